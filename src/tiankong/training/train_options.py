"""`tiankong train`'s options: the named starting configs, the option set and its checks."""

from __future__ import annotations

import fcntl
import importlib.util
import json
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import IO, Any

from tiankong.core.output_folder import check_output_folder, made_here
from tiankong.errors import BadDataFileError, BadOptionError
from tiankong.training.masking import MASKING_KINDS
from tiankong.training.train_data import (
    TextSource,
    check_text_file,
    check_utf8_lines,
    is_csv,
    split_spec,
)

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
# What marks a folder as an earlier run's --out (a run stopped in its first save leaves only the
# temporary checkpoint): train writes into such a folder, and refuses any other non-empty one.
# Only tiankong's own count (``owns_run_state``): any checkpoint/ or training.json did, and a
# project's checkpoint/ was deleted by the first save, the bundled model written over (a review).
RUN_MARKERS = (CHECKPOINT_DIR, CHECKPOINT_DIR + ".tmp", "training.json")
# The keys of trainer_state.pt (``save_checkpoint``) that make it tiankong's.
CHECKPOINT_KEYS = (b"optimizer", b"scheduler", b"state", b"recipe")
# Held (flock) by the run writing an --out, removed when it ends: a second run on the same
# folder interleaved its saves with the first's, and one seeing the first's checkpoint read it
# as a stopped run (a review).
RUN_LOCK = ".tiankong-train.lock"
CHECKPOINT_FILES = ("config.json", "trainer_state.pt")
# The fields of a model's config.json that make its shape, compared on --resume.
SHAPE_FIELDS = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",  # where the start names them (a named --config does not)
    "vocab_size",
)
# What a run is, kept in its checkpoint and repeated by --resume: each changed option was
# taken without a word (--lr did nothing, the scheduler kept its rate; --data, --batch-size or
# --seed changed the stream the replay skips through) and training.json recorded the last
# command's. How long it runs, how often it saves or evaluates, threads and device may change.
RECIPE_FIELDS = (
    "data",
    "heldout",
    "init",
    "config",
    "seed",
    "batch_size",
    "seq_len",
    "lr",
    "warmup_steps",
    "weight_decay",
    "mask_rate",
    "shuffle_buffer",
    "position_init",
    "masking",
    "precision",
    "skip_bad_rows",
    "data_workers",
)


# The recipe's fields that say how the model began, which a resume may leave out.
START_FIELDS = ("init", "config", "position_init")

DEFAULT_MAX_STEPS = 1000
NO_STEP_LIMIT = 2**62  # --max-time alone: the clock ends the run and its schedule


@dataclass(frozen=True)
class TrainOptions:
    out: Path
    data: tuple[str, ...]
    heldout: tuple[str, ...] = ()
    init: str | None = None
    config: str | None = None
    max_steps: int | None = None  # None: DEFAULT_MAX_STEPS, or no limit with max_time_s
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
    # The flags given on purpose (the CLI's command line), so that one which does not apply to
    # the run is refused even at its default value; other options are judged by their values.
    given: frozenset[str] = field(default=frozenset(), compare=False)

    @property
    def step_limit(self) -> int:
        """The step the run ends at: --max-steps, else 1000, or none under --max-time alone
        (``--max-time 2h`` stopped at the default's 1000 steps, 40 s into a tiny run: a
        review)."""
        if self.max_steps is not None:
            return self.max_steps
        return DEFAULT_MAX_STEPS if self.max_time_s is None else NO_STEP_LIMIT


POSITION_INITS = ("random", "sinusoidal")
# The numbers that took a traceback from torch or the loop (ZeroDivisionError, IndexError):
# each flag, its TrainOptions field, its least value and whether that least is allowed.
LIMITS = (
    ("--lr", "lr", 0, True),  # 0 keeps the weights: --max-steps 1 --lr 0 scores the start
    ("--max-time", "max_time_s", 0, False),
    ("--warmup-steps", "warmup_steps", 0, True),
    ("--weight-decay", "weight_decay", 0, True),
    ("--eval-every", "eval_every", 1, True),
    ("--eval-lines", "eval_lines", 1, True),
    ("--save-every", "save_every", 1, True),
    ("--shuffle-buffer", "shuffle_buffer", 1, True),
    ("--threads", "threads", 1, True),
    ("--stop-after-steps", "stop_after_steps", 1, True),
    ("--seed", "seed", 0, True),
)
# The numbers whose size took a traceback or a hang (a review): --seed 2**64 torch's overflow
# ValueError, --threads 100000 a MemoryError, --batch-size 10**20 a hang; each flag, its
# TrainOptions field and its most, with why (a shuffle buffer past the corpus reads it forever,
# and 100000 data workers are as many processes).
SEED_MOST = 2**63 - 1  # torch.manual_seed takes 64 bits; the data workers add their number
BATCH_MOST = 65_536
# --lr: a rate this large diverges in its first step with a mask; past float32's range (1e38)
# torch's optimizer stopped with a RuntimeError's traceback (a verifying review)
LR_MOST = 1_000_000
SHUFFLE_MOST = 10_000_000
PER_CORE_MOST = 4  # --threads and --data-workers: this many per CPU core


def upper_limits() -> tuple[tuple[str, str, int, str], ...]:
    cores = os.cpu_count() or 1
    per_core = f", {PER_CORE_MOST} per core of this machine's {cores}"
    return (
        ("--seed", "seed", SEED_MOST, " (2**63 - 1)"),
        ("--lr", "lr", LR_MOST, " (a rate past it diverges at once)"),
        ("--batch-size", "batch_size", BATCH_MOST, ""),
        ("--shuffle-buffer", "shuffle_buffer", SHUFFLE_MOST, " lines"),
        ("--threads", "threads", PER_CORE_MOST * cores, per_core),
        ("--data-workers", "data_workers", PER_CORE_MOST * cores, per_core),
    )


def schedule_warning(options: TrainOptions) -> str | None:
    """A warm-up at least as long as the run: the rate never reaches --lr (a run of 5 steps
    with the default 100 trained at 6% of it) and never decays. Said, not refused: a smoke
    run of a few steps is fine as it is."""
    warmup, steps = options.warmup_steps, options.step_limit
    if warmup == 0 or warmup < steps:
        return None
    return (
        f"--warmup-steps {warmup} is not below --max-steps {steps}: the learning rate rises to "
        f"{min(steps, warmup) / warmup:.0%} of --lr and never decays; give --warmup-steps "
        f"below {steps} for the whole schedule."
    )


def check_numbers(options: TrainOptions) -> None:
    """Each number of ``LIMITS`` and ``upper_limits`` within them (unset ones, None, are the
    defaults), and finite."""
    for flag, name, least, allowed in LIMITS:
        value = getattr(options, name)
        if value is not None and not math.isfinite(value):
            raise BadOptionError(f"{flag} must be a finite number; got {value:g}.")
        if value is None or value > least or (allowed and value == least):
            continue
        rule = f"{least:g} or more" if allowed else f"more than {least:g}"
        raise BadOptionError(f"{flag} must be {rule}; got {value:g}.")
    for flag, name, most, why in upper_limits():
        value = getattr(options, name)
        if value is not None and value > most:
            raise BadOptionError(f"{flag} must be at most {most:,}{why}; got {value}.")


# The options that apply to part of a run only, each with when it applies and why it would not:
# the flag, its TrainOptions field, what makes it apply, and the sentence when it doesn't.
PARTIAL_OPTIONS = (
    ("--seq-len", "seq_len", "text", "every file is CSV, whose rows are taken whole"),
    ("--mask-rate", "mask_rate", "text", "every file is CSV, masked at its [MASK]s only"),
    ("--shuffle-buffer", "shuffle_buffer", "text_data", "it mixes raw-text lines; --data is CSV"),
    ("--data-workers", "data_workers", "text_data", "they batch raw text; --data is CSV"),
    ("--masking", "masking", "text_data", "it masks raw text; --data is CSV"),
    ("--eval-lines", "eval_lines", "text_heldout", "there is no raw-text --heldout file"),
    ("--eval-every", "eval_every", "heldout", "there is no --heldout file to evaluate"),
    ("--skip-bad-rows", "skip_bad_rows", "csv", "there is no CSV file"),
)


def check_partial_options(options: TrainOptions) -> None:
    """An option the run would not use is refused, not silently ignored."""
    text_data = not all(is_csv(spec) for spec in options.data)
    text_heldout = any(not is_csv(spec) for spec in options.heldout)
    applies = {
        "text": text_data or text_heldout,
        "text_data": text_data,
        "text_heldout": text_heldout,
        "heldout": bool(options.heldout),
        "csv": any(is_csv(spec) for spec in (*options.data, *options.heldout)),
    }
    defaults = {item.name: item.default for item in fields(TrainOptions)}
    for flag, name, when, why in PARTIAL_OPTIONS:
        if applies[when]:
            continue
        if flag in options.given or getattr(options, name) != defaults[name]:
            raise BadOptionError(f"{flag} does not apply to this run: {why}.")


def check_files(specs: tuple[str, ...], flag: str) -> None:
    """Each file exists and is one kind (CSV or raw text), a raw-text one readable with a line;
    a weight only on --data's raw text (CSV rows are all used, held-out files all scored)."""
    sources = [TextSource.parse(spec, flag) for spec in specs]
    if len({is_csv(spec) for spec in specs}) > 1:
        raise BadOptionError(f"Mix of CSV and raw-text {flag} files; give one kind at a time.")
    for spec, source in zip(specs, sources, strict=True):
        weighted = split_spec(spec)[1] is not None
        if weighted and (flag == "--heldout" or is_csv(spec)):
            what = "a held-out file" if flag == "--heldout" else "a CSV file"
            raise BadOptionError(
                f"{flag} '{spec}' has a weight (FILE:WEIGHT), which {what} does not take; "
                "weights mix raw-text --data files."
            )
        if not is_csv(spec):
            check_text_file(source.path, flag)
        else:
            check_utf8_lines(source.path, flag)


def check_out_folder(options: TrainOptions) -> None:
    """--out is new, empty or an earlier run's (written over, or continued with --resume)."""
    check_output_folder(options.out, "--out", replaced=False)
    if run_in_progress(options.out):
        raise BadOptionError(in_progress(options.out))
    check_out_contents(options)


def check_out_contents(options: TrainOptions) -> None:
    """What ``check_out_folder`` says of what --out holds: checked again under the run lock."""
    out = options.out
    bundled = bundled_model_folder(out)
    if bundled:
        raise BadOptionError(
            f"--out '{out}' is the installed package's bundled model {bundled}, which a run "
            f"would write over; give a new or empty folder (--init {bundled} starts from it)."
        )
    if options.init and os.path.isdir(options.init):
        start, where = Path(options.init).resolve(), out.resolve()
        if start == where or where in start.parents:
            # the starting model was written over, and the recipe's --init then named the
            # run's own output: it could not be rerun (a review)
            raise BadOptionError(
                f"--out '{out}' holds --init '{options.init}', the model the run starts from, "
                "which it would write over; give a new or empty --out."
            )
    kept = out.is_dir() and any(path.name != RUN_LOCK for path in out.iterdir())
    foreign = foreign_contents(out) if kept and not options.resume else ""
    if foreign:
        raise BadOptionError(
            f"--out '{out}' is not empty and holds no tiankong training run{foreign}; give a "
            "new or empty folder."
        )
    checkpoint = out / CHECKPOINT_DIR
    if not options.resume:
        if unfinished(out):
            # the same command without --resume wrote over it with no word: hours of training
            # gone for a forgotten flag (a review)
            raise BadOptionError(
                f"--out '{out}' holds a run that stopped before it finished; continue it with "
                "--resume, or give a new --out (or delete the folder) to start over."
            )
        return
    if not checkpoint.is_dir():
        raise BadDataFileError(f"--resume was given but '{out}' has no checkpoint yet.")
    missing = [name for name in CHECKPOINT_FILES if not (checkpoint / name).is_file()]
    if missing:
        raise BadDataFileError(
            f"--resume: '{checkpoint}' is incomplete (no {' or '.join(missing)}), so it is not "
            "a checkpoint tiankong wrote; give a new --out to start again."
        )
    if not is_tiankong_checkpoint(checkpoint):
        raise BadDataFileError(
            f"--resume: '{checkpoint}' is not a checkpoint tiankong wrote (its "
            "trainer_state.pt holds no run's state and recipe); give a new --out to start again."
        )


def foreign_contents(out: Path) -> str:
    """Why ``out``, not empty, is not a tiankong run's folder ("" when it is one): it holds
    none of tiankong's own run state, or a checkpoint/ that tiankong did not write (the first
    save would delete it)."""
    checkpoint = out / CHECKPOINT_DIR
    if checkpoint.exists() and not is_tiankong_checkpoint(checkpoint):
        return " (its checkpoint/ is not one tiankong wrote)"
    if checkpoint.exists() or (out / (CHECKPOINT_DIR + ".tmp")).is_dir():
        return ""
    return "" if is_run_record(out / "training.json") else " (no tiankong checkpoint/ or record)"


def is_tiankong_checkpoint(folder: Path) -> bool:
    """Whether ``folder`` is a checkpoint ``save_checkpoint`` wrote: a config.json and a
    trainer_state.pt holding ``CHECKPOINT_KEYS``, read without torch (a torch.save file is a
    zip archive whose data.pkl names the keys)."""
    import zipfile

    state = folder / "trainer_state.pt"
    if not (folder / "config.json").is_file() or not state.is_file():
        return False
    try:
        with zipfile.ZipFile(state) as archive:
            name = next(n for n in archive.namelist() if n.endswith("/data.pkl"))
            pickled = archive.read(name)
    except (OSError, zipfile.BadZipFile, StopIteration):
        return False
    return all(key in pickled for key in CHECKPOINT_KEYS)


def is_run_record(path: Path) -> bool:
    """Whether ``path`` is the training.json a finished run writes: its ``summary`` (with the
    steps) and ``options``. A record joined from stages (``scripts/training_stages.py``) is an
    installed model's, not a run folder's."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(record, dict)
        and isinstance(record.get("summary"), dict)
        and "steps" in record["summary"]
        and isinstance(record.get("options"), dict)
        and "stages" not in record
    )


def bundled_model_folder(out: Path) -> str:
    """The name of the bundled model whose folder ``out`` is, or is inside ("" if none): a
    run there wrote over the shipped weights and config with no word (a review)."""
    from tiankong.core.models import BUNDLED_MODELS, BUNDLED_ROOT

    where = Path(os.path.realpath(out))
    for model in BUNDLED_MODELS:
        folder = Path(os.path.realpath(BUNDLED_ROOT / model.folder))
        if where == folder or folder in where.parents:
            return model.name
    return ""


def in_progress(out: Path) -> str:
    return (
        f"--out '{out}' is being written by another tiankong train now; wait for it to end, "
        "or give another --out."
    )


def run_in_progress(out: Path) -> bool:
    """Whether another process holds ``out``'s run lock (``run_lock``)."""
    try:
        handle = (out / RUN_LOCK).open("rb")
    except OSError:  # no lock file (or none readable): no run holds it
        return False
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


@contextmanager
def run_lock(out: Path) -> Iterator[None]:
    """``out`` made, and its run lock held (flock: released if the holder dies) until the
    block ends, then removed; another run holding it is a BadOptionError. The folders it made
    are removed again when the run left them empty: a run refused under the lock (a bad CSV
    row, --device cuda without a GPU, an --init that does not load) left an empty --out (a
    review)."""
    made = [folder for folder in (out, *out.parents) if not os.path.lexists(folder)]
    handle = locked(out)
    with handle:
        try:
            yield
        finally:
            (out / RUN_LOCK).unlink(missing_ok=True)
            fcntl.flock(handle, fcntl.LOCK_UN)
            for folder in made:  # the deepest first; one the run wrote in stays, with those above
                try:
                    folder.rmdir()
                except OSError:
                    break


def locked(out: Path) -> IO[str]:
    """The lock file of ``out``, opened and flocked; a lock file that the run before removed
    after this one opened it locks nothing, so it is opened again."""
    lock_file = out / RUN_LOCK
    while True:
        with made_here(out, "--out"):
            out.mkdir(parents=True, exist_ok=True)
            handle = lock_file.open("a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise BadOptionError(in_progress(out)) from None
        try:
            current = lock_file.stat().st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(handle.fileno()).st_ino:
            return handle
        handle.close()


def unfinished(out: Path) -> bool:
    """Whether ``out`` holds a run's checkpoint saved after its last finished run's
    training.json (or with none): a run stopped by Ctrl-C, SIGTERM or a crash, which --resume
    continues. A finished run writes training.json after its last checkpoint."""
    state = out / CHECKPOINT_DIR / "trainer_state.pt"
    record = out / "training.json"
    if not state.is_file():
        return False
    if not is_run_record(record):  # none, or one cut short by a kill (not a finished run's)
        return True
    return state.stat().st_mtime_ns > record.stat().st_mtime_ns


def read_config(folder: Path) -> dict[str, Any]:
    """A model folder's config.json (checked by resolve_model or check_out_folder)."""
    try:
        config: dict[str, Any] = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise BadDataFileError(f"'{folder}' has an unreadable or corrupt config.json.") from None
    return config


def check_resumed_shape(options: TrainOptions, shape_of_start: dict[str, Any] | None) -> None:
    """On --resume the model is the checkpoint's: a --config or --init of another shape would
    be dropped, so it is refused (one of the same shape describes the run being resumed)."""
    if not options.resume or shape_of_start is None:
        return
    saved = read_config(options.out / CHECKPOINT_DIR)
    given = f"--config {options.config}" if options.config else f"--init {options.init}"
    if saved.get("model_type") != shape_of_start.get("model_type"):
        theirs = f"a {saved.get('model_type')} model, not a {shape_of_start.get('model_type')}"
    else:
        differ = [
            name
            for name in SHAPE_FIELDS
            if name in shape_of_start and saved.get(name) != shape_of_start[name]
        ]
        theirs = ", ".join(f"its {name} is {saved.get(name)}" for name in differ)
    if theirs:
        raise BadOptionError(
            f"{given} is not the shape of the run in '{options.out}' ({theirs}); --resume "
            "continues the checkpoint's model, so drop it or give a new --out."
        )


def recipe(options: TrainOptions) -> dict[str, Any]:
    """The options of ``RECIPE_FIELDS``, as JSON values (files by their absolute paths, so a
    resume from another folder names the same ones)."""

    def plain(name: str, value: Any) -> Any:
        if name in ("data", "heldout"):
            return [absolute_spec(spec) for spec in value]
        if name == "init" and value is not None and Path(value).exists():
            return str(Path(value).resolve())
        return value

    fields = {name: plain(name, getattr(options, name)) for name in RECIPE_FIELDS}
    return {**fields, "data_files": data_stamps(options)}


def recorded_options(options: TrainOptions, run_recipe: dict[str, Any]) -> dict[str, Any]:
    """``options`` as JSON values for training.json (the files a list: they were a Python
    tuple's repr), and on a resume that left out the start (--init/--config, and with it
    --position-init) the run's own from its recipe: they were recorded "None" (a review)."""
    record: dict[str, Any] = {
        item.name: getattr(options, item.name) for item in fields(options) if item.name != "given"
    }
    if options.resume and not (options.init or options.config):
        record.update({name: run_recipe[name] for name in START_FIELDS if name in run_recipe})
    return {
        name: [str(item) for item in value]
        if isinstance(value, tuple)
        else str(value)
        if isinstance(value, Path)
        else value
        for name, value in record.items()
    }


def data_stamps(options: TrainOptions) -> dict[str, str]:
    """Each --data file's sha256, by its absolute path: a resume replays the stream through
    them to where it stopped, and a file changed in place gave another stream with no word (a
    review). Its content, not its size and time: a byte-identical copy put back was refused
    as changed (a verifying review)."""
    import hashlib

    stamps: dict[str, str] = {}
    for spec in options.data:
        path = Path(split_spec(spec)[0]).resolve()
        if path.is_file():
            with path.open("rb") as handle:
                stamps[str(path)] = hashlib.file_digest(handle, "sha256").hexdigest()
    return stamps


def absolute_spec(spec: str) -> str:
    path, weight = split_spec(spec)
    return str(Path(path).resolve()) + (f":{weight}" if weight is not None else "")


def check_resumed_recipe(options: TrainOptions, saved: dict[str, Any] | None) -> None:
    """--resume continues the run as it was started: an option of its recipe given otherwise
    is refused, naming it (a checkpoint from before recipes were kept is taken as it is)."""
    if saved is None:
        return
    now = recipe(options)
    # the start left out (no --init or --config): the checkpoint's, and --position-init with it
    # unless typed; a sinusoidal run could be resumed only with its --config repeated (a review)
    left_out = {"init", "config"} if now["init"] is None and now["config"] is None else set()
    if left_out and "--position-init" not in options.given and options.position_init == "random":
        left_out.add("position_init")
    differ = [
        name
        for name in RECIPE_FIELDS
        if name in saved
        and saved[name] != now[name]
        and not (name in ("init", "config") and now[name] is None)  # the checkpoint starts it
        and name not in left_out
    ]
    changed = [
        path
        for path, stamp in (saved.get("data_files") or {}).items()
        if now["data_files"].get(path, stamp) != stamp
    ]
    if changed and not differ:
        raise BadDataFileError(
            f"--resume replays the run's data to where it stopped, and '{changed[0]}' has "
            "changed since the run began (its content); restore it, or give a new --out to "
            "start over."
        )
    if differ:
        told = "; ".join(
            f"--{name.replace('_', '-')} {shown(now[name])} (the run's: {shown(saved[name])})"
            for name in differ
        )
        raise BadOptionError(
            f"--resume continues the run in '{options.out}' as it was started, and this "
            f"command differs: {told}; give the run's own options, or a new --out."
        )


def shown(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(map(str, value)) or "none"
    return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def validate_options(options: TrainOptions) -> None:
    """Every check that needs no model: the options, the files, the output folder."""
    if not options.data:
        raise BadOptionError("Give at least one training file with --data.")
    check_files(options.data, "--data")
    check_files(options.heldout, "--heldout")
    if not 0.0 < options.mask_rate < 1.0:
        raise BadOptionError(  # "between 0 and 1" read as if 0 were allowed
            f"--mask-rate must be more than 0 and less than 1; got {options.mask_rate:g}."
        )
    if options.seq_len < 8 or options.seq_len > 512:
        raise BadOptionError("--seq-len must be between 8 and 512.")
    if options.step_limit < 1 or options.batch_size < 1:
        raise BadOptionError("--max-steps and --batch-size must be at least 1.")
    if options.init and options.config:
        raise BadOptionError("Pass either --init or --config, not both.")
    if not (options.init or options.config or options.resume):  # never a random model unasked
        raise BadOptionError(
            "Pass --init MODEL to continue training a model, or --config NAME "
            f"({', '.join(MODEL_CONFIGS)}) to start one from scratch."
        )
    if options.config and options.config not in MODEL_CONFIGS:
        raise BadOptionError(
            f"Unknown --config '{options.config}'; choose one of {', '.join(MODEL_CONFIGS)} "
            "or pass --init."
        )
    if options.device not in ("auto", "cpu", "cuda"):
        raise BadOptionError(f"--device '{options.device}' is not one of auto, cpu or cuda.")
    if options.precision not in ("auto", "fp32", "bf16"):
        raise BadOptionError(f"--precision '{options.precision}' is not one of auto, fp32 or bf16.")
    if options.masking not in MASKING_KINDS:
        raise BadOptionError(
            f"--masking '{options.masking}' is not one of {', '.join(MASKING_KINDS)}."
        )
    if options.masking != "token" and importlib.util.find_spec("jieba") is None:
        raise BadOptionError(
            f"--masking {options.masking} segments words with jieba: pip install 'tiankong[train]'."
        )
    if options.data_workers < 0:
        raise BadOptionError("--data-workers must be 0 or more.")
    check_numbers(options)
    check_partial_options(options)
    if options.position_init not in POSITION_INITS:
        raise BadOptionError(
            f"--position-init '{options.position_init}' is not one of {', '.join(POSITION_INITS)}."
        )
    # on --resume alone it describes how the run began, checked against the run's recipe: a
    # sinusoidal run could not be resumed without its --config repeated (a review)
    from_config = options.config or (options.resume and not options.init)
    if options.position_init != "random" and not from_config:
        raise BadOptionError(
            f"--position-init {options.position_init} applies to a model started from "
            "--config; a model from --init keeps its own position embeddings."
        )
    check_out_folder(options)
    if options.resume and options.config:
        check_resumed_shape(options, {"model_type": "bert", **MODEL_CONFIGS[options.config]})


def check_positions(options: TrainOptions, positions: int, model: str) -> None:
    """--seq-len within the model's positions, when raw text is packed to it."""
    uses_seq_len = not all(is_csv(spec) for spec in (*options.data, *options.heldout))
    if uses_seq_len and options.seq_len > positions:
        raise BadOptionError(
            f"--seq-len {options.seq_len} is more than the {positions} positions of model "
            f"'{model}'; give --seq-len {positions} or less."
        )
