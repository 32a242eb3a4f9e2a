"""`tiankong train`: option parsing, the progress bar and the summary table (thin over train.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from tiankong.cli.options import any_case
from tiankong.cli.output import output_console
from tiankong.errors import BadOptionError

DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smh]?)$")


def parse_duration(text: str | None) -> float | None:
    """``90`` (seconds), ``90s``, ``45m`` or ``1.5h`` to seconds."""
    if text is None:
        return None
    match = DURATION.match(text.strip())
    if not match:
        raise BadOptionError(f"--max-time '{text}' is not a duration like 90s, 45m or 1.5h.")
    value, unit = float(match.group(1)), match.group(2) or "s"
    return value * {"s": 1, "m": 60, "h": 3600}[unit]


def given_flags(ctx: typer.Context) -> frozenset[str]:
    """The long flags typed on the command line (not left at their defaults). By the source's
    name: typer carries its own copy of click, whose enum is not click's."""
    typed = [
        param
        for param in ctx.command.params
        if param.name and getattr(ctx.get_parameter_source(param.name), "name", "") == "COMMANDLINE"
    ]
    return frozenset(next(opt for opt in param.opts if opt.startswith("--")) for param in typed)


def train_command(
    ctx: typer.Context,
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder (HF layout).")],
    data: Annotated[
        list[str],
        typer.Option(
            "--data",
            help="Training file: .txt/.txt.xz (one passage per line) for pretraining, or .csv "
            "with text,label for fine-tuning. Repeatable; append :WEIGHT to weight a text file.",
        ),
    ],
    heldout: Annotated[
        list[str] | None, typer.Option("--heldout", help="Held-out file(s), same formats.")
    ] = None,
    init: Annotated[
        str | None, typer.Option("--init", help="Start from this model (folder or hub id).")
    ] = None,
    config: Annotated[
        str | None,
        typer.Option(
            "--config", callback=any_case, help="Start from scratch: tiny, mini or small."
        ),
    ] = None,
    max_steps: Annotated[
        int | None,
        typer.Option(
            "--max-steps",
            help="End at this step (default: 1000, or no limit when --max-time is given).",
        ),
    ] = None,
    max_time: Annotated[
        str | None, typer.Option("--max-time", help="Wall-time budget, e.g. 45m or 2h.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed")] = 42,
    batch_size: Annotated[int, typer.Option("--batch-size")] = 64,
    seq_len: Annotated[int, typer.Option("--seq-len")] = 64,
    lr: Annotated[float, typer.Option("--lr")] = 5e-4,
    warmup_steps: Annotated[int, typer.Option("--warmup-steps")] = 100,
    mask_rate: Annotated[float, typer.Option("--mask-rate")] = 0.15,
    eval_every: Annotated[int, typer.Option("--eval-every")] = 200,
    eval_lines: Annotated[int, typer.Option("--eval-lines")] = 2000,
    save_every: Annotated[int, typer.Option("--save-every")] = 500,
    shuffle_buffer: Annotated[int, typer.Option("--shuffle-buffer")] = 100_000,
    threads: Annotated[int | None, typer.Option("--threads")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue from OUT/checkpoint.")] = False,
    skip_bad_rows: Annotated[
        bool,
        typer.Option("--skip-bad-rows", help="Skip bad CSV rows (counted) instead of stopping."),
    ] = False,
    fp16: Annotated[
        bool, typer.Option("--fp16", help="Save the final weights in float16.")
    ] = False,
    stop_after_steps: Annotated[
        int | None,
        typer.Option("--stop-after-steps", help="End at this step; the LR schedule is unchanged."),
    ] = None,
    position_init: Annotated[
        str,
        typer.Option(
            "--position-init", callback=any_case, help="random or sinusoidal (from --config only)."
        ),
    ] = "random",
    device: Annotated[
        str,
        typer.Option(
            "--device", callback=any_case, help="auto (a CUDA GPU when there is one), cpu or cuda."
        ),
    ] = "auto",
    data_workers: Annotated[
        int,
        typer.Option(
            "--data-workers", help="Processes that prepare text batches (0: in the training loop)."
        ),
    ] = 0,
    precision: Annotated[
        str,
        typer.Option(
            "--precision",
            callback=any_case,
            help="auto (bfloat16 autocast on CUDA and on a CPU with AVX512-BF16 or AMX, fp32 "
            "elsewhere), fp32, or bf16.",
        ),
    ] = "auto",
    masking: Annotated[
        str,
        typer.Option(
            "--masking",
            callback=any_case,
            help="token (each character alone), word (jieba's whole words) or ngram (runs of "
            "1-4 whole words, as MacBERT).",
        ),
    ] = "token",
) -> None:
    """Train or fine-tune a BERT-family masked LM: pretraining on text, cloze tuning on CSV."""
    from tiankong.training.train import TrainingStopped, TrainOptions, train
    from tiankong.training.train_data import is_csv
    from tiankong.training.train_options import NO_STEP_LIMIT, schedule_warning, validate_options

    options = TrainOptions(
        out=out,
        data=tuple(data),
        heldout=tuple(heldout or ()),
        init=init,
        config=config,
        max_steps=max_steps,
        max_time_s=parse_duration(max_time),
        seed=seed,
        batch_size=batch_size,
        seq_len=seq_len,
        lr=lr,
        warmup_steps=warmup_steps,
        mask_rate=mask_rate,
        eval_every=eval_every,
        eval_lines=eval_lines,
        save_every=save_every,
        shuffle_buffer=shuffle_buffer,
        threads=threads,
        resume=resume,
        skip_bad_rows=skip_bad_rows,
        save_fp16=fp16,
        position_init=position_init,
        stop_after_steps=stop_after_steps,
        device=device,
        data_workers=data_workers,
        precision=precision,
        masking=masking,
        given=given_flags(ctx),
    )
    console = Console(stderr=True)
    if not console.is_terminal:  # logs: wide plain lines instead of a cut-off live display
        console = Console(stderr=True, width=200)
    validate_options(options)  # a refusal first, alone: the warning came before it, two lines
    # said when the first step is done: a refusal made under the run lock (a bad CSV row, no
    # GPU for --device cuda) came after it too (a review)
    warnings = [schedule_warning(options)]
    of_limit = "" if options.step_limit == NO_STEP_LIMIT else f"/{options.step_limit}"
    progress = Progress(
        TextColumn("[bold]train"),
        BarColumn(),
        TextColumn(f"step {{task.completed:.0f}}{of_limit}"),
        TextColumn("loss {task.fields[loss]:.3f}"),
        TextColumn("{task.fields[tokens_per_s]:.0f} tok/s"),
        TextColumn("held-out acc {task.fields[accuracy]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
    )
    task = progress.add_task(
        "train",
        total=None if options.step_limit == NO_STEP_LIMIT else options.step_limit,
        loss=float("nan"),
        tokens_per_s=0.0,
        accuracy="-",
        start=False,
    )

    def on_progress(state: object, metrics: dict[str, float]) -> None:
        warning = warnings.pop() if warnings else None
        if warning:
            console.print(f"warning: {warning}", markup=False, highlight=False)
        fields: dict[str, Any] = {"loss": metrics["loss"]}
        elapsed = getattr(state, "elapsed_s", 0.0)
        fields["tokens_per_s"] = getattr(state, "tokens_seen", 0) / max(elapsed, 1e-9)
        if "heldout_accuracy" in metrics:
            fields["accuracy"] = f"{metrics['heldout_accuracy']:.1%}"
            console.log(
                f"step {metrics['step']:.0f}: loss {metrics['loss']:.3f}, held-out loss "
                f"{metrics['heldout_loss']:.3f}, acc {metrics['heldout_accuracy']:.2%}"
            )
        progress.update(task, completed=metrics["step"], **fields)
        progress.start_task(task)  # the bar from the first step on: none under a refusal
        progress.start()
        if not console.is_terminal and metrics["step"] % 100 == 0:  # logs get plain lines
            console.print(
                f"step {metrics['step']:.0f}{of_limit} loss {metrics['loss']:.3f} "
                f"lr {metrics['lr']:.2e} {fields['tokens_per_s']:.0f} tok/s "
                f"elapsed {elapsed:.0f}s"
            )

    # transformers' "Writing model shards" bar at every checkpoint, read when it is imported
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        summary = train(options, on_progress)
    except TrainingStopped as stop:
        progress.stop()
        console.print(
            f"saved the run at step {stop.step} in {stop.checkpoint}; the same command with "
            "--resume goes on from there",
            soft_wrap=True,
            highlight=False,
        )
        raise
    finally:
        if progress.live.is_started:  # Progress.stop prints a blank line even when it never ran
            progress.stop()
    table = Table(title=f"Training summary: {summary.out}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("steps", str(summary.steps))
    table.add_row("tokens", f"{summary.tokens:,}")
    table.add_row("wall time", f"{summary.wall_time_s:.0f} s")
    table.add_row("tokens/s", f"{summary.tokens_per_s:,.0f}")
    final_loss = summary.final_train_loss
    table.add_row("final train loss", "-" if final_loss is None else f"{final_loss:.4f}")
    if summary.heldout_accuracy is not None:
        table.add_row("held-out loss", f"{summary.heldout_loss:.4f}")
        table.add_row("held-out masked-token accuracy", f"{summary.heldout_accuracy:.2%}")
    for flag, specs, skipped in (
        ("--data", options.data, summary.skipped_rows),
        ("--heldout", options.heldout, summary.skipped_heldout_rows),
    ):
        if options.skip_bad_rows and any(is_csv(spec) for spec in specs):
            table.add_row(f"bad {flag} CSV rows skipped", str(skipped))
    output_console().print(table)
