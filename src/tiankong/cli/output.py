"""The commands' standard output, for rich and for plain lines: a write that can't land (a full
disk, a quota, a device gone) is raised as ``OutputError``, which ``tiankong.cli.main`` says in
one sentence (it was a traceback: a review). A closed pipe stays click's (exit 1, silent)."""

from __future__ import annotations

import errno
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from rich.console import Console
from rich.markup import escape


class OutputError(OSError):
    """The command's standard output failed."""


class Stdout:
    """``sys.stdout`` as it is at each call (a test's capture swaps it), its failed writes
    raised as ``OutputError``; none at all (the command run with ``>&-``: Python then has no
    ``sys.stdout``, and the first write was an AttributeError's traceback) is one too."""

    def write(self, text: str) -> int:
        with failed_as_output_error():
            return stdout().write(text)

    def flush(self) -> None:
        with failed_as_output_error():
            stdout().flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(stdout(), name)


@contextmanager
def failed_as_output_error() -> Iterator[None]:
    """An OSError of the output as ``OutputError``; a closed pipe stays click's."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as error:
        raise OutputError(error.errno, error.strerror) from error


def stdout() -> TextIO:
    """``sys.stdout``, or ``OutputError`` where the process was started without one."""
    if sys.stdout is None:
        raise OutputError(errno.EBADF, "standard output is closed")
    return sys.stdout


def output_console(**options: Any) -> Console:
    """A rich console on the command's standard output."""
    return Console(file=Stdout(), **options)  # type: ignore[arg-type]


def emit(line: str) -> None:
    """One line of plain output (JSON, a summary)."""
    print(line, file=Stdout())


# C0 and C1 control characters (and DEL) but the tab and the line feed, as Python writes them:
# a text piped in with ESC ] 0; … set the terminal's title, ESC [ 2 J cleared the screen (a review)
CONTROLS = {
    code: f"\\x{code:02x}"
    for code in (*range(0x20), 0x7F, *range(0x80, 0xA0))
    if chr(code) not in "\t\n"
}


def visible(text: str) -> str:
    """``text`` for a terminal: its control characters written out (``\\x1b``), so a text can't
    steer the terminal it is printed on."""
    return text.translate(CONTROLS)


def shown(text: str) -> str:
    """``text`` for rich markup: control characters written out and square brackets escaped
    (rich reads ``[x]`` as markup)."""
    return escape(visible(text))
