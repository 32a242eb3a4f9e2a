"""The bundled index: shipped xz text, built on first use into the user cache.

The package ships the MIT-licensed text (src/tiankong/bundled/corpus/, ~25 MB) rather than the
index (115 MB). The index is built once (15 s on a quiet 2-core AVX-512 machine, 18.5 s on an
AVX2-only one), with a progress bar, into ``<user cache>/tiankong/index/bundled-<key>``, where
the key hashes the shipped files, the tokenizer and the format version, so a new release or
tokenizer gets a fresh build.

>>> from tiankong.index.bundled import ensure_bundled_index
>>> ensure_bundled_index()  # what scripts/setup.sh calls to pre-build  # doctest: +SKIP
PosixPath('/home/me/.cache/tiankong/index/bundled-3f2a…')
"""

from __future__ import annotations

import fcntl
import hashlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tiankong.config import cache_folder
from tiankong.core.models import BUNDLED_CORPUS
from tiankong.core.output_folder import cache_written
from tiankong.core.script import normaliser_key
from tiankong.errors import IndexUnavailableError
from tiankong.index.build import build_index
from tiankong.index.sources import file_sha256
from tiankong.index.store import FORMAT_VERSION, MANIFEST, CorpusIndex
from tiankong.index.tokens import DEFAULT_TOKENIZER, default_tokenizer, tokenizer_fingerprint

BUNDLED_FILES = ("classical.txt.xz", "xiehouyu.txt.xz", "idioms.txt.xz")
# where the user's cache can't hold the index (read-only, full)
REMEDY = "set XDG_CACHE_HOME to a writable folder with room for it (115 MB), or use --index none"


def bundled_sources() -> list[Path]:
    return [BUNDLED_CORPUS / name for name in BUNDLED_FILES]


def bundled_index_dir(cache_dir: Path | None = None) -> Path:
    """Where the bundled index for this release's text and tokenizer lives."""
    digest = hashlib.sha256(f"format {FORMAT_VERSION}\n".encode())
    digest.update(tokenizer_fingerprint(default_tokenizer()).encode())
    digest.update(normaliser_key().encode())  # the text normaliser applied at build
    for path in bundled_sources():
        digest.update(f"\n{path.name} {file_sha256(path)}".encode())
    root = cache_dir or cache_folder("index")
    return root / f"bundled-{digest.hexdigest()[:16]}"


def ensure_bundled_index(progress: bool = True, cache_dir: Path | None = None) -> Path:
    """Build the bundled index unless the cache has it; returns its folder. Processes starting
    at once (servers, test workers sharing a cache) build it once: the others wait, then open
    it."""
    folder = bundled_index_dir(cache_dir)
    if (folder / MANIFEST).is_file():
        return folder
    with (
        cache_written(folder.parent, "The bundled corpus index", REMEDY, IndexUnavailableError),
        one_build_at_a_time(folder.parent / f".{folder.name}.lock"),
    ):
        if (folder / MANIFEST).is_file():  # built by another process meanwhile
            return folder
        if progress:  # the first use: say why this one run takes longer
            print(
                f"tiankong: building the bundled corpus index once into {folder} "
                "(about 20 s on 2 cores, 115 MB; later runs open it at once)",
                file=sys.stderr,
            )
        build_index(
            bundled_sources(),
            folder,
            progress=progress,
            tokenizer_name=DEFAULT_TOKENIZER,
            output_flag=None,
        )
    return folder


@contextmanager
def one_build_at_a_time(lock_file: Path) -> Iterator[None]:
    """An exclusive lock on ``lock_file`` (flock: released if the holder dies), its folder
    made first."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with lock_file.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def open_bundled_index(progress: bool = True, cache_dir: Path | None = None) -> CorpusIndex:
    """The bundled index, built first if needed, checked against the shipped text."""
    folder = ensure_bundled_index(progress, cache_dir)
    return CorpusIndex.open(folder, tokenizer_fingerprint(default_tokenizer()))


def main() -> None:
    """``python -m tiankong.index.bundled``: pre-build the bundled index (scripts/setup.sh)."""
    print(ensure_bundled_index(progress=True))


if __name__ == "__main__":
    main()
