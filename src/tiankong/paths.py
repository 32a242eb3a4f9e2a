"""Whether a path someone typed names a file or a folder, whatever string they typed.

pathlib's ``is_file``, ``is_dir`` and ``exists`` return False for a missing path but raise for a
name the system refuses: ``OSError`` (``ENAMETOOLONG``) for a part over 255 bytes, which a
sentence typed where a path may go easily is (86 Chinese characters). These answer False for any
``OSError``, so that the caller's own "does not exist" sentence is what the user reads.
"""

from __future__ import annotations

from pathlib import Path


def is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:
        return False
