"""`tiankong train`: masked-LM pretraining on raw text and cloze fine-tuning on CSV.

A plain torch loop on top of transformers' model classes and masking collator. The MLM head is
computed only at masked positions: on a 21,128-entry vocabulary the projection costs more than
a small encoder, so this is the single biggest saving on a CPU.

Example::

    tiankong train --config mini --data corpus.txt.xz --heldout heldout.txt.xz \\
        --out runs/mini --max-time 60m
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from tiankong.core.output_folder import file_mode, made_here
from tiankong.errors import BadDataFileError, BadOptionError
from tiankong.host import require
from tiankong.training.starting_point import (
    find_starting_point,
    load_model,
    load_starting_point,
    load_tokenizer,
)
from tiankong.training.train_batches import (
    cloze_batches,
    heldout_batches,
    prefetched_batches,
    pretraining_batches,
    read_csv_rows,
)
from tiankong.training.train_data import is_csv
from tiankong.training.train_options import (
    CHECKPOINT_DIR,
    MODEL_CONFIGS,
    NO_STEP_LIMIT,
    TrainOptions,
    check_out_contents,
    check_resumed_recipe,
    is_tiankong_checkpoint,
    recipe,
    recorded_options,
    run_lock,
    unfinished,
    validate_options,
)

__all__ = [
    "CHECKPOINT_DIR",
    "MODEL_CONFIGS",
    "TrainOptions",
    "TrainSummary",
    "load_starting_point",
    "train",
]


@dataclass
class TrainState:
    step: int = 0
    sequences_seen: int = 0
    tokens_seen: int = 0
    elapsed_s: float = 0.0
    history: list[dict[str, float]] = field(default_factory=list)
    # the run's seconds when its warm-up ended: a --max-time run's decay counts from there
    warm_elapsed_s: float | None = None
    # the training loss of the last step whose batch drew a mask (one that drew none scores
    # NaN, which reached training.json, invalid JSON: a review), kept in the checkpoint: a
    # resume that only finishes the run (stopped after its last step) trains none to take it
    last_loss: float | None = None
    # where each part of the run (its start, each resume) trained: "auto" and the threads may
    # resolve otherwise each time, and training.json described only the last part (a review)
    segments: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class TrainSummary:
    out: str
    steps: int
    tokens: int
    wall_time_s: float
    tokens_per_s: float
    final_train_loss: float | None  # the last step's that drew a mask; None if none did
    heldout_loss: float | None
    heldout_accuracy: float | None
    history: list[dict[str, float]]
    skipped_rows: int = 0  # bad --data CSV rows left out under --skip-bad-rows
    skipped_heldout_rows: int = 0  # and bad --heldout CSV rows


def masked_lm_loss(model: Any, batch: dict[str, Any], bf16: bool = False) -> tuple[Any, Any, Any]:
    """Cross-entropy at labelled positions, projecting to the vocabulary only there.

    With ``bf16`` the forward pass runs under bfloat16 autocast; weights and loss stay FP32.
    """
    import torch
    import torch.nn.functional as F

    labels = batch["labels"]
    with torch.autocast(labels.device.type, dtype=torch.bfloat16, enabled=bf16):
        head = getattr(model, "cls", None) or getattr(model, "lm_head", None)
        if head is None:  # an unfamiliar architecture: let it compute its own loss
            output = model(**batch)
            return output.loss, output.logits[labels != -100], labels[labels != -100]
        hidden = model.base_model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
        ).last_hidden_state
        selected = labels != -100
        logits = head(hidden[selected])
    return F.cross_entropy(logits.float(), labels[selected]), logits, labels[selected]


def training_device(options: TrainOptions) -> Any:
    """The torch device to train on: --device, where auto takes CUDA when there is one."""
    import torch

    if options.device == "cuda" and not torch.cuda.is_available():
        raise BadOptionError("--device cuda was given but torch sees no CUDA GPU here.")
    use_cuda = options.device == "cuda" or (options.device == "auto" and torch.cuda.is_available())
    return torch.device("cuda" if use_cuda else "cpu")


def trains_in_bf16(precision: str, device_type: str, pretraining: bool) -> bool:
    """bf16 autocast: asked for, or ``auto`` on CUDA, or ``auto`` when pretraining on a CPU with
    bf16 units (AVX512-BF16 or AMX), where it is 1.6x the tokens/s of FP32 (docs/TRAINING.md).

    CSV fine-tuning on a CPU stays FP32 under ``auto``: it is short, so speed matters less than
    the rounding, which kept a tiny model from memorising three masks at a high LR (the CSV test).
    """
    from tiankong.export.int8_recipe import cpu_has_bf16

    if precision != "auto":
        return precision == "bf16"
    return device_type == "cuda" or (pretraining and cpu_has_bf16())


def checked_first(
    batches: Iterator[dict[str, Any]], options: TrainOptions
) -> Iterator[dict[str, Any]]:
    """``batches``, refused where the first has no masked token: text of characters the
    vocabulary lacks (emoji, rare symbols: [UNK], never masked) trained at a NaN loss to the
    end, exit 0 (a review's find)."""
    first = next(batches)
    if not bool((first["labels"] != -100).any()):
        raise BadDataFileError(
            f"--data {', '.join(options.data)} gives no token to mask in its first batch: its "
            "text holds only characters the vocabulary lacks (emoji, rare symbols) or lines "
            "too short for a mask; give Chinese text the model's vocabulary holds."
        )
    return itertools.chain([first], batches)


def to_device(batch: dict[str, Any], device: Any) -> dict[str, Any]:
    return {name: tensor.to(device, non_blocking=True) for name, tensor in batch.items()}


def evaluate(model: Any, batches: list[dict[str, Any]], bf16: bool = False) -> tuple[float, float]:
    """Held-out masked-token loss and top-1 accuracy."""
    import torch

    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    with torch.inference_mode():
        for batch in batches:
            loss, logits, labels = masked_lm_loss(model, batch, bf16)
            total_loss += float(loss) * len(labels)
            correct += int((logits.argmax(-1) == labels).sum())
            count += len(labels)
    model.train()
    if count == 0:
        return math.nan, math.nan
    return total_loss / count, correct / count


@contextmanager
def written_to(out: Path) -> Iterator[None]:
    """Around writing the run's files in ``out`` (checkpoints, the model, its record): a full
    disk is one sentence and exit 2 (``made_here``), not a traceback after the run's work;
    safetensors' error, no OSError, carries the system's words."""
    from safetensors import SafetensorError

    with made_here(out, "--out"):
        try:
            yield
        except SafetensorError as error:
            raise OSError(str(error)) from None


def readable_as_made(folder: Path) -> None:
    """Each file in ``folder`` set to the mode the umask gives a new file (``file_mode``):
    safetensors wrote model.safetensors 0600 beside 0644 files, so a server running as
    another user (the image's, uid 10001) could not read the trained model (a review)."""
    mode = file_mode()
    for path in folder.iterdir():
        if path.is_file() and not path.is_symlink():
            os.chmod(path, mode)


def json_safe(value: Any) -> Any:
    """``value`` with each NaN or infinity as None (null): a step whose batch drew no mask has
    a NaN loss, which json.dumps wrote as NaN, and training.json was not JSON (a review)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return value


def save_checkpoint(
    folder: Path,
    model: Any,
    tokenizer: Any,
    optimizer: Any,
    scheduler: Any,
    state: TrainState,
    run_recipe: dict[str, Any],
) -> None:
    """Write a resumable checkpoint atomically (into a temp folder, then rename); a full
    disk is one sentence (``written_to``)."""
    import shutil

    import torch

    if folder.exists() and not is_tiankong_checkpoint(folder):
        # set aside and deleted, a project's own checkpoint/ was lost (a review); the --out
        # checks refuse such a folder first, this is the last word
        raise BadOptionError(
            f"'{folder}' is not a checkpoint tiankong wrote, so it is not written over; give a "
            "new or empty --out."
        )
    with written_to(folder.parent):
        temp = folder.with_name(folder.name + ".tmp")
        shutil.rmtree(temp, ignore_errors=True)
        model.save_pretrained(temp)
        tokenizer.save_pretrained(temp)
        torch.save(
            {
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "torch_rng": torch.get_rng_state(),
                "state": asdict(state),
                "recipe": run_recipe,
            },
            temp / "trainer_state.pt",
        )
        readable_as_made(temp)
        old = folder.with_name(folder.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if folder.exists():
            folder.rename(old)
        temp.rename(folder)
        shutil.rmtree(old, ignore_errors=True)


def diverged(step: int, options: TrainOptions, checkpoint: Path) -> str:
    """The sentence for a run whose loss became NaN at ``step`` (nothing is written then)."""
    saved = (
        f"the checkpoint in {checkpoint} is the last one saved, before it; "
        if (checkpoint / "config.json").exists()
        else ""
    )
    return (
        f"The run diverged at step {step}: its loss is not a number (NaN), so its weights are "
        f"no longer numbers, and no model was written ({saved}--resume would diverge again). "
        f"Start again with a lower --lr (this run's: {options.lr:g})."
    )


class TrainingStopped(KeyboardInterrupt):
    """Ctrl-C or SIGTERM ended the run between two steps, after saving it there."""

    def __init__(self, step: int, checkpoint: Path) -> None:
        super().__init__(step)
        self.step = step
        self.checkpoint = checkpoint


class StopRequest:
    asked = False


@contextmanager
def stops_between_steps() -> Iterator[StopRequest]:
    """The first Ctrl-C or SIGTERM asks the loop to stop after its step (which then saves a
    checkpoint, so no step is lost: up to --save-every minus one were, with no word of where
    to resume); a second one stops at once, as before. Only where signals can be set (the
    main thread)."""
    import signal
    import threading

    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    before = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}

    def ask(signum: int, frame: FrameType | None) -> None:
        if request.asked:
            raise KeyboardInterrupt
        request.asked = True

    for number in before:
        signal.signal(number, ask)
    try:
        yield request
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)


def resumed_state(options: TrainOptions, device: Any) -> dict[str, Any]:
    """OUT's checkpoint state, refused when the options give a finished run no step left to
    train: the loop would not run, and the run's training.json would be written over with a NaN
    loss. An unfinished run (``unfinished``) at its end is returned: the resume finishes it."""
    import torch

    path = options.out / CHECKPOINT_DIR / "trainer_state.pt"
    try:
        saved: dict[str, Any] = torch.load(path, weights_only=False, map_location=device)
        step, elapsed = int(saved["state"]["step"]), float(saved["state"]["elapsed_s"])
    except Exception:  # a truncated or foreign file: pickle, zip and key errors alike
        raise BadDataFileError(
            f"--resume: '{path}' is damaged or not a tiankong checkpoint's state."
        ) from None
    ends = [
        (options.step_limit, "--max-steps"),
        *([(options.stop_after_steps, "--stop-after-steps")] if options.stop_after_steps else []),
    ]
    check_resumed_recipe(options, saved.get("recipe"))
    # a run stopped after its last step (Ctrl-C or SIGTERM in the final evaluation or while the
    # model or training.json was written) is finished by the resume, training no more: it was
    # refused both with --resume and without (a review)
    finishing = unfinished(options.out)
    for limit, flag in ends:
        if step > limit or (step == limit and not finishing):
            raise BadOptionError(
                f"The run in '{options.out}' is already at step {step}, the end of {flag} "
                f"{limit}; raise {flag} to train it further."
            )
    if options.max_time_s and elapsed >= options.max_time_s and not finishing:
        raise BadOptionError(
            f"The run in '{options.out}' has already trained {elapsed:.0f} s, the whole "
            f"--max-time of {options.max_time_s:.0f} s; raise --max-time to train it further."
        )
    return saved


def train(
    options: TrainOptions,
    on_progress: Callable[[TrainState, dict[str, float]], None] | None = None,
) -> TrainSummary:
    """Run training to ``options.out``; returns the summary also written to training.json.

    Everything that can be checked without the model is, before torch loads; the data (CSV
    rows against the tokenizer, the held-out set) before the model loads."""
    validate_options(options)
    require(
        "train",
        ("torch", "transformers"),
        "Training",
        "; install torch==2.13.0 first, for its CPU wheel",
    )
    with run_lock(options.out):
        check_out_contents(options)  # again, now that no other run can write it
        return train_locked(options, on_progress)


def train_locked(
    options: TrainOptions,
    on_progress: Callable[[TrainState, dict[str, float]], None] | None,
) -> TrainSummary:
    """``train`` once its options are checked and ``--out`` is this run's alone."""
    start = find_starting_point(options)
    import torch
    from transformers import DataCollatorForLanguageModeling

    device = training_device(options)
    csv_data = all(is_csv(spec) for spec in options.data)
    bf16 = trains_in_bf16(options.precision, device.type, pretraining=not csv_data)
    saved = resumed_state(options, device) if options.resume else None
    if options.threads:
        torch.set_num_threads(options.threads)
    torch.manual_seed(options.seed)
    rng = random.Random(options.seed)
    tokenizer = load_tokenizer(start)
    # saved with the model: one the run never calls. With --data-workers the held-out set's
    # encoding (truncated at --seq-len) was the main tokenizer's last call, and save_pretrained
    # wrote its truncation into the run's tokenizer.json (without workers the training loop's
    # own calls reset it first); a folder saved that way passes it on to --init and --resume
    saved_tokenizer = load_tokenizer(start)
    backend = getattr(saved_tokenizer, "backend_tokenizer", None)
    if backend is not None:
        backend.no_truncation()
        backend.no_padding()
    collator = DataCollatorForLanguageModeling(
        tokenizer, mlm_probability=options.mask_rate, return_tensors="pt"
    )
    skipped = 0
    if csv_data:
        rows, skipped = read_csv_rows(
            options.data, tokenizer, start.positions, options.skip_bad_rows, "--data"
        )
    heldout, skipped_heldout = heldout_batches(options, tokenizer, collator, start.positions)
    model = load_model(start, options, tokenizer.vocab_size)
    if csv_data:
        batches = cloze_batches(rows, tokenizer, options.batch_size, rng)
    elif options.data_workers > 0:
        batches = prefetched_batches(options, tokenizer, collator, device)
    else:
        batches = pretraining_batches(options, tokenizer, collator, rng)
    model.to(device)
    eval_set = [to_device(batch, device) for batch in heldout]

    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "LayerNorm" not in n]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2 or "LayerNorm" in n]
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": options.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=options.lr,
        betas=(0.9, 0.98),
        eps=1e-6,
        fused=device.type == "cuda",
    )
    state = TrainState()
    clock = {"started": time.monotonic()}

    def lr_factor(step: int) -> float:
        """Linear warmup to --lr, then linear decay from --lr to zero at whichever budget runs
        out first (both counted from the warm-up's end: the decay counted from step 0 dropped
        the rate by warmup / max_steps in one step, a third at --max-steps 12 --warmup-steps 8).

        With --max-time the decay follows the clock, so a time-boxed run still ends its schedule
        (decay is worth a lot on a short budget); for a bit-exact rerun use --max-steps alone.
        """
        warmup = options.warmup_steps
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, options.step_limit - warmup)
        if options.max_time_s:
            elapsed = time.monotonic() - clock["started"]
            if state.warm_elapsed_s is None:
                state.warm_elapsed_s = elapsed
            warm = state.warm_elapsed_s
            progress = max(progress, (elapsed - warm) / max(1e-9, options.max_time_s - warm))
        return max(0.0, 1.0 - progress)

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
    # a resume keeps the recipe its checkpoint holds: the one made from its options lacked the
    # start it may leave out (--init/--config), and training.json recorded them "None" (a review)
    run_recipe = (saved or {}).get("recipe") or recipe(options)
    checkpoint = options.out / CHECKPOINT_DIR
    if saved is not None:
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        state = TrainState(**saved["state"])
        for _ in range(state.step):  # replay the data stream to where it stopped
            next(batches)
        torch.set_rng_state(saved["torch_rng"].cpu())
    machine = {
        "device": device.type,
        "precision": "bf16" if bf16 else "fp32",
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }
    state.segments.append({"from_step": state.step, **machine})

    batches = checked_first(batches, options)
    model.train()
    started = time.monotonic() - state.elapsed_s
    clock["started"] = started
    loss_value = math.nan if state.last_loss is None else state.last_loss
    heldout_loss: float | None = None
    heldout_accuracy: float | None = None
    with stops_between_steps() as stop:
        while state.step < options.step_limit:
            if stop.asked:  # Ctrl-C or SIGTERM: the steps since the last save are kept
                save_checkpoint(
                    checkpoint, model, saved_tokenizer, optimizer, scheduler, state, run_recipe
                )
                raise TrainingStopped(state.step, checkpoint)
            if options.max_time_s and time.monotonic() - started >= options.max_time_s:
                # the clock that ended the run, not the last step's end: a step's own work after
                # it (its progress, an evaluation) made a 1 s run say 0.9 s under load
                state.elapsed_s = time.monotonic() - started
                break
            if options.stop_after_steps and state.step >= options.stop_after_steps:
                break
            batch = next(batches)
            tokens = int(batch["attention_mask"].sum())
            loss, _, labelled = masked_lm_loss(model, to_device(batch, device), bf16)
            loss_value = float(loss.detach())
            if not math.isfinite(loss_value) and len(labelled):
                # a batch without a mask has no loss (NaN) and is passed over; one with masks
                # whose loss is NaN means the weights are no longer numbers: `--lr 1e10` wrote
                # such a model, exit 0, and every use of it was a traceback (a review)
                raise BadOptionError(diverged(state.step + 1, options, checkpoint))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            state.step += 1
            state.tokens_seen += tokens
            state.elapsed_s = time.monotonic() - started
            if math.isfinite(loss_value):
                state.last_loss = loss_value
            metrics: dict[str, float] = {
                "step": state.step,
                "loss": loss_value,
                "lr": float(scheduler.get_last_lr()[0]),
            }
            if eval_set and (
                state.step % options.eval_every == 0 or state.step == options.step_limit
            ):
                heldout_loss, heldout_accuracy = evaluate(model, eval_set, bf16)
                metrics.update(heldout_loss=heldout_loss, heldout_accuracy=heldout_accuracy)
                state.history.append(
                    {**metrics, "elapsed_s": state.elapsed_s, "tokens": state.tokens_seen}
                )
            if state.step % options.save_every == 0:
                save_checkpoint(
                    checkpoint, model, saved_tokenizer, optimizer, scheduler, state, run_recipe
                )
            if on_progress:
                on_progress(state, metrics)

    save_checkpoint(checkpoint, model, saved_tokenizer, optimizer, scheduler, state, run_recipe)
    last = state.history[-1] if state.history else None
    if eval_set and last is not None and last["step"] == state.step:
        # this step was evaluated: in the loop, or before a resume that only finishes the run,
        # whose checkpoint's history has it (it was appended a second time, [2, 3, 3]: a
        # verifying review)
        heldout_loss, heldout_accuracy = last["heldout_loss"], last["heldout_accuracy"]
    elif eval_set:
        heldout_loss, heldout_accuracy = evaluate(model, eval_set, bf16)
        state.history.append(
            {
                "step": state.step,
                "loss": loss_value,
                "lr": float(scheduler.get_last_lr()[0]),  # as the loop's entries (a review)
                "heldout_loss": heldout_loss,
                "heldout_accuracy": heldout_accuracy,
                "elapsed_s": state.elapsed_s,
                "tokens": state.tokens_seen,
            }
        )
    model.to("cpu")
    if options.save_fp16:
        model = model.half()
    with written_to(options.out):
        model.save_pretrained(options.out)
        saved_tokenizer.save_pretrained(options.out)
        readable_as_made(options.out)
    summary = TrainSummary(
        out=str(options.out),
        steps=state.step,
        tokens=state.tokens_seen,
        wall_time_s=round(state.elapsed_s, 1),
        tokens_per_s=round(state.tokens_seen / max(state.elapsed_s, 1e-9), 1),
        final_train_loss=state.last_loss,
        heldout_loss=heldout_loss,
        heldout_accuracy=heldout_accuracy,
        history=state.history,
        skipped_rows=skipped,
        skipped_heldout_rows=skipped_heldout,
    )
    record = {
        "summary": asdict(summary),
        "options": recorded_options(options, run_recipe),
        "recipe": run_recipe,  # as the run's checkpoint holds it, from the run's start
        # what "auto" and the defaults became on this machine: runs of one seed in bf16 and in
        # FP32, or on other thread counts, end with different weights, so a rerun needs them
        "resolved": {
            # max_steps None: 1000, or none (null) under max_time_s alone
            "step_limit": None if options.step_limit == NO_STEP_LIMIT else options.step_limit,
            **machine,  # the last part's; each part's, from its step, in segments
            "segments": state.segments,
        },
    }
    with written_to(options.out):
        # whole or not at all: a kill while it was written left a cut record newer than the
        # checkpoint, a finished run to --resume, which then refused it (a verifying review)
        part = options.out / "training.json.tmp"
        part.write_text(
            json.dumps(json_safe(record), indent=1, ensure_ascii=False, allow_nan=False)
        )
        os.replace(part, options.out / "training.json")
    return summary
