"""The bundled index: shipped xz text, built on first use into the user cache.

The package ships the MIT-licensed text (src/tiankong/bundled/corpus/, ~25 MB) rather than the
index (115 MB). The index is built once (about 15 s on a quiet 2-core machine), with a progress
bar, into
``<user cache>/tiankong/index/bundled-<key>``, where the key hashes the shipped files, the
tokenizer and the format version, so a new release or tokenizer gets a fresh build.

>>> from tiankong.index.bundled import ensure_bundled_index
>>> ensure_bundled_index()  # what scripts/setup.sh calls to pre-build  # doctest: +SKIP
PosixPath('/home/me/.cache/tiankong/index/bundled-3f2a…')
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from platformdirs import user_cache_dir

from tiankong.index.build import build_index
from tiankong.index.sources import file_sha256
from tiankong.index.store import FORMAT_VERSION, MANIFEST, CorpusIndex
from tiankong.index.tokens import default_tokenizer, tokenizer_fingerprint

BUNDLED_CORPUS = Path(__file__).resolve().parent.parent / "bundled" / "corpus"
BUNDLED_FILES = ("classical.txt.xz", "xiehouyu.txt.xz", "idioms.txt.xz")


def bundled_sources() -> list[Path]:
    return [BUNDLED_CORPUS / name for name in BUNDLED_FILES]


def bundled_index_dir(cache_dir: Path | None = None) -> Path:
    """Where the bundled index for this release's text and tokenizer lives."""
    digest = hashlib.sha256(f"format {FORMAT_VERSION}\n".encode())
    digest.update(tokenizer_fingerprint(default_tokenizer()).encode())
    for path in bundled_sources():
        digest.update(f"\n{path.name} {file_sha256(path)}".encode())
    root = cache_dir or Path(user_cache_dir("tiankong")) / "index"
    return root / f"bundled-{digest.hexdigest()[:16]}"


def ensure_bundled_index(progress: bool = True, cache_dir: Path | None = None) -> Path:
    """Build the bundled index unless the cache has it; returns its folder."""
    folder = bundled_index_dir(cache_dir)
    if not (folder / MANIFEST).is_file():
        if progress:  # the first use: say why this one run takes a minute
            print(
                f"tiankong: building the bundled corpus index once into {folder} "
                "(about 15 s and 115 MB; later runs open it at once)",
                file=sys.stderr,
            )
        build_index(
            bundled_sources(), folder, progress=progress, tokenizer_name="bert-base-chinese"
        )
    return folder


def open_bundled_index(progress: bool = True, cache_dir: Path | None = None) -> CorpusIndex:
    """The bundled index, built first if needed, checked against the shipped text."""
    folder = ensure_bundled_index(progress, cache_dir)
    return CorpusIndex.open(folder, tokenizer_fingerprint(default_tokenizer()))


def main() -> None:
    """``python -m tiankong.index.bundled``: pre-build the bundled index (scripts/setup.sh)."""
    print(ensure_bundled_index(progress=True))


if __name__ == "__main__":
    main()
