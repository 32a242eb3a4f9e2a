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

from tiankong.cli.output import emit, shown
from tiankong.core.text import LONE_SURROGATE
from tiankong.errors import EmptyTextError, TiankongError


def stdin_lines() -> Iterator[tuple[int, str]]:
    """stdin's lines that aren't blank, in order, each with its line number (from 1). A stdin
    with none (empty, or blank lines only) raises ``EmptyTextError`` once it ends: the command
    exited 0 having printed nothing, as if it had answered."""
    seen = False
    for number, raw in enumerate(sys.stdin.buffer, start=1):
        line = raw.decode("utf-8", "surrogateescape").rstrip("\r\n")
        if number == 1:
            line = line.removeprefix("\ufeff")
        if line.strip():
            seen = True
            yield number, line
    if not seen:
        raise EmptyTextError(
            "stdin held no text (it was empty or blank); give TEXT, or one sentence a line on "
            "stdin."
        )


def printable(text: str) -> str:
    """``text`` with each lone surrogate (a byte that wasn't UTF-8) shown as U+FFFD, so that
    echoing a bad line can't fail on a strict UTF-8 stdout."""
    return LONE_SURROGATE.sub("\ufffd", text)


EXCERPT_CHARS = 20  # of a bad line, in the table mode's error


def print_line_error(
    number: int, line: str, error: TiankongError, as_json: bool, console: Console
) -> None:
    """One line's error, where its answer would have gone: a JSON line with the line number,
    the text and the error's code and message, or the message in red after the line number
    and the line's start (the message alone did not say which of many lines it was)."""
    if as_json:
        fields = {"code": error.code, "message": error.message}
        record = {"line": number, "text": printable(line), "error": fields}
        emit(json.dumps(record, ensure_ascii=False))
    else:  # an error sentence goes to stderr, as every error of the CLI does
        start = printable(line)
        if len(start) > EXCERPT_CHARS:
            start = start[:EXCERPT_CHARS] + "…"
        Console(stderr=True, soft_wrap=True).print(
            f"[red]error:[/red] line {number} ({shown(start)}): {shown(error.message)}",
            highlight=False,
        )


STDIN = "-"  # a TEXT argument that names standard input, as in cat and most Unix tools


def named_stdin(text: str | None) -> str | None:
    """``text``, or None (read stdin) where it is ``-``: ``check -`` answered the dash ("no
    Chinese character") and ``predict -`` said it had no [MASK] (a review)."""
    return None if text == STDIN else text
