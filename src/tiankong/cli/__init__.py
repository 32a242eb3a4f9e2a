"""The `tiankong` command line: thin wrappers that build options and call the library."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from tiankong import __version__
from tiankong.cli.train import train_command
from tiankong.errors import TiankongError, mapping_for

app = typer.Typer(
    help="tiankong (填空): fast Chinese fill-in-the-blank with BERT masked language models.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def version_callback(value: bool) -> None:
    if value:
        typer.echo(f"tiankong {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=version_callback, is_eager=True, help="Show version."),
    ] = False,
) -> None:
    """tiankong (填空): fast Chinese fill-in-the-blank with BERT masked language models."""


app.command("train")(train_command)


def register_commands() -> None:
    """Importing a command module registers its commands on ``app``."""
    from tiankong.cli import (  # noqa: F401
        bench,
        eval,
        export,
        fill,
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
