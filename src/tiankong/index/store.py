"""The on-disk index: files, manifest, validation on open, and suffix-array search.

Files in an index folder (raw arrays, memory-mapped on open; format version 2):
  tokens.bin             big-endian uint16 token ids; SEPARATOR before and after every passage
  suffix_array.bin       token positions in suffix order, packed: ``bits`` (the manifest's)
                         little-endian bits per row, enough for the corpus (25 for 21 M tokens),
                         then 8 bytes of padding so any row is one 8-byte read
  buckets.bin            int64 [vocab + 1]: the first suffix-array row of each first token, so a
                         search starts in its first token's rows
  passage_tokens.bin     int32 (int64 past 2**31 tokens): where each passage's ids start
  characters.bin         uint32 [vocab]: the character each token id spells (0: none)
  spelling_positions.bin int32/int64, sorted: token positions whose character the token does not
  spelling_chars.bin     give back (a rare character read as [UNK]), and the character there
  verbatim_passages.bin  int32, sorted: passages whose tokens are not one per character (letters,
  verbatim_bytes.bin     digits, dropped spaces), kept as text: their numbers, their line starts
  passages.txt           in passages.txt, those passages as UTF-8, one a line
  manifest.json          written last: sources with sha256, counts, sizes, recipe, versions
The passage text is spelled from the tokens, with the two exception tables, so it is stored
once (the bundled index: 191 MB in version 1, 115 MB now).
"""

from __future__ import annotations

import json
import mmap
import os
import shlex
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from tiankong.errors import (
    IndexCorruptError,
    IndexStaleError,
    IndexTokenizerMismatchError,
    IndexUnavailableError,
)
from tiankong.index.sources import built_from, file_sha256
from tiankong.index.tokens import DEFAULT_TOKENIZER, TOKEN_DTYPE

FORMAT = "tiankong-corpus-index"
FORMAT_VERSION = 2
MANIFEST = "manifest.json"
ARRAY_FILES = (
    "tokens.bin",
    "suffix_array.bin",
    "buckets.bin",
    "passage_tokens.bin",
    "characters.bin",
    "spelling_positions.bin",
    "spelling_chars.bin",
    "verbatim_passages.bin",
    "verbatim_bytes.bin",
)
TEXT_FILE = "passages.txt"
ROW_PADDING = 8  # bytes after the packed rows: the last row is read with 8 bytes too
_WORD = struct.Struct("<Q")
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
        self.size = len(self.tokens)
        self.bits = int(files["suffix_array.bin"]["bits"])
        self.mask = (1 << self.bits) - 1
        # The binary search reads one packed row at a time: struct over the mmap is the fastest
        # read of a Python int (~0.15 µs, where indexing a numpy array costs ~1.5).
        self.packed_rows = np.frombuffer(self.row_bytes, dtype=np.uint8)
        # every 8-byte window of the packed rows, without a copy: one gather reads many rows
        self.row_words = sliding_window_view(self.packed_rows, 8) if self.row_bytes else None
        self.buckets = self.array("buckets.bin", files).tolist()
        self.passage_tokens = self.array("passage_tokens.bin", files)
        self.characters = self.array("characters.bin", files)
        self.spelling_positions = self.array("spelling_positions.bin", files)
        self.spelling_chars = self.array("spelling_chars.bin", files)
        self.verbatim_passages = self.array("verbatim_passages.bin", files)
        self.verbatim_bytes = self.array("verbatim_bytes.bin", files)

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
        check_fields(folder, manifest)
        built_with = manifest["tokenizer"]["fingerprint"]
        if tokenizer_fingerprint is not None and tokenizer_fingerprint != built_with:
            raise IndexTokenizerMismatchError(
                f"The index {folder} was built with a different tokenizer than the model's; "
                "rebuild it with the model's tokenizer."
            )
        if sources is not None:
            check_fresh(folder, manifest, [Path(path) for path in sources])
        try:
            index = cls(folder, manifest)
        except ValueError:  # a dtype the files' sizes don't divide into (numpy's frombuffer)
            raise IndexCorruptError(
                f"The index {folder} is damaged (its files don't read as the manifest's types); "
                "rebuild it."
            ) from None
        index.check_sorted()
        index.check_characters()
        return index

    @staticmethod
    def array(name: str, files: dict[str, Any]) -> np.ndarray:
        spec = files[name]
        # a plain array over the map: np.memmap's subclass costs microseconds per slice
        return np.frombuffer(map_file(Path(spec["path"])), dtype=np.dtype(spec["dtype"]))

    def check_sorted(self) -> None:
        rows = np.linspace(0, max(self.size - 2, 0), num=min(SORT_CHECKS, self.size - 1))
        for row in rows.astype(np.int64):
            first, second = self.suffix(int(row), 32), self.suffix(int(row) + 1, 32)
            if first > second or not first or not second:  # out of order, or past the end
                raise IndexCorruptError(
                    f"The index {self.folder} is corrupt (its suffix array is out of order)."
                )

    def check_characters(self) -> None:
        """Every character the evidence is spelled with decodes: a damaged characters.bin was
        a UnicodeDecodeError traceback at startup, or a 500 for every request of a batch that
        showed a 出处 (a review). The files are small (a vocabulary's entries, the spellings the
        tokens don't give back, the passages kept as text)."""
        for name, values in (
            ("characters.bin", self.characters),
            ("spelling_chars.bin", self.spelling_chars),
        ):
            code_points = values.astype(np.int64)
            surrogates = (code_points >= 0xD800) & (code_points <= 0xDFFF)
            if ((code_points > 0x10FFFF) | surrogates).any():
                raise IndexCorruptError(
                    f"The index {self.folder} is corrupt ({name} holds values that are no "
                    "characters); rebuild it."
                )
        if self.tokens.size and int(self.tokens.max()) >= len(self.characters):
            raise IndexCorruptError(
                f"The index {self.folder} is corrupt (tokens.bin holds ids past the "
                "vocabulary); rebuild it."
            )
        try:
            bytes(self.text).decode("utf-8")
        except UnicodeDecodeError:
            raise IndexCorruptError(
                f"The index {self.folder} is corrupt (its passages are not UTF-8); rebuild it."
            ) from None

    def row(self, row: int) -> int:
        """The token position in suffix-array row ``row``."""
        bit = row * self.bits
        return int((_WORD.unpack_from(self.row_bytes, bit >> 3)[0] >> (bit & 7)) & self.mask)

    def rows_between(self, low: int, high: int) -> np.ndarray:
        """The token positions in rows ``[low, high)``, as int64."""
        if self.row_words is None or high <= low:
            return np.zeros(0, dtype=np.int64)
        bits = np.arange(low, high, dtype=np.int64) * self.bits
        words = self.row_words[bits >> 3].view("<u8")[:, 0]
        return ((words >> (bits & 7).astype(np.uint64)) & np.uint64(self.mask)).astype(np.int64)

    @property
    def suffix_array(self) -> np.ndarray:
        """Every row, unpacked (for tests and tools: the whole array is 8 bytes a token)."""
        return self.rows_between(0, self.size)

    def suffix(self, row: int, length: int) -> bytes:
        """Up to ``length`` tokens (as big-endian bytes) of the suffix at ``row``."""
        start = 2 * self.row(row)
        return self.token_bytes[start : start + 2 * length]

    def search(self, pattern: Sequence[int], within: SearchRange | None = None) -> SearchRange:
        """The suffix-array rows starting with ``pattern``: the rows of its first token (one
        token: all of them), then two binary searches within those, each step one packed row
        and one slice of the tokens, inlined. The second starts from what the first learnt: no
        row at or after a row whose prefix is above ``pattern`` can match.

        ``within``: rows known to hold every match (a shorter prefix's rows: a prefix's rows
        lie within its own prefixes' rows), where the searches start instead."""
        if not len(pattern) or not 0 <= int(pattern[0]) < len(self.buckets) - 1:
            return SearchRange(0, 0)
        low, end = int(self.buckets[int(pattern[0])]), int(self.buckets[int(pattern[0]) + 1])
        if len(pattern) == 1:
            return SearchRange(low, end)
        if within is not None:
            low, end = max(low, within.low), min(end, within.high)
        key = np.asarray(pattern, dtype=TOKEN_DTYPE).tobytes()
        width = len(key)
        tokens, packed, bits, mask = self.token_bytes, self.row_bytes, self.bits, self.mask
        unpack = _WORD.unpack_from
        high = above = end
        while low < high:  # first row >= key
            middle = (low + high) // 2
            bit = middle * bits
            start = 2 * ((unpack(packed, bit >> 3)[0] >> (bit & 7)) & mask)
            prefix = tokens[start : start + width]
            if prefix < key:
                low = middle + 1
            else:
                high = middle
                if prefix != key:
                    above = middle
        first, high = low, above
        while low < high:  # first row whose prefix > key
            middle = (low + high) // 2
            bit = middle * bits
            start = 2 * ((unpack(packed, bit >> 3)[0] >> (bit & 7)) & mask)
            if tokens[start : start + width] <= key:
                low = middle + 1
            else:
                high = middle
        return SearchRange(first, low)

    def count(self, pattern: Sequence[int]) -> int:
        """How often ``pattern`` (token ids) occurs."""
        return self.search(pattern).count if len(pattern) else 0

    def positions(self, found: SearchRange, limit: int) -> np.ndarray:
        """Token positions of up to ``limit`` occurrences (the first rows of the range)."""
        return self.rows_between(found.low, min(found.high, found.low + limit))

    def passage_at(self, position: int) -> tuple[str, int]:
        """The passage holding token ``position`` and the passage's first token position: kept
        as text, or spelled from its tokens with the characters the tokens don't give back."""
        number, first, end = self.passage_span(position)
        text = self.verbatim_text(number)
        return (self.spell(first, end) if text is None else text), first

    def passage_span(self, position: int) -> tuple[int, int, int]:
        """The number of the passage holding token ``position``, and its tokens ``[first,
        end)`` (the SEPARATOR after it excluded)."""
        number = find(self.passage_tokens, position, "right") - 1
        first = int(self.passage_tokens[number])
        # one SEPARATOR after every passage, the next passage right after it
        has_next = number + 1 < len(self.passage_tokens)
        end = int(self.passage_tokens[number + 1]) - 1 if has_next else self.size - 1
        return number, first, end

    def verbatim_text(self, number: int) -> str | None:
        """Passage ``number`` as kept text, or None for a passage of one token a character
        (whose text ``spell`` gives, character i being token i)."""
        kept = find(self.verbatim_passages, number)
        if kept < len(self.verbatim_passages) and int(self.verbatim_passages[kept]) == number:
            start = int(self.verbatim_bytes[kept])
            end = self.text.find(b"\n", start)
            return self.text[start : end if end >= 0 else len(self.text)].decode("utf-8")
        return None

    def spell(self, begin: int, end: int) -> str:
        """The characters of tokens ``[begin, end)`` of a passage that is not kept as text:
        only those tokens are read, so a window of a long passage costs its own length."""
        spelled = self.characters[np.asarray(self.tokens[begin:end]).astype(np.int64)]
        spelled = spelled.astype("<u4")
        low, high = find(self.spelling_positions, begin), find(self.spelling_positions, end)
        spelled[self.spelling_positions[low:high] - begin] = self.spelling_chars[low:high]
        return spelled.tobytes().decode("utf-32-le")

    def describe(self) -> dict[str, Any]:
        """What /info shows: sources (by name: not where they lie on this machine), counts,
        size and how it was built."""
        keys = ("sources", "counts", "bytes", "tokenizer", "recipe", "versions")
        shown = {key: self.manifest.get(key) for key in keys}
        shown["sources"] = [  # a list of objects: check_fields
            {key: value for key, value in source.items() if key not in ("path", "mtime_ns")}
            for source in self.manifest["sources"]
        ]
        tokenizer = self.manifest.get("tokenizer")
        if isinstance(tokenizer, dict):  # where its model lies on this machine: not shown
            shown["tokenizer"] = {key: value for key, value in tokenizer.items() if key != "source"}
        return shown


def find(array: np.ndarray, value: int, side: Literal["left", "right"] = "left") -> int:
    """np.searchsorted for one value, given in the array's own dtype: a value of another dtype
    would have numpy convert the whole (memory-mapped) array first."""
    return int(np.searchsorted(array, np.asarray(value, dtype=array.dtype), side=side))


def map_file(path: Path) -> mmap.mmap | bytes:
    """A read-only map of ``path`` (an empty file: empty bytes). Lookups touch scattered pages,
    so the kernel is told not to read ahead: that keeps the resident set to the pages used."""
    if path.stat().st_size == 0:
        return b""
    with path.open("rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    if hasattr(mapped, "madvise") and hasattr(mmap, "MADV_RANDOM"):
        mapped.madvise(mmap.MADV_RANDOM)
    return mapped


def read_manifest(folder: Path) -> dict[str, Any]:
    path = folder / MANIFEST
    if os.path.isfile(folder):  # the text itself, given where its index goes (a review)
        raise IndexUnavailableError(
            f"{folder} is a file, not an index folder; {built_from(folder)}"
        )
    if not os.path.isdir(folder):
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


def check_fields(folder: Path, manifest: dict[str, Any]) -> None:
    """The manifest's fields the opening reads, each of its kind: a manifest edited or damaged
    where its files still agree with it (a dtype, a missing tokenizer or bits) was a KeyError,
    TypeError or ValueError traceback, exit 1 (a review)."""
    files = manifest["files"]  # a dict of dicts: check_files
    tokenizer = manifest.get("tokenizer")
    bits = files["suffix_array.bin"].get("bits")
    sources = manifest.get("sources")
    fine = (
        isinstance(tokenizer, dict)
        and isinstance(tokenizer.get("fingerprint"), str)
        and type(bits) is int  # not a bool; rows are read 8 bytes at a time
        and 0 < bits <= 57
        and isinstance(sources, list)
        and all(
            isinstance(source, dict)
            and isinstance(source.get("name"), str)
            and isinstance(source.get("sha256"), str)
            for source in sources
        )
    )
    for name in ARRAY_FILES:
        if name == "suffix_array.bin":
            continue  # packed rows of ``bits`` each, read as bytes
        dtype = files[name].get("dtype")
        try:
            fine = fine and isinstance(dtype, str) and np.dtype(dtype).kind in "iu"
        except (TypeError, ValueError, SyntaxError):  # np.dtype("(2,3") is a SyntaxError
            fine = False
    if not fine:
        raise IndexCorruptError(
            f"The index manifest in {folder} is damaged (a field missing or of the wrong kind); "
            "rebuild the index."
        )


def check_fresh(folder: Path, manifest: dict[str, Any], sources: list[Path]) -> None:
    """Each of ``sources`` as it was read for the index: the content of one of the sources of
    its name, and where its path is recorded, that source's (two sources of one name in two
    folders were one entry, and an unchanged pair was refused: a review)."""
    by_path = {source.get("path"): source["sha256"] for source in manifest["sources"]}
    by_name: dict[str, set[str]] = {}
    for source in manifest["sources"]:
        by_name.setdefault(source["name"], set()).add(source["sha256"])
    for path in sources:
        if not path.is_file():
            raise IndexStaleError(f"The index source {path} is gone; rebuild the index.")
        digest = file_sha256(path)
        where = str(path.resolve())
        if by_path.get(where, digest) != digest or digest not in by_name.get(path.name, ()):
            raise IndexStaleError(
                f"The index {folder} is stale: {path.name} changed since it was built; rebuild it."
            )


def check_recorded_sources(folder: Path, manifest: dict[str, Any]) -> None:
    """An index whose source, where it was read, has changed since the build is stale: it was
    used without a word, and turned a typo fixed in the text back into the typo (a review).
    The size and modification time find it without hashing every source on every start; a
    file that moved or was deleted is not a change (the index holds its text)."""
    for source in manifest["sources"]:  # a list of objects: check_fields
        if not isinstance(source.get("path"), str):
            continue  # an index from before paths were recorded
        path = Path(source["path"])
        if not path.is_file():
            continue
        stat = path.stat()
        if (stat.st_size, stat.st_mtime_ns) == (source.get("bytes"), source.get("mtime_ns")):
            continue
        if file_sha256(path) != source.get("sha256"):
            raise IndexStaleError(
                f"The index {folder} was built from {path}, which has changed since; rebuild "
                f"it with `{rebuild_command(folder, manifest)}`."
            )


def rebuild_command(folder: Path, manifest: dict[str, Any]) -> str:
    """The ``index build`` that made ``folder``, from its manifest: its sources where they were
    read (FILES where that is not recorded), its --field and the model whose tokenizer read
    them (the hint left both out, and the index it built was refused or failed: a review)."""
    paths = [source.get("path") for source in manifest["sources"]]
    files = (
        " ".join(shlex.quote(path) for path in paths)
        if all(isinstance(path, str) for path in paths)
        else "FILES"
    )
    command = f"tiankong index build {files} -o {shlex.quote(str(folder))}"
    recipe, tokenizer = manifest.get("recipe", {}), manifest.get("tokenizer", {})
    if isinstance(recipe, dict) and isinstance(recipe.get("field"), str):
        command += f" --field {shlex.quote(recipe['field'])}"
    # where the model was read (an absolute path); an index from before it was recorded: its name
    name = tokenizer.get("source", tokenizer.get("name")) if isinstance(tokenizer, dict) else None
    if isinstance(name, str) and name != DEFAULT_TOKENIZER:
        command += f" --model {shlex.quote(name)}"
    return command
