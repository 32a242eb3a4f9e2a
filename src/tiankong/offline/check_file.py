"""`tiankong check FILE -o OUT`: proofread every line of a file, resumable like `tiankong fill`.

The input is TXT (one text a line), JSONL or CSV (the text in ``--field``); the output is JSONL,
each line the input's own fields, then ``line`` and the check result. The checkpoint, the
output's truncation on resume and the error file are those of ``offline/resume.py``: after each
chunk the output is flushed and fsynced and the checkpoint replaced, so a run stopped at any
point continues where it stopped, never duplicating or losing a line; a rerun with another model,
method, ``--field`` or input format is refused (``run_key``), as fill's is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, replace
from typing import Any

from tiankong.config import Settings
from tiankong.errors import ModelUnavailableError, TiankongError
from tiankong.offline.files import json_line
from tiankong.offline.fill import (
    Row,
    check_files,
    checked_records,
    fields_problem,
    input_format,
    take,
)
from tiankong.offline.resume import (
    Checkpoint,
    FillJob,
    check_index,
    check_served,
    check_weights,
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
from tiankong.tasks.check import CheckMethod, CheckRequest, CheckResult, Proofreader

BATCH = 16  # texts per run of the proofreader (its two passes for all of them)
# an input field named like one of these would be overwritten in the output: refused, as in fill
CHECK_KEYS = frozenset(["line", *CheckResult.__dataclass_fields__])


def run_check_file(
    job: FillJob,
    checker: Proofreader,
    on_progress: Callable[[int, int, int], None] | None = None,
    on_start: Callable[[Checkpoint], None] | None = None,
) -> Checkpoint:
    """Check ``job.input`` into ``job.output``; the final checkpoint's counts."""
    job = replace(job, command="check")  # the job's messages are check's
    check_files(job)
    kind = input_format(job.input, job.input_format)
    rows = checked_records(job.input, kind, job.text_field, CHECK_KEYS)  # before any file
    settings, method = checker.masker.settings, checker.method
    # the text's field and the input's format in the key, as fill's: a rerun with another
    # --field resumed and appended its answers to the first field's
    key = run_key(settings, method, (job.text_field, kind, "jsonl"))
    run = run_description(settings, method, (job.text_field, kind, "jsonl"))
    with claimed(job):
        return check_rows(job, checker, rows, (key, run), on_progress, on_start)


def check_rows(
    job: FillJob,
    checker: Proofreader,
    rows: Iterator[Row],
    keyed: tuple[str, dict[str, Any]],  # run_key and run_description
    on_progress: Callable[[int, int, int], None] | None,
    on_start: Callable[[Checkpoint], None] | None,
) -> Checkpoint:
    """The records after the checkpoint's finished lines, checked and appended to its files."""
    settings, method = checker.masker.settings, checker.method
    key, run = keyed
    state = start_state(job, key, earlier_key=earlier_check_key(settings, method), run=run)
    model, engine = checker.masker.model, checker.masker.engine
    # as fill's: the first part on fp32 and the rest on bf16 (other --threads) mixed two
    # precisions' answers in one output (a review)
    check_served(job, state, str(engine.name), str(engine.precision), "--threads")
    check_weights(job, state, model, model_weights(model))
    check_index(job, state, index_build(checker.masker))
    if on_start:
        on_start(Checkpoint(**asdict(state)))
    for _ in range(state.lines_done):
        next(rows, None)
    with (
        writes_told(job.checkpoint),
        open_append(job.output, state.output_bytes) as output,
        open_append(job.error_file, state.error_bytes) as errors,
    ):
        while chunk := take(rows, job.chunk_size):
            checked = failed = 0
            for line, outcome, fields in check_chunk(checker, chunk, job.text_field):
                if isinstance(outcome, CheckResult):
                    record = {**fields, "line": line, **outcome.to_dict()}
                    output.write(json_line(record) + "\n")
                    checked += 1
                else:
                    errors.write(json_line({"line": line, **outcome}) + "\n")
                    failed += 1
            state.filled += checked
            state.failed += failed
            commit_chunk(job.checkpoint, state, output, errors, len(chunk), on_progress)
    return state


def earlier_check_key(settings: Settings, method: CheckMethod) -> str:
    """How a check run was keyed before the key held the text's field and the input's format:
    its method had no ``index_edge_marks`` then (added on, the nineteenth session) and no
    ``idiom_confusable_ratio`` (added in the twentieth, its rule then the other idioms'), nor
    ``index_unsuspected_context`` (the twenty-seventh), so only a method with the first on, the
    second no lower than ``idiom_model_ratio`` and the third off can be that run's; another
    would append different answers to its rows."""
    fields = asdict(method)
    if fields.pop("index_edge_marks") is not True:
        return ""
    if fields.pop("idiom_confusable_ratio") < fields["idiom_model_ratio"]:
        return ""
    if fields.pop("index_unsuspected_context") != 0:  # the twenty-seventh session's rule
        return ""
    return run_key(settings, fields)


def check_chunk(
    checker: Proofreader, chunk: list[tuple[int, str | None, str, dict[str, Any]]], field: str
) -> list[tuple[int, CheckResult | dict[str, str], dict[str, Any]]]:
    """Each record's result or error, in input order (``field``: the text's field)."""
    outcomes: dict[int, CheckResult | dict[str, str]] = {}
    ready: list[tuple[int, CheckRequest]] = []
    for line, text, problem, fields in chunk:
        problem = problem or fields_problem(fields, field, None, CHECK_KEYS)
        if text is None or problem:
            outcomes[line] = {"code": "bad_record", "message": problem}
            continue
        try:
            ready.append((line, checker.prepare(text)))
        except TiankongError as error:
            outcomes[line] = {"code": error.code, "message": error.message}
    for start in range(0, len(ready), BATCH):
        group = ready[start : start + BATCH]
        for (line, _), result in zip(group, checked_each(checker, group), strict=True):
            outcomes[line] = result
    return [(line, outcomes[line], fields) for line, _, _, fields in chunk]


def checked_each(
    checker: Proofreader, group: list[tuple[int, CheckRequest]]
) -> list[CheckResult | dict[str, str]]:
    """The group checked in one run; where the model gives no numbers for a text, each alone,
    and that one's error is its record (the whole file stopped at it, and a resume stopped
    there again: a verifying review)."""
    try:
        return list(checker.run([request for _, request in group]))
    except ModelUnavailableError:
        pass
    records: list[CheckResult | dict[str, str]] = []
    for _, request in group:
        try:
            records += checker.run([request])
        except ModelUnavailableError as error:
            records.append({"code": error.code, "message": error.message})
    return records
