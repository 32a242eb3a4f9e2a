"""`tiankong fill`: offline batch filling of JSONL / CSV / TXT files, resumable.

Streaming with constant memory: the input is read in chunks, each chunk is sorted by length
into batches (little padding), and results are appended in input order. After each chunk the
output (and error) file is flushed and fsynced, then a small checkpoint is replaced atomically.
A restart truncates the output back to the last checkpoint and skips the lines it covers, so
the output is never corrupt or duplicated (the checkpoint and its checks: ``resume.py``).

Every input field or column is kept and the result columns are added after it. The input
fields stay in the driver process (only the texts go to the workers) until their line is
written.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import asdict
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from tiankong.config import Settings, threads_per_worker
from tiankong.core.models import ResolvedModel
from tiankong.core.options import PredictOptions
from tiankong.core.request import PreparedRequest
from tiankong.core.results import FillResult
from tiankong.core.text import LONE_SURROGATE
from tiankong.errors import BadDataFileError, BadOptionError, TiankongError
from tiankong.index.sources import json_value, no_column, not_json
from tiankong.offline.files import (
    check_uncompressed_name,
    check_writable,
    csv_records,
    json_line,
    open_text,
    require_input,
    same_file,
)
from tiankong.offline.resume import (
    FILL_ANSWER_SETTINGS,
    Checkpoint,
    FillJob,
    check_index,
    check_served,
    check_weights,
    checkpoint_temp,
    claimed,
    commit_chunk,
    index_build,
    model_weights,
    open_append,
    run_description,
    run_key,
    start_state,
    writes_told,
)

T = TypeVar("T")
FORMATS = ("jsonl", "csv", "txt")
CSV_COLUMNS = ["line", "text", "sequence", "top_token", "top_score", "result"]
# The keys a JSONL output line gets besides the input's own fields.
RESULT_KEYS = frozenset(["line", "predictions", *FillResult.__dataclass_fields__])
Row = tuple[int, str | None, str, dict[str, Any]]  # line, text or None, problem, input fields

if TYPE_CHECKING:
    from tiankong.service import FillMasker


def format_of(path: Path, requested: str) -> str:
    """An output's format: the one asked for, else its name's (TXT when the name says none)."""
    return named_format(path, requested) or "txt"


def input_format(path: Path, requested: str) -> str:
    """An input's format: the one asked for, else its name's. A name that says none is
    refused: a .ndjson, .tsv or .data file was read as TXT, each JSON line filled as text."""
    kind = named_format(path, requested)
    if kind is None:
        require_input(path, "Input file")  # a file that isn't there says that first
        raise BadOptionError(
            f"The input '{path.name}' is not named .txt, .jsonl (.json, .ndjson) or .csv, so its "
            "format can't be told; give --input-format txt, jsonl or csv."
        )
    return kind


SUFFIX_FORMATS = {"jsonl": "jsonl", "json": "jsonl", "ndjson": "jsonl", "csv": "csv", "txt": "txt"}


def named_format(path: Path, requested: str) -> str | None:
    if requested != "auto":
        if requested not in FORMATS:
            raise BadOptionError(f"Unknown format '{requested}'; use one of {', '.join(FORMATS)}.")
        return requested
    suffixes = [s.lstrip(".").lower() for s in path.suffixes]  # OUT.CSV is a CSV too
    return next((SUFFIX_FORMATS[s] for s in reversed(suffixes) if s in SUFFIX_FORMATS), None)


def check_files(job: FillJob) -> None:
    """Refuse, before anything is deleted or loaded, files a run can't use: an input that is
    missing or a folder, an output (or its error file or checkpoint) that is the input, which
    ``--restart`` would delete, or that can't be written, or that is not a format the run
    writes (``tiankong check -o`` writes JSONL only); and sizes under 1. The CLI
    calls it before the model loads (these were refused after it, under a drawn bar)."""
    check = job.command == "check"
    if job.workers < 1 or job.chunk_size < 1 or job.batch_size < 1:
        raise BadOptionError(
            "--chunk-size must be at least 1."
            if check
            else "--workers, --chunk-size and --batch-size must be at least 1."
        )
    require_input(job.input, "Input file")
    if str(job.output) == "-":  # it made a file named -, and -.checkpoint.json beside it
        raise BadOptionError(
            f"tiankong {job.command} writes its output to a file, with a checkpoint beside it, "
            "not to stdout; name the output file."
        )
    check_writable(job.output, "output")  # first: '.' or '/' names no file to put beside it
    outputs = {"output": job.output, "error file": job.error_file, "checkpoint": job.checkpoint}
    for what, path in outputs.items():
        if same_file(path, job.input):
            raise BadOptionError(f"The {what} is the input ('{path}'); name another file.")
    if same_file(job.error_file, job.output):
        raise BadOptionError(f"The error file is the output ('{job.output}'); name another file.")
    for what, path in (("output", job.output), ("error file", job.error_file)):
        if same_file(path, job.checkpoint) or same_file(path, checkpoint_temp(job.checkpoint)):
            raise BadOptionError(f"The {what} is the checkpoint ('{path}'); name another file.")
    check_writable(job.error_file, "error file")
    check_writable(checkpoint_temp(job.checkpoint), "checkpoint")  # made, then renamed over
    for what, path in (("output", job.output), ("error file", job.error_file)):
        check_uncompressed_name(path, what)
    if job.output_format not in ("auto", "jsonl", "csv"):  # txt is an input's format alone
        raise BadOptionError(
            f"--output-format: unknown value '{job.output_format}'; fill writes jsonl or csv "
            "(or auto: by the output's name)."
        )
    out_kind = format_of(job.output, job.output_format)
    if check and out_kind != "jsonl":
        raise BadOptionError("tiankong check writes JSONL; name the output .jsonl.")
    if out_kind == "txt":
        raise BadOptionError(
            f"The output '{job.output.name}' would be TXT, by its name; fill writes JSONL or "
            "CSV: name it .jsonl or .csv, or pass --output-format."
        )


def count_records(path: Path, kind: str) -> int:
    """The number of records, the progress bar's total (constant memory). A CSV's header is
    not a record and a quoted field may span lines, so a CSV is parsed; in other files
    lines are counted (a last line without a newline included). Decoding them checks the whole
    file is UTF-8 (and a CSV well-formed) before the work starts."""
    with open_text(path, "Input file", newline="") as handle:
        if kind == "csv":
            return sum(1 for _ in csv_records(handle, path))
        count, last = 0, "\n"
        for block in iter(lambda: handle.read(1 << 20), ""):
            count += block.count("\n")
            last = block[-1:]
    return count + (last != "\n")


def checked_records(
    path: Path, kind: str, field: str, result_keys: frozenset[str] = frozenset()
) -> Iterator[Row]:
    """``read_records`` with its first records read now: a CSV without the column, or a JSONL
    file whose first object lacks the field, is refused before the caller makes its output
    files (a failed run left a header-only output behind, which the corrected run then refused
    to overwrite; a JSONL ``--field`` typo sent every line to the errors file, exit 0), and so
    is a first record with a field named like one of ``result_keys`` (a JSONL output's: each
    line went to the errors file, exit 0, where a CSV output refused the file)."""
    if kind == "jsonl" and opens_an_array(path):
        raise BadDataFileError(
            f"'{path.name}' holds a JSON array, not JSON Lines; write one object per line "
            "(jq -c '.[]' turns an array into that)."
        )
    rows = read_records(path, kind, field)
    read: list[Row] = []
    for row in rows:  # up to the first JSON object (bad lines before it are bad records)
        read.append(row)
        fields = row[3]
        if kind != "jsonl" or fields:
            if kind == "jsonl" and field not in fields:
                raise BadDataFileError(
                    f"The first record of '{path.name}' (line {row[0]}) has no field '{field}'; "
                    f"name the text's field with --field (it has {', '.join(list(fields)[:8])})."
                )
            if clash := fields_problem(fields, field, None, result_keys):
                raise BadDataFileError(
                    f"The first record of '{path.name}' (line {row[0]}): {clash}."
                )
            break
    return chain(read, rows)


def opens_an_array(path: Path) -> bool:
    """Whether the first character of a JSON file that is not white space opens an array: a
    ``.json`` file read as JSON Lines lost the records on the array's own lines, exit 0."""
    with open_text(path, "Input file") as handle:
        for line in handle:
            if line.strip():
                return line.lstrip().startswith("[")
    return False


def read_records(path: Path, kind: str, field: str) -> Iterator[Row]:
    """Yield (line number, text or None, problem, the record's fields) for every record. Lines
    end at "\n" alone (a "\r\n" ending is dropped), as ``count_records`` counts them: a lone
    "\r" inside a line split it in two, and every later line number was off by one."""
    with open_text(path, "Input file", newline="" if kind == "csv" else "\n") as handle:
        if kind == "csv":
            reader = csv_records(handle, path)
            header = reader.fieldnames or []
            if field not in header:
                raise BadDataFileError(no_column(f"CSV file '{path.name}'", field, header))
            for row in reader:  # a record is named by its first line, as CSV errors are
                problem = reader.problem(row, field)
                if None in row:  # its fields can't be kept: they don't match the header
                    yield reader.record_line, None, problem, {}
                    continue
                yield reader.record_line, row.get(field), problem, row
            return
        for number, line in enumerate(handle, start=1):
            line = line.rstrip("\r\n")
            if kind == "txt":
                yield number, line, "", {}
                continue
            if not line.strip():
                yield number, None, EMPTY_LINE, {}
                continue
            try:
                record = json_value(line)
            except ValueError as error:
                yield number, None, not_json(error), {}
                continue
            if not isinstance(record, dict):
                yield number, None, no_string_field(field), {}
                continue
            text = record.get(field)
            problem = "" if isinstance(text, str) else no_string_field(field)
            yield number, text if isinstance(text, str) else None, problem, record


def no_string_field(field: str) -> str:
    """The bad record a JSONL record without its text as a string is, with or without --ray."""
    return f"no string field '{field}'"


def input_columns(path: Path, kind: str, field: str) -> list[str]:
    """The input's own columns, which a CSV output keeps before the result columns: a CSV's
    header, or every key of a JSONL file's records, in the order they first appear (the first
    record's alone refused each later record with a field it lacked: a review). A TXT file has
    none (its line is the result's ``text``). A column named like a result column is refused,
    so none is lost."""
    columns: list[str] = []
    if kind == "csv":
        with open_text(path, "Input file", newline="") as handle:
            columns = list(csv_records(handle, path).fieldnames or [])
    elif kind == "jsonl":
        keys: dict[str, None] = {}
        for _, _, _, fields in read_records(path, kind, field):
            keys.update(dict.fromkeys(fields))
        columns = list(keys)
    clashes = named_like_results(columns, CSV_COLUMNS, field)
    if clashes:
        raise BadDataFileError(
            f"The input column '{clashes[0]}' has the name of a result column "
            f"({', '.join(CSV_COLUMNS)}); rename it."
        )
    written: dict[str, str] = {}
    for name, shown in zip(columns, shown_header(columns), strict=True):
        if shown in written:  # "k\ud800" and "k\ufffd": two columns of one name (a review)
            raise BadDataFileError(
                f"The input keys {written[shown]!a} and {name!a} would both be the "
                f"CSV column '{shown}' (a lone surrogate is written as U+FFFD); rename one."
            )
        written[shown] = name
    return columns


def named_like_results(names: Iterable[str], results: Collection[str], field: str) -> list[str]:
    """The input's own ``names`` a result would overwrite: named like one of ``results``, but
    for the text's own field when it is ``text`` (the result's text is that text). The one
    rule of fill's CSV and JSONL outputs and fill --ray's."""
    return [name for name in names if name in results and not name == field == "text"]


def fields_problem(
    fields: dict[str, Any],
    field: str,
    columns: list[str] | None,
    result_keys: frozenset[str] = RESULT_KEYS,
) -> str:
    """Why a record's own fields can't go into the output ("" when they can): a JSONL field
    named like a result key (``result_keys``: the task's), or a field a CSV output has no
    column for."""
    if columns is not None:
        extra = [name for name in fields if name not in columns]
        return f"field '{extra[0]}' is not a CSV column ({', '.join(columns)})" if extra else ""
    clashes = named_like_results(fields, result_keys, field)
    return f"field '{clashes[0]}' has the name of a result field; rename it" if clashes else ""


# --- the work for one chunk (runs in a worker process when --workers > 1) --------------------

_masker: Any = None


def load_worker(settings: Settings) -> None:
    global _masker
    from tiankong.service import FillMasker

    _masker = FillMasker.load(settings=settings)


PARENT_POLL_S = 1.0
EMPTY_LINE = "empty line"  # a blank line of a JSONL file: a bad record, with or without --ray
WORKER_DIED = (
    "A --workers process ended before its work was done (killed, or out of memory); the lines "
    "the checkpoint covers are kept: run the same command again to resume (with fewer "
    "--workers if memory ran short)."
)


def start_worker(settings: Settings, parent: int) -> None:
    """A worker process of ``--workers``: SIGTERM ends it (the CLI's handler, inherited, raised
    a KeyboardInterrupt that the pool's result sending caught and retried, so a pool broken by
    one worker's death hung on the other: a review), Ctrl-C is the driver's to handle, and it
    ends itself once the driver is gone (``kill -9`` of the driver left both workers running,
    each holding its model, blocked on a result no one would read)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="tiankong-parent-watch", daemon=True).start()
    load_worker(settings)


def fill_chunk(
    records: list[tuple[int, str | None, str]], options: PredictOptions, batch_size: int
) -> list[tuple[int, str, dict[str, Any]]]:
    """``fill_records`` on this worker's masker (``load_worker``)."""
    return fill_records(_masker, records, options, batch_size)


def fill_records(
    masker: FillMasker,
    records: list[tuple[int, str | None, str]],
    options: PredictOptions,
    batch_size: int,
) -> list[tuple[int, str, dict[str, Any]]]:
    """Results in input order: (line, "ok" | "error", payload); a record's text is None where
    it has none (its problem says why). Plain texts run in length-sorted batches of
    ``batch_size``; a search runs alone. The one filling of fill and of fill --ray's actors."""
    outcomes: dict[int, tuple[str, dict[str, Any]]] = {}
    plain: list[tuple[int, str, PreparedRequest]] = []
    search: list[tuple[int, str, PreparedRequest]] = []
    for line, text, problem in records:
        if text is None:
            outcomes[line] = ("error", {"code": "bad_record", "message": problem})
            continue
        try:
            request = masker.prepare_request(text, options)
        except TiankongError as error:
            outcomes[line] = ("error", {"code": error.code, "message": error.message})
            continue
        (plain if request.plain else search).append((line, text, request))
    for line, text, request in search:  # several engine calls each, one text at a time
        try:
            outcomes[line] = ("ok", record_of(text, masker.run_requests([request])[0]))
        except TiankongError as error:
            outcomes[line] = ("error", {"code": error.code, "message": error.message})
    plain.sort(key=lambda item: len(item[2].prepared.input_ids))
    for start in range(0, len(plain), batch_size):
        group = plain[start : start + batch_size]
        results = masker.answer_each([item[2] for item in group])
        for (line, text, _), result in zip(group, results, strict=True):
            outcomes[line] = (
                ("error", {"code": result.code, "message": result.message})
                if isinstance(result, TiankongError)
                else ("ok", record_of(text, result))
            )
    return [(line, *outcomes[line]) for line, _, _ in records]


def record_of(text: str, result: FillResult) -> dict[str, Any]:
    data = result.to_dict()
    data["text"] = text
    return data


# --- the driver -------------------------------------------------------------------------------


def run_fill(
    job: FillJob,
    settings: Settings,
    options: PredictOptions,
    on_progress: Callable[[int, int, int], None] | None = None,
    on_start: Callable[[Checkpoint], None] | None = None,
    masker: FillMasker | None = None,
) -> Checkpoint:
    """Fill ``job.input`` into ``job.output``; returns the final checkpoint (counts).

    ``on_start`` gets the counts the run starts from (those of a resumed run's finished lines,
    zeros on a fresh run); ``on_progress`` gets each chunk's lines and the running totals.
    ``masker``: the model ``settings`` load, where the caller has it loaded (the CLI, to check
    the options): with one worker it fills the lines, where the model was loaded twice."""
    check_files(job)
    in_kind = input_format(job.input, job.input_format)
    out_kind = format_of(job.output, job.output_format)
    columns = input_columns(job.input, in_kind, job.text_field) if out_kind == "csv" else None
    keys = RESULT_KEYS if out_kind == "jsonl" else frozenset()  # a CSV's: input_columns
    rows = checked_records(job.input, in_kind, job.text_field, keys)  # before any file is made
    files = (job.text_field, in_kind, out_kind)
    key = run_key(settings, options, files, FILL_ANSWER_SETTINGS)
    run = run_description(settings, options, files, FILL_ANSWER_SETTINGS)
    with claimed(job), started_workers(job, settings, masker) as pool:  # before a model loads
        state = start_state(job, key, earlier_key=run_key(settings, options), run=run)
        check_served(job, state, *on_a_worker(pool, served_here))
        check_weights(job, state, *on_a_worker(pool, weights_here))
        check_index(job, state, on_a_worker(pool, index_here))
        if on_start:
            on_start(Checkpoint(**asdict(state)))
        fill_rows(job, options, pool, rows, columns, state, on_progress)
    return state


def fill_rows(
    job: FillJob,
    options: PredictOptions,
    pool: ProcessPoolExecutor | None,
    rows: Iterator[Row],
    columns: list[str] | None,
    state: Checkpoint,
    on_progress: Callable[[int, int, int], None] | None,
) -> None:
    """The records after ``state``'s finished lines, filled and appended to its files."""
    for _ in range(state.lines_done):
        next(rows, None)
    kept: dict[int, dict[str, Any]] = {}  # the input fields of the lines in flight

    def records() -> Iterator[tuple[int, str | None, str]]:
        for line, text, problem, fields in rows:
            problem = problem or fields_problem(fields, job.text_field, columns)
            kept[line] = fields
            yield line, None if problem else text, problem

    header = None if columns is None else columns + [c for c in CSV_COLUMNS if c not in columns]
    if header is not None and state.output_bytes:
        check_header(job, header)
    with (
        writes_told(job.checkpoint),
        open_append(job.output, state.output_bytes) as output,
        open_append(job.error_file, state.error_bytes) as errors,
    ):
        writer = None
        if header is not None:
            writer = csv.DictWriter(output, header)
            if state.output_bytes == 0:  # a name's lone surrogate as a value's (a traceback)
                writer.writer.writerow(shown_header(header))
        for results in chunk_results(job, pool, options, records()):
            for line, status, payload in results:
                fields = kept.pop(line)
                if status == "ok":
                    write_result(output, writer, line, fields, payload)
                    state.filled += 1
                else:
                    errors.write(json_line({"line": line, **payload}) + "\n")
                    state.failed += 1
            commit_chunk(job.checkpoint, state, output, errors, len(results), on_progress)


@contextmanager
def started_workers(
    job: FillJob, settings: Settings, masker: FillMasker | None = None
) -> Iterator[ProcessPoolExecutor | None]:
    """The model loaded here (one worker: None; ``masker`` where it is loaded already), or a
    pool of ``job.workers`` processes that each load it with their share of the threads."""
    global _masker
    if job.workers == 1:
        if masker is not None:
            _masker = masker
        else:
            load_worker(settings)
        yield None
        return
    per_worker = settings.with_overrides(threads=threads_per_worker(settings.threads, job.workers))
    pool = ProcessPoolExecutor(
        job.workers, initializer=start_worker, initargs=(per_worker, os.getpid())
    )
    try:
        yield pool
    except BaseException as error:  # an interrupt, a refusal, a worker that died: stop now
        processes = list((pool._processes or {}).values())  # the pool's own (None if broken)
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.terminate()
        if isinstance(error, BrokenProcessPool):
            raise TiankongError(WORKER_DIED) from None
        raise
    finally:
        pool.shutdown(wait=True)


def on_a_worker(pool: ProcessPoolExecutor | None, ask: Callable[[], T]) -> T:
    """``ask``'s answer where the lines are filled: here, or on one worker of the pool (they
    share the settings, so the answer)."""
    return ask() if pool is None else pool.submit(ask).result()


def check_header(job: FillJob, header: list[str]) -> None:
    """A resumed CSV output goes on under the header its first part wrote: a JSONL input's
    columns were its first record's keys before they were every record's, and a run begun
    then would append rows of more columns than its header names."""
    with open_text(job.output, "Output file", newline="") as handle:
        written = next(csv.reader(handle), [])
    if written != shown_header(header):
        raise BadDataFileError(
            f"'{job.output.name}' was started with the columns {', '.join(written)}, and this "
            f"run writes {', '.join(header)}; pass --restart to start over."
        )


def served_here() -> tuple[str, str]:
    """The engine and precision served, as resolved."""
    return str(_masker.engine.name), str(_masker.engine.precision)


def weights_here() -> tuple[ResolvedModel, str]:
    """The model served and its weights' identity (``resume.model_weights``)."""
    return _masker.model, model_weights(_masker.model)


def index_here() -> str:
    """The build of the corpus index served (``resume.index_build``)."""
    return index_build(_masker)


def chunk_results(
    job: FillJob,
    pool: ProcessPoolExecutor | None,
    options: PredictOptions,
    records: Iterator[tuple[int, str | None, str]],
) -> Iterator[list[tuple[int, str, dict[str, Any]]]]:
    """Chunks in input order; with several workers at most 2 chunks per worker are in flight."""
    chunks = iter(lambda: take(records, job.chunk_size), [])
    if pool is None:
        for chunk in chunks:
            yield fill_chunk(chunk, options, job.batch_size)
        return
    pending: list[Future[list[tuple[int, str, dict[str, Any]]]]] = []
    for chunk in chunks:
        pending.append(pool.submit(fill_chunk, chunk, options, job.batch_size))
        if len(pending) >= 2 * job.workers:
            yield pending.pop(0).result()
    for future in pending:
        yield future.result()


def take(records: Iterator[Any], count: int) -> list[Any]:
    chunk = []
    for record in records:
        chunk.append(record)
        if len(chunk) == count:
            break
    return chunk


def write_result(
    output: TextIO,
    writer: csv.DictWriter[str] | None,
    line: int,
    fields: dict[str, Any],
    payload: dict[str, Any],
) -> None:
    """One output line: the input's own fields, then the line number and the result."""
    if writer is None:
        record = {**fields, "line": line, **payload}
        output.write(json_line(record) + "\n")
        return
    top_token, top_score = top_answer(payload)
    writer.writerow(
        {
            **{name: csv_cell(value) for name, value in fields.items()},
            "line": line,
            "text": payload["text"],
            "sequence": payload["sequence"],
            "top_token": top_token,
            "top_score": top_score,
            "result": json.dumps(payload, ensure_ascii=False),
        }
    )


def top_answer(payload: dict[str, Any]) -> tuple[str, float | str]:
    """The CSV's ``top_token`` and ``top_score``: the answer ``sequence`` shows, as the request
    chose it: the best option (candidates), the best whole fill (whole-word, [BLANK]), else the
    first mask's best token (it was always that token: in candidates mode not one of the
    options, in whole-word mode not the fill)."""
    for key, name in (("candidates", "option"), ("sequences", "fill")):
        if payload.get(key):
            return payload[key][0][name], payload[key][0]["score"]
    if payload["predictions"]:
        return payload["predictions"][0]["token"], payload["predictions"][0]["score"]
    return "", ""


def shown_header(header: list[str]) -> list[str]:
    """A CSV output's header as written: each name as ``csv_cell`` writes a string."""
    return [LONE_SURROGATE.sub("\ufffd", name) for name in header]


def csv_cell(value: Any) -> Any:
    """A JSONL value in a CSV cell: lists, objects, true, false and null as JSON, not as
    Python's repr (True, and null an empty cell like a missing key: a review); a string's
    lone surrogates, which no CSV escape can keep (a JSON escape in the input), as U+FFFD."""
    if isinstance(value, dict | list | bool) or value is None:
        return json_line(value)
    return LONE_SURROGATE.sub("\ufffd", value) if isinstance(value, str) else value


def refuse_empty(total: int, job: FillJob, verb: str) -> None:
    """An input with no record is refused before the model loads and before any file is made:
    it was "filled 0 lines, 0 bad" and then this error, leaving an empty output, an errors
    file and a lock behind (a review); with --ray, after Ray had started (a review)."""
    if total == 0:
        raise BadDataFileError(f"{job.input} holds no text, so no line was {verb}.")
