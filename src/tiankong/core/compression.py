"""Compressed files a user may hand over where plain text is read: told by their first bytes."""

from __future__ import annotations

from pathlib import Path

# how each compressed format a user may hand over starts, and the suffixes it is named by
COMPRESSED = {
    "xz": (b"\xfd7zXZ\x00", (".xz",)),
    "gzip": (b"\x1f\x8b", (".gz", ".gzip")),
    "bzip2": (b"BZh", (".bz2",)),
    "zstd": (b"\x28\xb5\x2f\xfd", (".zst",)),
    "zip": (b"PK\x03\x04", (".zip",)),
}


def compression_of(path: Path) -> str | None:
    """The compressed format ``path``'s first bytes are, or None."""
    try:
        with path.open("rb") as handle:
            head = handle.read(8)
    except OSError:
        return None
    return next((name for name, (magic, _) in COMPRESSED.items() if head.startswith(magic)), None)
