"""`tiankong check`: proofread a sentence, stdin lines or a file; and `tiankong eval --task
check`'s report. Option parsing and output only (the task is ``tiankong.tasks.check``)."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from tiankong.cli.fill import stop_as_interrupted
from tiankong.cli.options import (
    FLAG,
    FROM_FLAGS,
    any_case,
    int8_warned,
    names_a_file,
    names_a_folder,
    refuse_field_for_txt,
    refuse_unread,
    settings_flags,
)
from tiankong.cli.output import emit, output_console, shown, visible
from tiankong.cli.predict import excerpt
from tiankong.cli.root import app
from tiankong.cli.stdin import STDIN, named_stdin, print_line_error, stdin_lines
from tiankong.config import Settings
from tiankong.errors import BadOptionError, TiankongError, mapping_for
from tiankong.offline.files import TOTAL_ROW

if TYPE_CHECKING:
    from tiankong.offline.check_eval import CheckReport
    from tiankong.offline.resume import FillJob
    from tiankong.tasks.check import CheckResult, Proofreader


def load_checker(settings: Settings) -> Proofreader:
    from tiankong.service import FillMasker
    from tiankong.tasks.check import Proofreader

    return Proofreader(int8_warned(FillMasker.load(settings=settings)))


# what a file name ends with: `check 我的作文.txt` with the file elsewhere proofread the name
# and said "no errors found" without a word of the file (a review)
FILE_SUFFIXES = (".txt", ".jsonl", ".json", ".ndjson", ".csv", ".tsv", ".md")


def looks_like_a_file(text: str) -> bool:
    return text.lower().endswith(FILE_SUFFIXES) and not any(c.isspace() for c in text)


FILE_ONLY = {
    "field": "--field",
    "input_format": "--input-format",
    "chunk_size": "--chunk-size",
    "restart": "--restart",
}


@app.command("check")
@settings_flags
def check_command(
    text: Annotated[
        str | None,
        typer.Argument(
            help="A sentence to check, or with -o a file (TXT, JSONL, CSV); omit (or -) "
            "to read sentences from stdin, one a line."
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Check the file TEXT into this JSONL file (resumable)."
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object per sentence.")
    ] = False,
    field: Annotated[
        str, typer.Option("--field", help="JSON field or CSV column holding the text (-o).")
    ] = "text",
    input_format: Annotated[
        str,
        typer.Option(
            "--input-format",
            callback=any_case,
            help="txt, jsonl or csv (-o); auto: by the file's name (.txt .jsonl .ndjson .csv).",
        ),
    ] = "auto",
    chunk_size: Annotated[int, typer.Option("--chunk-size", help="Lines per checkpoint.")] = 256,
    restart: Annotated[
        bool, typer.Option("--restart", help="Ignore a checkpoint and overwrite OUTPUT.")
    ] = False,
    model: object = FLAG,
    device: object = FLAG,
    threads: object = FLAG,
    engine: object = FLAG,
    precision: object = FLAG,
    max_length: object = FLAG,
    onnx_cache_dir: object = FLAG,
    index: object = FLAG,
    settings: Settings = FROM_FLAGS,
    typed: frozenset[str] = frozenset(),
) -> None:
    """Find wrong characters (错别字) in TEXT and propose fixes, with 出处 for idioms and poems."""
    if output is not None:
        if text is None:
            raise BadOptionError("-o needs an input file: tiankong check FILE -o OUT.jsonl.")
        if text == STDIN:  # it said "Input file '-' does not exist."
            raise BadOptionError(
                "check -o reads a file, not standard input ('-'), as it resumes by the file's "
                "lines: save the texts to a file, one a line, and give its path (without -o, "
                "check reads stdin)."
            )
        from tiankong.offline.fill import input_format as input_kind  # input_format: the flag
        from tiankong.offline.resume import FillJob

        # a file is checked into JSONL (--json was ignored); a TXT file has no fields
        refuse_unread(typed, {"as_json": "--json"}, "without -o (-o writes JSONL)")
        refuse_field_for_txt(typed, input_kind(Path(text), input_format))
        job = FillJob(
            input=Path(text),
            output=output,
            text_field=field,
            input_format=input_format,
            chunk_size=chunk_size,
            resume=not restart,
            command="check",
        )
        check_file(job, settings)
        return
    refuse_unread(typed, FILE_ONLY, "with -o, which checks a file", "add -o OUT.jsonl")
    text = named_stdin(text)
    if text is not None and names_a_file(text):
        raise BadOptionError(
            f"'{text}' is a file; check it with -o: tiankong check {text} -o OUT.jsonl."
        )
    if text is not None and names_a_folder(text):  # it was a sentence with no Chinese, exit 0
        raise BadOptionError(
            f"'{text}' is a folder; check takes a sentence, or a file with -o: tiankong check "
            "FILE -o OUT.jsonl."
        )
    if text is not None and looks_like_a_file(text):
        # said, not refused: a sentence may end so too (请查看README.md: a review)
        typer.echo(
            f"warning: '{visible(text)}' looks like a file name, but no such file is here; it "
            "is checked as a sentence (to check a file: tiankong check FILE -o OUT.jsonl).",
            err=True,
        )
    checker = load_checker(settings)
    console = output_console(soft_wrap=True)  # a long sentence is one line, also in a file
    if text is not None:
        print_check(checker.check(text), as_json, console)
        return
    failures, exit_code = 0, 0
    for number, line in stdin_lines():
        try:
            print_check(checker.check(line), as_json, console)
        except TiankongError as error:  # one bad line doesn't stop the rest
            failures += 1
            exit_code = mapping_for(error).exit_code
            print_line_error(number, line, error, as_json, console)
    if failures:
        raise typer.Exit(exit_code)


def print_check(result: CheckResult, as_json: bool, console: Console) -> None:
    if as_json:
        emit(json.dumps(result.to_dict(), ensure_ascii=False))
        return
    for warning in result.warnings:  # as --json carries them (no Chinese character)
        console.print(f"[yellow]note:[/yellow] {shown(warning)}", highlight=False)
    if not result.edits and not result.checked:  # the note above says why: nothing was read
        console.print(visible(result.text), highlight=False, markup=False)
        return
    if not result.edits:
        console.print(f"{shown(result.text)}  [green]no errors found[/green]", highlight=False)
        return
    console.print(visible(result.corrected), highlight=False, markup=False)
    for edit in result.edits:
        line = (
            f"  {edit.start}: {edit.original} → {edit.suggestion}  score {edit.score:.2f}"
            f"  ({edit.source})"
        )
        if edit.memory is not None:
            line += f"  出处: {excerpt(edit.memory['example'], edit.memory.get('match'))}"
        console.print(visible(line), highlight=False, markup=False)  # the text is the user's


def check_file(job: FillJob, settings: Settings) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from tiankong.cli.fill import refuse_if_none_done, summary_line
    from tiankong.offline.check_file import run_check_file
    from tiankong.offline.fill import (
        Checkpoint,
        check_files,
        count_records,
        input_format,
        refuse_empty,
    )

    check_files(job)  # before the model loads: a missing input, a bad output
    total = count_records(job.input, input_format(job.input, job.input_format))
    refuse_empty(total, job, "checked")
    checker = load_checker(settings)
    # SIGTERM ends the run as Ctrl-C does (exit 130, the checkpoint kept), as in fill
    signal.signal(signal.SIGTERM, stop_as_interrupted)
    console = Console(stderr=True)
    progress = Progress(
        TextColumn("[bold]check"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[failed]} bad"),
        console=console,
    )
    start = Checkpoint("")
    with progress:
        task = progress.add_task("check", total=total, failed=0)

        def on_start(resumed: Checkpoint) -> None:
            nonlocal start
            start = resumed
            progress.reset(task, total=total, completed=resumed.lines_done, failed=resumed.failed)

        def on_progress(done: int, checked: int, failed: int) -> None:
            progress.update(task, advance=done, failed=failed)

        state = run_check_file(job, checker, on_progress, on_start)
    console.print(summary_line("checked", start, state, job), soft_wrap=True, highlight=False)
    refuse_if_none_done("checked", state, job)


def eval_check(file: Path, settings: Settings, json_out: Path | None, verbose: bool) -> None:
    """`tiankong eval --task check FILE`: the SIGHAN-style table, per category (``json_out``
    is checked by ``eval_command`` before this runs)."""
    from tiankong.offline.check_eval import evaluate_check, read_check_items
    from tiankong.offline.files import write_report

    items = read_check_items(file, settings.max_check_chars)
    report = evaluate_check(load_checker(settings), items, str(file))
    console = output_console(soft_wrap=True)  # a long sentence is one line, also in a file
    print_check_report(console, report)
    if verbose:
        for miss in report.misses:
            console.print(
                visible(
                    f"  line {miss['line']} [{miss['category']}] {miss['text']} → "
                    f"{miss['corrected']}  (correct: {miss['correct']})"
                ),
                highlight=False,
                markup=False,  # the file's own text and categories
            )
    if json_out:
        write_report(json_out, json.dumps(report.to_dict(), ensure_ascii=False, indent=1))
        console.print(f"report written to {json_out}")


def print_check_report(console: Console, report: CheckReport) -> None:
    table = Table(
        title=shown(
            f"{report.model} · {report.engine} {report.precision} · check · index {report.index}"
        ),
        title_justify="left",
    )
    columns = (
        "category",
        "sentences",
        "det P",
        "det R",
        "det F1",
        "cor P",
        "cor R",
        "cor F1",
        "false alarms",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "category" else "right")
    for scores in [*report.categories, report.overall]:
        figures = scores.figures()
        clean = scores.sentences - scores.with_errors
        table.add_row(
            shown(scores.category),
            str(scores.sentences),
            *(
                f"{figures[f'{kind}_{name}']:.3f}"
                for kind in ("detection", "correction")
                for name in ("precision", "recall", "f1")
            ),
            f"{figures['false_alarm_rate']:.1%} of {clean}",
            style="bold" if scores.category == TOTAL_ROW else None,
        )
    # a file or a pipe gets the table at its natural width: cut to 80 columns, it read
    # "modern…" for both modern_clean and modern_error (a terminal keeps its own width)
    if not console.is_terminal:
        natural = console.measure(table, options=console.options.update_width(1000)).maximum
        table.width = natural if natural > console.width else None
    console.print(table, crop=False)
    console.print(f"{report.sentences_per_s:.1f} sentences/s", highlight=False)
