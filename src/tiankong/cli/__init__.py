"""The `tiankong` command line: thin wrappers that build options and call the library.

Each command lives in its own module and registers on ``root.app`` when imported;
``register_commands`` imports them all, in the order ``tiankong --help`` lists them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from types import FrameType
from typing import NoReturn

import typer

from tiankong.cli.output import OutputError, visible
from tiankong.cli.root import app
from tiankong.cli.train import train_command
from tiankong.errors import EXIT_INTERNAL, TiankongError, mapping_for

__all__ = ["app", "main", "register_commands"]

app.command("train")(train_command)


def register_commands() -> None:
    """Importing a command module registers its commands on ``app``."""
    from tiankong.cli import (  # noqa: F401
        bench,
        check,
        eval,
        export,
        fill,
        index,
        predict,
        serve,
    )


def main() -> None:
    """Console-script entry: typed errors become one sentence and the table's exit code."""
    register_commands()
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        # Python's own Ctrl-C only: one the parent set to be ignored (a `cmd &` job, `trap ''
        # INT`) stays ignored
        signal.signal(signal.SIGINT, on_interrupt)
    sys.unraisablehook = quiet_interrupts
    try:
        app()  # standalone: usage errors print click's message and exit 2
    except TiankongError as error:
        typer.secho(f"error: {visible(error.message)}", fg=typer.colors.RED, err=True)
        sys.exit(mapping_for(error).exit_code)
    except KeyboardInterrupt:
        exit_interrupted()
    except OutputError as error:  # a full disk or a device gone under the command's output
        reason = error.strerror or type(error).__name__
        typer.secho(f"error: The output can't be written ({reason}).", fg="red", err=True)
        quiet_stdout()
        sys.exit(EXIT_INTERNAL)
    except SystemExit as stop:  # typer turns Ctrl-C (and SIGTERM, cli/fill.py) into a silent 130
        if (stop.code == 130 and interrupted(stop)) or (stop.code in (0, None) and INTERRUPTS):
            exit_interrupted()
        raise


def quiet_stdout() -> None:
    """Point stdout at /dev/null, so that Python's flush at exit doesn't print a second error
    ("Exception ignored ... BrokenPipeError" and the like) for the bytes still buffered."""
    if sys.stdout is None:  # started without one: nothing is buffered
        return
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def exit_interrupted() -> NoReturn:
    """Say "interrupted" and exit 130; another interrupt from here on ends the process at once,
    130 still: one that came while `serve --ray` stopped Ray escaped as a KeyboardInterrupt,
    and the process died of SIGINT (-2) after saying "interrupted" (the full test run)."""
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: os._exit(130))
    typer.echo(INTERRUPTED, err=True)
    sys.exit(130)


INTERRUPTED = "interrupted (Ctrl-C or SIGTERM)"
INTERRUPTS: list[int] = []  # Ctrl-Cs seen, so one that a callback swallowed still counts


def on_interrupt(signum: int, frame: FrameType | None) -> None:
    """Python's own Ctrl-C (a KeyboardInterrupt), noted: raised inside a weakref or thread
    callback (a pool's, as stdin ends) it was printed as "Exception ignored" and the run went on
    to exit 0."""
    INTERRUPTS.append(signum)
    raise KeyboardInterrupt


def quiet_interrupts(unraisable: sys.UnraisableHookArgs) -> None:
    """A Ctrl-C that a callback swallowed is said once, as "interrupted" (``main``), not as an
    "Exception ignored" traceback; anything else goes to Python's own hook."""
    if not isinstance(unraisable.exc_value, KeyboardInterrupt):
        sys.__unraisablehook__(unraisable)


def interrupted(error: BaseException) -> bool:
    """Whether a KeyboardInterrupt is among the exceptions that led to ``error``."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False
