"""The files of the offline commands (`fill`, `check FILE -o`, `eval`): inputs read as UTF-8,
outputs checked before the work.

An input is UTF-8 with or without a byte-order mark (Excel's "CSV UTF-8" starts with one); a file
in another encoding (GBK, UTF-16) is one sentence and exit 2, as `tiankong index build` says it,
never a ``UnicodeDecodeError``. A path is tested with ``os.path``, which answers False for a name
the system refuses (a sentence typed where a file goes is soon over 255 bytes) where pathlib
raises ``OSError``. A CSV input is read strictly, as `tiankong index build` reads one
(``csv_records``): a quote never closed is one sentence naming the line it opens on. An output
that can't be written is refused before the model loads, not after the work; a missing folder
above it is made when it is written, as the commands always have.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from tiankong.core.compression import COMPRESSED, compression_of, first_line_not_utf8
from tiankong.core.text import LONE_SURROGATE
from tiankong.errors import BadDataFileError, BadOptionError, not_utf8
from tiankong.index.sources import CsvRecords

TOTAL_ROW = "overall"  # an eval report's row of every item


def item_category(record: dict[str, Any], where: str) -> str:
    """An eval item's ``category`` (``all`` where it has none), one rule for the cloze and the
    check files: a string that names a row of its own, not the total's (a category named
    overall gave the table two overall rows, and the index's flips counted its items twice; an
    empty one a row with no name: a review)."""
    category = record.get("category", "all")
    if not isinstance(category, str):
        raise BadDataFileError(f'{where}: "category" must be a string.')
    if not category.strip() or category.strip().casefold() == TOTAL_ROW:  # Overall too
        raise BadDataFileError(
            f'{where}: "category" {category!r} can\'t be a row of its own (empty, or the '
            f"total's name, {TOTAL_ROW}); name it otherwise or leave it out."
        )
    return category.strip()  # "idiom " made a second row that read idiom (a review)


def require_input(path: Path, what: str) -> None:
    """A missing input, a folder or a sentence in place of a file name: one sentence each."""
    if os.path.isfile(path):
        return
    if os.path.isdir(path):
        raise BadDataFileError(f"{what} '{path}' is a folder, not a file.")
    if os.path.exists(path):  # a device, a pipe or a socket (/dev/null)
        raise BadDataFileError(f"{what} '{path}' is not a regular file.")
    raise BadDataFileError(f"{what} '{path}' does not exist.")


@contextmanager
def open_text(path: Path, what: str, newline: str | None = None) -> Iterator[TextIO]:
    """``path`` as UTF-8 text, a byte-order mark skipped. Bytes that aren't UTF-8, met at any
    read inside the block (a generator's lines included), raise ``BadDataFileError``."""
    try:
        with path.open(encoding="utf-8-sig", newline=newline) as handle:
            yield handle
    except UnicodeDecodeError as error:
        packed = compression_of(path)
        if packed:  # "save it as UTF-8" was the advice for an xz file
            raise BadDataFileError(
                f"{what} '{path}' is {packed}-compressed; this command reads plain files: "
                "decompress it first."
            ) from None
        found = first_line_not_utf8(path)
        line = found[0] if found else 0
        where = f" (line {line})" if line > 1 else ""  # line 1: a file in another encoding
        raise BadDataFileError(not_utf8(f"{what} '{path}'{where}", error, line)) from None
    except OSError as error:
        raise BadDataFileError(f"{what} '{path}' can't be read ({error.strerror}).") from None


def check_uncompressed_name(path: Path, what: str) -> None:
    """An output named like a compressed file is refused: the commands write plain text, and
    out.jsonl.gz was plain JSONL under a .gz name."""
    suffix = path.suffix.lower()
    for name, (_, suffixes) in COMPRESSED.items():
        if suffix in suffixes:
            raise BadOptionError(
                f"The {what} '{path.name}' is named like a {name} file, but it would be written "
                f"uncompressed; drop {path.suffix} from the name (compress it afterwards)."
            )


def csv_records(handle: TextIO, path: Path) -> CsvRecords:
    """A CSV input's records (a ``csv.DictReader``), read strictly: a malformed record (a quote
    opened and never closed, which took the rest of the file as one value without a word) is a
    ``BadDataFileError`` naming the line where it starts. The rule is index build's
    (``index.sources.CsvRecords``), shared."""
    return CsvRecords(handle, path, BadDataFileError)


def json_line(value: Any, default: Callable[[Any], Any] | None = None) -> str:
    """``value`` as one line of JSON, non-ASCII as it is, and a lone surrogate (which a JSON
    input may hold as an escape, and Python reads as one) escaped again, so the line is UTF-8
    and reads back to the same value (it stopped a run with a UnicodeEncodeError).

    >>> json_line({"note": "a\\udc00b 中"})
    '{"note": "a\\\\udc00b 中"}'
    """
    text = json.dumps(value, ensure_ascii=False, default=default)
    return LONE_SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


def same_file(first: Path, second: Path) -> bool:
    """Whether two paths name one file: the same inode where both exist (a link, another
    spelling), else the same resolved path."""
    try:
        return os.path.samefile(first, second)
    except OSError:
        return os.path.realpath(first) == os.path.realpath(second)


def check_writable(path: Path, what: str) -> None:
    """Refuse an output that can't be written: a folder, a name under a file, no permission.
    Where the file doesn't exist yet, the nearest folder above it that does decides."""
    if os.path.isdir(path):
        raise BadOptionError(f"The {what} '{path}' is a folder; name a file.")
    target = path
    if not os.path.exists(path):
        target = next(folder for folder in path.parents if os.path.exists(folder))
        if not os.path.isdir(target):
            raise BadOptionError(
                f"The {what} '{path}' can't be written: '{target}' is a file, not a folder."
            )
    if not os.access(target, os.W_OK | (os.X_OK if target != path else 0)):
        raise BadOptionError(f"The {what} '{path}' can't be written (permission denied).")
    if target in (path, path.parent):  # tried: root passes os.access where a write fails
        probe(path, what)


def probe(path: Path, what: str) -> None:
    """Open ``path`` for appending (nothing is written), removing it again if this made it:
    ``eval --json /proc/report.json`` ran the whole evaluation, then could not write."""
    existed = os.path.exists(path)
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as error:
        raise BadOptionError(f"The {what} '{path}' can't be written ({error.strerror}).") from None
    if not existed:
        os.unlink(path)


def check_report(report: Path, source: Path) -> None:
    """`eval --json`: checked before the evaluation runs, and never the file it reads."""
    if same_file(report, source):
        raise BadOptionError(f"The report is the input ('{report}'); name another file.")
    check_writable(report, "report")


def write_report(report: Path, text: str) -> None:
    """Write a report, making its folder; what ``check_report`` can't foresee (a name over 255
    bytes, a full disk) is one sentence too."""
    try:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(text, encoding="utf-8")
    except OSError as error:
        message = f"The report '{report}' can't be written ({error.strerror})."
        raise BadOptionError(message) from None
