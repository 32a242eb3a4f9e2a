"""The lines a command reads from stdin (``predict`` and ``check`` without TEXT), and how a line
that can't be answered is reported.

Read as bytes and decoded as UTF-8 whatever the locale says, so that a line that isn't UTF-8
is one bad line, refused with its own error (the text checks find the lone surrogates that
``surrogateescape`` leaves), instead of a decoding error that ends the command. A byte-order
mark and the line ends (``\\n`` and ``\\r\\n``) are removed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

from rich.console import Console
from rich.markup import escape

from tiankong.core.text import LONE_SURROGATE
from tiankong.errors import TiankongError


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


def print_line_error(line: str, error: TiankongError, as_json: bool, console: Console) -> None:
    """One line's error, where its answer would have gone: a JSON line with the text and the
    error's code and message, or the message in red."""
    if as_json:
        fields = {"code": error.code, "message": error.message}
        print(json.dumps({"text": printable(line), "error": fields}, ensure_ascii=False))
    else:  # an error sentence goes to stderr, as every error of the CLI does
        Console(stderr=True, soft_wrap=True).print(
            f"[red]error:[/red] {escape(error.message)}", highlight=False
        )
