"""Reading index inputs: .txt / .txt.xz (one passage a line), JSONL and CSV (one field)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import lzma
import os
import re
import shlex
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

from tiankong.core.compression import compression_of, first_line_not_utf8
from tiankong.core.text import LONE_SURROGATE
from tiankong.errors import BadInputError, IndexInputError, not_utf8

TEXT_SUFFIXES = (".txt", ".txt.xz")
JSONL_SUFFIXES = (".jsonl", ".jsonl.xz", ".ndjson", ".ndjson.xz")  # .ndjson as `fill` reads it
FIELD_SUFFIXES = (*JSONL_SUFFIXES, ".csv", ".csv.xz")


class NotJsonError(ValueError):
    """A JSONL line that isn't JSON as RFC 8259 has it; its message says what is wrong."""


def json_value(line: str) -> Any:
    """One JSONL line as JSON has it: ``json.loads`` also takes ``NaN`` and ``Infinity``, and
    reads ``1e400`` as infinity, and a record's own fields, kept in a fill's output, were then
    written back as ``Infinity``, which is not JSON. Each raises ``NotJsonError`` (a
    ``ValueError``, as ``json.loads`` raises) with what the line holds.

    >>> json_value('{"n": 1.5, "big": 12345678901234567890}')
    {'n': 1.5, 'big': 12345678901234567890}
    >>> json_value('{"n": 1e400}')
    Traceback (most recent call last):
    ...
    tiankong.index.sources.NotJsonError: the number 1e400 is too large for a JSON number here
    >>> json_value('{"n": NaN}')
    Traceback (most recent call last):
    ...
    tiankong.index.sources.NotJsonError: NaN is not JSON

    A key given twice in one object is refused too: the last one was kept without a word, where
    a CSV header that repeats a column is refused (a review).

    >>> json_value('{"id": 1, "id": 2}')
    Traceback (most recent call last):
    ...
    tiankong.index.sources.NotJsonError: the key 'id' is given twice
    """
    return json.loads(
        line,
        parse_constant=not_json_constant,
        parse_float=finite_float,
        object_pairs_hook=unique_keys,
    )


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    record: dict[str, Any] = {}
    for key, value in pairs:
        if key in record:
            raise NotJsonError(f"the key '{key}' is given twice")
        record[key] = value
    return record


def not_json(error: ValueError) -> str:
    """What a line ``json_value`` refused is: "not valid JSON", and why where that is known
    (``json.loads``'s own messages name positions, not the problem a user can fix)."""
    return f"not valid JSON ({error})" if isinstance(error, NotJsonError) else "not valid JSON"


def not_json_constant(name: str) -> Any:
    raise NotJsonError(f"{name} is not JSON")


def finite_float(literal: str) -> float:
    value = float(literal)
    if value in (float("inf"), float("-inf")):
        raise NotJsonError(f"the number {literal} is too large for a JSON number here")
    return value


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def open_text(path: Path) -> io.TextIOBase:
    """UTF-8, a byte-order mark at the start dropped (as ``tiankong fill`` reads files): it
    hid a CSV's first column name and broke a JSONL's first line."""
    if lower_name(path).endswith(".xz"):
        return lzma.open(path, "rt", encoding="utf-8-sig", newline="")
    return path.open("r", encoding="utf-8-sig", newline="")


def only_text(paths: Sequence[Path]) -> bool:
    """Whether every one of ``paths`` is text, one passage a line (no field to name)."""
    return all(lower_name(path).endswith(TEXT_SUFFIXES) for path in paths)


def lower_name(path: Path) -> str:
    """A file's name as its suffixes are read: in any case (N.TXT is text, as fill reads it)."""
    return path.name.lower()


def check_input(path: Path, field: str | None) -> None:
    """Refuse unsupported or missing files before any work starts."""
    name = lower_name(path)
    if os.path.isdir(path):
        raise IndexInputError(f"The input {path} is a folder; name the files to index.")
    if not os.path.isfile(path):
        raise IndexInputError(f"The input file {path} does not exist.")
    if name.endswith(FIELD_SUFFIXES) and not field:
        raise IndexInputError(f"{path} is JSONL/CSV; name the text field with --field.")
    if not name.endswith(TEXT_SUFFIXES + FIELD_SUFFIXES):
        raise IndexInputError(
            f"{path} is not a supported input; use .txt, .jsonl (.ndjson) or .csv, each optionally "
            ".xz."
        )


def built_from(path: Path) -> str:
    """How to build an index from the file ``path``, given where an index folder goes: the
    command as it would run (a JSONL or CSV needs its --field, told to run without it)."""
    name, quoted = lower_name(path), shlex.quote(str(path))  # `my notes.csv` was two words
    if name.endswith(FIELD_SUFFIXES):
        return (
            f"build an index from it with `tiankong index build {quoted} --field FIELD -o DIR` "
            "(FIELD: its text's column or key) and pass --index DIR."
        )
    if name.endswith(TEXT_SUFFIXES):
        return (
            f"build an index from it with `tiankong index build {quoted} -o DIR` and pass "
            "--index DIR."
        )
    return (
        "an index is built from .txt, .jsonl (.ndjson) or .csv files (each optionally .xz) with "
        "`tiankong index build FILE -o DIR`, then passed as --index DIR."
    )


@cache
def hidden_characters() -> re.Pattern[str]:
    """Characters no reader sees that the tokenizer drops: controls (Cc: a BEL, an escape) and
    format characters (Cf: zero-width spaces and joiners, soft hyphens, a BOM inside a line).
    Kept in a passage, 出处 showed them (守株\u200b待兔, 画龙点睛\x07). Variation selectors
    too (VS1-16, U+FE00-FE0F, and the ideographic ones, U+E0100-E01EF): marks that only pick a
    glyph, which the tokenizer's accent stripping drops; 风花雪月\ufe0f琴棋书画诗酒茶 kept one,
    and the line matched only its half after it (a verifying review). Whitespace among the
    controls is folded instead, as the rest is. Made on first use (0.3 s)."""
    hidden = (
        chr(code)
        for code in range(0x110000)
        if unicodedata.category(chr(code)) in ("Cc", "Cf") and not chr(code).isspace()
    )
    return re.compile("[" + "".join(map(re.escape, hidden)) + SELECTORS + "]")


SELECTORS = "\ufe00-\ufe0f\U000e0100-\U000e01ef"  # variation selectors: a character class's
HAS_SELECTOR = re.compile(f"[{SELECTORS}]")  # printable (Mn), so looked for apart


def visible(folded: str) -> str:
    """``folded`` (whitespace folded) without ``hidden_characters``; a printable text with no
    variation selector, almost every line, is returned as it is without the full scan."""
    if folded.isprintable() and not HAS_SELECTOR.search(folded):
        return folded
    return " ".join(hidden_characters().sub("", folded).split())


def read_passages(path: Path, field: str | None = None) -> list[str]:
    """Non-blank passages of one input, hidden characters dropped (``hidden_characters``),
    whitespace runs (newlines too) folded to one space."""
    check_input(path, field)
    try:
        with open_text(path) as handle:
            if lower_name(path).endswith(TEXT_SUFFIXES):
                raw: Iterator[str] = iter(handle)
            elif lower_name(path).endswith(JSONL_SUFFIXES):
                raw = json_field(handle, field or "", path)
            else:
                raw = csv_field(handle, field or "", path)
            passages = [visible(" ".join(text.split())) for text in raw]
    except UnicodeDecodeError as error:  # Python's decoder text said which byte, not what to do
        # the line too: a bad byte deep in a UTF-8 file was told to convert it from GBK
        found = first_line_not_utf8(path, unpack_xz=lower_name(path).endswith(".xz"))
        line = found[0] if found else 0
        where = f" (line {line})" if line > 1 else ""
        raise IndexInputError(not_utf8(f"{path}{where}", error, line)) from None
    except (lzma.LZMAError, EOFError):
        raise IndexInputError(not_xz(path)) from None
    except OSError as error:
        raise IndexInputError(f"{path} can't be read ({error.strerror or error}).") from None
    except csv.Error as error:
        raise IndexInputError(f"{path} is not well-formed CSV ({error}).") from None
    passages = [text for text in passages if text]
    if not passages:
        raise IndexInputError(f"The input file {path} has no text; give at least one passage.")
    return passages


def not_xz(path: Path) -> str:
    """Why ``path``, named .xz, reads as no xz stream: by its first bytes (plain text was
    told "it is not xz, or it is cut short")."""
    packed = compression_of(path)
    if packed is None:
        return (
            f"{path} is named .xz but isn't xz-compressed; if it is plain text, name it without "
            ".xz (or compress it with xz)."
        )
    if packed != "xz":
        return f"{path} is {packed}-compressed, not xz; decompress it or compress it with xz."
    return f"{path} is a damaged or incomplete xz file; compress it again with xz."


def json_field(handle: io.TextIOBase, field: str, path: Path) -> Iterator[str]:
    for number, line in enumerate(handle, start=1):
        if not line.strip():
            continue
        try:
            record = json_value(line)
        except ValueError as error:
            raise IndexInputError(f"Line {number} of {path} is {not_json(error)}.") from None
        if not isinstance(record, dict) or field not in record:
            raise IndexInputError(f"Line {number} of {path} has no text field '{field}'.")
        value = record[field]
        if not isinstance(value, str):
            raise IndexInputError(
                f"Line {number} of {path}: the field '{field}' is {json_type(value)}, not text."
            )
        if LONE_SURROGATE.search(value):  # "\ud800" in JSON: no UTF-8 form, can't be stored
            raise IndexInputError(f"Line {number} of {path} has invalid Unicode (a surrogate).")
        yield value


def no_column(what: str, field: str, header: Sequence[str]) -> str:
    """The sentence for a CSV without the ``field`` column, with the columns it has: a file
    separated by ';' or tabs reads as one column named by the whole header line, and an empty
    file as none."""
    if not header:
        return f"{what} is empty: it has no header row with a '{field}' column."
    shown = ", ".join(repr(name) for name in header[:5]) + (", ..." if len(header) > 5 else "")
    hint = " (is it separated by commas?)" if len(header) == 1 else ""
    return f"{what} has no column '{field}'; its columns are {shown}{hint}."


def csv_field(handle: io.TextIOBase, field: str, path: Path) -> Iterator[str]:
    """The column's values, read strictly (``CsvRecords``)."""
    reader = CsvRecords(handle, path, IndexInputError)
    if reader.fieldnames is None or field not in reader.fieldnames:
        raise IndexInputError(no_column(str(path), field, reader.fieldnames or []))
    for row in reader:
        # one short of the column, or with more values than the header has, was skipped or
        # indexed without a word
        problem = reader.problem(row, field)
        if problem:
            raise IndexInputError(f"Line {reader.record_line} of {path}: {problem}.")
        yield row[field]


class CsvRecords(csv.DictReader):
    """``csv.DictReader``, strict: a malformed record raises ``error`` (a ``BadInputError``)
    with the line where it starts. The one reading of CSV input: ``index build``, and ``fill``
    and ``check FILE -o`` (``offline/files.py``). A quote opened and never closed took the rest
    of the file as one value without a word.

    >>> try:
    ...     list(CsvRecords(io.StringIO('text\\n"ab\\ncd\\n'), Path("in.csv"), IndexInputError))
    ... except IndexInputError as error:
    ...     print(error)
    Line 2 of in.csv is not well-formed CSV (a quote opened there is never closed).
    """

    def __init__(self, handle: Iterable[str], path: Path, error: type[BadInputError]) -> None:
        self.since: list[str] = []  # the lines read since the last record

        def lines() -> Iterator[str]:
            for line in handle:
                self.since.append(line)
                yield line

        super().__init__(lines(), strict=True)
        self.path, self.error = path, error
        self.start = 1  # the line after the last record (or the header)
        self.record_line = 0  # the line the last record read starts on (blank lines skipped)

    @property
    def fieldnames(self) -> Any:
        # DictReader reads this on every row too: only the access that reads the header ends a
        # record (the header's), else each row's start was counted past it
        reading = self._fieldnames is None
        with self.refused(advance=reading):
            names = super().fieldnames
        if reading and names:
            # DictReader keeps the last value: the first was lost (an empty name, as the
            # trailing commas of a spreadsheet's export leave, holds nothing anyone reads)
            twice = next((n for n in names if n and names.count(n) > 1), None)
            if twice is not None:
                raise self.error(
                    f"The header of {self.path} names the column '{twice}' more than once; "
                    "rename the others."
                )
        return names

    @fieldnames.setter
    def fieldnames(self, value: Any) -> None:
        self._fieldnames = value

    def __next__(self) -> dict[Any, Any]:
        with self.refused():
            return super().__next__()

    def problem(self, row: dict[Any, Any], field: str) -> str:
        """What keeps a record's ``field`` from being its text ("" for nothing): the one rule
        of ``index build`` (which refuses the file) and ``fill`` (a bad record)."""
        if None in row:  # DictReader puts a long row's extra values under None
            return f"more values than the header's {len(self.fieldnames or [])} columns"
        if row.get(field) is None:  # a short row: DictReader's restval
            return f"no value in column '{field}'"
        return ""

    def first_line(self) -> int:
        """The line the record being read starts on: after the blank lines the reader skipped
        (a record may span lines, a quoted value holding line breaks)."""
        blank = next(
            (k for k, line in enumerate(self.since) if line.strip("\r\n")), len(self.since)
        )
        return self.start + blank

    @contextmanager
    def refused(self, advance: bool = True) -> Iterator[None]:
        try:
            yield
        except csv.Error as error:
            why = str(error)
            if why == "unexpected end of data":
                why = "a quote opened there is never closed"
            raise self.error(
                f"Line {self.first_line()} of {self.path} is not well-formed CSV ({why})."
            ) from None
        if advance:
            self.record_line = self.first_line()
            self.start = self.line_num + 1
            self.since.clear()


def json_type(value: object) -> str:
    """A JSON value's type as JSON names it (null, a number, an array...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a number"
    return "an array" if isinstance(value, list) else "an object"
