"""Compressed files a user may hand over where plain text is read: told by their first bytes."""

from __future__ import annotations

import lzma
import re
from pathlib import Path

# how each compressed format a user may hand over starts, and the suffixes it is named by
COMPRESSED = {
    "xz": (re.compile(rb"\xfd7zXZ\x00"), (".xz",)),
    "gzip": (re.compile(rb"\x1f\x8b"), (".gz", ".gzip")),
    # the block size and the block's magic (pi's digits) too: text may begin "BZh"
    "bzip2": (re.compile(rb"BZh[1-9]1AY&SY"), (".bz2",)),
    "zstd": (re.compile(rb"\x28\xb5\x2f\xfd"), (".zst",)),
    "zip": (re.compile(rb"PK\x03\x04"), (".zip",)),
}


def compression_of(path: Path) -> str | None:
    """The compressed format ``path``'s first bytes are, or None."""
    try:
        with path.open("rb") as handle:
            head = handle.read(16)
    except OSError:
        return None
    return next((name for name, (magic, _) in COMPRESSED.items() if magic.match(head)), None)


def first_line_not_utf8(
    path: Path, unpack_xz: bool = False
) -> tuple[int, UnicodeDecodeError] | None:
    """The number of the first line of ``path`` that isn't UTF-8, with its error (None where
    every line is, or the file can't be read again): one bad line in a long file was refused
    with no line to look at (a review). A line break byte is never inside a UTF-8 character,
    so lines decode alone. ``unpack_xz``: the lines of the xz stream ``path`` holds."""
    try:
        with lzma.open(path, "rb") if unpack_xz else path.open("rb") as handle:
            for number, raw in enumerate(handle, 1):
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as error:
                    return number, error
    except (OSError, EOFError, lzma.LZMAError):
        pass
    return None
