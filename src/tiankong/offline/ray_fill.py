"""`tiankong fill --ray`: the same filling on Ray Data, spread over a cluster's actors. The input
file is read whole by one task (docs/SCALE.md: about ten times its size in memory), so it is the
filling that scales out, not the reading.

Ray Data reads the input (JSONL, CSV or TXT), ``map_batches`` runs a pool of actors that each
load the model once, and the driver writes the results, in input order, as JSONL shards of
``SHARD_ROWS`` rows into the OUTPUT folder (Ray's own ``write_json`` went through pandas, which
wrote a whole number beside a null as 1.0, and in no fixed order). Every input column is kept,
before the result columns (``OUTPUT_COLUMNS``): ``result`` is the whole result as a JSON string,
and a row that fails has its ``error`` as one string, ``code: message``, and no result.
Connects to the cluster in ``RAY_ADDRESS`` (or the given address), else starts a local one.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, Any

from tiankong.config import Settings, threads_per_worker
from tiankong.core.options import PredictOptions
from tiankong.core.text import LONE_SURROGATE
from tiankong.errors import BadDataFileError, BadOptionError
from tiankong.index.sources import json_value, not_json
from tiankong.offline.files import csv_records, json_line, open_text, require_input
from tiankong.offline.fill import (
    EMPTY_LINE,
    checked_records,
    fill_records,
    format_of,
    input_format,
    named_like_results,
    no_string_field,
)
from tiankong.offline.ray_cluster import init_ray
from tiankong.offline.resume import FillJob

# sequence / top answer as plain columns, the full result (masks, sequences, candidates) as JSON
OUTPUT_COLUMNS = ("text", "sequence", "error", "result")
SHARD_ROWS = 100_000  # output rows per JSONL shard
ROWS_PER_BLOCK = 4  # batches of rows per input block: a file read as one block ran on one actor


class FillActor:
    """One model per actor; ``__call__`` fills a batch of rows (a dict of columns)."""

    def __init__(self, settings: Settings, options: PredictOptions, field: str) -> None:
        from tiankong.service import FillMasker

        self.masker = FillMasker.load(settings=settings)
        self.options = options
        self.field = field

    def __call__(self, batch: Any) -> Any:
        """``batch``: a ``pyarrow.Table`` (as numpy or pandas, a whole number column with a null
        became floats, 1.0 and NaN); the input columns go through as they are. The texts are
        filled as ``tiankong fill`` fills a chunk (``fill_records``: length-sorted engine
        batches; each engine call filled one row before). A block whose rows all lack the
        field has no such column: each row is then a bad record (the job failed)."""
        import pyarrow as pa

        names = batch.column_names
        values = batch.column(self.field).to_pylist() if self.field in names else []
        values += [None] * (batch.num_rows - len(values))
        kept = {name: batch.column(name) for name in names if name not in OUTPUT_COLUMNS}
        records = [
            (row, None, EMPTY_LINE)
            if text == BLANK_LINE
            else (row, text if isinstance(text, str) else None, no_string_field(self.field))
            for row, text in enumerate(values)  # a number, a boolean, null or missing
        ]
        columns: dict[str, list[Any]] = {name: [] for name in OUTPUT_COLUMNS}
        for (_, text, _), (_, status, payload) in zip(
            records, fill_records(self.masker, records, self.options, len(records)), strict=True
        ):
            if status == "error":
                error = f"{payload['code']}: {payload['message']}"
                # a lone surrogate (bad_input) has no UTF-8 form: the text as a column holds it
                payload = {} if text is None else {"text": LONE_SURROGATE.sub("\ufffd", text)}
            else:
                error = None
            for name in OUTPUT_COLUMNS:
                columns[name].append(payload.get(name))
            columns["error"][-1] = error
            columns["result"][-1] = (
                json.dumps(payload, ensure_ascii=False) if error is None else None
            )
        results = {name: pa.array(column, pa.string()) for name, column in columns.items()}
        return pa.table({**kept, **results})


def run_ray_fill(
    job: FillJob,
    settings: Settings,
    options: PredictOptions,
    address: str | None = None,
    actors: int | None = None,
    checked: tuple[str, str] | None = None,
) -> Written:
    """Fill ``job.input`` into the folder ``job.output`` on Ray; returns the rows written and
    how many of them are error rows.
    ``checked``: ``checked_ray_input(job)``'s answer where the caller has it (the CLI, before
    the model loads), so the input is not read through twice."""
    import ray

    kind, field = checked or checked_ray_input(job)
    if not ray.is_initialized():
        init_ray(address)
    ray.data.DataContext.get_current().execution_options.preserve_order = True
    dataset = read_dataset(job.input, kind, field)
    output = Path(job.output)
    if not dataset.columns() and not dataset.count():  # an empty file, or a header alone
        return Written(0, 0)
    if field not in dataset.columns():
        raise BadDataFileError(f"Input '{job.input.name}' has no field '{field}'.")
    clashes = named_like_results(dataset.columns(), OUTPUT_COLUMNS, field)
    if clashes:
        raise BadDataFileError(
            f"The input column '{clashes[0]}' has the name of a result column "
            f"({', '.join(OUTPUT_COLUMNS)}); rename it."
        )
    workers = actors or job.workers
    dataset = dataset.repartition(target_num_rows_per_block=ROWS_PER_BLOCK * job.batch_size)
    threads = threads_per_worker(settings.threads, workers)
    # Logical CPUs: leave one for Ray's read and write tasks, or they wait behind the actors.
    cluster_cpus = float(ray.cluster_resources().get("CPU", 1.0))
    actor_cpus = max(0.1, min(float(threads or cluster_cpus), (cluster_cpus - 1.0) / workers))
    filled = dataset.map_batches(
        FillActor,
        fn_constructor_kwargs={
            "settings": settings.with_overrides(threads=threads),
            "options": options,
            "field": field,
        },
        batch_size=job.batch_size,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=workers),  # concurrency= is deprecated
        num_cpus=actor_cpus,
    )
    return write_shards(filled.iter_rows(), output)


@dataclass(frozen=True)
class Written:
    """A Ray fill's output: its rows, and of them the error rows (``error`` not null)."""

    rows: int
    bad: int


def write_shards(rows: Iterable[dict[str, Any]], output: Path) -> Written:
    """``rows`` as JSONL files of ``SHARD_ROWS`` rows each in ``output``, in order
    (``part-000000.jsonl``, ...), each value as Arrow holds it; the rows written."""
    written = bad = 0
    handle: IO[str] | None = None
    try:
        try:
            for row in rows:
                if written % SHARD_ROWS == 0:
                    if handle is not None:
                        handle.close()
                    name = f"part-{written // SHARD_ROWS:06d}.jsonl"
                    handle = (output / name).open("w", encoding="utf-8", newline="\n")
                assert handle is not None
                handle.write(json_line(row, default=str) + "\n")
                written += 1
                bad += row.get("error") is not None
        finally:
            if handle is not None:
                handle.close()
    except OSError as error:  # a full disk was four chained tracebacks (a review)
        raise BadDataFileError(
            f"Writing the output folder '{output}' failed ({error.strerror or error}) after "
            f"{written:,} rows, and its last shard may be cut short; --ray has no checkpoint: "
            "remove the folder and run again once it can write."
        ) from None
    return Written(written, bad)


NO_CHECKPOINT = (
    "--ray writes a new folder each run and has no checkpoint, so --restart and --chunk-size "
    "don't apply; leave them out, or run without --ray."
)


def check_ray_job(job: FillJob, typed: Collection[str] = ()) -> None:
    """Refuse, in one sentence, the options of ``tiankong fill`` that --ray can't honour: it
    writes a folder of JSONL shards with each row's error in it, and has no checkpoint.
    ``typed``: the CLI's flags as typed (--chunk-size 512, the default's value, was taken)."""
    default = FillJob(job.input, job.output)
    if job.workers < 1 or job.batch_size < 1:
        raise BadOptionError("--workers and --batch-size must be at least 1.")
    if job.errors is not None:
        raise BadOptionError(
            "--ray writes each bad row's error in its output row (the 'error' column) and no "
            "errors file; leave out --errors, or run without --ray."
        )
    if format_of(job.output, job.output_format) == "csv":
        raise BadOptionError(
            "--ray writes a folder of JSONL shards, not CSV; leave out --output-format csv and "
            "name the output folder without .csv, or run without --ray."
        )
    if not job.resume or job.chunk_size != default.chunk_size or "chunk_size" in typed:
        raise BadOptionError(NO_CHECKPOINT)


def read_dataset(path: Path, kind: str, field: str = "text") -> Any:
    """The input as a Ray dataset whose values are those ``tiankong fill`` reads without --ray:
    CSV values as strings ("01234", "NA" and "true" stay as written, where Arrow's type
    inference made them 1234, null and true), a TXT file's lines split at "\n" alone and
    without its byte-order mark. JSONL lines are parsed by ``json_value``, as without --ray
    (Ray's reader went through pandas: "01234" became 1234, "2024-01-02" a timestamp, and a lone
    surrogate was dropped), of the flat records ``check_ray_files`` let through; a blank line is a
    row that is a bad record, "empty line", as without --ray (Ray's reader dropped it)."""
    import ray

    where = str(path.resolve())
    if kind == "txt":
        return ray.data.read_binary_files(where).flat_map(txt_lines)
    if kind == "csv":
        import pyarrow as pa
        from pyarrow import csv as arrow_csv

        with open_text(path, "Input file", newline="") as handle:
            header = next(csv.reader(handle), [])
        return ray.data.read_csv(
            where,
            parse_options=arrow_csv.ParseOptions(newlines_in_values=True),
            convert_options=arrow_csv.ConvertOptions(
                column_types={name: pa.string() for name in header},
                strings_can_be_null=False,
            ),
        )
    return ray.data.read_binary_files(where).flat_map(partial(jsonl_records, field=field))


def jsonl_records(row: dict[str, Any], field: str) -> list[dict[str, Any]]:
    """A JSONL file's records as ``read_records`` parses them (``check_ray_files`` has refused
    what isn't a flat JSON object); a blank line is ``{field: BLANK_LINE}``."""
    lines = bytes(row["bytes"]).decode("utf-8-sig").split("\n")
    if lines[-1] == "":
        lines.pop()
    return [json_value(line) if line.strip() else {field: BLANK_LINE} for line in lines]


# a blank JSONL line's text, told apart from a record's own "" by ``Filler``: plain fill calls
# it a bad_record ("empty line"), and --ray called it empty_text (a review)
BLANK_LINE = "\x00\x00tiankong: a blank line\x00\x00"


def txt_lines(row: dict[str, Any]) -> list[dict[str, str]]:
    """A TXT file's lines as ``read_records`` reads them: split at "\n" (Ray's read_text split
    at "\r" and the other characters of str.splitlines too), the BOM dropped."""
    lines = bytes(row["bytes"]).decode("utf-8-sig").split("\n")
    if lines[-1] == "":
        lines.pop()
    return [{"text": line.rstrip("\r")} for line in lines]


def checked_ray_input(job: FillJob, typed: Collection[str] = ()) -> tuple[str, str]:
    """The job's flags, input and output checked as ``run_ray_fill`` needs them (the CLI calls
    it before the model loads and Ray starts); the input's format and its text's field."""
    check_ray_job(job, typed)
    require_input(job.input, "Input file")
    kind = input_format(job.input, job.input_format)
    field = "text" if kind == "txt" else job.text_field
    check_ray_files(job, kind, field)
    return kind, field


def check_ray_files(job: FillJob, kind: str, field: str = "text") -> None:
    """What Ray Data would stop on with a traceback, refused first in one sentence: an output
    that is a file or a folder holding files (a second run added a second shard: every row
    twice), input that isn't UTF-8, and a JSONL line that isn't JSON (on Ray a bad line stops
    the run; ``tiankong fill`` without --ray sends it to the errors file instead); and what
    ``tiankong fill`` refuses before it starts (``checked_records``: a CSV without the column,
    an empty one among them, a JSON array, a first record without the field). The output
    folder is made last, so one that can't be is refused before Ray starts, not after."""
    output = Path(job.output)
    if output.exists() and not output.is_dir():
        raise BadOptionError(f"--ray writes a folder, and '{output}' is a file; name a folder.")
    if output.is_dir() and any(output.iterdir()):
        raise BadOptionError(
            f"The output folder '{output}' is not empty; name a new or empty folder (--ray "
            "writes its shards there, and a second run's would sit beside the first's)."
        )
    if kind != "txt":
        checked_records(job.input, kind, field)  # reads the first records, and no further
    if kind == "csv":
        check_csv_rows(job.input)
    else:
        check_jsonl_lines(job, kind)
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise BadOptionError(
            f"The output folder '{output}' can't be made ({error.strerror or error}); name a "
            "folder that can be written."
        ) from None
    if not os.access(output, os.W_OK | os.X_OK):
        raise BadOptionError(f"The output folder '{output}' can't be written (permission denied).")


def check_jsonl_lines(job: FillJob, kind: str) -> None:
    """Every JSONL line a flat JSON object whose fields keep one type (Arrow gives a column
    one); a TXT file's lines only have to be UTF-8."""
    seen: dict[str, tuple[str, int]] = {}  # field -> (its JSON type, the line it was first seen)
    elsewhere = "(tiankong fill without --ray sends bad lines to an errors file)"
    with open_text(job.input, "Input file", newline="\n") as handle:  # lines as fill's
        for number, line in enumerate(handle, start=1):
            if kind != "jsonl" or not line.strip():
                continue
            where = f"Line {number} of '{job.input.name}'"
            try:
                record = json_value(line)
            except ValueError as error:
                raise BadDataFileError(
                    f"{where} is {not_json(error)}; on Ray every line must be JSON {elsewhere}."
                ) from None
            if not isinstance(record, dict):
                raise BadDataFileError(
                    f"{where} is not a JSON object; on Ray every line must be one {elsewhere}."
                )
            for field, value in record.items():  # Arrow gives a column one type
                if LONE_SURROGATE.search(field):  # four tracebacks from Arrow (a review)
                    raise BadDataFileError(
                        f"{where} has a field name with a lone surrogate (a \\u escape of half "
                        "a character), which Ray's tables can't hold; rename it, or run "
                        "without --ray."
                    )
                if named_like_results([field], OUTPUT_COLUMNS, job.text_field):
                    # the check on the dataset's columns sees the first block's alone, and a
                    # later block's result-named field was dropped without a word (a review)
                    raise BadDataFileError(
                        f"{where} has the field '{field}', the name of a result column "
                        f"({', '.join(OUTPUT_COLUMNS)}); rename it."
                    )
                kind_of = json_type(value)
                if kind_of in ("a list", "an object"):
                    raise BadDataFileError(
                        f"{where} has field '{field}' as {kind_of}, which Arrow would rewrite on "
                        "Ray (keys missing from one object added as null to all, numbers made "
                        "floats); on Ray a field must be a string, a number, a boolean or null "
                        "(tiankong fill without --ray keeps nested values as they are)."
                    )
                first = seen.setdefault(field, (kind_of, number))
                if first[0] == "null" and kind_of != "null":  # a null says nothing of the type
                    first = seen[field] = (kind_of, number)
                if kind_of != first[0] and kind_of != "null":
                    raise BadDataFileError(
                        f"{where} has field '{field}' as {kind_of}, line {first[1]} as "
                        f"{first[0]}; on Ray a field keeps one type {elsewhere}."
                    )


def check_csv_rows(path: Path) -> None:
    """A CSV row with more or fewer values than the header stops Arrow's reader (a traceback
    from Ray); ``tiankong fill`` without --ray sends it to the errors file. A header naming a
    column twice is refused too (by the reader, as everywhere: Arrow kept both, and the row could
    not be written as JSON)."""
    with open_text(path, "Input file", newline="") as handle:
        records = csv_records(handle, path)  # strict, as fill's: a quote never closed is refused
        header = list(records.fieldnames or [])  # one naming a column twice is refused here
        for record in records:
            extra = record.get(None) or []  # DictReader's restkey: values past the header's
            values = len(extra) + sum(
                1 for key, value in record.items() if key is not None and value is not None
            )
            if values != len(header):
                raise BadDataFileError(
                    f"Line {records.record_line} of '{path.name}' has {values} values and the "
                    f"header {len(header)} columns; on Ray every row must have the header's "
                    "columns (tiankong fill without --ray sends bad lines to an errors file)."
                )


def json_type(value: object) -> str:
    """JSON's name for the type of a parsed value (a number is one type, as Arrow widens it)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"
