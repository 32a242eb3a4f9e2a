"""`tiankong fill`: formats, bad lines, resume after interruption, workers, constant memory."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from tiankong import FillMasker, Settings
from tiankong.core.decoding import Constraints
from tiankong.core.options import PredictOptions
from tiankong.engines.fake import FakeEngine
from tiankong.errors import BadDataFileError, BadOptionError, ModelUnavailableError
from tiankong.offline.fill import (
    CSV_COLUMNS,
    Checkpoint,
    FillJob,
    count_records,
    fill_records,
    read_records,
    run_fill,
)

TEXTS = ["处处闻啼[MASK]。", "画龙点[MASK]", "没有空", "手机没电了，赶紧去[MASK][MASK]。"] * 25


def write_jsonl(path: Path, texts: list[str]) -> Path:
    lines = [json.dumps({"id": i, "text": t}, ensure_ascii=False) for i, t in enumerate(texts)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_jsonl_in_jsonl_out_with_bad_lines(settings: Settings, tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", TEXTS[:4])
    with source.open("a", encoding="utf-8") as handle:
        handle.write('not json\n{"other": 1}\n')
    job = FillJob(source, tmp_path / "out.jsonl", chunk_size=3)
    state = run_fill(job, settings, PredictOptions(top_k=3))
    assert (state.filled, state.failed, state.lines_done) == (3, 3, 6)
    rows = read_jsonl(job.output)
    assert [r["line"] for r in rows] == [1, 2, 4]
    assert rows[2]["text"] == TEXTS[3] and len(rows[2]["masks"]) == 2
    assert len(rows[0]["predictions"]) == 3
    errors = read_jsonl(job.error_file)
    assert [(e["line"], e["code"]) for e in errors] == [
        (3, "no_mask"),
        (5, "bad_record"),
        (6, "bad_record"),
    ]
    assert "no string field 'text'" in errors[2]["message"]


def test_csv_and_txt(settings: Settings, tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    with source.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "sentence"])
        writer.writerows([[1, "处处闻啼[MASK]。"], [2, "多行\n文本[MASK]"]])
    job = FillJob(source, tmp_path / "out.csv", text_field="sentence")
    run_fill(job, settings, PredictOptions())
    with job.output.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["line"] for r in rows] == ["2", "3"]  # the lines the records start on
    assert rows[0]["sequence"].startswith("处处闻啼") and float(rows[0]["top_score"]) > 0
    assert json.loads(rows[1]["result"])["text"] == "多行\n文本[MASK]"
    txt = tmp_path / "in.txt"
    txt.write_text("处处闻啼[MASK]。\n\n画龙点[MASK]\n", encoding="utf-8")
    state = run_fill(FillJob(txt, tmp_path / "txt.jsonl"), settings, PredictOptions())
    assert (state.filled, state.failed) == (2, 1)
    with pytest.raises(BadDataFileError, match="has no column 'text'"):
        run_fill(FillJob(source, tmp_path / "x.jsonl"), settings, PredictOptions())


def stop_after(chunks: int) -> Callable[[int, int, int], None]:
    """A progress callback that interrupts the run once ``chunks`` chunks are done."""
    calls: list[int] = []

    def stop(done: int, filled: int, failed: int) -> None:
        calls.append(done)
        if len(calls) == chunks:
            raise KeyboardInterrupt

    return stop


def test_resume_after_interruption_gives_the_same_output(
    settings: Settings, tmp_path: Path
) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", TEXTS)
    whole = FillJob(source, tmp_path / "whole.jsonl", chunk_size=16)
    run_fill(whole, settings, PredictOptions())

    job = FillJob(source, tmp_path / "split.jsonl", chunk_size=16)
    with pytest.raises(KeyboardInterrupt):
        run_fill(job, settings, PredictOptions(), stop_after(3))
    # a crash mid-write leaves a partial line after the checkpointed bytes
    with job.output.open("a", encoding="utf-8") as handle:
        handle.write('{"line": 999, "trunc')
    resumed_lines = []
    state = run_fill(job, settings, PredictOptions(), lambda d, f, x: resumed_lines.append(d))
    assert sum(resumed_lines) == len(TEXTS) - 48  # only the unfinished lines were filled
    assert state.lines_done == len(TEXTS)
    assert job.output.read_text(encoding="utf-8") == whole.output.read_text(encoding="utf-8")
    assert job.error_file.read_text(encoding="utf-8") == whole.error_file.read_text(
        encoding="utf-8"
    )
    again = run_fill(job, settings, PredictOptions())  # finished: nothing more to do
    assert again.lines_done == len(TEXTS) and again.filled == state.filled


def test_a_job_folder_moved_mid_run_resumes(settings: Settings, tmp_path: Path) -> None:
    """The checkpoint kept the errors file's absolute path, so a job folder moved (or mounted
    elsewhere) was refused, and the advice, --errors with the old path, made the old folder
    again (a review)."""
    first = tmp_path / "mv1"
    first.mkdir()
    source = write_jsonl(first / "in.jsonl", TEXTS)
    with pytest.raises(KeyboardInterrupt):
        run_fill(
            FillJob(source, first / "out.jsonl", chunk_size=16),
            settings,
            PredictOptions(),
            stop_after(2),
        )
    moved = first.rename(tmp_path / "mv2")
    job = FillJob(moved / "in.jsonl", moved / "out.jsonl", chunk_size=16)
    state = run_fill(job, settings, PredictOptions())
    assert state.lines_done == len(TEXTS) and not first.exists()
    whole = FillJob(moved / "in.jsonl", tmp_path / "whole.jsonl", chunk_size=16)
    run_fill(whole, settings, PredictOptions())
    assert job.output.read_text(encoding="utf-8") == whole.output.read_text(encoding="utf-8")
    # an errors file outside the output's folder stays where it was named: the output's folder
    # moved away from it, it resumed with it (it was refused, a verifying review)
    errors = tmp_path / "errs" / "e.jsonl"
    (tmp_path / "m3").mkdir()
    elsewhere = FillJob(
        moved / "in.jsonl", tmp_path / "m3" / "out.jsonl", errors=errors, chunk_size=16
    )
    with pytest.raises(KeyboardInterrupt):
        run_fill(elsewhere, settings, PredictOptions(), stop_after(2))
    deep = (tmp_path / "m3").rename(tmp_path / "deep")
    again = FillJob(moved / "in.jsonl", deep / "out.jsonl", errors=errors, chunk_size=16)
    assert run_fill(again, settings, PredictOptions()).lines_done == len(TEXTS)


def test_a_resumed_run_must_be_the_same_run(settings: Settings, tmp_path: Path) -> None:
    """Another top_k (or model) was appended to the first run's rows; now it is refused, and
    --restart (resume=False) starts over."""
    source = write_jsonl(tmp_path / "in.jsonl", TEXTS)
    job = FillJob(source, tmp_path / "out.jsonl", chunk_size=16)

    def interrupt(done: int, filled: int, failed: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_fill(job, settings, PredictOptions(top_k=1), interrupt)
    with pytest.raises(BadDataFileError, match="another model or other options") as refused:
        run_fill(job, settings, PredictOptions(top_k=5))
    assert "(--top-k 5 (the run's: 1)); run the same command" in refused.value.message  # named
    with pytest.raises(BadDataFileError, match=r"started on fp32 \(torch\).*int8 \(torch\)"):
        run_fill(job, replace(settings, precision="int8"), PredictOptions(top_k=1))
    with pytest.raises(BadDataFileError, match="pass --engine torch --precision fp32"):
        run_fill(job, replace(settings, engine="fake"), PredictOptions(top_k=1))
    resumed = run_fill(job, replace(settings, threads=2), PredictOptions(top_k=1))
    assert resumed.lines_done == len(TEXTS)  # threads are not the answers: the same run
    fresh = FillJob(source, job.output, chunk_size=16, resume=False)
    assert run_fill(fresh, settings, PredictOptions(top_k=5)).lines_done == len(TEXTS)


def interrupt_at_once(done: int, filled: int, failed: int) -> None:
    raise KeyboardInterrupt


def test_a_resumed_run_keeps_its_field_and_formats(settings: Settings, tmp_path: Path) -> None:
    """Another --field appended the second field's answers to the first's, another
    --output-format CSV rows after JSONL lines: the rerun is refused now."""
    source = tmp_path / "in.jsonl"
    lines = [json.dumps({"q1": t, "q2": "画龙点[MASK]"}, ensure_ascii=False) for t in TEXTS]
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    first = FillJob(source, tmp_path / "out.dat", text_field="q1", output_format="jsonl")
    with pytest.raises(KeyboardInterrupt):
        run_fill(replace(first, chunk_size=16), settings, PredictOptions(), interrupt_at_once)
    others = [
        replace(first, text_field="q2"),
        replace(first, output_format="csv"),
        replace(first, input_format="txt"),
    ]
    named = ["--field q2 (the run's: q1)", "--output-format csv (the run's: jsonl)"]
    named += ["--input-format txt (the run's: jsonl)"]
    for other, which in zip(others, named, strict=True):
        with pytest.raises(BadDataFileError, match="another model or other options") as refused:
            run_fill(other, settings, PredictOptions())
        assert f"({which})" in refused.value.message
    state = run_fill(replace(first, input_format="jsonl"), settings, PredictOptions())
    assert state.lines_done == len(TEXTS)  # jsonl is what auto read: the same run
    assert all(r["text"] == r["q1"] for r in read_jsonl(first.output))  # q1's answers only


def test_a_resume_is_refused_where_auto_serves_another_engine(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--precision auto chooses by each worker's threads (ONNX INT8 with two workers, OpenVINO
    bf16 with one): a resume with other --workers mixed the two engines in one output."""
    from tiankong.offline import fill

    source = write_jsonl(tmp_path / "in.jsonl", TEXTS)
    job = FillJob(source, tmp_path / "out.jsonl", chunk_size=16)
    with pytest.raises(KeyboardInterrupt):
        run_fill(job, settings, PredictOptions(), interrupt_at_once)
    saved = json.loads(job.checkpoint.read_text(encoding="utf-8"))
    assert (saved["engine"], saved["precision"]) == ("torch", "fp32")
    with monkeypatch.context() as patch:
        patch.setattr(fill, "served_here", lambda: ("openvino", "bf16"))
        with pytest.raises(BadDataFileError) as refused:
            run_fill(job, settings, PredictOptions())
    assert str(refused.value) == (
        "'out.jsonl' was started on fp32 (torch) and this run serves bf16 (openvino) "
        "(--engine and --precision as given, or auto's choice by the threads, which --workers "
        "and --threads change); "
        "pass --engine torch --precision fp32 to resume it, or pass --restart to start over."
    )
    # what the sentence says to pass: asked otherwise, resolved the same, so the same run
    state = run_fill(job, replace(settings, precision="fp32"), PredictOptions())
    assert state.lines_done == len(TEXTS)


def test_a_resume_is_refused_on_other_weights_of_the_same_model(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """The key names the model, not its weights: a folder retrained in place (or the bundled
    model, replaced in an upgrade) resumed the run and appended the new weights' answers."""
    import shutil

    from safetensors.torch import load_file, save_file

    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir, folder)
    settings = Settings(engine="torch", threads=1, model=str(folder))
    source = write_jsonl(tmp_path / "in.jsonl", TEXTS)
    job = FillJob(source, tmp_path / "out.jsonl", chunk_size=16)
    with pytest.raises(KeyboardInterrupt):
        run_fill(job, settings, PredictOptions(), interrupt_at_once)
    saved = json.loads(job.checkpoint.read_text(encoding="utf-8"))
    assert len(saved["weights"]) == 16
    weights = load_file(str(folder / "model.safetensors"))  # retrained in place
    save_file({name: tensor * 1.01 for name, tensor in weights.items()},
              str(folder / "model.safetensors"), metadata={"format": "pt"})  # fmt: skip
    with pytest.raises(BadDataFileError, match="was started on other weights of the model"):
        run_fill(job, settings, PredictOptions())
    job.checkpoint.write_text(json.dumps({**saved, "weights": ""}), encoding="utf-8")
    state = run_fill(job, settings, PredictOptions())  # from before: a model of one's own
    assert state.lines_done == len(TEXTS) and state.weights not in ("", saved["weights"])


def test_a_checkpoint_without_weights_is_refused_on_the_bundled_model(tmp_path: Path) -> None:
    from tiankong.core.models import ResolvedModel
    from tiankong.offline.resume import Checkpoint, check_weights

    job = FillJob(tmp_path / "in.jsonl", tmp_path / "out.jsonl")
    bundled = ResolvedModel("tiankong-mini-zh", tmp_path, "bundled")
    with pytest.raises(BadDataFileError, match="has been replaced since; pass --restart"):
        check_weights(job, Checkpoint("x", lines_done=3), bundled, "ab" * 8)
    fresh = Checkpoint("x")  # a new run records them
    check_weights(job, fresh, bundled, "ab" * 8)
    assert fresh.weights == "ab" * 8


def test_a_split_engine_resume_names_workers_and_threads(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tiankong.offline import fill

    source = write_jsonl(tmp_path / "in.jsonl", TEXTS)
    job = FillJob(source, tmp_path / "out.jsonl", chunk_size=16)
    monkeypatch.setattr(fill, "served_here", lambda: ("onnx+openvino", "int8+bf16"))
    with pytest.raises(KeyboardInterrupt):
        run_fill(job, settings, PredictOptions(), interrupt_at_once)
    monkeypatch.setattr(fill, "served_here", lambda: ("onnx", "int8"))
    with pytest.raises(BadDataFileError, match="with the first run's --workers and --threads"):
        run_fill(job, settings, PredictOptions())


def test_a_checkpoint_from_before_the_engine_was_recorded_resumes(
    settings: Settings, tmp_path: Path
) -> None:
    """A checkpoint keyed the earlier way (no field, formats or engine in it) still resumes
    with the same command, and is refused with another top_k."""
    from tiankong.offline.fill import run_key

    source = write_jsonl(tmp_path / "in.jsonl", TEXTS)
    job = FillJob(source, tmp_path / "out.jsonl", chunk_size=16)
    with pytest.raises(KeyboardInterrupt):
        run_fill(job, settings, PredictOptions(), interrupt_at_once)
    saved = json.loads(job.checkpoint.read_text(encoding="utf-8"))
    del saved["engine"], saved["precision"]
    saved["run_key"] = run_key(settings, PredictOptions())
    job.checkpoint.write_text(json.dumps(saved), encoding="utf-8")
    with pytest.raises(BadDataFileError, match="another model or other options"):
        run_fill(job, settings, PredictOptions(top_k=2))
    assert run_fill(job, settings, PredictOptions()).lines_done == len(TEXTS)
    assert json.loads(job.checkpoint.read_text(encoding="utf-8"))["engine"] == "torch"
    # the checkpoint moved to the new key: the same command again finds the run done
    assert run_fill(job, settings, PredictOptions()).lines_done == len(TEXTS)


def test_a_jsonl_file_without_the_field_is_refused_as_a_csv_is(
    settings: Settings, tmp_path: Path
) -> None:
    """`--field nope` on JSONL sent every line to the errors file and exited 0, where a CSV
    without the column is refused before any output is made."""
    source = tmp_path / "in.jsonl"
    source.write_text('not json\n{"q": "画龙点[MASK]"}\n{"q": "好[MASK]"}\n', encoding="utf-8")
    job = FillJob(source, tmp_path / "out.jsonl", text_field="nope")
    with pytest.raises(BadDataFileError, match=r"record of 'in.jsonl' \(line 2\) has no field"):
        run_fill(job, settings, PredictOptions())
    assert not job.output.exists() and not job.error_file.exists()
    state = run_fill(replace(job, text_field="q"), settings, PredictOptions())
    assert (state.filled, state.failed) == (2, 1)  # a later record without it is a bad line


def test_a_lone_carriage_return_stays_in_its_line(settings: Settings, tmp_path: Path) -> None:
    """read_records split a TXT line at a lone "\r" where count_records counts "\n": the
    progress total and every later line number were off."""
    source = tmp_path / "in.txt"
    source.write_bytes("画龙\r点[MASK]\r\n处处闻啼[MASK]\n".encode())
    assert count_records(source, "txt") == 2
    assert [(n, t) for n, t, _, _ in read_records(source, "txt", "text")] == [
        (1, "画龙\r点[MASK]"),
        (2, "处处闻啼[MASK]"),
    ]
    state = run_fill(FillJob(source, tmp_path / "out.jsonl"), settings, PredictOptions())
    assert state.lines_done == 2
    assert [r["line"] for r in read_jsonl(tmp_path / "out.jsonl")] == [1, 2]


def test_a_csv_without_the_column_leaves_no_output(settings: Settings, tmp_path: Path) -> None:
    """A header-only output was left behind, and the corrected run was then refused."""
    source = tmp_path / "in.csv"
    source.write_text("id,review\n1,画龙点[MASK]\n", encoding="utf-8")
    for output in (tmp_path / "out.csv", tmp_path / "out.jsonl"):
        with pytest.raises(BadDataFileError, match="has no column 'text'") as refused:
            run_fill(FillJob(source, output), settings, PredictOptions())
        assert str(refused.value).endswith("its columns are 'id', 'review'.")  # what it has
        assert not output.exists()
        state = run_fill(FillJob(source, output, text_field="review"), settings, PredictOptions())
        assert state.filled == 1
    semicolons = tmp_path / "semi.csv"  # one column, named by the whole header line
    semicolons.write_text("id;text\n1;画龙点[MASK]\n", encoding="utf-8")
    with pytest.raises(BadDataFileError, match=r"columns are 'id;text' \(is it separated by"):
        run_fill(FillJob(semicolons, tmp_path / "semi.jsonl"), settings, PredictOptions())


def test_file_formats_by_suffix_in_any_case(settings: Settings, tmp_path: Path) -> None:
    source = tmp_path / "IN.CSV"
    source.write_text("id,text\n1,画龙点[MASK]\n", encoding="utf-8")
    state = run_fill(FillJob(source, tmp_path / "OUT.JSONL"), settings, PredictOptions())
    assert (state.filled, state.failed) == (1, 0)  # the header was a bad TXT line before
    assert read_jsonl(tmp_path / "OUT.JSONL")[0]["text"] == "画龙点[MASK]"


def test_an_error_file_named_like_the_checkpoint_is_refused(
    settings: Settings, tmp_path: Path
) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", TEXTS[:2])
    output = tmp_path / "out.jsonl"
    checkpoint = FillJob(source, output).checkpoint
    with pytest.raises(BadOptionError, match="is the checkpoint"):
        run_fill(FillJob(source, output, errors=checkpoint), settings, PredictOptions())


def test_existing_output_without_checkpoint_is_not_clobbered(settings, tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", TEXTS[:2])
    output = tmp_path / "out.jsonl"
    output.write_text("precious\n", encoding="utf-8")
    with pytest.raises(BadDataFileError, match="already exists and has no checkpoint"):
        run_fill(FillJob(source, output), settings, PredictOptions())
    run_fill(FillJob(source, output, resume=False), settings, PredictOptions())
    assert "precious" not in output.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "content",
    [
        '[\n  {"text": "画龙点[MASK]"},\n  {"text": "守株待[MASK]"}\n]\n',
        '\n [{"text": "画龙点[MASK]"}]',
    ],
)
def test_a_json_array_is_refused_not_read_as_lines(
    settings: Settings, tmp_path: Path, content: str
) -> None:
    """A .json file holding an array was read as JSON Lines: its records went to the errors
    file, or one happened to parse, exit 0."""
    source = tmp_path / "arr.json"
    source.write_text(content, encoding="utf-8")
    job = FillJob(source, tmp_path / "out.jsonl")
    with pytest.raises(BadDataFileError, match=r"'arr\.json' holds a JSON array, not JSON Lines"):
        run_fill(job, settings, PredictOptions())
    assert not job.output.exists() and not job.error_file.exists()


def test_an_existing_errors_file_without_checkpoint_is_not_clobbered(
    settings: Settings, tmp_path: Path
) -> None:
    """--errors named any file, and a fresh run deleted it (notes.md was wiped)."""
    source = write_jsonl(tmp_path / "in.jsonl", TEXTS[:2])
    notes = tmp_path / "notes.md"
    notes.write_text("precious\n", encoding="utf-8")
    job = FillJob(source, tmp_path / "out.jsonl", errors=notes)
    with pytest.raises(BadDataFileError, match=r"'notes\.md' already exists and has no checkpoint"):
        run_fill(job, settings, PredictOptions())
    assert notes.read_text(encoding="utf-8") == "precious\n"
    assert not job.output.exists()
    empty = tmp_path / "empty.jsonl"  # an empty file loses nothing
    empty.touch()
    run_fill(FillJob(source, tmp_path / "two.jsonl", errors=empty), settings, PredictOptions())
    run_fill(FillJob(source, job.output, errors=notes, resume=False), settings, PredictOptions())
    assert "precious" not in notes.read_text(encoding="utf-8")


def test_whole_word_and_candidates_options(settings: Settings, tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", ["手机没电了，赶紧去[MASK][MASK]。"])
    job = FillJob(source, tmp_path / "ww.jsonl")
    run_fill(job, settings, PredictOptions(mode="whole_word", top_k=2))
    assert read_jsonl(job.output)[0]["sequences"]
    source = write_jsonl(tmp_path / "c.jsonl", ["手机没电了，赶紧去[MASK]。"])
    job = FillJob(source, tmp_path / "c_out.jsonl")
    run_fill(job, settings, PredictOptions(mode="candidates", candidates=("充电", "吃饭")))
    assert {c["option"] for c in read_jsonl(job.output)[0]["candidates"]} == {"充电", "吃饭"}


@pytest.mark.processes
def test_workers_give_the_same_output(settings: Settings, tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", TEXTS)
    one = FillJob(source, tmp_path / "one.jsonl", chunk_size=10)
    two = FillJob(source, tmp_path / "two.jsonl", chunk_size=10, workers=2)
    run_fill(one, settings, PredictOptions())
    run_fill(two, settings, PredictOptions())
    saved = json.loads(two.checkpoint.read_text(encoding="utf-8"))
    assert (saved["engine"], saved["precision"]) == ("torch", "fp32")  # a worker's, recorded
    first, second = read_jsonl(one.output), read_jsonl(two.output)
    assert [r["line"] for r in first] == [r["line"] for r in second]
    for a, b in zip(first, second, strict=True):
        assert [c["token_id"] for c in a["predictions"]] == [
            c["token_id"] for c in b["predictions"]
        ]


# What a run may grow by per line after its first tenth. RSS, peak and current: the former
# 200k-line run allowed 30 MB of peak over 180k lines, 170 bytes a line. Python's allocated
# blocks: a run that keeps any object per line (a result, the input's fields, a line number)
# grows by at least one a line; a flat run grows by under 0.1 a line (caches filling).
LEAK_BYTES_PER_LINE = 160
LEAK_BLOCKS_PER_LINE = 0.25


@pytest.mark.processes
def test_memory_stays_flat_on_a_large_file(tiny_model_dir: Path, tmp_path: Path) -> None:
    """40k generated lines through the fake engine in 200 chunks: from the 10% mark to the end
    (36k lines) neither RSS (peak and current) nor the Python objects alive grow with the
    input. Peak RSS alone misses any leak that fits under the peak of loading (hundreds of MB);
    current RSS and the object count (sys.getallocatedblocks, free to read) don't, so fewer
    lines prove more than the 200k lines of before, which cost five times the time (softmax
    and top-k over the vocabulary, per line)."""
    lines = 40_000
    script = f"""
import json, resource, sys
from pathlib import Path
import psutil
from tiankong import Settings
from tiankong.offline.fill import FillJob, run_fill
from tiankong.core.options import PredictOptions
source = Path(sys.argv[1])
with source.open("w", encoding="utf-8") as handle:
    for i in range(int(sys.argv[2])):
        record = {{"text": f"第{{i}}句话，处处闻啼[MASK]。"}}
        handle.write(json.dumps(record, ensure_ascii=False) + "\\n")
marks = []
def on_progress(done, filled, failed):
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rss = psutil.Process().memory_info().rss
    marks.append((peak_kib * 1024, rss, sys.getallocatedblocks()))
settings = Settings(model={str(tiny_model_dir)!r}, engine="fake", threads=1)
run_fill(FillJob(source, Path(sys.argv[3]), chunk_size=200, batch_size=64), settings,
         PredictOptions(top_k=1), on_progress)
early_late = [marks[len(marks) // 10], marks[-1]]
print(json.dumps({{"early_late": early_late, "chunks": len(marks)}}))
"""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            str(tmp_path / "big.jsonl"),
            str(lines),
            str(tmp_path / "big_out.jsonl"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["chunks"] == 200
    peak, rss, blocks = (late - early for early, late in zip(*figures["early_late"], strict=True))
    measured = lines - lines // 10
    assert peak < LEAK_BYTES_PER_LINE * measured, figures
    assert rss < LEAK_BYTES_PER_LINE * measured, figures
    assert blocks < LEAK_BLOCKS_PER_LINE * measured, figures


@pytest.mark.usefixtures("onnx_exports")  # --engine onnx starts without torch
@pytest.mark.processes
def test_fill_cli(tiny_model_dir: Path, tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", TEXTS[:8])
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tiankong",
            "fill",
            str(source),
            "-o",
            str(tmp_path / "o.jsonl"),
            "--model",
            str(tiny_model_dir),
            "--engine",
            "onnx",
            "--top-k",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "filled 6 lines, 2 bad" in done.stderr
    assert len(read_jsonl(tmp_path / "o.jsonl")) == 6
    missing = subprocess.run(
        [
            sys.executable,
            "-m",
            "tiankong",
            "fill",
            str(tmp_path / "nope.jsonl"),
            "-o",
            str(tmp_path / "x.jsonl"),
            "--model",
            str(tiny_model_dir),
            "--engine",
            "onnx",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 2 and "does not exist" in missing.stderr


def write_csv(path: Path, rows: list[list[object]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows(rows)
    return path


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


def test_csv_keeps_every_input_column_in_order(settings: Settings, tmp_path: Path) -> None:
    source = write_csv(
        tmp_path / "in.csv",
        [
            ["id", "sentence", "note"],
            ["a7", "处处闻啼[MASK]。", "唐诗"],
            ["b8", "没有空", "no mask"],
            ["c9", "画龙点[MASK]", ""],
            ["d0", "多一列[MASK]", "x", "extra"],
        ],
    )
    job = FillJob(source, tmp_path / "out.csv", text_field="sentence")
    state = run_fill(job, settings, PredictOptions())
    assert (state.filled, state.failed) == (2, 2)
    header, rows = read_csv(job.output)
    assert header == ["id", "sentence", "note", *CSV_COLUMNS]
    assert [(r["id"], r["sentence"], r["note"]) for r in rows] == [
        ("a7", "处处闻啼[MASK]。", "唐诗"),
        ("c9", "画龙点[MASK]", ""),
    ]
    assert rows[0]["text"] == "处处闻啼[MASK]。" and rows[0]["sequence"].startswith("处处闻啼")
    errors = read_jsonl(job.error_file)
    assert [(e["line"], e["code"]) for e in errors] == [(3, "no_mask"), (5, "bad_record")]
    assert "more values than the header's 3 columns" in errors[1]["message"]
    # the text column named "text" is the result's text column, not a second one
    same = write_csv(tmp_path / "same.csv", [["id", "text"], [1, "画龙点[MASK]"]])
    run_fill(FillJob(same, tmp_path / "same_out.csv"), settings, PredictOptions())
    header = read_csv(tmp_path / "same_out.csv")[0]
    assert header == ["id", "text", *(c for c in CSV_COLUMNS if c != "text")]


def test_a_jsonl_records_values_are_json_in_csv_cells(settings: Settings, tmp_path: Path) -> None:
    """Lists and objects were JSON, but true was Python's True and null an empty cell, as a
    missing key is (a review)."""
    source = tmp_path / "in.jsonl"
    record = {"text": "画龙点[MASK]", "meta": {"a": [1, "中"]}, "ok": True, "no": False, "n": None}
    source.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    job = FillJob(source, tmp_path / "out.csv")
    assert run_fill(job, settings, PredictOptions()).filled == 1
    [row] = read_csv(job.output)[1]
    assert (row["meta"], row["ok"], row["no"], row["n"]) == (
        '{"a": [1, "中"]}',
        "true",
        "false",
        "null",
    )


@pytest.mark.parametrize(
    ("options", "answer_key", "name"),
    [
        (PredictOptions(mode="candidates", candidates=("名列前茅", "好")), "candidates", "option"),
        (PredictOptions(mode="whole_word"), "sequences", "fill"),
        (PredictOptions(), "masks", "token"),
    ],
)
def test_the_csv_top_token_is_the_answer_the_sequence_shows(
    settings: Settings, tmp_path: Path, options: PredictOptions, answer_key: str, name: str
) -> None:
    """top_token was always the first mask's best token: not one of the options in candidates
    mode, not the fill in whole-word mode (赶紧去赶紧 beside top_token 没)."""
    source = write_csv(
        tmp_path / "in.csv",
        [["text"], ["成绩[MASK][MASK]。" if answer_key != "candidates" else "成绩[MASK]。"]],
    )
    job = FillJob(source, tmp_path / "out.csv")
    run_fill(job, settings, options)
    [row] = read_csv(job.output)[1]
    result = json.loads(row["result"])
    best = result[answer_key][0][0] if answer_key == "masks" else result[answer_key][0]
    assert (row["top_token"], float(row["top_score"])) == (best[name], best["score"])
    if answer_key != "masks":
        assert row["top_token"] in row["sequence"]


def test_an_input_column_named_like_a_result_column_is_refused(
    settings: Settings, tmp_path: Path
) -> None:
    source = write_csv(tmp_path / "in.csv", [["text", "sequence"], ["画龙点[MASK]", "1"]])
    with pytest.raises(BadDataFileError, match="input column 'sequence' has the name of a result"):
        run_fill(FillJob(source, tmp_path / "out.csv"), settings, PredictOptions())
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text(
        '{"id": 1, "text": "画龙点[MASK]"}\n{"id": 2, "text": "画龙点[MASK]", "masks": 0}\n',
        encoding="utf-8",
    )
    job = FillJob(jsonl, tmp_path / "out.jsonl")
    assert run_fill(job, settings, PredictOptions()).failed == 1
    [error] = read_jsonl(job.error_file)
    assert error["line"] == 2 and "field 'masks' has the name of a result field" in error["message"]


def test_jsonl_keeps_its_other_fields(settings: Settings, tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    records = [
        {"id": 3, "text": "处处闻啼[MASK]。", "meta": {"source": "唐诗"}},
        {"id": 1, "text": "画龙点[MASK]", "tags": ["成语"]},
    ]
    source.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8"
    )
    job = FillJob(source, tmp_path / "out.jsonl")
    run_fill(job, settings, PredictOptions(top_k=2))
    rows = read_jsonl(job.output)
    assert [{k: r[k] for k in record} for r, record in zip(rows, records, strict=True)] == records
    assert list(rows[0])[:4] == ["id", "text", "meta", "line"]  # input fields first
    assert [r["line"] for r in rows] == [1, 2] and len(rows[1]["predictions"]) == 2
    # to CSV: every record's keys are the input columns, in the order they first appear (the
    # first record's alone made the second a bad record: a review); objects and lists as JSON
    job = FillJob(source, tmp_path / "out.csv")
    state = run_fill(job, settings, PredictOptions())
    header, rows_csv = read_csv(job.output)
    assert header == ["id", "text", "meta", "tags", *CSV_COLUMNS[:1], *CSV_COLUMNS[2:]]
    assert json.loads(rows_csv[0]["meta"]) == {"source": "唐诗"} and rows_csv[0]["tags"] == ""
    assert json.loads(rows_csv[1]["tags"]) == ["成语"] and rows_csv[1]["meta"] == ""
    assert (state.filled, state.failed) == (2, 0)


def strict_json(line: str) -> object:
    """``json.loads`` as RFC 8259 has it: NaN and Infinity refused, as other JSON readers do."""

    def refuse(name: str) -> object:
        raise ValueError(f"{name} is not JSON")

    return json.loads(line, parse_constant=refuse)


def test_numbers_json_cannot_hold_are_bad_records_not_infinity_in_the_output(
    settings: Settings, tmp_path: Path
) -> None:
    # json.loads read 1e400 as infinity and took NaN/Infinity, and the record's fields were
    # written back as Infinity and NaN: an output line no strict JSON reader takes
    source = tmp_path / "in.jsonl"
    source.write_text(
        '{"text": "处处闻啼[MASK]。", "score": 1e400}\n'
        '{"text": "处处闻啼[MASK]。", "score": -1e400}\n'
        '{"text": "处处闻啼[MASK]。", "score": NaN}\n'
        '{"text": "处处闻啼[MASK]。", "score": -Infinity}\n'
        '{"text": "处处闻啼[MASK]。", "score": 1.5e300, "n": 123456789012345678901234567890}\n',
        encoding="utf-8",
    )
    job = FillJob(source, tmp_path / "out.jsonl")
    state = run_fill(job, settings, PredictOptions(top_k=2))
    assert (state.filled, state.failed) == (1, 4)
    rows = [strict_json(line) for line in job.output.read_text("utf-8").splitlines()]
    assert [(r["line"], r["score"], r["n"]) for r in rows] == [
        (5, 1.5e300, 123456789012345678901234567890)
    ]
    errors = [strict_json(line) for line in job.error_file.read_text("utf-8").splitlines()]
    assert [(e["line"], e["code"], e["message"]) for e in errors] == [
        (1, "bad_record", "not valid JSON (the number 1e400 is too large for a JSON number here)"),
        (2, "bad_record", "not valid JSON (the number -1e400 is too large for a JSON number here)"),
        (3, "bad_record", "not valid JSON (NaN is not JSON)"),
        (4, "bad_record", "not valid JSON (-Infinity is not JSON)"),
    ]


def test_count_records_counts_records_not_lines(tmp_path: Path) -> None:
    source = write_csv(
        tmp_path / "in.csv", [["id", "text"], [1, "多行\n文本[MASK]"], [2, "画龙点[MASK]"]]
    )
    assert count_records(source, "csv") == 2  # no header, the two-line field is one record
    assert count_records(source, "csv") == sum(1 for _ in read_records(source, "csv", "text"))
    txt = tmp_path / "in.txt"
    txt.write_text("a\n\nb", encoding="utf-8")  # the last line has no newline
    assert count_records(txt, "txt") == 3 == sum(1 for _ in read_records(txt, "txt", "text"))


def interrupted_csv_fill(settings: Settings, tmp_path: Path) -> FillJob:
    """10 CSV records filled 3 per chunk, stopped after 3 chunks: 9 done, 1 to go."""
    rows = [["id", "text"], *[[f"r{i}", f"第{i}句，画龙点[MASK]。"] for i in range(10)]]
    job = FillJob(write_csv(tmp_path / "in.csv", rows), tmp_path / "out.csv", chunk_size=3)
    chunks = []

    def interrupt(done: int, filled: int, failed: int) -> None:
        chunks.append(done)
        if len(chunks) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_fill(job, settings, PredictOptions(), interrupt)
    return job


def test_a_resumed_run_starts_from_its_finished_lines(settings: Settings, tmp_path: Path) -> None:
    job = interrupted_csv_fill(settings, tmp_path)
    starts: list[Checkpoint] = []
    state = run_fill(job, settings, PredictOptions(), on_start=starts.append)
    assert [(s.lines_done, s.filled, s.failed) for s in starts] == [(9, 9, 0)]
    assert (state.lines_done, state.filled) == (10, 10)
    assert [r["id"] for r in read_csv(job.output)[1]] == [f"r{i}" for i in range(10)]


@pytest.mark.usefixtures("onnx_exports")  # --engine onnx starts without torch
@pytest.mark.processes
def test_fill_cli_progress_on_csv_and_a_resumed_run(
    settings: Settings, tiny_model_dir: Path, tmp_path: Path
) -> None:
    job = interrupted_csv_fill(replace(settings, engine="onnx"), tmp_path)  # the same run
    done = subprocess.run(
        [
            *[sys.executable, "-m", "tiankong", "fill", str(job.input), "-o", str(job.output)],
            *["--model", str(tiny_model_dir), "--engine", "onnx", "--chunk-size", "3"],
            *["--threads", "1"],  # the first part's: --precision auto chose by them
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    assert "10/10 100%" in done.stderr  # the header is no record; the 9 done lines count
    assert "9 lines already done, 1 filled now, 0 bad now" in done.stderr
    assert [r["id"] for r in read_csv(job.output)[1]] == [f"r{i}" for i in range(10)]


@pytest.mark.processes
def test_sigterm_to_the_driver_ends_its_workers_too(tiny_model_dir: Path, tmp_path: Path) -> None:
    """kill PID (a job scheduler's stop) to `fill --workers 2` left both workers running,
    re-parented to init, holding the caller's pipes; now it ends as Ctrl-C does."""
    import signal

    import psutil

    driver = started_fill_with_workers(tiny_model_dir, tmp_path)
    workers = psutil.Process(driver.pid).children(recursive=True)
    assert workers
    driver.send_signal(signal.SIGTERM)
    assert driver.wait(timeout=60) == 130
    _, alive = psutil.wait_procs(workers, timeout=30)
    assert not alive, f"workers left running: {[p.pid for p in alive]}"


def started_fill_with_workers(tiny_model_dir: Path, tmp_path: Path) -> subprocess.Popen[str]:
    """`fill --workers 2` on a long file, once its first chunk is written."""
    import time

    source = tmp_path / "in.txt"
    source.write_text("".join(f"第{i}句，画龙点[MASK]。\n" for i in range(200_000)), "utf-8")
    output = tmp_path / "out.jsonl"
    command = [
        sys.executable, "-m", "tiankong", "fill", str(source), "-o", str(output),
        "--model", str(tiny_model_dir), "--engine", "torch", "--workers", "2",
        "--chunk-size", "256",
    ]  # fmt: skip
    driver = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    checkpoint = output.with_name(output.name + ".checkpoint.json")
    deadline = time.monotonic() + 120
    while not checkpoint.exists() and time.monotonic() < deadline and driver.poll() is None:
        time.sleep(0.2)
    assert checkpoint.exists(), "the run never got going"
    return driver


@pytest.mark.processes
def test_a_worker_that_dies_ends_the_run_in_one_sentence(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """kill -9 of one worker (as the OOM killer does) hung the run for good: the pool, broken,
    sent SIGTERM to the other, whose inherited handler's KeyboardInterrupt the pool's result
    sending caught and retried, and the driver waited on it (a review)."""
    import psutil

    driver = started_fill_with_workers(tiny_model_dir, tmp_path)
    first, *others = psutil.Process(driver.pid).children(recursive=True)
    first.kill()
    assert driver.wait(timeout=60) == 1
    assert driver.stderr is not None
    assert (
        driver.stderr.read()
        .strip()
        .endswith(
            "error: A --workers process ended before its work was done (killed, or out of memory); "
            "the lines the checkpoint covers are kept: run the same command again to resume (with "
            "fewer --workers if memory ran short)."
        )
    )
    _, alive = psutil.wait_procs(others, timeout=30)
    assert not alive, f"workers left running: {[p.pid for p in alive]}"


@pytest.mark.processes
def test_workers_end_when_their_driver_is_killed(tiny_model_dir: Path, tmp_path: Path) -> None:
    """kill -9 of the driver left both workers running, re-parented to init, each holding its
    model and blocked on a result no one would read; SIGTERM did not end them (a review)."""
    import psutil

    driver = started_fill_with_workers(tiny_model_dir, tmp_path)
    workers = psutil.Process(driver.pid).children(recursive=True)
    assert workers
    driver.kill()
    driver.wait(timeout=30)
    _, alive = psutil.wait_procs(workers, timeout=30)
    assert not alive, f"workers left running: {[p.pid for p in alive]}"


def test_a_csv_record_over_several_lines_is_named_by_its_first(
    settings: Settings, tmp_path: Path
) -> None:
    """A quoted value spanning lines: the bad record was reported at its last line (4), the
    good one after it at its own line (5) as before."""
    source = tmp_path / "ml.csv"
    source.write_text(
        'text,id\n"画龙点[MASK]",1\n"一行\n两行",2,extra\n好[MASK],3\n\n\n秋[MASK],4\n',
        encoding="utf-8",
    )
    job = FillJob(source, tmp_path / "out.jsonl")
    state = run_fill(job, settings, PredictOptions())
    assert (state.filled, state.failed) == (3, 1)
    assert [(e["line"], e["code"]) for e in read_jsonl(job.error_file)] == [(3, "bad_record")]
    # after blank lines, which the reader skips, a record is still named by its own line
    assert [row["line"] for row in read_jsonl(job.output)] == [2, 5, 8]


def test_ray_names_a_csv_record_over_several_lines_by_its_first(tmp_path: Path) -> None:
    """`fill --ray` refuses a row of the wrong width before Ray starts, and named it by its
    last line where `fill` names its first."""
    from tiankong.offline.ray_fill import check_csv_rows

    source = tmp_path / "ml.csv"
    source.write_text('text,id\n\n"一行\n两行",2,extra\n', encoding="utf-8")
    with pytest.raises(BadDataFileError, match=r"^Line 3 of 'ml\.csv' has 3 values"):
        check_csv_rows(source)


def test_a_lone_surrogate_in_another_field_is_written_not_a_crash(
    settings: Settings, tmp_path: Path
) -> None:
    """A JSONL field other than the text holding a lone surrogate ("\\ud800", which JSON allows
    and Python reads as one) stopped the run with a UnicodeEncodeError when its line was
    written. JSONL output keeps the value exactly, escaped as it came; a CSV cell can't hold it
    and shows U+FFFD."""
    source = tmp_path / "in.jsonl"
    source.write_text(
        '{"text": "处处闻啼[MASK]。", "note": "a\\udc00b"}\n'
        '{"text": "画龙点[MASK]", "note": "ok"}\n',
        encoding="utf-8",
    )
    job = FillJob(source, tmp_path / "out.jsonl")
    state = run_fill(job, settings, PredictOptions(top_k=1))
    assert (state.filled, state.failed) == (2, 0)
    rows = read_jsonl(job.output)
    assert [r["note"] for r in rows] == ["a\udc00b", "ok"]  # read back: the same value
    assert '"note": "a\\udc00b"' in job.output.read_text(encoding="utf-8")
    job = FillJob(source, tmp_path / "out.csv")
    assert run_fill(job, settings, PredictOptions(top_k=1)).filled == 2
    _, cells = read_csv(job.output)
    assert [row["note"] for row in cells] == ["a\ufffdb", "ok"]


def test_a_refused_resume_names_index_and_constraints_as_flags(
    settings: Settings, tmp_path: Path
) -> None:
    """The settings' --index and the options' index were one key (a resume on another index
    named --field and the formats), and constraints came as a JSON blob under --constraints."""
    source = write_jsonl(tmp_path / "in.jsonl", TEXTS)
    job = FillJob(source, tmp_path / "out.jsonl", chunk_size=16)
    with pytest.raises(KeyboardInterrupt):
        run_fill(job, settings, PredictOptions(), interrupt_at_once)
    # --index none where auto served no index (a model of one's own) is the same run: resumed
    # further, then an index that was not the run's is refused, naming both
    with pytest.raises(KeyboardInterrupt):
        run_fill(job, replace(settings, index="none"), PredictOptions(), stop_after(1))
    from tiankong.index import build_index

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("春眠不觉晓，处处闻啼鸟。\n", encoding="utf-8")
    build_index([corpus], tmp_path / "notes", progress=False)
    with pytest.raises(BadDataFileError) as refused:
        run_fill(job, replace(settings, index=str(tmp_path / "notes")), PredictOptions())
    assert "another corpus index (it was none, this run's is the index 'notes')" in (
        refused.value.message
    )
    allowed = PredictOptions(constraints=Constraints(allowed=("的",)))
    with pytest.raises(BadDataFileError) as refused:
        run_fill(job, settings, allowed)
    assert '(--allowed ["的"] (the run\'s: []))' in refused.value.message


def test_a_resume_takes_the_index_folder_however_its_path_is_written(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--index ./idx, idx/ or its absolute path were refused on a run begun with --index idx
    ("started with another model or other options": a review); a folder is one by its build."""
    from tiankong.index import build_index

    monkeypatch.chdir(tmp_path)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("春眠不觉晓，处处闻啼鸟。\n画龙点睛\n", encoding="utf-8")
    build_index([corpus], "idx", progress=False)
    source = write_jsonl(tmp_path / "in.jsonl", TEXTS)
    job = FillJob(source, tmp_path / "out.jsonl", chunk_size=16)
    with pytest.raises(KeyboardInterrupt):
        run_fill(job, replace(settings, index="idx"), PredictOptions(), interrupt_at_once)
    with pytest.raises(KeyboardInterrupt):
        run_fill(job, replace(settings, index="./idx/"), PredictOptions(), stop_after(1))
    with pytest.raises(KeyboardInterrupt):
        run_fill(
            job, replace(settings, index=str(tmp_path / "idx")), PredictOptions(), stop_after(1)
        )
    # a copy under another name is the same index: it was refused as "rebuilt since"
    shutil.copytree(tmp_path / "idx", tmp_path / "copy")
    done = run_fill(job, replace(settings, index="copy"), PredictOptions())
    assert done.lines_done == len(TEXTS)


def test_a_resume_is_refused_on_another_build_of_the_index(
    settings: Settings, tmp_path: Path
) -> None:
    """The index was keyed by its --index as typed: rebuilt in place from other text, it
    resumed, and the output mixed the two builds' answers (a review). The checkpoint records
    the build."""
    from tiankong.index import build_index

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("春眠不觉晓，处处闻啼鸟。\n画龙点睛\n", encoding="utf-8")
    folder = tmp_path / "idx"
    build_index([corpus], folder, progress=False)
    indexed = replace(settings, index=str(folder))
    source = write_jsonl(tmp_path / "in.jsonl", TEXTS)
    job = FillJob(source, tmp_path / "out.jsonl", chunk_size=16)
    with pytest.raises(KeyboardInterrupt):
        run_fill(job, indexed, PredictOptions(), interrupt_at_once)
    built = json.loads(job.checkpoint.read_text(encoding="utf-8"))["index"]
    name, digest = built.rsplit(":", 1)  # the index's name and a hash of its content
    assert name == folder.name and len(digest) == 16
    # a typo fixed: the same counts, where the key read a build time the manifest lacks, so
    # the rebuilt index was the same index (the session's own review)
    corpus.write_text("春眠不觉晓，处处闻啼鸟。\n画龙点晴\n", encoding="utf-8")
    shutil.rmtree(folder)
    build_index([corpus], folder, progress=False)
    with pytest.raises(BadDataFileError, match=r"another corpus index \(it was rebuilt since\)"):
        run_fill(job, indexed, PredictOptions())


def test_a_csv_output_resumes_under_the_header_it_was_started_with(
    settings: Settings, tmp_path: Path
) -> None:
    """Its columns were the first JSONL record's keys before they were every record's: a run
    begun then goes on only under the same header, or is refused, never appended with rows of
    more columns than the header names."""
    source = tmp_path / "in.jsonl"
    lines = [{"id": i, "text": text} for i, text in enumerate(TEXTS)]
    lines[40]["note"] = "后来才有的字段"
    source.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines), encoding="utf-8"
    )
    job = FillJob(source, tmp_path / "out.csv", chunk_size=16)
    with pytest.raises(KeyboardInterrupt):
        run_fill(job, settings, PredictOptions(), interrupt_at_once)
    assert read_csv(job.output)[0][:3] == ["id", "text", "note"]
    state = run_fill(job, settings, PredictOptions())  # the same header: it goes on
    _, rows = read_csv(job.output)
    assert state.lines_done == len(TEXTS) and rows[-1]["id"] == str(len(TEXTS) - 1)
    assert [r["note"] for r in rows if r["note"]] == ["后来才有的字段"]
    with pytest.raises(KeyboardInterrupt):  # a run begun as the earlier code began it
        run_fill(replace(job, resume=False), settings, PredictOptions(), interrupt_at_once)
    text = job.output.read_text(encoding="utf-8")
    job.output.write_text(text.replace("id,text,note,", "id,text,", 1), encoding="utf-8")
    saved = json.loads(job.checkpoint.read_text(encoding="utf-8"))
    saved["output_bytes"] = len(job.output.read_bytes())
    job.checkpoint.write_text(json.dumps(saved), encoding="utf-8")
    with pytest.raises(BadDataFileError, match="was started with the columns id, text, line"):
        run_fill(job, settings, PredictOptions())


def test_a_record_the_model_gives_no_numbers_for_is_an_error_record(tiny_masker) -> None:
    """A NaN row failed the library call holding it with ModelUnavailableError, so fill lost
    every record of its batch; now that record alone is an error record, and the library call
    that asked for it still raises."""
    vocab = tiny_masker.encoder.vocab
    engine = FakeEngine(len(vocab), nan_token_id=vocab["炸"])
    masker = FillMasker(tiny_masker.model, tiny_masker.encoder, engine, tiny_masker.settings)
    records = [(1, "好[MASK]。", ""), (2, "炸[MASK]。", ""), (3, "画龙点[MASK]", "")]
    outcomes = fill_records(masker, records, masker.options(3), batch_size=8)
    assert engine.calls == [3]  # one engine call for the three
    assert [(line, status) for line, status, _ in outcomes] == [(1, "ok"), (2, "error"), (3, "ok")]
    assert outcomes[1][2]["code"] == "model_unavailable"
    assert "scores are not numbers (NaN)" in outcomes[1][2]["message"]
    assert outcomes[0][2]["text"] == "好[MASK]。" and outcomes[2][2]["masks"]
    with pytest.raises(ModelUnavailableError, match="not numbers"):
        masker.predict_batch(["好[MASK]。", "炸[MASK]。"])
    assert masker.predict("好[MASK]。").masks  # the model still answers other texts


def test_a_field_name_with_a_lone_surrogate_is_written_to_a_csv(
    settings: Settings, tmp_path: Path
) -> None:
    """A JSONL key's lone surrogate ({"k\\ud800": 1}) was a UnicodeEncodeError traceback at the
    CSV header, leaving an empty output behind (a review); it is written as a value's is, and
    the run resumes under that header."""
    source = tmp_path / "s.jsonl"
    source.write_text(
        '{"text": "好[MASK]", "k\\ud800": 1}\n{"text": "画龙点[MASK]", "k\\ud800": 2}\n',
        encoding="utf-8",
    )
    job = FillJob(source, tmp_path / "s.csv", chunk_size=1)
    state = run_fill(job, settings, PredictOptions(top_k=1))
    assert state.filled == 2
    with (tmp_path / "s.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0][:2] == ["text", "k\ufffd"] and [row[1] for row in rows[1:]] == ["1", "2"]
    assert run_fill(job, settings, PredictOptions(top_k=1)).filled == 2  # resumes: all done


def test_two_keys_one_csv_column_would_hold_are_refused(settings: Settings, tmp_path: Path) -> None:
    """ "k\\ud800" and "k\\ufffd" were both written as the column "k\ufffd": two columns of one
    name, and a reader keeps one (a review)."""
    source = tmp_path / "s.jsonl"
    source.write_text(
        '{"text": "好[MASK]", "k\\ud800": 1}\n{"text": "画龙点[MASK]", "k\\ufffd": 2}\n',
        encoding="utf-8",
    )
    with pytest.raises(BadDataFileError) as refused:
        run_fill(FillJob(source, tmp_path / "s.csv"), settings, PredictOptions(top_k=1))
    assert refused.value.message == (
        "The input keys 'k\\ud800' and 'k\\ufffd' would both be the CSV column 'k\ufffd' (a "
        "lone surrogate is written as U+FFFD); rename one."
    )
    assert not (tmp_path / "s.csv").exists()


def test_a_record_that_gives_a_key_twice_is_a_bad_record(
    settings: Settings, tmp_path: Path
) -> None:
    """{"id": 1, "id": 2, ...} kept the last id without a word, where a CSV header that
    repeats a column is refused (a review)."""
    source = tmp_path / "dup.jsonl"
    source.write_text(
        '{"id": 1, "id": 2, "text": "好[MASK]"}\n{"id": 3, "text": "画龙点[MASK]"}\n',
        encoding="utf-8",
    )
    job = FillJob(source, tmp_path / "out.jsonl")
    state = run_fill(job, settings, PredictOptions(top_k=1))
    assert (state.filled, state.failed) == (1, 1)
    assert read_jsonl(job.error_file) == [
        {"line": 1, "code": "bad_record", "message": "not valid JSON (the key 'id' is given twice)"}
    ]
