"""`tiankong index build`: a corpus index from text files (thin over tiankong.index)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from tiankong.cli.root import app
from tiankong.errors import BadOptionError

index_app = typer.Typer(
    help="Corpus indexes: fills grounded in a text collection (docs/INDEX.md).",
    no_args_is_help=True,
)
app.add_typer(index_app, name="index")


@index_app.command("build")
def build_command(
    inputs: Annotated[
        list[Path],
        typer.Argument(
            help=".txt or .txt.xz (one passage a line), or JSONL/CSV (.xz too) with --field."
        ),
    ],
    output: Annotated[
        str,  # not Path: -o "" was read as ".", a folder the user never named
        typer.Option(
            "--output", "-o", metavar="PATH", help="The index folder to write (replaced)."
        ),
    ],
    field: Annotated[
        str | None, typer.Option("--field", help="The text field of JSONL or CSV inputs.")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="Read the text with this model's tokenizer (a bundled name, folder or hub "
            "id), for --index DIR beside --model; default: bert-base-chinese's, the bundled "
            "model's.",
        ),
    ] = None,
) -> None:
    """Build a corpus index of INPUT files into a folder, for --index DIR.

    A bad input (missing, empty, not UTF-8, without the field) is one sentence and exit 2.
    """
    from tiankong.index import build_index
    from tiankong.index.sources import only_text
    from tiankong.index.tokens import DEFAULT_TOKENIZER

    if field is not None and only_text(inputs):  # it was ignored, and written into the
        raise BadOptionError(  # manifest as if it had been read
            f"--field '{field}' names the text field of JSONL or CSV inputs, and every input "
            "here is text, one passage a line; leave it out."
        )
    tokenizer, tokenizer_name, source = None, DEFAULT_TOKENIZER, None
    if model is not None:  # the model is checked before any input is read
        from tiankong.core.text import TextEncoder, TextLimits
        from tiankong.model_sources import resolve_model

        resolved = resolve_model(model)
        tokenizer = TextEncoder.from_folder(resolved.path, TextLimits()).tokenizer
        tokenizer_name = resolved.name
        source = str(resolved.path) if resolved.kind == "local" else resolved.name
    manifest = build_index(
        inputs,
        output,
        field=field,
        progress=True,
        tokenizer=tokenizer,
        tokenizer_name=tokenizer_name,
        tokenizer_source=source,
        output_flag="--output",
    )
    counts = manifest.get("counts", {})
    Console(stderr=True).print(
        f"indexed {plural(counts.get('passages', 0), 'passage')} "
        f"({plural(counts.get('tokens', 0), 'token')}) "
        f"from {plural(len(inputs), 'file')} into {output}; use it with --index {output}",
        highlight=False,
    )


def plural(count: int, noun: str) -> str:
    """1 passage, 2 passages ("indexed 1 passages" was a review's find)."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"
