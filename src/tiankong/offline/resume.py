"""A fill's files across runs: the job (``FillJob``), its checkpoint, the checks a resumed run
must pass (the same input, the same run: ``run_key``, and the same engine and precision as
resolved: ``check_served``), and appending after the checkpointed bytes. ``tiankong fill`` and
``tiankong check FILE -o`` share them. An output shorter than its checkpoint says (deleted or
cut since) is refused, never padded: truncating "up" to the checkpoint would fill it with NUL
bytes and lose the lines before.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from tiankong.config import Settings
from tiankong.core.decoding import Constraints
from tiankong.core.models import ResolvedModel
from tiankong.errors import BadDataFileError, BadOptionError


@dataclass(frozen=True)
class FillJob:
    input: Path
    output: Path
    text_field: str = "text"
    input_format: str = "auto"
    output_format: str = "auto"
    errors: Path | None = None
    chunk_size: int = 512
    batch_size: int = 32
    workers: int = 1
    resume: bool = True
    command: str = "fill"  # or "check" (``tiankong check FILE -o``): what its messages name

    @property
    def keyed_options(self) -> str:
        """The options a resumed run must repeat, as the refusal names them (``check -o`` has
        only --field of the three)."""
        if self.command == "check":
            return "--field"
        return "--field, --input-format and --output-format"

    @property
    def checkpoint(self) -> Path:
        return self.output.with_name(self.output.name + ".checkpoint.json")

    @property
    def error_file(self) -> Path:
        return self.errors or self.output.with_name(self.output.name + ".errors.jsonl")

    @property
    def lock(self) -> Path:
        return self.output.with_name(self.output.name + ".lock")

    @property
    def locks(self) -> tuple[Path, ...]:
        """The files this run holds while it runs: the output's lock and its errors file's
        (two runs with their own outputs shared one --errors, or one named the other's
        OUTPUT.errors.jsonl, each from its own checkpoint, and one run's error lines were
        lost: reviews)."""
        return (self.lock, self.error_file.with_name(self.error_file.name + ".lock"))


@dataclass
class Checkpoint:
    input_id: str
    lines_done: int = 0  # input records consumed (good and bad)
    output_bytes: int = 0
    error_bytes: int = 0
    filled: int = 0
    failed: int = 0
    run_key: str = ""  # run_key of the run that wrote it ("" in a checkpoint from before it)
    # what served its answers, as resolved (``--precision auto`` chooses by the threads each
    # worker has); "" in a checkpoint from before it was recorded
    engine: str = ""
    precision: str = ""
    # the served model's weights (``model_weights``); "" in a checkpoint from before it was
    # recorded: the name alone let a run resume on other weights under the same name (the
    # bundled model, replaced in an upgrade, or a folder retrained in place)
    weights: str = ""
    # the corpus index's build (``index_build``; "none" without one); "" in a checkpoint from
    # before it was recorded: an index rebuilt in place under the same --index resumed, and
    # the output mixed the two builds' answers (a review)
    index: str = ""
    # where the errors were written (absolute); "" in a checkpoint from before it was recorded:
    # a resume naming another --errors file cut that file to the first one's length
    errors: str = ""
    # what ``run_key`` hashes, readable (``run_description``), so that a refused resume names
    # the options that differ; {} in a checkpoint from before it was kept
    run: dict[str, Any] = field(default_factory=dict)
    # the command that writes it (``FillJob.command``); "" in a checkpoint from before it was
    # recorded: `check -o` onto fill's output was refused as "another model or other options",
    # naming 28 options the user never gave (a review)
    command: str = ""


def input_identity(path: Path) -> str:
    """Size plus a hash of the whole file: a resumed run must read the same input (a hash of
    the first 64 KiB alone missed an edit past it that kept the size, and the stale answers
    stayed). BLAKE2b reads about 1 GB a second, next to hours of filling for such a file."""
    with path.open("rb") as handle:
        digest = hashlib.file_digest(handle, hashlib.blake2b).hexdigest()[:32]
    return f"{path.stat().st_size}:b2:{digest}"


def head_identity(path: Path) -> str:
    """How a checkpoint written before ``input_identity`` hashed the whole file named its
    input: the size and a hash of the first 64 KiB."""
    with path.open("rb") as handle:
        head = handle.read(65536)
    return f"{path.stat().st_size}:{hashlib.sha256(head).hexdigest()[:16]}"


@contextmanager
def claimed(job: FillJob) -> Iterator[None]:
    """The output to this run alone while it runs (a lock beside it, ``<output>.lock``): two
    runs writing one output both appended, each from its own checkpoint, and 10,000 lines
    came out as 19,000 out of order, which a third run then called done."""
    from filelock import FileLock, Timeout

    held: list[FileLock] = []
    try:
        for path, written in zip(job.locks, (job.output, job.error_file), strict=False):
            lock = FileLock(str(path), timeout=0)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                lock.acquire()
            except Timeout:  # an OSError too: first
                raise BadDataFileError(being_written(job, written)) from None
            except OSError as error:
                raise BadOptionError(f"'{path}' can't be written ({error.strerror}).") from None
            held.append(lock)
        yield
    finally:
        for lock in reversed(held):
            lock.release()


def errors_where(job: FillJob) -> str:
    """A run's errors file as its checkpoint keeps it: relative to the output's folder where
    it lies in it (the default, beside the output), so a job folder moved or mounted elsewhere
    resumes (an absolute path was refused there, and the advice to name it with --errors made
    the old folder again: a review); elsewhere its absolute path, so an output moved away from
    it still finds it (a verifying review)."""
    errors = os.path.abspath(job.error_file)
    relative = os.path.relpath(errors, os.path.dirname(os.path.abspath(job.output)))
    return errors if relative.split(os.sep)[0] == os.pardir else relative


def being_written(job: FillJob, written: Path) -> str:
    return (
        f"'{written.name}' is being written by another run now; wait for it to end, or choose "
        f"another {'output' if written == job.output else '--errors'}."
    )


def refuse_if_claimed(job: FillJob) -> None:
    """``claimed``'s refusal, before a model loads (the CLI loads one to check the options), with
    nothing made: a lock no run made yet is held by none."""
    from filelock import FileLock, Timeout

    for path, written in zip(job.locks, (job.output, job.error_file), strict=False):
        if not path.exists():
            continue
        try:
            with FileLock(str(path), timeout=0):
                pass
        except Timeout:
            raise BadDataFileError(being_written(job, written)) from None
        except OSError:
            continue  # claimed() says why, once the run takes it


def run_key(
    settings: Settings,
    options: Any,
    files: tuple[str, ...] = (),
    answer_settings: tuple[str, ...] = (),
) -> str:
    """What a run's output depends on (the model, engine, precision, device, window, index and
    the options, as asked, a dataclass or its fields; ``files``: the text field and the formats
    read and written), so that
    a resumed run is the same run: a rerun with another model, top_k or --field was appended to
    the first one's rows. Threads, workers and batch sizes are not in it. ``answer_settings``
    (default ``ANSWER_SETTINGS``) names the settings in it: ``fill`` leaves the engine and
    precision out, as it compares the ones they resolve to (``check_served``)."""
    answers = [getattr(settings, name) for name in answer_settings or ANSWER_SETTINGS]
    described: list[Any] = [answers, options if isinstance(options, dict) else asdict(options)]
    if files:  # a key from before they were in it stays as it was
        described.append(list(files))
    text = json.dumps(described, default=str, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_description(
    settings: Settings,
    options: Any,
    files: tuple[str, ...] = (),
    answer_settings: tuple[str, ...] = (),
) -> dict[str, Any]:
    """What ``run_key`` hashes, by name (JSON values): each setting, option and file choice."""
    named = {
        f"--{name.replace('_', '-')}": getattr(settings, name)
        for name in answer_settings or ANSWER_SETTINGS
    }
    for name, value in (options if isinstance(options, dict) else asdict(options)).items():
        if name == "constraints":  # --allowed, --exclude, --preset (None: none of them)
            given = value if isinstance(value, dict) else asdict(Constraints())
            named.update({f"--{key}": item for key, item in given.items()})
        else:  # as the CLI's flag where it has one (mode: --whole-word, --candidates)
            named[OPTION_FLAGS.get(name, name)] = value
    named.update(zip(("--field", "--input-format", "--output-format"), files, strict=False))
    described: dict[str, Any] = json.loads(json.dumps(named, default=str))
    return described


# the options that are CLI flags by the same name; the others keep their own (the settings' --index
# is a flag, the option's index, whether a request uses it, is not: the two were one key)
OPTION_FLAGS = {
    "top_k": "--top-k",
    "beam_width": "--beam-width",
    "order": "--order",
    "candidates": "--candidates",
    "max_blank_length": "--max-blank-length",
}


def run_differences(
    saved: dict[str, Any], now: dict[str, Any], skipped: tuple[str, ...] = ()
) -> str:
    """The entries of two run descriptions that differ, as a refusal names them, but
    ``skipped``."""
    names = [
        name
        for name in {**saved, **now}
        if saved.get(name) != now.get(name) and name not in skipped
    ]
    shown = [
        f"{name} {plain(now.get(name))} (the run's: {plain(saved.get(name))})" for name in names[:3]
    ]
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return "; ".join(shown) + more


def plain(value: Any) -> str:
    return "none" if value is None else json.dumps(value, ensure_ascii=False).strip('"')


ANSWER_SETTINGS = ("model", "engine", "precision", "device", "max_length", "index", "max_masks")
FILL_ANSWER_SETTINGS = tuple(
    name for name in ANSWER_SETTINGS if name not in ("engine", "precision")
)


FILL_FLAGS = "--workers and --threads"  # what changes fill's --precision auto choice


def check_served(
    job: FillJob, state: Checkpoint, engine: str, precision: str, flags: str = FILL_FLAGS
) -> None:
    """A resumed run must serve on the engine and precision its first part did, as resolved:
    ``--precision auto`` chooses by the threads each worker has (``--workers 2`` on two cores
    chose ONNX INT8, one worker OpenVINO bf16), and a resume with other workers mixed the two in
    one output. The checkpoint of a fresh run records them. ``flags``: what changes the choice
    in this command (``check`` has no --workers, and its run key holds --engine and --precision
    as typed, so naming them would be refused in turn: a review)."""
    if state.engine and (state.engine, state.precision) != (engine, precision):
        was, now = f"{state.precision} ({state.engine})", f"{precision} ({engine})"
        advice = f"pass --engine {state.engine} --precision {state.precision} to resume it"
        if flags != FILL_FLAGS or "+" in state.engine + state.precision:
            advice = f"resume it with the first run's {flags}"  # (a split: no flag names both)
        raise BadDataFileError(
            f"'{job.output.name}' was started on {was} and this run serves {now} "
            f"(--engine and --precision as given, or auto's choice by the threads, which "
            f"{flags} change); {advice}, or "
            "pass --restart to start over."
        )
    state.engine, state.precision = engine, precision


def model_weights(model: ResolvedModel) -> str:
    """The served model's identity for a checkpoint: a hash of its config, weight and tokenizer
    files (the export cache's fingerprint), 16 hex digits."""
    from tiankong.export.export_cache import model_fingerprint

    return model_fingerprint(model.path)[:16]


def check_weights(job: FillJob, state: Checkpoint, model: ResolvedModel, weights: str) -> None:
    """A resumed run must serve the weights its first part did. A checkpoint from before they
    were recorded resumes a model of one's own as it did; on the bundled model it is refused,
    since the bundled weights were replaced after it (2026-12-04) and the two can't be told
    apart."""
    if state.weights and state.weights != weights:
        raise BadDataFileError(
            f"'{job.output.name}' was started on other weights of the model '{model.name}' (its "
            "files changed since); pass --restart to start over on these."
        )
    if not state.weights and state.lines_done and model.kind == "bundled":
        raise BadDataFileError(
            f"'{job.output.name}' was started by an earlier tiankong, which did not record the "
            f"model's weights, and the bundled '{model.name}' has been replaced since; pass "
            "--restart to start over on it."
        )
    state.weights = weights


def index_build(masker: Any) -> str:
    """The identity of the corpus index ``masker`` mixes in (its name and a hash of its content:
    the result cache's key, ``FillMemory.key``), or "none"."""
    memory = masker.memory
    return "none" if memory is None else str(memory.key)


def check_index(job: FillJob, state: Checkpoint, build: str) -> None:
    """A resumed run must mix in the index its first part did (``index_build``), compared by
    content: the same index under another name (a copy, --index auto or bundled) is the same."""
    if state.index and content_of(state.index) != content_of(build):
        was, now = (plain_index(value) for value in (state.index, build))
        why = "it was rebuilt since" if was == now else f"it was {was}, this run's is {now}"
        raise BadDataFileError(
            f"'{job.output.name}' was started with another corpus index ({why}); pass "
            "--restart to start over with this one."
        )
    state.index = build


def content_of(build: str) -> str:
    """An index build's content hash ("none" without an index): ``index_build``'s last part."""
    return build.rpartition(":")[2]


def plain_index(build: str) -> str:
    """An index build as a refusal names it: its name, or "none"."""
    return "none" if build == "none" else f"the index '{build.rpartition(':')[0]}'"


def start_state(
    job: FillJob, key: str = "", earlier_key: str = "", run: dict[str, Any] | None = None
) -> Checkpoint:
    """The checkpoint a run starts from: the saved one, checked (the same input, run, errors
    file and files), or a fresh one, after refusing to overwrite what no checkpoint covers."""
    identity = input_identity(job.input)
    errors = errors_where(job)
    if job.resume and os.path.isfile(job.checkpoint):
        try:
            saved = Checkpoint(**json.loads(job.checkpoint.read_text(encoding="utf-8")))
        except (ValueError, TypeError):
            raise BadDataFileError(
                f"The checkpoint '{job.checkpoint.name}' is unreadable; delete it to start over."
            ) from None
        if saved.command and saved.command != job.command:
            raise BadDataFileError(
                f"'{job.output.name}' is the output of `tiankong {saved.command}`; name another "
                f"output for `tiankong {job.command}`, or pass --restart to start over."
            )
        saved.command = job.command
        was = identity if ":b2:" in saved.input_id else head_identity(job.input)
        if saved.input_id != was:
            raise BadDataFileError(
                f"'{job.output.name}' was started from a different input; use another output "
                "or pass --restart."
            )
        saved.input_id = identity
        # an absolute path: a checkpoint written before errors were kept relative to the output
        if saved.errors and saved.errors not in (errors, os.path.abspath(job.error_file)):
            # a relative path is the output folder's; an absolute one stays itself
            where = os.path.join(os.path.dirname(os.path.abspath(job.output)), saved.errors)
            raise BadDataFileError(
                f"'{job.output.name}' was started with its errors in "
                f"'{os.path.normpath(where)}'; name that file with --errors to resume it, or "
                "pass --restart to start over."
            )
        saved.errors = errors
        # ``earlier_key``: how a checkpoint written before the key held the text's field and the
        # formats was keyed (a new key never equals it: the files are in it)
        if (
            saved.run_key
            and saved.run_key not in (key, earlier_key or key)
            and not only_the_index_named_otherwise(saved, run)
        ):
            # the index is compared by its content (check_index), not as --index was typed
            skipped = ("--index",) if saved.index else ()
            differ = run_differences(saved.run, run, skipped) if saved.run and run else ""
            which = differ or (
                "the model's files or a setting" if saved.run else f"{job.keyed_options} among them"
            )
            raise BadDataFileError(
                f"'{job.output.name}' was started with another model or other options "
                f"({which}); run the same command to resume it, or pass --restart to start over."
            )
        saved.run = run or saved.run
        saved.run_key = key or saved.run_key  # an earlier-keyed checkpoint moves to this key
        for path, size in ((job.output, saved.output_bytes), (job.error_file, saved.error_bytes)):
            if file_size(path) < size:
                raise BadDataFileError(
                    f"'{path.name}' is missing or shorter than its checkpoint "
                    f"'{job.checkpoint.name}' says; restore it, or pass --restart to start over."
                )
        return saved
    # the checkpoint first: a --restart stopped after emptying the files left the old one,
    # and the next run was refused for options or files it never had (a review)
    for stale in (job.checkpoint, checkpoint_temp(job.checkpoint)):
        if os.path.isfile(stale):
            stale.unlink()
    named = "another --errors" if job.errors is not None else "another output"
    for path, choose in ((job.output, "another output"), (job.error_file, named)):
        if file_size(path) and job.resume:  # not ours to overwrite: --errors named any file
            raise BadDataFileError(
                f"'{path.name}' already exists and has no checkpoint; choose {choose} or pass "
                "--restart to overwrite it."
            )
        if os.path.isfile(path):
            path.unlink()
    return Checkpoint(identity, run_key=key, errors=errors, run=run or {}, command=job.command)


def only_the_index_named_otherwise(saved: Checkpoint, run: dict[str, Any] | None) -> bool:
    """Whether a resume differs from its run only in --index as typed, where the checkpoint
    records the index's content, which ``check_index`` compares: ``--index ./idx`` was refused
    on a run begun with ``--index idx``, and ``bundled`` on one begun with ``auto`` (reviews)."""
    if not (saved.index and saved.run and run):
        return False
    return not run_differences(saved.run, run, ("--index",))


def file_size(path: Path) -> int:
    """The size of a file, 0 when there is none (or the name is one the system refuses)."""
    return os.path.getsize(path) if os.path.isfile(path) else 0


def open_append(path: Path, valid_bytes: int) -> TextIO:
    """Open for appending after cutting off anything written past the last checkpoint (the
    file holds at least that much: ``start_state`` checked). What ``check_files`` can't foresee
    (a name over 255 bytes) is one sentence too."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as handle:
            handle.truncate(valid_bytes)
        return path.open("a", encoding="utf-8", newline="")
    except OSError as error:
        raise BadOptionError(f"'{path}' can't be written ({error.strerror}).") from None


def durable(handle: TextIO) -> int:
    handle.flush()
    os.fsync(handle.fileno())
    return handle.tell()


def commit_chunk(
    checkpoint: Path,
    state: Checkpoint,
    output: TextIO,
    errors: TextIO,
    lines: int,
    on_progress: Callable[[int, int, int], None] | None,
) -> None:
    """After a chunk is written: both files on disk first, then the checkpoint that says where
    they end (the point a rerun resumes from), then the progress report."""
    state.lines_done += lines
    state.output_bytes = durable(output)
    state.error_bytes = durable(errors)
    save_checkpoint(checkpoint, state)
    if on_progress:
        on_progress(lines, state.filled, state.failed)


def checkpoint_temp(path: Path) -> Path:
    return path.with_name(path.name + ".tmp")


def save_checkpoint(path: Path, state: Checkpoint) -> None:
    temp = checkpoint_temp(path)
    try:
        temp.write_text(json.dumps(asdict(state)), encoding="utf-8")
        os.replace(temp, path)
    except OSError:
        temp.unlink(missing_ok=True)  # a full disk left the half-written .tmp behind
        raise


@contextmanager
def writes_told(checkpoint: Path) -> Iterator[None]:
    """A write that fails mid-run (a full disk, a quota) as one sentence, not two chained
    tracebacks: the lines its last checkpoint covers are kept, and the same command resumes."""
    try:
        yield
    except OSError as error:
        raise BadOptionError(
            f"Writing the output failed ({error.strerror or error}); the lines its checkpoint "
            f"'{checkpoint.name}' covers are kept, and the same command resumes once it can "
            "write."
        ) from None
