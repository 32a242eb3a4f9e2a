"""Building an index: inputs -> passages -> token ids -> suffix array -> files + manifest.

>>> from tiankong.index.build import build_index
>>> build_index(["notes.txt"], "notes-index")  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from tiankong.core.script import normaliser_key, standard
from tiankong.errors import IndexInputError
from tiankong.index.sources import file_sha256, read_passages
from tiankong.index.store import (
    ARRAY_FILES,
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    TEXT_FILE,
)
from tiankong.index.tokens import (
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
    tokenizer_name: str = "bert-base-chinese",
) -> dict[str, Any]:
    """Build an index of ``inputs`` into ``out_dir`` (replaced atomically); returns the manifest.

    ``field`` names the text field of JSONL/CSV inputs. ``tokenizer`` defaults to the
    bert-base-chinese tokenizer that the bundled model uses.
    """
    started = time.perf_counter()
    if not inputs:
        raise IndexInputError("Give at least one input file to index.")
    tokenizer = tokenizer or default_tokenizer()
    out = Path(out_dir)
    if out.exists() and not (out / MANIFEST).is_file() and any(out.iterdir()):
        raise IndexInputError(f"{out} exists and is not an index; choose an empty or new folder.")
    paths = [Path(path) for path in inputs]
    sources: list[dict[str, Any]] = []
    passages: list[str] = []
    with progress_bar(progress) as bar:
        task = bar.add_task("reading", total=len(paths))
        for path in paths:
            read = read_passages(path, field)
            sources.append(
                {
                    "name": path.name,
                    "sha256": file_sha256(path),
                    "bytes": path.stat().st_size,
                    "passages": len(read),
                    "characters": sum(map(len, read)),
                }
            )
            passages += map(standard, read)  # the index's one text normaliser (core/script.py)
            bar.advance(task)
        ids, starts = encode_all(passages, tokenizer, bar)
        bar.add_task("suffix array", total=None)
        suffix_array = build_suffix_array(ids)
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".building-", dir=out.parent))
    try:
        texts = "\n".join(passages).encode("utf-8") + b"\n"
        line_lengths = np.fromiter((len(p.encode("utf-8")) + 1 for p in passages), np.int64)
        byte_starts = np.concatenate([[0], np.cumsum(line_lengths)[:-1]]).astype(np.int64)
        arrays = {
            "tokens.bin": ids,
            "suffix_array.bin": suffix_array,
            "passage_tokens.bin": starts.astype("<i8"),
            "passage_bytes.bin": byte_starts.astype("<i8"),
        }
        files: dict[str, Any] = {}
        for name in ARRAY_FILES:
            arrays[name].tofile(work / name)
            files[name] = {"dtype": arrays[name].dtype.str, "bytes": arrays[name].nbytes}
        (work / TEXT_FILE).write_bytes(texts)
        files[TEXT_FILE] = {"dtype": "utf-8", "bytes": len(texts)}
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
                "fingerprint": tokenizer_fingerprint(tokenizer),
                "vocab_size": tokenizer.get_vocab_size(),
            },
            "recipe": {
                "field": field,
                "passage": "one per line (txt) or per record (JSONL/CSV); whitespace folded",
                "separator_token": SEPARATOR,
                "token_dtype": TOKEN_DTYPE.str,
                "suffix_array": "pydivsufsort.divsufsort over the big-endian token bytes",
                "normaliser": normaliser_key(),
            },
            "versions": versions(),
            "build_seconds": round(time.perf_counter() - started, 2),
        }
        (work / MANIFEST).write_text(json.dumps(manifest, ensure_ascii=False, indent=1) + "\n")
        if out.exists():
            shutil.rmtree(out)
        os.replace(work, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return manifest


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
