"""The lines a command reads from stdin (``predict`` and ``check`` without TEXT).

Read as bytes and decoded as UTF-8 whatever the locale says, so that a line that isn't UTF-8
is one bad line, refused with its own error (the text checks find the lone surrogates that
``surrogateescape`` leaves), instead of a decoding error that ends the command. A byte-order
mark and the line ends (``\\n`` and ``\\r\\n``) are removed.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

from tiankong.core.text import LONE_SURROGATE


def stdin_lines() -> Iterator[str]:
    """stdin's lines that aren't blank, in order."""
    for number, raw in enumerate(sys.stdin.buffer):
        line = raw.decode("utf-8", "surrogateescape").rstrip("\r\n")
        if number == 0:
            line = line.removeprefix("\ufeff")
        if line.strip():
            yield line


def printable(text: str) -> str:
    """``text`` with each lone surrogate (a byte that wasn't UTF-8) shown as U+FFFD, so that
    echoing a bad line can't fail on a strict UTF-8 stdout."""
    return LONE_SURROGATE.sub("\ufffd", text)
