"""Compressed files a user may hand over where plain text is read: told by their first bytes."""

from __future__ import annotations

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
