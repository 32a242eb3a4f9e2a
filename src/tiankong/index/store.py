"""The on-disk index: files, manifest, validation on open, and suffix-array search.

Files in an index folder (all raw arrays, memory-mapped on open):
  tokens.bin         big-endian uint16 token ids; SEPARATOR before and after every passage
  suffix_array.bin   little-endian int32 (int64 past 2**31 tokens): token positions, sorted
  passages.txt       the passages as UTF-8, one a line (for the example line of a match)
  passage_tokens.bin int64: where each passage's ids start in tokens.bin
  passage_bytes.bin  int64: where each passage starts in passages.txt
  manifest.json      written last: sources with sha256, counts, sizes, recipe, versions
"""

from __future__ import annotations

import json
import mmap
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tiankong.errors import (
    IndexCorruptError,
    IndexStaleError,
    IndexTokenizerMismatchError,
    IndexUnavailableError,
)
from tiankong.index.sources import file_sha256
from tiankong.index.tokens import TOKEN_DTYPE

FORMAT = "tiankong-corpus-index"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
ARRAY_FILES = ("tokens.bin", "suffix_array.bin", "passage_tokens.bin", "passage_bytes.bin")
TEXT_FILE = "passages.txt"
SORT_CHECKS = 16  # adjacent suffix-array pairs compared on open: catches foreign arrays cheaply


@dataclass(frozen=True)
class SearchRange:
    """Rows ``[low, high)`` of the suffix array whose suffixes start with the pattern."""

    low: int
    high: int

    @property
    def count(self) -> int:
        return self.high - self.low


class CorpusIndex:
    """An opened, validated index.

    >>> index = CorpusIndex.open("my-index")  # doctest: +SKIP
    >>> index.count([4636, 7987, 4157, 4706])  # ids of 画龙点睛  # doctest: +SKIP
    12
    """

    def __init__(self, folder: Path, manifest: dict[str, Any]) -> None:
        self.folder = folder
        self.manifest = manifest
        files = manifest["files"]
        self.token_bytes = map_file(folder / "tokens.bin")
        self.row_bytes = map_file(folder / "suffix_array.bin")
        self.text = map_file(folder / TEXT_FILE)
        self.tokens = np.frombuffer(self.token_bytes, dtype=np.dtype(files["tokens.bin"]["dtype"]))
        self.suffix_array = np.frombuffer(
            self.row_bytes, dtype=np.dtype(files["suffix_array.bin"]["dtype"])
        )
        self.passage_tokens = self.array("passage_tokens.bin", files)
        self.passage_bytes = self.array("passage_bytes.bin", files)
        # The binary search reads single rows: a memoryview gives Python ints ~30x faster than
        # indexing a numpy array. The file is little-endian, like every machine numpy targets
        # in practice; on another, fall back to the (byte-swapping) numpy view.
        self.rows: Sequence[int] | np.ndarray = self.suffix_array
        if sys.byteorder == "little":
            view = memoryview(self.row_bytes)
            self.rows = view.cast("i") if self.suffix_array.dtype.itemsize == 4 else view.cast("q")
        self.size = len(self.suffix_array)

    @classmethod
    def open(
        cls,
        folder: str | Path,
        tokenizer_fingerprint: str | None = None,
        sources: Sequence[str | Path] | None = None,
    ) -> CorpusIndex:
        """Open and validate; raises a typed IndexUnavailableError subclass with one sentence.

        ``tokenizer_fingerprint``: the model's (tokens.tokenizer_fingerprint); refused if it
        differs. ``sources``: the input files now; refused as stale if their sha256 changed.
        """
        folder = Path(folder)
        manifest = read_manifest(folder)
        check_files(folder, manifest)
        built_with = manifest["tokenizer"]["fingerprint"]
        if tokenizer_fingerprint is not None and tokenizer_fingerprint != built_with:
            raise IndexTokenizerMismatchError(
                f"The index {folder} was built with a different tokenizer than the model's; "
                "rebuild it with the model's tokenizer."
            )
        if sources is not None:
            check_fresh(folder, manifest, [Path(path) for path in sources])
        index = cls(folder, manifest)
        index.check_sorted()
        return index

    @staticmethod
    def array(name: str, files: dict[str, Any]) -> np.ndarray:
        spec = files[name]
        return np.memmap(spec["path"], dtype=np.dtype(spec["dtype"]), mode="r")

    def check_sorted(self) -> None:
        rows = np.linspace(0, max(self.size - 2, 0), num=min(SORT_CHECKS, self.size - 1))
        for row in rows.astype(np.int64):
            first, second = self.suffix(int(row), 32), self.suffix(int(row) + 1, 32)
            if first > second:
                raise IndexCorruptError(
                    f"The index {self.folder} is corrupt (its suffix array is out of order)."
                )

    def suffix(self, row: int, length: int) -> bytes:
        """Up to ``length`` tokens (as big-endian bytes) of the suffix at ``row``."""
        start = 2 * int(self.rows[row])
        return self.token_bytes[start : start + 2 * length]

    def search(self, pattern: Sequence[int]) -> SearchRange:
        """The suffix-array rows starting with ``pattern`` (two binary searches)."""
        key = np.asarray(pattern, dtype=TOKEN_DTYPE).tobytes()
        length = len(pattern)
        low, high = 0, self.size
        while low < high:  # first row >= key
            middle = (low + high) // 2
            if self.suffix(middle, length) < key:
                low = middle + 1
            else:
                high = middle
        first, high = low, self.size
        while low < high:  # first row whose prefix > key
            middle = (low + high) // 2
            if self.suffix(middle, length) <= key:
                low = middle + 1
            else:
                high = middle
        return SearchRange(first, low)

    def count(self, pattern: Sequence[int]) -> int:
        """How often ``pattern`` (token ids) occurs."""
        return self.search(pattern).count if len(pattern) else 0

    def positions(self, found: SearchRange, limit: int) -> np.ndarray:
        """Token positions of up to ``limit`` occurrences (the first rows of the range)."""
        return np.asarray(self.suffix_array[found.low : min(found.high, found.low + limit)])

    def passage_at(self, position: int) -> tuple[str, int]:
        """The passage holding token ``position`` and the passage's first token position."""
        number = int(np.searchsorted(self.passage_tokens, position, side="right")) - 1
        start = int(self.passage_bytes[number])
        end = self.text.find(b"\n", start)
        line = self.text[start : end if end >= 0 else len(self.text)].decode("utf-8")
        return line, int(self.passage_tokens[number])

    def describe(self) -> dict[str, Any]:
        """What /info shows: sources, counts, size and how it was built."""
        keys = ("sources", "counts", "bytes", "tokenizer", "recipe", "versions")
        return {key: self.manifest.get(key) for key in keys}


def map_file(path: Path) -> mmap.mmap:
    """A read-only map of ``path``. Lookups touch scattered pages, so the kernel is told not to
    read ahead: that keeps the resident set to the pages actually used."""
    with path.open("rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    if hasattr(mapped, "madvise") and hasattr(mmap, "MADV_RANDOM"):
        mapped.madvise(mmap.MADV_RANDOM)
    return mapped


def read_manifest(folder: Path) -> dict[str, Any]:
    path = folder / MANIFEST
    if not folder.is_dir():
        raise IndexUnavailableError(f"There is no index at {folder}; build one first.")
    if not path.is_file():
        raise IndexCorruptError(f"{folder} is not a tiankong index (it has no {MANIFEST}).")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise IndexCorruptError(f"The index manifest {path} is unreadable.") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise IndexCorruptError(f"{folder} is not a tiankong index (a foreign manifest).")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise IndexCorruptError(
            f"The index {folder} has format version {manifest.get('format_version')}; "
            f"this tiankong reads version {FORMAT_VERSION}, so rebuild it."
        )
    return manifest


def check_files(folder: Path, manifest: dict[str, Any]) -> None:
    """Every file present with the size the manifest records (truncation, tampering)."""
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise IndexCorruptError(f"The index manifest in {folder} lists no files.")
    for name in (*ARRAY_FILES, TEXT_FILE):
        spec = files.get(name)
        path = folder / name
        if not isinstance(spec, dict) or not path.is_file():
            raise IndexCorruptError(f"The index {folder} is incomplete ({name} is missing).")
        if path.stat().st_size != spec.get("bytes"):
            raise IndexCorruptError(
                f"The index {folder} is truncated or damaged ({name} has "
                f"{path.stat().st_size} bytes, the manifest says {spec.get('bytes')})."
            )
        spec["path"] = str(path)


def check_fresh(folder: Path, manifest: dict[str, Any], sources: list[Path]) -> None:
    recorded = {source["name"]: source["sha256"] for source in manifest["sources"]}
    for path in sources:
        if not path.is_file():
            raise IndexStaleError(f"The index source {path} is gone; rebuild the index.")
        if recorded.get(path.name) != file_sha256(path):
            raise IndexStaleError(
                f"The index {folder} is stale: {path.name} changed since it was built; rebuild it."
            )
