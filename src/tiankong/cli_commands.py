"""`tiankong predict` and `tiankong models`: option parsing and output, nothing else."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from tiankong.cli import app
from tiankong.config import Settings
from tiankong.errors import TiankongError, mapping_for
from tiankong.results import FillResult

ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        envvar="TIANKONG_MODEL",
        help="Bundled model name, local HF folder, or hub id (default: the bundled model).",
    ),
]
DeviceOption = Annotated[
    str, typer.Option("--device", envvar="TIANKONG_DEVICE", help="auto, cpu or cuda.")
]
ThreadsOption = Annotated[
    int | None,
    typer.Option("--threads", envvar="TIANKONG_THREADS", help="Intra-op threads (default: cores)."),
]
EngineOption = Annotated[
    str, typer.Option("--engine", envvar="TIANKONG_ENGINE", help="auto, torch or onnx.")
]
PrecisionOption = Annotated[
    str, typer.Option("--precision", envvar="TIANKONG_PRECISION", help="auto, fp32, int8, fp16.")
]
MaxLengthOption = Annotated[
    int | None,
    typer.Option("--max-length", envvar="TIANKONG_MAX_LENGTH", help="Token window (default 128)."),
]


def build_settings(
    model: str | None,
    device: str,
    threads: int | None,
    engine: str,
    precision: str,
    max_length: int | None = None,
) -> Settings:
    return Settings().with_overrides(
        model=model,
        device=device,
        threads=threads,
        engine=engine,
        precision=precision,
        max_length=max_length,
    )


@app.command("predict")
def predict_command(
    text: Annotated[
        str | None, typer.Argument(help="Text with [MASK]s; omit to read lines from stdin.")
    ] = None,
    model: ModelOption = None,
    top_k: Annotated[int, typer.Option("--top-k", "-k", help="Candidates per mask (1-50).")] = 5,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object per text.")
    ] = False,
    device: DeviceOption = "auto",
    threads: ThreadsOption = None,
    engine: EngineOption = "auto",
    precision: PrecisionOption = "auto",
    max_length: MaxLengthOption = None,
) -> None:
    """Fill the [MASK]s in TEXT (or in each line of stdin) and print ranked candidates."""
    from tiankong.service import FillMasker

    settings = build_settings(model, device, threads, engine, precision, max_length)
    masker = FillMasker.load(settings=settings)
    masker.check_top_k(top_k)
    console = Console()
    if text is not None:
        print_result(masker.predict(text, top_k), as_json, console, masker.model.name)
        return
    failures, exit_code = 0, 0
    for line in sys.stdin:
        line = line.rstrip("\n")
        if not line.strip():
            continue
        try:
            print_result(masker.predict(line, top_k), as_json, console, masker.model.name)
        except TiankongError as error:  # one bad line doesn't stop the rest
            failures += 1
            if as_json:
                print(
                    json.dumps(
                        {"text": line, "error": {"code": error.code, "message": error.message}},
                        ensure_ascii=False,
                    )
                )
            else:
                console.print(f"[red]error:[/red] {error.message}", highlight=False)
            exit_code = mapping_for(error).exit_code
    if failures:
        raise typer.Exit(exit_code)


def print_result(result: FillResult, as_json: bool, console: Console, model: str) -> None:
    if as_json:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
        return
    title = f"{result.sequence}   [dim](model: {model})[/dim]"
    if result.truncated:
        title += "   [yellow](text was cut to a window around the masks)[/yellow]"
    console.print(title, highlight=False)
    for index, candidates in enumerate(result.masks, start=1):
        table = Table(title=f"[MASK] {index}", title_justify="left")
        table.add_column("#", justify="right")
        table.add_column("token")
        table.add_column("probability", justify="right")
        table.add_column("")
        for rank, candidate in enumerate(candidates, start=1):
            bar = "█" * max(1, round(candidate.score * 20)) if candidate.score >= 0.025 else "▏"
            table.add_row(str(rank), candidate.token, f"{candidate.score:.4f}", bar)
        console.print(table)


@app.command("models")
def models_command() -> None:
    """List the bundled models and show their model cards."""
    from tiankong.models import BUNDLED_MODELS, BUNDLED_ROOT

    console = Console()
    for entry in BUNDLED_MODELS:
        console.rule(f"[bold]{entry.name}[/bold] (bundled, default)")
        card = BUNDLED_ROOT / entry.folder / "MODEL_CARD.md"
        console.print(card.read_text(encoding="utf-8") if card.is_file() else entry.summary)
    console.print(
        "\nOther sources: any local folder in Hugging Face layout, or a hub id such as "
        "google-bert/bert-base-chinese (recommended for production), via --model."
    )
