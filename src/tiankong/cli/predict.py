"""`tiankong predict` and `tiankong models`: option parsing and output, nothing else."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from tiankong.cli.options import (
    FLAG,
    FROM_FLAGS,
    any_case,
    int8_warned,
    names_a_file,
    settings_flags,
)
from tiankong.cli.output import emit, output_console, shown
from tiankong.cli.root import app
from tiankong.cli.stdin import named_stdin, print_line_error, stdin_lines
from tiankong.config import Settings
from tiankong.core.options import RANGES, PredictOptions
from tiankong.core.results import FillResult, Memory
from tiankong.core.text import BLANK, has_blank
from tiankong.errors import BadOptionError, TiankongError, mapping_for

if TYPE_CHECKING:
    from tiankong.core.options import RANGES, PredictOptions
    from tiankong.service import FillMasker

WholeWordOption = Annotated[
    bool, typer.Option("--whole-word", help="Joint fills for several masks (beam search).")
]


def ranged(flag: str, field: str, help: str) -> Any:
    """The option ``flag`` for PredictOptions' ``field``, held to its range (``RANGES``) by the
    CLI, which then names the flag (the library's sentence names the field)."""
    least, most = RANGES[field]
    return typer.Option(flag, min=least, max=most, help=help)


BeamOption = Annotated[int, ranged("--beam-width", "beam_width", "Beam width for joint fills.")]
OrderOption = Annotated[
    str,
    typer.Option(
        "--order", callback=any_case, help="Joint decoding: left_to_right or confident_first."
    ),
]
CandidatesOption = Annotated[
    str | None,
    typer.Option(
        "--candidates",
        help="Options for the blank, separated by commas (, ， 、) or spaces: 充电,吃饭.",
    ),
]
AllowedOption = Annotated[
    str | None,
    typer.Option(
        "--allowed", help="Only these characters/words, separated by commas (, ， 、) or spaces."
    ),
]
ExcludeOption = Annotated[
    str | None,
    typer.Option(
        "--exclude", help="Never these characters/words, separated by commas (, ， 、) or spaces."
    ),
]
PresetOption = Annotated[
    str | None,
    typer.Option(
        "--preset", callback=any_case, help="Constraint preset: chinese_only, no_punctuation."
    ),
]
# None: the settings' default_top_k (TIANKONG_DEFAULT_TOP_K), which the flag's fixed 5 hid
TopKOption = Annotated[
    int | None,
    typer.Option(
        "--top-k",
        "-k",
        help=f"Candidates per mask (1-{Settings.max_top_k}; default {Settings.default_top_k}, "
        "or TIANKONG_DEFAULT_TOP_K).",
        show_default=False,
    ),
]
BlankLengthOption = Annotated[
    int, ranged("--max-blank-length", "max_blank_length", "Longest fill for a [BLANK].")
]
AlphaOption = Annotated[
    float,
    ranged("--length-alpha", "length_alpha", "Rank [BLANK] fills by joint^(1/length^alpha)."),
]
LIST_SEPARATORS = re.compile(r"[,，、\s]+")


def split_list(value: str | None) -> tuple[str, ...]:
    return tuple(item for item in LIST_SEPARATORS.split(value or "") if item)


def decoding_options(
    masker: FillMasker,
    top_k: int | None,
    whole_word: bool,
    beam_width: int,
    order: str,
    candidates: str | None,
    allowed: str | None,
    exclude: str | None,
    preset: str | None,
    max_blank_length: int,
) -> PredictOptions:
    """PredictOptions from the CLI's decoding flags (shared by predict and fill)."""
    from tiankong.core.decoding import Constraints

    constraints = Constraints(split_list(allowed), split_list(exclude), preset)
    if candidates is not None and not split_list(candidates):
        raise BadOptionError(
            "--candidates is empty; give the options to rank, separated by commas or spaces, "
            "or leave it out."
        )
    if candidates is not None and whole_word:  # the library's sentence names mode 'whole_word'
        raise BadOptionError("--candidates ranks options for one blank; drop --whole-word.")
    for flag, given in (("--allowed", allowed), ("--exclude", exclude)):
        if given is not None and not split_list(given):  # as POST /predict's allowed: []
            raise BadOptionError(  # --exclude "" was taken and did nothing
                f"{flag} is empty; give the characters or words, separated by commas or spaces, "
                "or leave it out."
            )
    return masker.options(
        masker.settings.default_top_k if top_k is None else top_k,
        mode="whole_word" if whole_word else "single",
        beam_width=beam_width,
        order=order,
        candidates=None if candidates is None else split_list(candidates),
        constraints=constraints,
        max_blank_length=max_blank_length,
    )


@app.command("predict")
@settings_flags
def predict_command(
    text: Annotated[
        str | None, typer.Argument(help="Text with [MASK]s; omit (or -) to read lines from stdin.")
    ] = None,
    model: object = FLAG,
    top_k: TopKOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object per text.")
    ] = False,
    device: object = FLAG,
    threads: object = FLAG,
    engine: object = FLAG,
    precision: object = FLAG,
    max_length: object = FLAG,
    whole_word: WholeWordOption = False,
    beam_width: BeamOption = PredictOptions.beam_width,
    order: OrderOption = PredictOptions.order,
    candidates: CandidatesOption = None,
    allowed: AllowedOption = None,
    exclude: ExcludeOption = None,
    preset: PresetOption = None,
    max_blank_length: BlankLengthOption = PredictOptions.max_blank_length,
    onnx_cache_dir: object = FLAG,
    index: object = FLAG,
    settings: Settings = FROM_FLAGS,
) -> None:
    """Fill the [MASK]s in TEXT (or in each line of stdin) and print ranked candidates.

    A [BLANK] is a blank of unknown length (1 to --max-blank-length characters).
    """
    from tiankong.service import FillMasker

    text = named_stdin(text)
    if text is not None and names_a_file(text) and not has_blank(text):
        # it said "The text has no [MASK]", of a file full of them (a review)
        raise BadOptionError(file_given(text))
    masker = int8_warned(FillMasker.load(settings=settings))
    options = decoding_options(
        masker,
        top_k,
        whole_word,
        beam_width,
        order,
        candidates,
        allowed,
        exclude,
        preset,
        max_blank_length,
    )
    console = output_console(soft_wrap=True)  # a long sentence is one line, also in a file
    if text is not None:
        result = masker.predict(text, options=options)
        print_result(result, as_json, console, masker.model.name)
        return
    failures, exit_code = 0, 0
    for number, line in stdin_lines():
        try:
            result = masker.predict(line, options=options)
            print_result(result, as_json, console, masker.model.name)
        except TiankongError as error:  # one bad line doesn't stop the rest
            failures += 1
            print_line_error(number, line, error, as_json, console)
            exit_code = mapping_for(error).exit_code
    if failures:
        raise typer.Exit(exit_code)


SOURCE = "出处 (corpus index)"  # a column only when some row has evidence


SOURCE_WIDTH = 30  # characters of the source line shown around its match


def excerpt(example: str, match: str | None, width: int = SOURCE_WIDTH) -> str:
    """The part of a source line that holds its match: ``width`` characters centred on it,
    with … where the line goes on, so a long line never hides the match past a table's edge."""
    at = example.find(match) if match else -1
    if at < 0 or len(example) <= width:
        return example
    assert match is not None
    start = max(0, min(at + len(match) // 2 - width // 2, len(example) - width, at))
    end = max(start + width, at + len(match))
    return ("…" if start else "") + example[start:end] + ("…" if end < len(example) else "")


def source_of(memory: Memory) -> str:
    """The source line of a candidate's evidence around its match, with its count, or nothing
    (as rich markup: the corpus's own brackets are escaped)."""
    if memory is None:
        return ""
    return shown(f"{excerpt(memory['example'], memory.get('match'))} (×{memory['count']})")


def print_result(result: FillResult, as_json: bool, console: Console, model: str) -> None:
    if as_json:
        emit(json.dumps(result.to_dict(), ensure_ascii=False))
        return
    # the user's text, the corpus's and the model's tokens are escaped: rich reads [x] as markup
    title = f"{shown(result.sequence)}   [dim](model: {shown(model)})[/dim]"
    if result.truncated:
        title += "   [yellow](text was cut to a window around the masks)[/yellow]"
    console.print(title, highlight=False)
    for warning in result.warnings:  # as --json carries them (no Han character, ...)
        console.print(f"[yellow]note:[/yellow] {shown(warning)}", highlight=False)
    # Options and [BLANK] fills differ in length, so they are not ranked by the joint
    # probability (that of the whole fill): options by the probability per token (the
    # geometric mean), [BLANK] fills by rank_score; the ranking column comes first and the
    # title names it.
    if result.candidates:
        # score: per token, with the index's evidence mixed in; model: the model's own per
        # token, and joint its chain probability (the columns read "per token" and "joint", and
        # with the index on a one-character option showed two different numbers)
        title = "candidates, ranked by score (per token)"
        table = Table(title=title, title_justify="left")
        sourced = any(option.memory for option in result.candidates)
        for column in ("#", "option", "score", "model", "model joint", *[SOURCE] * sourced):
            table.add_column(column, justify="left" if column in ("option", SOURCE) else "right")
        for rank, option in enumerate(result.candidates, start=1):
            name = option.option if option.in_vocabulary else f"{option.option} (unknown, last)"
            model_score = option.score if option.model_score is None else option.model_score
            cells = [str(rank), shown(name), f"{option.score:.4g}", f"{model_score:.4g}"]
            cells.append(f"{option.joint:.4g}")
            table.add_row(*cells, *[source_of(option.memory)] * sourced)
        console.print(table)
        return
    if result.sequences and BLANK in result.text:
        # fills of several lengths: ranked by rank_score, which neither per char nor joint
        # follows (the title said "per char", whose column then read out of order)
        title = f"[BLANK] fills, ranked by joint^(1/length^{PredictOptions.length_alpha})"
        table = Table(title=title, title_justify="left")
        sourced = any(fill.memory for fill in result.sequences)
        columns = ("#", "fill", "sentence", "rank", "per char", "joint", *[SOURCE] * sourced)
        for column in columns:
            left = column in ("fill", "sentence", SOURCE)
            table.add_column(column, justify="left" if left else "right")
        for rank, fill in enumerate(result.sequences, start=1):
            cells = [str(rank), shown(fill.fill), shown(fill.text), f"{fill.rank_score:.4g}"]
            cells += [f"{fill.normalised:.4g}", f"{fill.score:.4g}"]
            table.add_row(*cells, *[source_of(fill.memory)] * sourced)
        console.print(table)
    elif result.sequences:  # one length: the joint probability ranks them
        table = Table(title="whole-word fills, ranked by joint", title_justify="left")
        sourced = any(fill.memory for fill in result.sequences)
        for column in ("#", "fill", "sentence", "joint", *[SOURCE] * sourced):
            left = column in ("fill", "sentence", SOURCE)
            table.add_column(column, justify="left" if left else "right")
        for rank, fill in enumerate(result.sequences, start=1):
            cells = [str(rank), shown(fill.fill), shown(fill.text), f"{fill.score:.4g}"]
            table.add_row(*cells, *[source_of(fill.memory)] * sourced)
        console.print(table)
    for index, candidates in enumerate(result.masks, start=1):
        table = Table(title=f"[MASK] {index}", title_justify="left")
        table.add_column("#", justify="right")
        table.add_column("token")
        table.add_column("probability", justify="right")
        table.add_column("")
        sourced = any(candidate.memory for candidate in candidates)
        if sourced:
            table.add_column(SOURCE)
        for rank, candidate in enumerate(candidates, start=1):
            bar = "█" * max(1, round(candidate.score * 20)) if candidate.score >= 0.025 else "▏"
            cells = [str(rank), shown(candidate.token), f"{candidate.score:.4f}", bar]
            table.add_row(*cells, *[source_of(candidate.memory)] * sourced)
        console.print(table)


@app.command("models")
def models_command() -> None:
    """List the bundled models and show their model cards."""
    from tiankong.core.models import BUNDLED_MODELS, BUNDLED_ROOT

    console = output_console(soft_wrap=True)  # a long sentence is one line, also in a file
    for entry in BUNDLED_MODELS:
        console.rule(f"[bold]{entry.name}[/bold] (bundled, default)")
        card = BUNDLED_ROOT / entry.folder / "MODEL_CARD.md"
        console.print(card.read_text(encoding="utf-8") if card.is_file() else entry.summary)
    console.print(
        "\nOther sources: any local folder in Hugging Face layout, or a hub id such as "
        "google-bert/bert-base-chinese (recommended for production), via --model."
    )


def file_given(name: str) -> str:
    """What to do with a file given as the text: fill it, or, for plain lines, give them on
    stdin (stdin's lines are texts as typed: a JSONL's were filled inside their braces)."""
    from tiankong.offline.fill import named_format

    quoted = shlex.quote(name)
    fill = f"tiankong fill {quoted} -o OUT.jsonl"
    if named_format(Path(name), "auto") in ("jsonl", "csv"):
        return f"'{name}' is a file; fill its records with {fill}."
    return (
        f"'{name}' is a file; fill its lines with {fill}, or give them on stdin: tiankong "
        f"predict < {quoted}."
    )
