"""`tiankong train`'s options: the named starting configs, the option set and its checks."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tiankong.core.output_folder import check_output_folder
from tiankong.errors import BadDataFileError, BadOptionError
from tiankong.training.masking import MASKING_KINDS
from tiankong.training.train_data import TextSource

# Named starting configs (vocabulary size comes from the tokenizer).
MODEL_CONFIGS: dict[str, dict[str, Any]] = {
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128),
    "mini": dict(
        hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024
    ),
    "small": dict(
        hidden_size=384, num_hidden_layers=6, num_attention_heads=6, intermediate_size=1536
    ),
}
CHECKPOINT_DIR = "checkpoint"


@dataclass(frozen=True)
class TrainOptions:
    out: Path
    data: tuple[str, ...]
    heldout: tuple[str, ...] = ()
    init: str | None = None
    config: str | None = None
    max_steps: int = 1000
    max_time_s: float | None = None
    seed: int = 42
    batch_size: int = 64
    seq_len: int = 64
    lr: float = 5e-4
    warmup_steps: int = 100
    weight_decay: float = 0.01
    mask_rate: float = 0.15
    eval_every: int = 200
    eval_lines: int = 2000
    save_every: int = 500
    shuffle_buffer: int = 100_000
    threads: int | None = None
    resume: bool = False
    skip_bad_rows: bool = False
    save_fp16: bool = False
    position_init: str = "random"  # random | sinusoidal (only when starting from --config)
    stop_after_steps: int | None = None  # end early without changing the LR schedule
    device: str = "auto"  # auto (CUDA when there is one) | cpu | cuda
    data_workers: int = 0  # processes preparing batches; 0 prepares them in the training loop
    precision: str = "auto"  # auto (bf16 on CUDA and on a CPU with bf16 units) | fp32 | bf16
    masking: str = "token"  # token | word (jieba's whole words) | ngram (1-4 whole words)


POSITION_INITS = ("random", "sinusoidal")
# The numbers that took a traceback from torch or the loop (ZeroDivisionError, IndexError):
# each flag, its TrainOptions field, its least value and whether that least is allowed.
LIMITS = (
    ("--lr", "lr", 0, False),
    ("--max-time", "max_time_s", 0, False),
    ("--warmup-steps", "warmup_steps", 0, True),
    ("--weight-decay", "weight_decay", 0, True),
    ("--eval-every", "eval_every", 1, True),
    ("--eval-lines", "eval_lines", 1, True),
    ("--save-every", "save_every", 1, True),
    ("--shuffle-buffer", "shuffle_buffer", 1, True),
    ("--threads", "threads", 1, True),
    ("--stop-after-steps", "stop_after_steps", 1, True),
)


def check_numbers(options: TrainOptions) -> None:
    """Each number of ``LIMITS`` within it (unset ones, None, are the defaults)."""
    for flag, name, least, allowed in LIMITS:
        value = getattr(options, name)
        if value is None or value > least or (allowed and value == least):
            continue
        rule = f"{least:g} or more" if allowed else f"more than {least:g}"
        raise BadOptionError(f"{flag} must be {rule}; got {value:g}.")


def validate_options(options: TrainOptions) -> None:
    if not options.data:
        raise BadOptionError("Give at least one training file with --data.")
    kinds = {spec.endswith(".csv") for spec in options.data}
    if len(kinds) > 1:
        raise BadOptionError("Mix of CSV and raw-text --data files; train on one kind at a time.")
    for spec in options.data:
        TextSource.parse(spec)  # raises a clear error for a missing file
    if not 0.0 < options.mask_rate < 1.0:
        raise BadOptionError("--mask-rate must be between 0 and 1.")
    if options.seq_len < 8 or options.seq_len > 512:
        raise BadOptionError("--seq-len must be between 8 and 512.")
    if options.max_steps < 1 or options.batch_size < 1:
        raise BadOptionError("--max-steps and --batch-size must be at least 1.")
    if options.init and options.config:
        raise BadOptionError("Pass either --init or --config, not both.")
    if not (options.init or options.config or options.resume):  # never a random model unasked
        raise BadOptionError(
            "Pass --init MODEL to continue training a model, or --config NAME "
            f"({', '.join(MODEL_CONFIGS)}) to start one from scratch."
        )
    check_output_folder(options.out, "--out", replaced=False)
    if options.device not in ("auto", "cpu", "cuda"):
        raise BadOptionError(f"--device '{options.device}' is not one of auto, cpu or cuda.")
    if options.precision not in ("auto", "fp32", "bf16"):
        raise BadOptionError(f"--precision '{options.precision}' is not one of auto, fp32 or bf16.")
    if options.masking not in MASKING_KINDS:
        raise BadOptionError(
            f"--masking '{options.masking}' is not one of {', '.join(MASKING_KINDS)}."
        )
    if options.masking != "token" and all(spec.endswith(".csv") for spec in options.data):
        raise BadOptionError("--masking applies to raw-text pretraining, not to CSV fine-tuning.")
    if options.masking != "token" and importlib.util.find_spec("jieba") is None:
        raise BadOptionError(
            f"--masking {options.masking} segments words with jieba: pip install 'tiankong[train]'."
        )
    if options.data_workers < 0:
        raise BadOptionError("--data-workers must be 0 or more.")
    check_numbers(options)
    if any(TextSource.parse(spec).weight <= 0 for spec in options.data):
        raise BadOptionError("A --data weight (FILE:WEIGHT) must be more than 0.")
    if options.position_init not in POSITION_INITS:
        raise BadOptionError(
            f"--position-init '{options.position_init}' is not one of {', '.join(POSITION_INITS)}."
        )
    if options.resume and not (options.out / CHECKPOINT_DIR).is_dir():
        raise BadDataFileError(f"--resume was given but '{options.out}' has no checkpoint yet.")
