"""`tiankong eval`: per-category cloze accuracy, optional JSON report and engine comparison."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from tiankong.cli.options import (
    FLAG,
    FROM_FLAGS,
    any_case,
    int8_warned,
    refuse_unread,
    settings_flags,
)
from tiankong.cli.output import output_console, shown, visible
from tiankong.cli.predict import AlphaOption, BeamOption
from tiankong.cli.root import app
from tiankong.config import Settings, check_settings
from tiankong.core.options import MASK_RUN, PredictOptions, check_blank
from tiankong.core.text import BLANK, MASK, normalize_masks
from tiankong.errors import BadOptionError, TiankongError
from tiankong.offline.evaluate import (
    ClozeItem,
    EvalReport,
    agreement,
    check_scorable,
    evaluate_items,
    index_changes,
    read_items,
)
from tiankong.offline.files import TOTAL_ROW, check_report, write_report


@app.command("eval")
@settings_flags
def eval_command(
    context: typer.Context,
    file: Annotated[Path, typer.Argument(help="JSONL cloze items, or ChID JSON lines.")],
    task: Annotated[
        str,
        typer.Option(
            "--task",
            callback=any_case,
            help='fill (cloze items) or check (proofreading: {"text", "correct"} JSONL).',
        ),
    ] = "fill",
    model: object = FLAG,
    onnx_cache_dir: object = FLAG,
    engine: object = FLAG,
    precision: object = FLAG,
    device: object = FLAG,
    threads: object = FLAG,
    max_length: object = FLAG,
    order: Annotated[
        str,
        typer.Option(
            "--order", callback=any_case, help="Joint decoding: left_to_right or confident_first."
        ),
    ] = PredictOptions.order,
    beam_width: BeamOption = PredictOptions.beam_width,
    blank: Annotated[
        bool, typer.Option("--blank", help="Turn each item's masks into one [BLANK].")
    ] = False,
    length_alpha: AlphaOption = PredictOptions.length_alpha,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="List the misses.")] = False,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write a JSON report.")] = None,
    index: object = FLAG,
    compare_index: Annotated[
        bool,
        typer.Option(
            "--compare-index",
            help="Run twice, with and without the corpus index, and compare per category.",
        ),
    ] = False,
    compare: Annotated[
        str | None,
        typer.Option(
            "--compare",
            help="A second ENGINE:PRECISION (e.g. onnx:int8) to run and compare against.",
        ),
    ] = None,
    settings: Settings = FROM_FLAGS,
) -> None:
    """Top-1 / top-5 accuracy, MRR and latency per category for a cloze file (--task check:
    sentence-level detection and correction P/R/F1 and false alarms for a proofreading file)."""
    from tiankong.core.options import PredictOptions
    from tiankong.service import FillMasker

    if json_out:  # before the work: a report that can't be written would lose it
        check_report(json_out, file)
    if task == "check":
        from tiankong.cli.check import eval_check

        refuse_fill_options(context)
        eval_check(file, settings, json_out, verbose)
        return
    if task != "fill":
        raise BadOptionError(f"--task takes fill or check, not '{task}'.")

    items = read_items(file)
    refuse_unread_decoding(context, items, blank, file.name)
    options = PredictOptions(
        beam_width=beam_width, order=order, length_alpha=length_alpha
    ).validated()
    if compare_index and compare:
        raise BadOptionError("Use --compare-index or --compare, not both.")
    if compare_index:  # before the model loads (and is measured, on its first run: a review)
        from tiankong.index.grounding import without_index
        from tiankong.model_sources import resolve_model

        reason = without_index(settings.index, resolve_model(settings.model))
        if reason is not None:
            advice = "" if "--index" in reason else "; add --index bundled or --index DIR"
            raise BadOptionError(
                f"--compare-index needs a corpus index, and this run has none ({reason}){advice}."
            )
    other = None
    if compare:  # checked before any model loads, and named as typed: "--precision: unknown
        # value 'fp64'" named a flag the user never gave (a review)
        other_engine, _, other_precision = compare.lower().partition(":")  # any case
        if not other_engine:
            raise BadOptionError("--compare takes ENGINE:PRECISION, e.g. onnx:int8.")
        try:
            other = settings.with_overrides(
                engine=other_engine, precision=other_precision or "auto"
            )
            check_settings(other)
        except BadOptionError as error:
            raise BadOptionError(f"--compare {compare}: {error.message}") from None
    masker = int8_warned(FillMasker.load(settings=settings))
    check_scorable(masker, items, blank, file.name)  # before any run: its tokenizer decides
    runs = [(masker, options)]
    if compare_index:
        runs = [(masker, replace(options, index=False)), (masker, options)]
    if other is not None:
        try:
            second = FillMasker.load(settings=other)
        except TiankongError as error:  # "fp16 needs a CUDA GPU" named no --compare (a review)
            error.message = f"--compare {compare}: {error.message}"
            error.args = (error.message,)
            raise
        runs.append((int8_warned(second), options))
    console = output_console()
    reports, outcomes = [], []
    for run_masker, run_options in runs:
        report, outcome = evaluate_items(run_masker, items, run_options, blank)
        reports.append(report)
        outcomes.append(outcome)
        print_report(console, report, verbose)
    payload: dict[str, object] = {"file": str(file), "reports": [r.to_dict() for r in reports]}
    if compare_index:
        changes = index_changes(outcomes[0], outcomes[1])
        payload["index_changes"] = changes
        print_index_comparison(console, reports[0], reports[1], changes)
    elif len(outcomes) == 2:
        figures = agreement(outcomes[0], outcomes[1])
        payload["agreement"] = figures
        console.print(
            f"agreement {reports[0].engine}:{reports[0].precision} vs "
            f"{reports[1].engine}:{reports[1].precision} over {figures['items']:.0f} items: "
            f"top-1 {figures['top1_agreement']:.1%}, top-5 overlap {figures['top5_overlap']:.1%}"
        )
    if json_out:
        write_report(json_out, json.dumps(payload, ensure_ascii=False, indent=1))
        console.print(f"report written to {json_out}")


def refuse_unread_decoding(
    context: typer.Context, items: list[ClozeItem], blank: bool, name: str
) -> None:
    """The decoding options no item of the file reads are refused, not ignored: a choice item
    ranks its candidates and reads none of them, a lone [MASK] reads neither --order nor
    --beam-width, and only a [BLANK]'s fills read --length-alpha (each was accepted and did
    nothing: a review)."""
    given = {FILL_ONLY_OPTIONS[name] for name in fill_options_given(context)}
    free = [item for item in items if not item.candidates]  # choice items read no option
    if "--blank" in given and not free:
        raise BadOptionError(
            f"--blank turns an item's masks into one [BLANK], and every item of {name} ranks "
            "its own candidates, which --blank does not change; leave it out."
        )
    if blank:  # the one-blank rule, on the text --blank makes: masks apart made two blanks,
        for item in free:  # scored wrong at every run, exit 0 (a verifying review)
            try:
                check_blank(MASK_RUN.sub(BLANK, normalize_masks(item.text)))
            except BadOptionError as error:
                raise BadOptionError(
                    f"--blank: {name} line {item.line}: its masks are not one run, so they make "
                    f"no single [BLANK] ({error.message.removesuffix('.')}); leave --blank out."
                ) from None
    texts = [normalize_masks(item.text) for item in free]
    blanks = [text for text in texts if blank or BLANK in text]
    joint = blanks or [text for text in texts if text.count(MASK) > 1]
    # --blank as the way out only where it would be taken: not for a file of choice items
    add = "add --blank (each item's masks as one [BLANK]) or " if free and not blank else ""
    for flag in ("--order", "--beam-width"):
        if flag in given and not joint:
            raise BadOptionError(
                f"{flag} steers the joint fill of several [MASK]s or a [BLANK], and no item of "
                f"{name} has one; {add}leave it out."
            )
    if "--length-alpha" in given and not blanks:  # it ranks a [BLANK]'s fills
        raise BadOptionError(
            f"--length-alpha ranks the fills of a [BLANK], and no item of {name} has one; "
            f"{add}leave it out."
        )


# eval's own options that only the fill task reads: --task check refuses them, not ignores them
FILL_ONLY_OPTIONS = {
    "order": "--order",
    "beam_width": "--beam-width",
    "blank": "--blank",
    "length_alpha": "--length-alpha",
    "compare_index": "--compare-index",
    "compare": "--compare",
}


def fill_options_given(context: typer.Context) -> frozenset[str]:
    """The fill-only options given on the command line (not left at their defaults)."""
    return frozenset(
        name
        for name in FILL_ONLY_OPTIONS
        if getattr(context.get_parameter_source(name), "name", "DEFAULT") != "DEFAULT"
    )


def refuse_fill_options(context: typer.Context) -> None:
    refuse_unread(
        fill_options_given(context),
        FILL_ONLY_OPTIONS,
        "to --task fill (--task check takes --index, --verbose, --json and the model and engine "
        "options)",
    )


def print_index_comparison(
    console: Console,
    without: EvalReport,
    grounded: EvalReport,
    changes: dict[str, dict[str, int]],
) -> None:
    """Per category, side by side: the model alone and with the corpus index, and how many
    items the index turned from right to wrong and from wrong to right (top-1)."""
    table = Table(
        title=shown(f"{grounded.model}: without the index vs with {grounded.index}"),
        title_justify="left",
    )
    columns = (
        "category", "items", "top-1", "+index top-1", "top-5", "+index top-5",
        "right→wrong", "wrong→right",
    )  # fmt: skip
    for column in columns:
        table.add_column(column, justify="left" if column == "category" else "right")
    alone_rows = [*without.categories, without.overall]
    for alone, mixed in zip(alone_rows, [*grounded.categories, grounded.overall], strict=True):
        table.add_row(
            shown(alone.category),
            str(alone.items),
            f"{alone.top1:.1%}",
            f"{mixed.top1:.1%}",
            f"{alone.top5:.1%}",
            f"{mixed.top5:.1%}",
            str(changes[alone.category]["right_to_wrong"]),
            str(changes[alone.category]["wrong_to_right"]),
            style="bold" if alone.category == TOTAL_ROW else None,
        )
    print_table(console, table)


def print_table(console: Console, table: Table) -> None:
    """A file or a pipe gets the table at its natural width: cut to 80 columns, it read
    "modern_…" for both modern_word and modern_blank (a terminal keeps its own width)."""
    if not console.is_terminal:
        natural = console.measure(table, options=console.options.update_width(1000)).maximum
        table.width = natural if natural > console.width else None
    console.print(table, crop=False)


def print_report(console: Console, report: EvalReport, verbose: bool) -> None:
    table = Table(
        title=shown(
            f"{report.model} · {report.engine} {report.precision} · {report.mode} · "
            f"index {report.index}"
        ),
        title_justify="left",
    )
    for column in ("category", "items", "top-1", "top-5", "MRR", "latency ms", "errors"):
        table.add_column(column, justify="left" if column == "category" else "right")
    for row in [*report.categories, report.overall]:
        table.add_row(
            shown(row.category),
            str(row.items),
            f"{row.top1:.1%}",
            f"{row.top5:.1%}",
            f"{row.mrr:.3f}",
            f"{row.mean_latency_ms:.1f}",
            str(row.errors),
            style="bold" if row.category == TOTAL_ROW else None,
        )
    print_table(console, table)
    if verbose:
        for failure in report.failures:
            console.print(
                visible(
                    f"  line {failure['line']} [{failure['category']}] {failure['text']}  "
                    f"answers {failure['answers']}  got {failure['predicted']}"
                    + (f"  error: {failure['error']}" if failure["error"] else "")
                ),
                highlight=False,
                markup=False,  # the file's own text and categories
            )
