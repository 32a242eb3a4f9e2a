"""`tiankong fill`: option parsing and the progress bar (thin over fill.py)."""

from __future__ import annotations

import signal
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from tiankong.cli.options import (
    FLAG,
    FROM_FLAGS,
    any_case,
    int8_warned,
    refuse_field_for_txt,
    refuse_without_ray,
    settings_flags,
)
from tiankong.cli.predict import (
    AllowedOption,
    BeamOption,
    BlankLengthOption,
    CandidatesOption,
    ExcludeOption,
    OrderOption,
    PresetOption,
    TopKOption,
    WholeWordOption,
    decoding_options,
)
from tiankong.cli.root import app
from tiankong.config import Settings
from tiankong.core.options import PredictOptions
from tiankong.errors import BadDataFileError, BadOptionError

if TYPE_CHECKING:
    from tiankong.offline.resume import Checkpoint, FillJob


@app.command("fill")
@settings_flags
def fill_command(
    input_file: Annotated[Path, typer.Argument(help="JSONL, CSV or TXT (one text per line).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="JSONL or CSV output file.")],
    field: Annotated[
        str, typer.Option("--field", help="JSON field or CSV column holding the text.")
    ] = "text",
    input_format: Annotated[
        str,
        typer.Option(
            "--input-format",
            callback=any_case,
            help="jsonl, csv or txt; auto: by INPUT_FILE's name (.jsonl .json .ndjson .csv .txt).",
        ),
    ] = "auto",
    output_format: Annotated[
        str,
        typer.Option(
            "--output-format", callback=any_case, help="jsonl or csv; auto: by OUTPUT's name."
        ),
    ] = "auto",
    errors: Annotated[
        Path | None,
        typer.Option("--errors", help="Bad lines go here (default OUTPUT.errors.jsonl)."),
    ] = None,
    workers: Annotated[
        int,
        typer.Option("--workers", help="Worker processes; --threads is shared among them."),
    ] = 1,
    batch_size: Annotated[
        int, typer.Option("--batch-size", help="Texts per engine call (sorted by length).")
    ] = 32,
    chunk_size: Annotated[int, typer.Option("--chunk-size", help="Lines per checkpoint.")] = 512,
    restart: Annotated[
        bool, typer.Option("--restart", help="Ignore a checkpoint and overwrite OUTPUT.")
    ] = False,
    ray: Annotated[
        bool, typer.Option("--ray", help="Run on Ray Data; OUTPUT becomes a folder of JSONL.")
    ] = False,
    ray_address: Annotated[
        str | None,
        typer.Option("--ray-address", envvar="RAY_ADDRESS", help="Ray cluster (default: local)."),
    ] = None,
    model: object = FLAG,
    onnx_cache_dir: object = FLAG,
    top_k: TopKOption = None,
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
    index: object = FLAG,
    settings: Settings = FROM_FLAGS,
    typed: frozenset[str] = frozenset(),
) -> None:
    """Fill every text of INPUT_FILE into OUTPUT; resumable after an interruption."""
    from tiankong.offline.fill import check_files, count_records, refuse_empty, run_fill
    from tiankong.offline.fill import input_format as input_kind  # input_format: the flag
    from tiankong.offline.resume import Checkpoint, FillJob, refuse_if_claimed
    from tiankong.service import FillMasker

    if str(input_file) == "-":  # it said "Input file '-' does not exist."
        raise BadOptionError(
            "fill reads a file, not standard input ('-'): it resumes by the file's lines. Save "
            "the texts to a file, one a line, and give its path (predict reads stdin)."
        )
    job = FillJob(
        input=input_file,
        output=output,
        text_field=field,
        input_format=input_format,
        output_format=output_format,
        errors=errors,
        chunk_size=chunk_size,
        batch_size=batch_size,
        workers=workers,
        resume=not restart,
    )
    refuse_without_ray(ray, typed)
    refuse_field_for_txt(typed, input_kind(input_file, input_format))
    total = None
    made_output = missing_folders(output) if ray else []
    if not ray:  # the files (and the input's encoding) are checked before the model loads
        check_files(job)
        total = count_records(input_file, input_kind(input_file, input_format))
        refuse_empty(total, job, "filled")
        refuse_if_claimed(job)  # a run writing the output now: before the model loads
    try:
        if ray:  # what --ray can't honour, and its files, are refused before the model loads
            from tiankong.offline.ray_fill import checked_ray_input

            checked = checked_ray_input(job, typed)  # makes the output folder, last
            # before Ray starts (about 20 s), where the library's run fills nothing
            refuse_empty(count_records(input_file, checked[0]), job, "filled")
        # validates the model and the options up front
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
        # one worker fills with this model (it was loaded a second time); workers and Ray
        # actors load their own, so the driver lets it go
        filler = masker if not ray and job.workers == 1 else None
        del masker
        if ray:  # before the handler below: Ray's own SIGTERM handler dumped a stack, exit 15
            from tiankong.offline.ray_cluster import init_ray

            init_ray(ray_address)
    except BaseException:
        remove_if_empty(made_output)  # a refused run left the folder it made (a review)
        raise
    # SIGTERM to this process alone (kill PID, a job scheduler) ends the run as Ctrl-C does:
    # the worker pool is shut down on the way out, where its processes were left running
    signal.signal(signal.SIGTERM, stop_as_interrupted)
    if ray:
        from tiankong.offline.ray_fill import run_ray_fill

        try:
            written = run_ray_fill(job, settings, options, address=ray_address, checked=checked)
        except BaseException:
            remove_if_empty(made_output)  # interrupted before a shard was written
            raise
        if written.rows == written.bad:  # nothing filled is exit 2, as without --ray
            if not written.rows:
                raise BadDataFileError(f"{job.input} holds no text, so no line was filled.")
            raise BadDataFileError(
                f"No line of {job.input} could be filled ({written.bad:,} bad; each row's "
                f"error is in its 'error' column in {output})."
            )
        Console(stderr=True).print(
            f"wrote {written.rows:,} rows to the folder {output} (Ray Data), "
            f"{written.bad:,} of them bad (their 'error' column says why)"
        )
        return
    console = Console(stderr=True)
    progress = Progress(
        TextColumn("[bold]fill"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[rate]:.0f} lines/s · {task.fields[failed]} bad"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
    )
    with progress:
        task = progress.add_task("fill", total=total, rate=0.0, failed=0)
        start = Checkpoint("")

        def on_start(resumed: Checkpoint) -> None:
            nonlocal start
            start = resumed  # a resumed run's bar starts at its finished lines
            progress.reset(
                task, total=total, completed=resumed.lines_done, rate=0.0, failed=resumed.failed
            )

        def on_progress(done: int, filled: int, failed: int) -> None:
            progress.advance(task, done)
            speed = progress.tasks[task].speed or 0.0
            progress.update(task, rate=speed, failed=failed)

        state = run_fill(job, settings, options, on_progress, on_start, masker=filler)
    console.print(summary_line("filled", start, state, job), soft_wrap=True, highlight=False)
    refuse_if_none_done("filled", state, job)


def refuse_if_none_done(verb: str, state: Checkpoint, job: FillJob) -> None:
    """A file run that answered no line at all, this run and any it resumed, is exit 2: an
    empty input, or every line bad, was "filled 0 lines, 1 bad" with exit 0, and a script
    took the run for done. A run with some lines answered keeps exit 0, its bad lines in the
    errors file."""
    if state.filled:
        return
    if not state.failed:
        raise BadDataFileError(f"{job.input} holds no text, so no line was {verb}.")
    raise BadDataFileError(
        f"No line of {job.input} could be {verb} ({state.failed:,} bad; see {job.error_file})."
    )


def summary_line(verb: str, start: Checkpoint, state: Checkpoint, job: FillJob) -> str:
    """A file run's last line (fill and check -o): what this run did, after what a resumed one
    found done, and where the errors and the output are (the errors file by its path: its
    name alone hid a folder)."""
    now, failed = state.filled - start.filled, state.failed - start.failed
    done = (
        f"{lines(start.lines_done)} already done, {now:,} {verb} now, {failed:,} bad now"
        if start.lines_done
        else f"{verb} {lines(now)}, {failed:,} bad"
    )
    errors = f" (see {job.error_file})" if state.failed else ""  # a file with bad lines in it
    return f"{done}{errors}; output: {job.output}"


def lines(count: int) -> str:
    return f"{count:,} line{'' if count == 1 else 's'}"


def missing_folders(folder: Path) -> list[Path]:
    """``folder`` and each of its parents that does not exist yet, innermost first: what a
    ``fill --ray`` run makes before it writes."""
    missing = []
    for path in (folder, *folder.absolute().parents):
        if path.exists():
            break
        missing.append(path)
    return missing


def remove_if_empty(made: list[Path]) -> None:
    """The folders this run made (``missing_folders``), removed while they are still empty
    (``rmdir`` removes no other), innermost first: a refused or interrupted ``fill --ray`` left
    the output folder behind, and then its parents (``-o r/a/b/out``: a verifying review)."""
    for path in made:
        try:
            path.rmdir()
        except OSError:
            return


def stop_as_interrupted(signum: int, frame: FrameType | None) -> None:
    """SIGTERM as Ctrl-C: ``main`` prints "interrupted" and exits 130."""
    raise KeyboardInterrupt
