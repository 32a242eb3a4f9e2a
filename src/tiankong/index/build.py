"""Building an index: inputs -> passages -> token ids -> suffix array -> files + manifest.

The suffix array is packed to as many bits a row as the corpus needs, and the passage text is
spelled from the token ids with a table of exceptions (store.py lists the files).

>>> from tiankong.index.build import build_index
>>> build_index(["notes.txt"], "notes-index")  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from tiankong.core.output_folder import (
    check_not_working_folder,
    check_output_folder,
    folder_mode,
    holds_only,
    made_here,
    replace_folder,
    replaced_path,
)
from tiankong.core.script import normaliser_key, standard_lines
from tiankong.errors import IndexInputError
from tiankong.index.sources import file_sha256, only_text, read_passages
from tiankong.index.store import (
    ARRAY_FILES,
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    ROW_PADDING,
    TEXT_FILE,
)
from tiankong.index.tokens import (
    DEFAULT_TOKENIZER,
    SEPARATOR,
    TOKEN_DTYPE,
    CorpusEncoder,
    default_tokenizer,
    tokenizer_fingerprint,
)

ENCODE_CHUNK = 20_000  # passages per encoding step: bounds memory and moves the progress bar


def build_index(
    inputs: Sequence[str | Path],
    out_dir: str | Path,
    field: str | None = None,
    progress: bool = True,
    tokenizer: Tokenizer | None = None,
    tokenizer_name: str = DEFAULT_TOKENIZER,
    tokenizer_source: str | None = None,
    output_flag: str | None = "out_dir",
) -> dict[str, Any]:
    """Build an index of ``inputs`` (files, or one file) into ``out_dir``, which is replaced
    only once the new index is complete (``replace_folder``); returns the manifest.

    ``field`` names the text field of JSONL/CSV inputs. ``tokenizer`` defaults to the
    bert-base-chinese tokenizer that the bundled model uses; ``tokenizer_source``: where its
    model was read (a local folder's path), for a stale index's rebuild command. ``output_flag``:
    what the user named the output folder with, in the sentence a folder that can't be written
    (a read-only or full file system) gives; None: that OSError is the caller's to explain (the
    bundled index's cache).
    """
    started = time.perf_counter()
    if not inputs:
        raise IndexInputError("Give at least one input file to index.")
    tokenizer = tokenizer or default_tokenizer()
    if isinstance(inputs, str | Path):  # one file: a string was read as its characters' names
        inputs = [inputs]
    flag = output_flag or "out_dir"
    if not str(out_dir).strip():  # "" is ".", which the user never named
        raise IndexInputError(f"{flag} is empty; name the folder the index is built in.")
    given, out = Path(out_dir), replaced_path(Path(out_dir))
    if output_flag is not None:
        check_output_folder(given, output_flag, replaced=True)
    check_not_working_folder(given, flag, IndexInputError)
    paths = [Path(path) for path in inputs]
    seen: set[Path] = set()
    for path in paths:  # the same file twice counted each of its passages twice
        if path.resolve() in seen:
            raise IndexInputError(f"The file {path} is given more than once; give each input once.")
        seen.add(path.resolve())
    if only_text(paths):
        field = None  # no input has fields: the manifest must not say one was read
    for path in paths:  # the build replaces the folder whole, with whatever it holds
        if out.resolve() in path.resolve().parents:
            raise IndexInputError(
                f"The input {path} is inside the index folder {given}, which the build replaces; "
                "move it out first."
            )
    check_replaceable(out)
    sources: list[dict[str, Any]] = []
    passages: list[str] = []
    with progress_bar(progress) as bar:
        task = bar.add_task("reading", total=len(paths))
        digests: dict[str, Path] = {}
        for path in paths:
            read = read_passages(path, field)
            digest = file_sha256(path)
            # the text read, too: notes.txt beside notes.txt.xz (or .jsonl) doubled every count
            text_digest = hashlib.sha256("\n".join(read).encode("utf-8")).hexdigest()
            for key, what in ((f"bytes {digest}", "bytes"), (f"text {text_digest}", "text")):
                if key in digests:  # a copy under another name: every count of its text doubled
                    raise IndexInputError(
                        f"The file {path} holds the same {what} as {digests[key]}; give the "
                        "text once (a copy counts each of its passages twice)."
                    )
                digests[key] = path
            stat = path.stat()
            sources.append(
                {
                    "name": path.name,
                    # where it was read, so that opening the index finds a source edited since
                    # (store.check_recorded_sources); not shown in /info
                    "path": str(path.resolve()),
                    "mtime_ns": stat.st_mtime_ns,
                    "sha256": digest,
                    "bytes": stat.st_size,
                    "passages": len(read),
                    "characters": sum(map(len, read)),
                }
            )
            passages += standard_lines(read)  # the index's one text normaliser (core/script.py)
            bar.advance(task)
        ids, starts = encode_all(passages, tokenizer, bar)
        task = bar.add_task("suffix array", total=2)
        suffix_array = build_suffix_array(ids)
        bar.advance(task)
        bits = row_bits(len(ids))
        packed = pack_rows(suffix_array, bits)
        bar.advance(task)
        task = bar.add_task("spelling", total=1)
        spelling = spelling_arrays(passages, ids, starts, tokenizer)
        bar.advance(task)
    with made_here(given, output_flag) if output_flag is not None else nullcontext():
        out.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".building-", dir=out.parent))
        try:
            position = position_dtype(len(ids))
            arrays = {
                "tokens.bin": ids,
                "suffix_array.bin": packed,
                "buckets.bin": first_token_rows(ids, tokenizer.get_vocab_size()),
                "passage_tokens.bin": starts.astype(position),
                **spelling.arrays(position),
            }
            files: dict[str, Any] = {}
            for name in ARRAY_FILES:
                arrays[name].tofile(work / name)
                files[name] = {"dtype": arrays[name].dtype.str, "bytes": arrays[name].nbytes}
            files["suffix_array.bin"] = {"dtype": "packed", "bits": bits, "bytes": packed.nbytes}
            (work / TEXT_FILE).write_bytes(spelling.text)
            files[TEXT_FILE] = {"dtype": "utf-8", "bytes": len(spelling.text)}
            lengths = np.diff(np.append(starts, len(ids))) - 1  # tokens per passage
            first = 0
            for source in sources:
                source["tokens"] = int(lengths[first : first + source["passages"]].sum())
                first += source["passages"]
            manifest = {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "sources": sources,
                "counts": {
                    "passages": len(passages),
                    "characters": sum(source["characters"] for source in sources),
                    "tokens": int(np.count_nonzero(ids != SEPARATOR)),
                },
                "bytes": sum(spec["bytes"] for spec in files.values()),
                "files": files,
                "tokenizer": {
                    "name": tokenizer_name,
                    # where the model was read (a local folder's absolute path), for a stale
                    # index's rebuild command; not shown in /info
                    "source": tokenizer_source or tokenizer_name,
                    "fingerprint": tokenizer_fingerprint(tokenizer),
                    "vocab_size": tokenizer.get_vocab_size(),
                },
                "recipe": {
                    "field": field,
                    "passage": (
                        "one per line (txt) or per record (JSONL/CSV); control and format "
                        "characters dropped, whitespace folded"
                    ),
                    "separator_token": SEPARATOR,
                    "token_dtype": TOKEN_DTYPE.str,
                    "suffix_array": "pydivsufsort.divsufsort over the big-endian token bytes",
                    "normaliser": normaliser_key(),
                    "text": "spelled from the tokens; passages not one token a character verbatim",
                },
                "versions": versions(),
                "build_seconds": round(time.perf_counter() - started, 2),
            }
            (work / MANIFEST).write_text(json.dumps(manifest, ensure_ascii=False, indent=1) + "\n")
            # mkdtemp's 0700 would keep the index from a server that runs as another user (the
            # image's uid 10001 reading a mounted /data); a folder asked for gets the usual mode
            os.chmod(work, folder_mode())
            replace_folder(work, out)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return manifest


def check_replaceable(out: Path) -> None:
    """Refuse an output folder that holds anything but a tiankong index's own files (a web
    app's ``manifest.json`` is not an index's): the build replaces it whole; and one inside an
    index folder (``-o idx/sub`` was built, and ``idx`` then could not be rebuilt: "not an
    index folder")."""
    holder = next(
        (above for above in Path(os.path.abspath(out)).parents if own_manifest(above)), None
    )
    if holder is not None:
        raise IndexInputError(
            f"{out} is inside the index folder {holder}, which holds only its own files; "
            "choose a folder outside it."
        )
    if not os.path.isdir(out) or not any(out.iterdir()):
        return
    foreign = IndexInputError(
        f"{out} exists and is not an index folder (it holds files no tiankong index has); "
        "choose an empty or new folder."
    )
    manifest = own_manifest(out)
    if manifest is None:
        raise foreign
    listed = manifest.get("files")
    if not holds_only(out, {MANIFEST, *(listed if isinstance(listed, dict) else ())}):
        raise foreign


def own_manifest(folder: Path) -> dict[str, Any] | None:
    """``folder``'s manifest where it is a tiankong index's (its format named), else None."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and manifest.get("format") == FORMAT else None


def encode_all(
    passages: list[str], tokenizer: Tokenizer, bar: Any
) -> tuple[np.ndarray, np.ndarray]:
    encoder = CorpusEncoder(tokenizer)
    task = bar.add_task("tokenizing", total=len(passages))
    all_ids: list[np.ndarray] = [np.array([SEPARATOR], dtype=TOKEN_DTYPE)]
    all_starts: list[np.ndarray] = []
    offset = 1
    for first in range(0, len(passages), ENCODE_CHUNK):
        chunk = passages[first : first + ENCODE_CHUNK]
        ids, starts = encoder.encode(chunk)
        all_ids.append(ids[1:])  # each chunk begins with its own separator
        all_starts.append(starts - 1 + offset)
        offset += len(ids) - 1
        bar.advance(task, len(chunk))
    # np.concatenate returns native byte order: make the stored order explicit again.
    return np.concatenate(all_ids).astype(TOKEN_DTYPE), np.concatenate(all_starts)


def build_suffix_array(ids: np.ndarray) -> np.ndarray:
    """Token positions in suffix order (suffixes compared token by token)."""
    from pydivsufsort import divsufsort

    # divsufsort sorts bytes; big-endian 2-byte tokens sort like the tokens themselves, and
    # only even byte offsets start a token. pydivsufsort does that reduction for uint16 input.
    suffix_array = divsufsort(np.ascontiguousarray(ids.astype(np.uint16)))
    dtype = np.dtype("<i4") if len(ids) < 2**31 else np.dtype("<i8")
    return np.asarray(suffix_array).astype(dtype, copy=False)


def row_bits(tokens: int) -> int:
    """Bits per suffix-array row: enough for every token position."""
    return max(1, (tokens - 1).bit_length())


def position_dtype(tokens: int) -> np.dtype:
    return np.dtype("<i4") if tokens < 2**31 else np.dtype("<i8")


PACK_CHUNK = 1 << 20  # rows packed at a time (a multiple of 8, so chunks meet at a byte)


def pack_rows(rows: np.ndarray, bits: int) -> np.ndarray:
    """``rows`` as ``bits`` little-endian bits each, back to back, then ROW_PADDING zero bytes.

    Eight rows make ``bits`` whole bytes: each group of eight is assembled in 64-bit words, one
    vectorised shift-and-or per row of the group."""
    words_per_group = -(-8 * bits // 64)
    pieces = []
    for first in range(0, len(rows), PACK_CHUNK):
        values = np.asarray(rows[first : first + PACK_CHUNK], dtype=np.uint64)
        groups = -(-len(values) // 8)
        flat = np.zeros(groups * 8, dtype=np.uint64)
        flat[: len(values)] = values
        grouped = flat.reshape(groups, 8)
        words = np.zeros((groups, words_per_group + 1), dtype="<u8")
        for j in range(8):
            word, shift = divmod(j * bits, 64)
            words[:, word] |= grouped[:, j] << np.uint64(shift)
            if shift + bits > 64:
                words[:, word + 1] |= grouped[:, j] >> np.uint64(64 - shift)
        packed = words.view(np.uint8).reshape(groups, -1)[:, :bits].ravel()
        pieces.append(packed[: -(-len(values) * bits // 8)])
    pieces.append(np.zeros(ROW_PADDING, dtype=np.uint8))
    return np.concatenate(pieces)


def first_token_rows(ids: np.ndarray, vocab_size: int) -> np.ndarray:
    """The first suffix-array row of each first token (and the end): every position is a row."""
    counts = np.bincount(ids.astype(np.int64), minlength=vocab_size)
    return np.concatenate([[0], np.cumsum(counts)]).astype("<i8")


@dataclass
class Spelling:
    """How the passage text is stored: spelled from the tokens, with exceptions."""

    characters: np.ndarray  # [vocab] the character each token spells, 0 for none
    positions: np.ndarray  # token positions whose token doesn't spell the passage's character
    chars: np.ndarray  # the character at each of those
    verbatim: np.ndarray  # passages kept as text: not one token per character
    text: bytes  # those passages, one a line
    line_starts: np.ndarray  # where each starts in ``text``

    def arrays(self, position: np.dtype) -> dict[str, np.ndarray]:
        return {
            "characters.bin": self.characters.astype("<u4"),
            "spelling_positions.bin": self.positions.astype(position),
            "spelling_chars.bin": self.chars.astype("<u4"),
            "verbatim_passages.bin": self.verbatim.astype("<i4"),
            "verbatim_bytes.bin": self.line_starts.astype("<i8"),
        }


SPELL_CHUNK = 50_000  # passages compared at a time: bounds the temporary arrays


def spelling_arrays(
    passages: list[str], ids: np.ndarray, starts: np.ndarray, tokenizer: Tokenizer
) -> Spelling:
    """Compare every passage with what its tokens spell (a token of one character spells it):
    a passage with one token per character is stored as the characters its tokens get wrong
    (a rare one read as [UNK]); any other is kept verbatim."""
    characters = np.zeros(tokenizer.get_vocab_size(), dtype=np.int64)
    for token, number in tokenizer.get_vocab().items():
        if len(token) == 1:
            characters[number] = ord(token)
    token_lengths = np.diff(np.append(starts, len(ids))) - 1
    positions, chars, verbatim = [], [], []
    for first in range(0, len(passages), SPELL_CHUNK):
        chunk = passages[first : first + SPELL_CHUNK]
        points = np.frombuffer("\n".join(chunk).encode("utf-32-le"), dtype="<u4")
        char_starts = np.concatenate([[0], np.flatnonzero(points == 10) + 1])
        char_lengths = np.diff(np.append(char_starts, len(points) + 1)) - 1
        lengths = token_lengths[first : first + len(chunk)]
        aligned = char_lengths == lengths
        verbatim.append(first + np.flatnonzero(~aligned))
        counts = lengths[aligned]
        runs = np.cumsum(counts) - counts  # where each passage's run begins
        token_at = np.arange(counts.sum()) + np.repeat(
            starts[first : first + len(chunk)][aligned] - runs, counts
        )
        char_at = np.arange(counts.sum()) + np.repeat(char_starts[aligned] - runs, counts)
        wanted = points[char_at].astype(np.int64)
        wrong = characters[ids[token_at].astype(np.int64)] != wanted
        positions.append(token_at[wrong])
        chars.append(wanted[wrong])
    kept = np.concatenate(verbatim).astype(np.int64)
    lines = [passages[number].encode("utf-8") + b"\n" for number in kept]
    line_lengths = np.fromiter(map(len, lines), dtype=np.int64, count=len(lines))
    return Spelling(
        characters=characters,
        positions=np.concatenate(positions),
        chars=np.concatenate(chars),
        verbatim=kept,
        text=b"".join(lines),
        line_starts=np.concatenate([[0], np.cumsum(line_lengths)[:-1]]).astype(np.int64),
    )


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for package in ("tiankong", "numpy", "tokenizers", "pydivsufsort"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "unknown"
    return found


class _NoBar:
    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, *args: Any, **kwargs: Any) -> int:
        return 0

    def advance(self, *args: Any, **kwargs: Any) -> None:
        return None


def progress_bar(enabled: bool) -> Any:
    """A rich progress bar on stderr, or a silent stand-in."""
    if not enabled:
        return _NoBar()
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("index: {task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=False,
    )
