"""The root ``tiankong`` command: the typer app every command module registers on."""

from __future__ import annotations

from typing import Annotated

import typer

from tiankong import __version__

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
