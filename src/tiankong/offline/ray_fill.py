"""`tiankong fill --ray`: the same filling on Ray Data, for inputs too large for one machine.

Ray Data reads the input (JSONL, CSV or TXT), ``map_batches`` runs a pool of actors that each
load the model once, and the results are written as JSONL shards into the OUTPUT folder (Ray
writes one file per block). Rows that fail carry an ``error`` object instead of predictions.
Every input column is kept, before the result columns.
Connects to the cluster in ``RAY_ADDRESS`` (or the given address), else starts a local one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tiankong.config import Settings, threads_per_worker
from tiankong.core.options import PredictOptions
from tiankong.errors import BadDataFileError, BadOptionError, TiankongError
from tiankong.offline.files import open_text, require_input
from tiankong.offline.fill import FillJob, format_of, record_of

# sequence / top answer as plain columns, the full result (masks, sequences, candidates) as JSON
OUTPUT_COLUMNS = ("text", "sequence", "error", "result")


class FillActor:
    """One model per actor; ``__call__`` fills a batch of rows (a dict of columns)."""

    def __init__(self, settings: Settings, options: PredictOptions, field: str) -> None:
        from tiankong.service import FillMasker

        self.masker = FillMasker.load(settings=settings)
        self.options = options
        self.field = field

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        texts = [str(text) if text is not None else "" for text in batch[self.field]]
        kept = {name: values for name, values in batch.items() if name not in OUTPUT_COLUMNS}
        columns: dict[str, Any] = {**kept, **{name: [] for name in OUTPUT_COLUMNS}}
        for text in texts:
            try:
                payload = record_of(text, self.masker.predict(text, options=self.options))
                error = None
            except TiankongError as failure:
                payload, error = {"text": text}, f"{failure.code}: {failure.message}"
            for name in OUTPUT_COLUMNS:
                columns[name].append(payload.get(name))
            columns["error"][-1] = error
            columns["result"][-1] = (
                json.dumps(payload, ensure_ascii=False) if error is None else None
            )
        return columns


def run_ray_fill(
    job: FillJob,
    settings: Settings,
    options: PredictOptions,
    address: str | None = None,
    actors: int | None = None,
) -> int:
    """Fill ``job.input`` into the folder ``job.output`` on Ray; returns the rows written."""
    import ray

    require_input(job.input, "Input file")
    kind = format_of(job.input, job.input_format)
    check_ray_files(job, kind)
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    path = str(job.input.resolve())
    if kind == "txt":
        dataset = ray.data.read_text(path, drop_empty_lines=False)
        field = "text"
    elif kind == "csv":
        dataset = ray.data.read_csv(path)
        field = job.text_field
    else:
        dataset = ray.data.read_json(path, lines=True)
        field = job.text_field
    if field not in dataset.columns():
        raise BadDataFileError(f"Input '{job.input.name}' has no field '{field}'.")
    clashes = [c for c in dataset.columns() if c in OUTPUT_COLUMNS and not c == field == "text"]
    if clashes:
        raise BadDataFileError(
            f"The input column '{clashes[0]}' has the name of a result column "
            f"({', '.join(OUTPUT_COLUMNS)}); rename it."
        )
    workers = actors or job.workers
    threads = threads_per_worker(settings.threads, workers)
    # Logical CPUs: leave one for Ray's read and write tasks, or they wait behind the actors.
    cluster_cpus = float(ray.cluster_resources().get("CPU", 1.0))
    actor_cpus = max(0.1, min(float(threads), (cluster_cpus - 1.0) / workers))
    filled = dataset.map_batches(
        FillActor,
        fn_constructor_kwargs={
            "settings": settings.with_overrides(threads=threads),
            "options": options,
            "field": field,
        },
        batch_size=job.batch_size,
        concurrency=workers,
        num_cpus=actor_cpus,
    )
    output = Path(job.output)
    output.mkdir(parents=True, exist_ok=True)
    filled.write_json(str(output.resolve()), force_ascii=False)
    return count_rows(output)


def check_ray_files(job: FillJob, kind: str) -> None:
    """What Ray Data would stop on with a traceback, refused first in one sentence: an output
    that is a file or a folder holding files (a second run added a second shard: every row
    twice), input that isn't UTF-8, and a JSONL line that isn't JSON (on Ray a bad line stops
    the run; ``tiankong fill`` without --ray sends it to the errors file instead)."""
    output = Path(job.output)
    if output.exists() and not output.is_dir():
        raise BadOptionError(f"--ray writes a folder, and '{output}' is a file; name a folder.")
    if output.is_dir() and any(output.iterdir()):
        raise BadOptionError(
            f"The output folder '{output}' is not empty; name a new or empty folder (--ray "
            "writes its shards there, and a second run's would sit beside the first's)."
        )
    seen: dict[str, tuple[str, int]] = {}  # field -> (its JSON type, the line it was first seen)
    elsewhere = "(tiankong fill without --ray sends bad lines to an errors file)"
    with open_text(job.input, "Input file") as handle:
        for number, line in enumerate(handle, start=1):
            if kind != "jsonl" or not line.strip():
                continue
            where = f"Line {number} of '{job.input.name}'"
            try:
                record = json.loads(line)
            except ValueError:
                raise BadDataFileError(
                    f"{where} is not valid JSON; on Ray every line must be {elsewhere}."
                ) from None
            if not isinstance(record, dict):
                raise BadDataFileError(
                    f"{where} is not a JSON object; on Ray every line must be one {elsewhere}."
                )
            for field, value in record.items():  # Arrow gives a column one type
                kind_of = json_type(value)
                first = seen.setdefault(field, (kind_of, number))
                if first[0] == "null" and kind_of != "null":  # a null says nothing of the type
                    first = seen[field] = (kind_of, number)
                if kind_of != first[0] and kind_of != "null":
                    raise BadDataFileError(
                        f"{where} has field '{field}' as {kind_of}, line {first[1]} as "
                        f"{first[0]}; on Ray a field keeps one type {elsewhere}."
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


def count_rows(folder: Path) -> int:
    return sum(sum(1 for _ in path.open(encoding="utf-8")) for path in folder.glob("*.json*"))
