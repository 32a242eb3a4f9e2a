"""The `tiankong` command line: thin wrappers that build options and call the library.

Each command lives in its own module and registers on ``root.app`` when imported;
``register_commands`` imports them all, in the order ``tiankong --help`` lists them.
"""

from __future__ import annotations

import sys

import typer

from tiankong.cli.root import app
from tiankong.cli.train import train_command
from tiankong.errors import TiankongError, mapping_for

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
    try:
        app()  # standalone: usage errors print click's message and exit 2
    except TiankongError as error:
        typer.secho(f"error: {error.message}", fg=typer.colors.RED, err=True)
        sys.exit(mapping_for(error).exit_code)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
