"""`tiankong check` (a sentence, stdin lines, a resumable file) and `tiankong eval --task check`:
output shapes and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import run_cli

# the CLI's processes find the tiny model's ONNX exports made (conftest.onnx_exports), so
# `--engine onnx` starts without torch; the engine is not the subject here
pytestmark = [pytest.mark.processes, pytest.mark.usefixtures("onnx_exports")]


def model_flags(tiny_model_dir: Path) -> list[str]:
    return ["--model", str(tiny_model_dir), "--engine", "onnx", "--threads", "1"]


def test_check_json_for_a_sentence(tiny_model_dir: Path) -> None:
    done = run_cli("check", "画龙点晴", "--json", *model_flags(tiny_model_dir))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert set(data) == {"text", "corrected", "edits", "model", "latency_ms", "warnings", "checked"}
    assert data["checked"] == 4
    assert data["warnings"] == []
    assert data["corrected"] == "画龙点睛"
    [edit] = data["edits"]
    assert {k: edit[k] for k in ("start", "end", "original", "suggestion")} == {
        "start": 3,
        "end": 4,
        "original": "晴",
        "suggestion": "睛",
    }
    assert edit["memory"]["match"] == "画龙点睛" and isinstance(edit["alternatives"], list)


def test_check_stdin_lines_answers_each_and_exits_2_for_a_bad_one(tiny_model_dir: Path) -> None:
    lines = "画龙点晴\n\nhello\n" + "好" * 2001 + "\n"
    done = run_cli("check", "--json", *model_flags(tiny_model_dir), stdin=lines)
    assert done.returncode == 2, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a.get("corrected") for a in answers[:2]] == ["画龙点睛", "hello"]
    assert answers[2]["error"]["code"] == "text_too_long"
    assert "Traceback" not in done.stderr


def test_a_text_without_chinese_is_said_to_have_nothing_checked(tiny_model_dir: Path) -> None:
    """As predict warns: "no errors found" alone read as if the text had been checked."""
    done = run_cli("check", "hello world 123", "--json", *model_flags(tiny_model_dir))
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["edits"] == [] and "no Chinese (Han) character" in answer["warnings"][0]
    table = run_cli("check", "hello world 123", *model_flags(tiny_model_dir))
    assert table.stdout.startswith("note: The text has no Chinese (Han) character")
    chinese = run_cli("check", "画龙点晴", "--json", *model_flags(tiny_model_dir))
    assert json.loads(chinese.stdout)["warnings"] == []
    # a fill blank typed where the text is proofread: said so, not only "no errors found"
    blank = run_cli("check", "守株待【mask】，他说。", "--json", *model_flags(tiny_model_dir))
    assert "proofreading checks the characters as typed" in json.loads(blank.stdout)["warnings"][0]


def test_check_table_output(tiny_model_dir: Path) -> None:
    done = run_cli("check", "画龙点晴", *model_flags(tiny_model_dir))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "画龙点睛"
    assert "晴 → 睛" in done.stdout and "出处: 画龙点睛" in done.stdout


def test_check_file_is_resumable(tiny_model_dir: Path, tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_text("画龙点晴\n\n白日依山尽。\n走头无路\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    flags = [*model_flags(tiny_model_dir), "--chunk-size", "2"]
    done = run_cli("check", str(source), "-o", str(out), *flags)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [row["line"] for row in rows] == [1, 3, 4]
    assert rows[0]["corrected"] == "画龙点睛" and rows[2]["corrected"] == "走投无路"
    errors = (tmp_path / "out.jsonl.errors.jsonl").read_text(encoding="utf-8")
    assert json.loads(errors)["line"] == 2
    again = run_cli("check", str(source), "-o", str(out), *flags)
    assert again.returncode == 0, again.stderr  # as fill says it (it said "checked 0 lines now")
    assert "4 lines already done, 0 checked now, 0 bad now" in again.stderr
    assert f"(see {tmp_path / 'out.jsonl.errors.jsonl'}); output: {out}\n" in again.stderr
    assert len(out.read_text(encoding="utf-8").splitlines()) == 3


def test_check_file_refuses_a_csv_quote_that_is_never_closed(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """As index build refuses it: the rest of the file was checked as one text, exit 0."""
    source = tmp_path / "in.csv"
    source.write_text('text\n画龙点晴\n"守株待免\n白日依山尽\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    done = run_cli("check", str(source), "-o", str(out), *model_flags(tiny_model_dir))
    assert done.returncode == 2, done.stderr
    assert "Line 3 of " in done.stderr and "never closed" in done.stderr
    assert "Traceback" not in done.stderr and not out.exists()


def test_check_file_never_overwrites_an_input_field(tiny_model_dir: Path, tmp_path: Path) -> None:
    """A record with a field named like a result field (corrected, line, edits) is a bad record,
    as in fill: its value was replaced without a word before. Other fields are kept. In the
    first record it refuses the file (every record went to the errors file, exit 0)."""
    source = tmp_path / "in.jsonl"
    first = {"id": 0, "text": "画龙点晴", "edits": []}
    source.write_text(json.dumps(first, ensure_ascii=False) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    done = run_cli("check", str(source), "-o", str(out), *model_flags(tiny_model_dir))
    assert done.returncode == 2 and "(line 1): field 'edits' has the name" in done.stderr
    assert not out.exists()
    records = [
        {"id": 3, "text": "画龙点晴"},
        {"id": 1, "text": "画龙点晴", "corrected": "mine"},
        {"id": 2, "text": "画龙点晴", "line": 7},
    ]
    source.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    out = tmp_path / "out.jsonl"
    done = run_cli("check", str(source), "-o", str(out), *model_flags(tiny_model_dir))
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(row["id"], row["line"], row["corrected"]) for row in rows] == [(3, 1, "画龙点睛")]
    errors = (tmp_path / "out.jsonl.errors.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(e)["message"] for e in errors] == [
        "field 'corrected' has the name of a result field; rename it",
        "field 'line' has the name of a result field; rename it",
    ]


def test_eval_task_check(tiny_model_dir: Path, tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    rows = [
        {"text": "画龙点晴", "correct": "画龙点睛", "category": "idiom"},
        {"text": "白日依山尽", "correct": "白日依山尽", "category": "poem"},
    ]
    items.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    report = tmp_path / "report.json"
    done = run_cli(
        "eval", "--task", "check", str(items), "--json", str(report), *model_flags(tiny_model_dir)
    )
    assert done.returncode == 0, done.stderr
    overall = json.loads(report.read_text(encoding="utf-8"))["overall"]
    assert overall["sentences"] == 2 and overall["with_errors"] == 1
    assert overall["correction_recall"] == 1.0
    assert "cor F1" in done.stdout


def test_eval_task_check_refuses_a_bad_file(tiny_model_dir: Path, tmp_path: Path) -> None:
    items = tmp_path / "bad.jsonl"
    items.write_text('{"text": "画龙点晴", "correct": "画龙点"}\n', encoding="utf-8")
    done = run_cli("eval", "--task", "check", str(items), *model_flags(tiny_model_dir))
    assert done.returncode == 2 and "as many characters" in done.stderr


def test_check_a_file_without_output_says_how(tiny_model_dir: Path, tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_text("画龙点晴\n", encoding="utf-8")
    done = run_cli("check", str(source), *model_flags(tiny_model_dir))
    assert done.returncode == 2 and "-o" in done.stderr and "Traceback" not in done.stderr


def test_check_a_sentence_longer_than_a_file_name(tiny_model_dir: Path) -> None:
    """A sentence over 255 bytes is checked, not taken for a file name the OS refuses."""
    text = "我门看电影，" * 60
    done = run_cli("check", text, "--json", *model_flags(tiny_model_dir))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["text"] == text


def test_sigterm_ends_a_file_check_as_ctrl_c_does(tiny_model_dir: Path, tmp_path: Path) -> None:
    """As in fill: exit 130 with the checkpoint kept, so the run resumes (it was 143)."""
    import signal
    import subprocess
    import sys
    import time

    source = tmp_path / "in.txt"
    source.write_text("".join(f"第{i}句，画龙点晴。\n" for i in range(20_000)), "utf-8")
    output = tmp_path / "out.jsonl"
    command = [sys.executable, "-m", "tiankong", "check", str(source), "-o", str(output)]
    command += [*model_flags(tiny_model_dir), "--chunk-size", "16"]
    run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    checkpoint = output.with_name(output.name + ".checkpoint.json")
    deadline = time.monotonic() + 120
    while not checkpoint.exists() and time.monotonic() < deadline and run.poll() is None:
        time.sleep(0.2)
    assert checkpoint.exists(), "the run never got going"
    run.send_signal(signal.SIGTERM)
    assert run.wait(timeout=60) == 130
    again = run_cli("check", str(source), "-o", str(output), *model_flags(tiny_model_dir))
    assert again.returncode == 0, again.stderr
    lines = [json.loads(row)["line"] for row in output.read_text(encoding="utf-8").splitlines()]
    assert lines == list(range(1, 20_001))  # resumed where it stopped: none twice, none lost


def test_check_file_takes_input_format_where_the_name_says_none(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """A .tsv input is refused until --input-format says it, which check had no flag for: its
    advice was a dead end ("No such option")."""
    source = tmp_path / "notes.tsv"
    source.write_text("画龙点晴\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    refused = run_cli("check", str(source), "-o", str(out), *model_flags(tiny_model_dir))
    assert refused.returncode == 2 and "give --input-format txt" in refused.stderr
    flags = [str(source), "-o", str(out), "--input-format", "txt", *model_flags(tiny_model_dir)]
    done = run_cli("check", *flags)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text(encoding="utf-8"))["text"] == "画龙点晴"


def test_a_file_name_that_is_not_there_is_said_so(tiny_model_dir: Path, tmp_path: Path) -> None:
    """`check 我的作文.txt` with the file elsewhere proofread the name and said "no errors
    found" without a word of the file (a review); it is still checked, as a sentence may end
    so too (请查看README.md), and a warning says what happened."""
    done = run_cli("check", "--json", "我的作文.txt", *model_flags(tiny_model_dir), cwd=tmp_path)
    assert done.returncode == 0 and json.loads(done.stdout)["text"] == "我的作文.txt"
    assert done.stderr == (
        "warning: '我的作文.txt' looks like a file name, but no such file is here; it is "
        "checked as a sentence (to check a file: tiankong check FILE -o OUT.jsonl).\n"
    )
    sentence = run_cli("check", "--json", "请查看说明书", *model_flags(tiny_model_dir))
    assert sentence.returncode == 0 and "warning" not in sentence.stderr


def test_a_control_character_between_two_characters_hides_no_error(
    tiny_model_dir: Path,
) -> None:
    """画龙\\x00点晴 answered "no errors found" (a review), where 画龙\\u200b点晴 and 画龙 点晴 were
    fixed: a control character is nothing a reader sees, as a format character isn't."""
    gaps = ("\x00", "\x01", "\x7f")  # a NUL can't be an argument: stdin lines
    lines = "".join(f"画龙{gap}点晴\n" for gap in gaps)
    done = run_cli("check", "--json", *model_flags(tiny_model_dir), stdin=lines)
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line)["corrected"] for line in done.stdout.splitlines()]
    assert answers == [f"画龙{gap}点睛" for gap in gaps]


def test_a_folder_is_refused_not_checked_as_a_sentence(tiny_model_dir: Path) -> None:
    """check /tmp checked the sentence '/tmp' and exited 0 with a note (a review)."""
    done = run_cli("check", str(tiny_model_dir), *model_flags(tiny_model_dir))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"error: '{tiny_model_dir}' is a folder; check takes a sentence, or a file with -o: "
        "tiankong check FILE -o OUT.jsonl."
    )


def test_a_sentence_is_checked_though_a_folder_bears_its_name(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """After mkdir 画龙点晴, check 画龙点晴 was refused as a folder (a verifying review)."""
    (tmp_path / "画龙点晴").mkdir()
    done = run_cli("check", "画龙点晴", "--json", *model_flags(tiny_model_dir), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["corrected"] == "画龙点睛"
