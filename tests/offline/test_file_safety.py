"""The offline commands' files: inputs in another encoding or with a byte-order mark, paths that
aren't files, outputs that can't be written or are the input, and an output deleted or cut while
its checkpoint was kept. Each is one typed error (exit 2), raised before anything is deleted."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from tiankong import Settings
from tiankong.core.options import PredictOptions
from tiankong.errors import BadDataFileError, BadInputError, BadOptionError
from tiankong.offline.check_eval import read_check_items
from tiankong.offline.evaluate import read_items
from tiankong.offline.fill import FillJob, count_records, input_columns, read_records, run_fill

NOT_UTF8 = {
    "gbk.txt": "画龙点[MASK]\n".encode("gbk"),
    "gbk.csv": "text\n画龙点[MASK]\n".encode("gbk"),
    "utf16.jsonl": '{"text": "画龙点[MASK]"}\n'.encode("utf-16"),
}
LONG_NAME = "画龙点睛" * 25  # 300 bytes: a sentence typed where a file name goes
CHEAP = Settings(threads=1)  # for runs refused before any model loads


@pytest.mark.parametrize(
    ("name", "packed"), [("in.txt.xz", "xz"), ("in.jsonl.gz", "gzip"), ("in.csv.bz2", "bzip2")]
)
def test_a_compressed_input_is_named_so(tmp_path: Path, name: str, packed: str) -> None:
    """An xz file was told to 'save it as UTF-8'."""
    import bz2
    import gzip
    import lzma

    data = "画龙点[MASK]\n".encode()
    compress = {"xz": lzma.compress, "gzip": gzip.compress, "bzip2": bz2.compress}[packed]
    path = tmp_path / name
    path.write_bytes(compress(data))
    with pytest.raises(BadDataFileError, match=f"'{path}' is {packed}-compressed; this command"):
        count_records(path, "txt")


@pytest.mark.parametrize("output", ["out.jsonl.gz", "out.csv.XZ", "out.zip"])
def test_an_output_named_like_a_compressed_file_is_refused(tmp_path: Path, output: str) -> None:
    """out.jsonl.gz was written as plain JSONL under its .gz name, without a word."""
    source = tmp_path / "in.txt"
    source.write_text("画龙点[MASK]\n", encoding="utf-8")
    with pytest.raises(BadOptionError, match=f"The output '{output}' is named like a"):
        run_fill(FillJob(source, tmp_path / output), CHEAP, PredictOptions())
    errors = FillJob(source, tmp_path / "out.jsonl", errors=tmp_path / "e.jsonl.gz")
    with pytest.raises(BadOptionError, match=r"The error file 'e\.jsonl\.gz' is named like a gzip"):
        run_fill(errors, CHEAP, PredictOptions())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


@pytest.mark.parametrize("name", NOT_UTF8)
def test_an_input_that_is_not_utf8_is_one_sentence(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(NOT_UTF8[name])
    kind = name.rsplit(".", 1)[1]
    with pytest.raises(BadDataFileError, match="can't be read as UTF-8 text"):
        count_records(path, kind)
    with pytest.raises(BadDataFileError, match="can't be read as UTF-8 text"):
        list(read_records(path, kind, "text"))


def test_a_byte_order_mark_is_not_part_of_the_first_field(tmp_path: Path) -> None:
    table = tmp_path / "excel.csv"  # Excel's "CSV UTF-8"
    table.write_text("text,id\n画龙点[MASK],7\n", encoding="utf-8-sig")
    assert count_records(table, "csv") == 1
    assert input_columns(table, "csv", "text") == ["text", "id"]
    [(_, text, problem, fields)] = read_records(table, "csv", "text")
    assert (text, problem, fields["id"]) == ("画龙点[MASK]", "", "7")
    lines = tmp_path / "bom.jsonl"
    lines.write_text('{"text": "画龙点[MASK]"}\n', encoding="utf-8-sig")
    [(_, text, problem, _)] = read_records(lines, "jsonl", "text")
    assert (text, problem) == ("画龙点[MASK]", "")


def test_eval_files_are_utf8_with_or_without_a_byte_order_mark(tmp_path: Path) -> None:
    cloze = tmp_path / "cloze.jsonl"
    cloze.write_text('{"text": "画龙点[MASK]", "answers": ["睛"]}\n', encoding="utf-8-sig")
    assert [item.answers for item in read_items(cloze)] == [("睛",)]
    check = tmp_path / "check.jsonl"
    check.write_text('{"text": "画龙点晴", "correct": "画龙点睛"}\n', encoding="utf-8-sig")
    assert [item.correct for item in read_check_items(check)] == ["画龙点睛"]
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"text": "画龙点晴", "correct": "画龙点睛"}\n{"text": "", "correct": ""}\n')
    with pytest.raises(BadDataFileError, match=r"Line 2 of 'empty\.jsonl': \"text\" is empty"):
        read_check_items(empty)
    for path in (cloze, check):
        path.write_bytes(path.read_text(encoding="utf-8-sig").encode("gbk"))
    with pytest.raises(BadDataFileError, match=r"cloze\.jsonl' can't be read as UTF-8 text"):
        read_items(cloze)
    with pytest.raises(BadDataFileError, match=r"check\.jsonl' can't be read as UTF-8 text"):
        read_check_items(check)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"text": "画龙点[MASK]", "answers": ["睛"], "candidates": 5}, "'candidates' must be"),
        ({"text": "画龙点[MASK]", "answers": ["睛"], "candidates": [1]}, "'candidates' must be"),
        ({"content": 123, "answer": "一目十行"}, "ChID 'content' must be a string"),
        (
            {"content": "他#idiom#。", "answer": "一目十行", "candidates": {"a": 1}},
            "ChID 'candidates' must be",
        ),
        (  # one list of options per placeholder, but one list short
            {"content": "#idiom#，#idiom#", "groundTruth": ["甲", "乙"], "candidates": [["甲"]]},
            "ChID 'candidates' must be",
        ),
    ],
)
def test_eval_fields_of_the_wrong_type_name_the_line(
    tmp_path: Path, record: dict, message: str
) -> None:
    path = tmp_path / "items.jsonl"
    good = {"text": "处处闻啼[MASK]。", "answers": ["鸟"]}
    path.write_text(f"{json.dumps(good)}\n{json.dumps(record)}\n", encoding="utf-8")
    with pytest.raises(BadDataFileError, match=f"items.jsonl line 2: {message}"):
        read_items(path)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        # proofreading refuses these: the run stopped mid-way, after the model had loaded
        ({"text": "守" * 2_001, "correct": "守" * 2_001}, "The text has 2,001 characters"),
        ({"text": "守株待\ud800", "correct": "守株待兔"}, "is not valid Unicode"),
        ({"text": "守株待免", "correct": "守株待\udc00"}, "is not valid Unicode"),
        # a category that isn't a string was shown as None or 5
        ({"text": "守株待免", "correct": "守株待兔", "category": None}, "must be a string"),
        ({"text": "守株待免", "correct": "守株待兔", "category": 5}, "must be a string"),
        # two rows named overall in the table and the report (a review)
        ({"text": "守株待免", "correct": "守株待兔", "category": "overall"}, "total's name"),
        ({"text": "守株待免", "correct": "守株待兔", "category": "Overall"}, "total's name"),
        ({"text": "守株待免", "correct": "守株待兔", "category": ""}, "can't be a row"),
    ],
)
def test_check_eval_items_proofreading_would_refuse_name_their_line(
    tmp_path: Path, record: dict, message: str
) -> None:
    path = tmp_path / "items.jsonl"
    good = {"text": "画龙点晴", "correct": "画龙点睛"}
    # json.dumps escapes a lone surrogate, as a file of JSON lines holds one
    path.write_text(f"{json.dumps(good)}\n{json.dumps(record)}\n", encoding="utf-8")
    with pytest.raises(BadDataFileError, match=f"Line 2 of 'items.jsonl'.*{message}"):
        read_check_items(path, max_chars=2_000)


def test_check_eval_reads_a_text_holding_a_line_separator_as_one_item(tmp_path: Path) -> None:
    """str.splitlines cut the JSON line at U+2028, U+2029 or U+0085 inside the text, and the
    valid line was refused as not JSON."""
    path = tmp_path / "items.jsonl"
    records = [
        {"text": f"他说{mark}守株待免", "correct": f"他说{mark}守株待兔"}
        for mark in "\u2028\u2029\x85"
    ]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), "utf-8")
    assert [item.text for item in read_check_items(path)] == [r["text"] for r in records]


@pytest.mark.parametrize("reader", [read_items, read_check_items])
def test_eval_inputs_that_are_not_files(tmp_path: Path, reader) -> None:
    with pytest.raises(BadDataFileError, match="does not exist"):
        reader(Path(LONG_NAME))
    with pytest.raises(BadDataFileError, match="is a folder, not a file"):
        reader(tmp_path)


def test_fill_inputs_that_are_not_files(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with pytest.raises(BadDataFileError, match="does not exist"):
        run_fill(FillJob(Path(LONG_NAME), out), CHEAP, PredictOptions())
    with pytest.raises(BadDataFileError, match="is a folder, not a file"):
        run_fill(FillJob(tmp_path, out), CHEAP, PredictOptions())


def test_an_output_that_is_the_input_is_refused_before_it_is_deleted(tmp_path: Path) -> None:
    source = tmp_path / "same.jsonl"
    source.write_text('{"text": "画龙点[MASK]"}\n', encoding="utf-8")
    (tmp_path / "link.jsonl").symlink_to(source)
    for job in (
        FillJob(source, source, resume=False),
        FillJob(source, tmp_path / "sub" / ".." / "same.jsonl", resume=False),
        FillJob(source, tmp_path / "link.jsonl", resume=False),
        FillJob(source, tmp_path / "out.jsonl", errors=source, resume=False),
    ):
        with pytest.raises(BadInputError, match="is the input"):
            run_fill(job, CHEAP, PredictOptions())
    assert source.read_text(encoding="utf-8") == '{"text": "画龙点[MASK]"}\n'
    errors_on_output = FillJob(source, tmp_path / "o.jsonl", errors=tmp_path / "o.jsonl")
    with pytest.raises(BadInputError, match="The error file is the output"):
        run_fill(errors_on_output, CHEAP, PredictOptions())


def test_outputs_that_cant_be_written_are_refused_before_anything_is_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "in.txt"
    source.write_text("画龙点[MASK]\n", encoding="utf-8")
    a_file = tmp_path / "a.txt"
    a_file.write_text("x\n", encoding="utf-8")
    output = tmp_path / "out.jsonl"
    output.write_text("precious\n", encoding="utf-8")  # --restart would delete it
    cases = {
        "is a folder; name a file": FillJob(source, tmp_path, output_format="jsonl"),
        r"a\.txt' is a file, not a folder": FillJob(source, a_file / "out.jsonl"),
        r"The error file .* is a file, not a folder": FillJob(source, output, errors=a_file / "e"),
    }
    for message, job in cases.items():
        with pytest.raises(BadInputError, match=message):
            run_fill(replace(job, resume=False), CHEAP, PredictOptions())
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access  # root may write anywhere: a folder without permission, simulated
    monkeypatch.setattr(os, "access", lambda path, mode: path != locked and real_access(path, mode))
    with pytest.raises(BadInputError, match=r"locked/out\.jsonl' can't be written"):
        run_fill(FillJob(source, locked / "out.jsonl"), CHEAP, PredictOptions())
    with pytest.raises(BadInputError, match=r"locked/e\.jsonl' can't be written"):
        run_fill(FillJob(source, output, errors=locked / "e.jsonl"), CHEAP, PredictOptions())
    assert output.read_text(encoding="utf-8") == "precious\n"
    assert not list(locked.iterdir())


def test_an_output_name_the_system_refuses_is_one_sentence(tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_text("画龙点[MASK]\n", encoding="utf-8")
    with pytest.raises(BadInputError, match="can't be written"):
        run_fill(FillJob(source, tmp_path / f"{LONG_NAME}.jsonl"), CHEAP, PredictOptions())


def interrupted(settings: Settings, tmp_path: Path) -> FillJob:
    """A fill stopped after two of its four chunks, with one bad line in each."""
    source = tmp_path / "in.txt"
    source.write_text("画龙点[MASK]\n没有空\n" * 8, encoding="utf-8")
    job = FillJob(source, tmp_path / "out.jsonl", chunk_size=4)
    calls = []

    def stop(done: int, filled: int, failed: int) -> None:
        calls.append(done)
        if len(calls) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_fill(job, settings, PredictOptions(), stop)
    return job


@pytest.mark.parametrize("damage", ["delete output", "cut output", "delete errors"])
def test_an_output_shorter_than_its_checkpoint_is_refused_not_padded(
    settings: Settings, tmp_path: Path, damage: str
) -> None:
    job = interrupted(settings, tmp_path)
    if damage == "delete output":
        job.output.unlink()
    elif damage == "cut output":
        os.truncate(job.output, 10)
    else:
        job.error_file.unlink()
    with pytest.raises(BadDataFileError, match=r"shorter than its checkpoint .* --restart"):
        run_fill(job, settings, PredictOptions())
    if damage == "cut output":
        assert job.output.stat().st_size == 10  # left as it was, not padded with NUL bytes
    else:
        assert not (job.output if damage == "delete output" else job.error_file).exists()
    state = run_fill(replace(job, resume=False), settings, PredictOptions())
    assert (state.filled, state.failed) == (8, 8)
    assert b"\0" not in job.output.read_bytes()
    lines = job.output.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["line"] for line in lines[:2]] == [1, 3]  # nothing lost


def test_a_second_run_on_the_same_output_is_refused_while_the_first_runs(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs writing one output both appended from their own checkpoints (10,000 lines came
    out as 19,000, out of order, and a third run called it done): the output is locked, and the
    second run is refused before its model loads."""
    from filelock import FileLock

    from tiankong.offline import fill

    source = tmp_path / "in.txt"
    source.write_text("画龙点[MASK]\n" * 4, encoding="utf-8")
    job = FillJob(source, tmp_path / "out.jsonl")
    with FileLock(str(job.lock)), monkeypatch.context() as patched:  # the first run, running
        patched.setattr(fill, "load_worker", lambda _: pytest.fail("the model loaded first"))
        with pytest.raises(BadDataFileError, match=r"'out\.jsonl' is being written by another run"):
            run_fill(job, settings, PredictOptions())
        assert not job.output.exists() and not job.checkpoint.exists()
    assert run_fill(job, settings, PredictOptions()).filled == 4  # once it has ended


def test_a_restart_stopped_after_emptying_the_files_leaves_no_checkpoint(
    settings: Settings, tmp_path: Path
) -> None:
    """--restart emptied the output and kept the old checkpoint: stopped there, the next run
    was refused for options it never had, or for an output "shorter than its checkpoint"
    that tiankong itself had emptied (a review)."""
    from tiankong.offline.resume import checkpoint_temp, start_state

    job = interrupted(settings, tmp_path)
    assert job.checkpoint.is_file() and job.output.stat().st_size
    checkpoint_temp(job.checkpoint).write_text("{", encoding="utf-8")  # a save cut short
    start_state(replace(job, resume=False))  # what --restart does before its first chunk
    assert not job.checkpoint.exists() and not checkpoint_temp(job.checkpoint).exists()
    assert not job.output.exists() and not job.error_file.exists()
    state = run_fill(job, settings, PredictOptions())  # the plain command starts afresh
    assert (state.filled, state.failed) == (8, 8)


def test_two_runs_cannot_share_one_errors_file(settings: Settings, tmp_path: Path) -> None:
    """Two runs with their own outputs and one --errors each appended from their own
    checkpoint, and one run's error lines were lost (a review): the errors file is held too."""
    from filelock import FileLock

    source = tmp_path / "in.txt"
    source.write_text("画龙点[MASK]\n没有空\n", encoding="utf-8")
    shared = tmp_path / "shared.errors.jsonl"
    first = FillJob(source, tmp_path / "a.jsonl", errors=shared)
    second = FillJob(source, tmp_path / "b.jsonl", errors=shared)
    with FileLock(str(first.locks[1])):  # the first run, running
        with pytest.raises(BadDataFileError, match=r"'shared\.errors\.jsonl' is being written by"):
            run_fill(second, settings, PredictOptions())
        assert not second.output.exists()
    assert run_fill(second, settings, PredictOptions()).failed == 1
    # ... and a run naming another run's own OUTPUT.errors.jsonl (a verifying review)
    third = FillJob(source, tmp_path / "c.jsonl")
    fourth = FillJob(source, tmp_path / "d.jsonl", errors=third.error_file, resume=False)
    held = FileLock(str(third.locks[1]))
    written = r"'c\.jsonl\.errors\.jsonl' is being written"
    with held, pytest.raises(BadDataFileError, match=written):
        run_fill(fourth, settings, PredictOptions())


def test_a_resume_naming_another_errors_file_is_refused(settings: Settings, tmp_path: Path) -> None:
    """A resume skipped the check a fresh run makes and cut the named file to the first run's
    error length: 3,893 bytes of someone's file became 0."""
    job = interrupted(settings, tmp_path)
    precious = tmp_path / "precious.txt"
    precious.write_text("\n".join(map(str, range(1000))), encoding="utf-8")
    before = precious.read_bytes()
    with pytest.raises(BadDataFileError, match=r"started with its errors in '.*out\.jsonl\.errors"):
        run_fill(replace(job, errors=precious), settings, PredictOptions())
    assert precious.read_bytes() == before
    state = run_fill(job, settings, PredictOptions())  # the same command resumes
    assert (state.filled, state.failed) == (8, 8)


def test_an_edit_that_keeps_the_size_is_noticed_past_the_first_64_kib(
    settings: Settings, tmp_path: Path
) -> None:
    """Only the first 64 KiB were hashed: a same-length edit past them kept the stale answer."""
    source = tmp_path / "in.txt"
    lines = [f"第{i:05d}句，画龙点[MASK]。" for i in range(4000)]  # about 120 KB
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    job = FillJob(source, tmp_path / "out.jsonl")
    run_fill(job, settings, PredictOptions())
    lines[3500] = lines[3500].replace("画龙点", "守株待")  # the same number of bytes
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(BadDataFileError, match="was started from a different input"):
        run_fill(job, settings, PredictOptions())


def test_a_checkpoint_that_hashed_the_first_64_kib_still_resumes(
    settings: Settings, tmp_path: Path
) -> None:
    from tiankong.offline.resume import head_identity

    job = interrupted(settings, tmp_path)
    saved = json.loads(job.checkpoint.read_text(encoding="utf-8"))
    saved["input_id"] = head_identity(job.input)  # as the tiankong before wrote it
    del saved["errors"]
    job.checkpoint.write_text(json.dumps(saved), encoding="utf-8")
    state = run_fill(job, settings, PredictOptions())
    assert (state.filled, state.failed, state.lines_done) == (8, 8, 16)


def test_a_write_that_fails_mid_run_is_one_sentence(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk ended the run with two chained tracebacks and left the checkpoint's .tmp."""
    import errno

    from tiankong.offline import resume

    job = interrupted(settings, tmp_path)
    kept = job.checkpoint.read_bytes()

    def no_room(*_: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(resume.os, "replace", no_room)
    with pytest.raises(BadOptionError, match=r"Writing the output failed \(No space left on d"):
        run_fill(job, settings, PredictOptions())
    assert job.checkpoint.read_bytes() == kept  # the lines it covers are kept
    assert not resume.checkpoint_temp(job.checkpoint).exists()
    monkeypatch.undo()
    state = run_fill(job, settings, PredictOptions())  # the same command resumes
    assert (state.filled, state.failed) == (8, 8)


def test_an_input_whose_name_says_no_format_is_refused(settings: Settings, tmp_path: Path) -> None:
    """A .ndjson, .tsv or .data input was read as TXT: each JSON line filled as text, exit 0."""
    record = '{"id": 1, "text": "画龙点[MASK]"}\n'
    ndjson = tmp_path / "in.ndjson"
    ndjson.write_text(record, encoding="utf-8")
    state = run_fill(FillJob(ndjson, tmp_path / "a.jsonl"), settings, PredictOptions())
    row = json.loads((tmp_path / "a.jsonl").read_text(encoding="utf-8"))
    assert state.filled == 1 and row["id"] == 1 and row["text"] == "画龙点[MASK]"  # JSON lines
    tsv = tmp_path / "in.tsv"
    tsv.write_text("id\ttext\n1\t画龙点[MASK]\n", encoding="utf-8")
    with pytest.raises(BadOptionError, match=r"^The input 'in\.tsv' is not named \.txt, \.jsonl"):
        run_fill(FillJob(tsv, tmp_path / "b.jsonl"), settings, PredictOptions())
    assert not (tmp_path / "b.jsonl").exists()
    told = FillJob(tsv, tmp_path / "c.jsonl", input_format="txt")  # said: taken
    assert run_fill(told, settings, PredictOptions()).lines_done == 2


@pytest.mark.parametrize("output", ["out.jsonl", "out.csv"])
def test_a_field_named_like_a_result_is_refused_before_the_work(
    settings: Settings, tmp_path: Path, output: str
) -> None:
    """With JSONL output every line went to the errors file, exit 0, where a CSV output
    refused the same input up front."""
    source = tmp_path / "in.jsonl"
    source.write_text('{"line": 7, "text": "画龙点[MASK]"}\n' * 3, encoding="utf-8")
    with pytest.raises(BadDataFileError, match="'line'"):
        run_fill(FillJob(source, tmp_path / output), settings, PredictOptions())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def test_stdout_as_the_output_is_refused_by_name(tmp_path: Path) -> None:
    """-o - --output-format jsonl wrote a file named -, and -.checkpoint.json beside it."""
    source = tmp_path / "in.txt"
    source.write_text("画龙点[MASK]\n", encoding="utf-8")
    job = FillJob(source, Path("-"), output_format="jsonl")
    with pytest.raises(BadOptionError, match="writes its output to a file, with a checkpoint"):
        run_fill(job, CHEAP, PredictOptions())


def test_a_report_the_system_refuses_is_refused_before_the_work(tmp_path: Path) -> None:
    """``eval --json /proc/report.json`` passed the permission check (root may write
    anywhere by ``os.access``), ran the whole evaluation, then could not write its report. The
    path is now opened before the work, and a file the probe made is removed again."""
    from tiankong.offline.files import check_report

    source = tmp_path / "items.jsonl"
    source.write_text("{}\n", encoding="utf-8")
    with pytest.raises(BadOptionError, match="can't be written"):
        check_report(Path("/proc/tiankong-report.json"), source)
    report = tmp_path / "report.json"
    check_report(report, source)
    assert not report.exists()
    report.write_text("kept\n", encoding="utf-8")
    check_report(report, source)
    assert report.read_text(encoding="utf-8") == "kept\n"


def test_one_line_that_is_not_utf8_is_named_by_its_number(tmp_path: Path) -> None:
    """A GBK line at line 2,245 of a UTF-8 file was refused with no line to look at (a
    review); a file that is another encoding from its first line is named as before."""
    from tiankong.offline.files import open_text

    mixed = tmp_path / "mixed.jsonl"
    good = '{"text": "画龙点[MASK]"}\n' * 2244
    mixed.write_bytes(good.encode() + '{"text": "守株待[MASK]"}\n'.encode("gbk"))
    with pytest.raises(BadDataFileError) as refused, open_text(mixed, "Input file") as handle:
        handle.read()
    assert str(refused.value).startswith(
        f"Input file '{mixed}' (line 2245) can't be read as UTF-8 text (invalid continuation"
    )
    gbk = tmp_path / "gbk.txt"
    gbk.write_bytes("画龙点[MASK]\n".encode("gbk"))
    with pytest.raises(BadDataFileError) as whole, open_text(gbk, "Input file") as handle:
        handle.read()
    assert str(whole.value).startswith(f"Input file '{gbk}' can't be read as UTF-8 text")
