"""`tiankong fill`, `check FILE -o` and `eval` on files that aren't what they should be: not
UTF-8, with a byte-order mark, a folder, a sentence in place of a file name, an output that is
the input or can't be written, an output deleted while its checkpoint was kept. Each is exit 2
and one sentence, never a traceback, and never after the work."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_helpers import run_cli

# the CLI's processes find the tiny model's ONNX exports made (conftest.onnx_exports), so
# `--engine onnx` starts without torch; the engine is not the subject here
pytestmark = [pytest.mark.processes, pytest.mark.usefixtures("onnx_exports")]

LONG_SENTENCE = "画龙点睛" * 25  # 300 bytes: longer than a file name may be
# A model that doesn't exist is exit 3 when it is loaded: a run that answers exit 2 with this
# "model" has refused its files before the model and the work.
NO_MODEL = ["--model", "/nonexistent/tiankong-model"]


def model_flags(tiny_model_dir: Path) -> list[str]:
    return ["--model", str(tiny_model_dir), "--engine", "onnx", "--threads", "1"]


def refused(done: subprocess.CompletedProcess[str], sentence: str) -> None:
    assert done.returncode == 2, done.stderr
    assert sentence in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("command", "name", "data"),
    [
        ("fill", "gbk.txt", "画龙点[MASK]\n".encode("gbk")),
        ("fill", "gbk.csv", "text\n画龙点[MASK]\n".encode("gbk")),
        ("fill", "utf16.jsonl", '{"text": "画龙点[MASK]"}\n'.encode("utf-16")),
        ("check", "gbk.txt", "画龙点晴\n".encode("gbk")),
        ("eval", "gbk.jsonl", '{"text": "画龙点[MASK]", "answers": ["睛"]}\n'.encode("gbk")),
    ],
)
def test_an_input_that_is_not_utf8_is_exit_2(
    tiny_model_dir: Path, tmp_path: Path, command: str, name: str, data: bytes
) -> None:
    (tmp_path / name).write_bytes(data)
    output = [] if command == "eval" else ["-o", "out.jsonl"]
    done = run_cli(command, name, *output, *model_flags(tiny_model_dir), cwd=tmp_path)
    where = " (line 2)" if name == "gbk.csv" else ""  # its header is ASCII: UTF-8 too
    refused(done, f"'{name}'{where} can't be read as UTF-8 text")


@pytest.mark.parametrize("name", ["excel.csv", "bom.jsonl"])
def test_fill_reads_utf8_with_a_byte_order_mark(
    tiny_model_dir: Path, tmp_path: Path, name: str
) -> None:
    source = tmp_path / name
    if name.endswith(".csv"):
        source.write_text("text,id\n画龙点[MASK],7\n", encoding="utf-8-sig")
    else:
        source.write_text('{"text": "画龙点[MASK]", "id": 7}\n', encoding="utf-8-sig")
    out = tmp_path / "out.jsonl"
    done = run_cli("fill", str(source), "-o", str(out), *model_flags(tiny_model_dir))
    assert done.returncode == 0 and "filled 1 line, 0 bad" in done.stderr, done.stderr
    assert "(see " not in done.stderr  # no errors file to look at (it was named: a review)
    [row] = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert row["text"] == "画龙点[MASK]" and str(row["id"]) == "7"


@pytest.mark.parametrize("command", ["fill", "check"])
def test_an_output_deleted_after_its_checkpoint_is_refused(
    tiny_model_dir: Path, tmp_path: Path, command: str
) -> None:
    source = tmp_path / "in.txt"
    text = "画龙点[MASK]" if command == "fill" else "画龙点晴"
    source.write_text(f"{text}\n" * 12, encoding="utf-8")
    out = tmp_path / "out.jsonl"
    flags = [str(source), "-o", str(out), "--chunk-size", "4", *model_flags(tiny_model_dir)]
    assert run_cli(command, *flags).returncode == 0
    out.unlink()
    refused(run_cli(command, *flags), "shorter than its checkpoint")
    assert not out.exists()  # not re-made with NUL bytes where the lines were
    again = run_cli(command, *flags, "--restart")
    assert again.returncode == 0, again.stderr
    assert len(out.read_text(encoding="utf-8").splitlines()) == 12


@pytest.mark.parametrize("command", ["fill", "check"])
@pytest.mark.parametrize("output", ["same.jsonl", "./same.jsonl", "link.jsonl"])
def test_an_output_that_is_the_input_is_refused_even_with_restart(
    tmp_path: Path, command: str, output: str
) -> None:
    source = tmp_path / "same.jsonl"
    source.write_text('{"text": "画龙点[MASK]"}\n', encoding="utf-8")
    (tmp_path / "link.jsonl").symlink_to(source)
    for restart in ([], ["--restart"]):
        done = run_cli(command, "same.jsonl", "-o", output, *restart, *NO_MODEL, cwd=tmp_path)
        refused(done, "The output is the input")
    assert source.read_text(encoding="utf-8") == '{"text": "画龙点[MASK]"}\n'


@pytest.mark.parametrize(
    ("args", "sentence"),
    [
        (["fill", "in.txt", "-o", "a.txt/out.jsonl"], "'a.txt' is a file, not a folder"),
        (["fill", "in.txt", "-o", "folder", "--output-format", "jsonl"], "is a folder"),
        (
            ["fill", "in.txt", "-o", "folder", "--output-format", "jsonl", "--restart"],
            "The output 'folder' is a folder; name a file.",
        ),
        (["fill", "in.txt", "-o", "o.jsonl", "--errors", "a.txt/e.jsonl"], "The error file"),
        (["check", "in.txt", "-o", "a.txt/out.jsonl"], "'a.txt' is a file, not a folder"),
        # a folder with no name of its own: the error file beside it can't be named
        (["fill", "in.txt", "-o", "."], "The output '.' is a folder; name a file."),
        (["check", "in.txt", "-o", "/"], "The output '/' is a folder; name a file."),
        (["eval", "e.jsonl", "--json", "folder"], "The report 'folder' is a folder"),
        (["eval", "e.jsonl", "--json", "a.txt/r.json"], "'a.txt' is a file, not a folder"),
        (["eval", "e.jsonl", "--json", "e.jsonl"], "The report is the input"),
        (["eval", "--task", "check", "c.jsonl", "--json", "folder"], "The report 'folder'"),
        # these were refused after the model loaded (here: the missing model's error instead)
        (["fill", "in.txt", "-o", "x.txt"], "The output 'x.txt' would be TXT, by its name"),
        # TXT asked for was blamed on the name, and an unknown format offered txt (a review)
        (
            ["fill", "in.txt", "-o", "x.jsonl", "--output-format", "txt"],
            "--output-format: unknown value 'txt'; fill writes jsonl or csv",
        ),
        (
            ["fill", "in.txt", "-o", "x.jsonl", "--output-format", "xml"],
            "--output-format: unknown value 'xml'; fill writes jsonl or csv",
        ),
        (["fill", "in.txt", "-o", "x.jsonl", "--workers", "0"], "--workers, --chunk-size and"),
        (["check", "in.txt", "-o", "x.csv"], "tiankong check writes JSONL; name the output"),
    ],
)
def test_an_output_that_cant_be_written_is_refused_before_the_work(
    tmp_path: Path, args: list[str], sentence: str
) -> None:
    (tmp_path / "in.txt").write_text("画龙点[MASK]\n", encoding="utf-8")
    (tmp_path / "a.txt").write_text("x\n", encoding="utf-8")
    (tmp_path / "folder").mkdir()
    (tmp_path / "e.jsonl").write_text(
        '{"text": "画龙点[MASK]", "answers": ["睛"]}\n', encoding="utf-8"
    )
    (tmp_path / "c.jsonl").write_text(
        '{"text": "画龙点晴", "correct": "画龙点睛"}\n', encoding="utf-8"
    )
    refused(run_cli(*args, *NO_MODEL, cwd=tmp_path), sentence)
    assert list((tmp_path / "folder").iterdir()) == []


@pytest.mark.parametrize("task", ["fill", "check"])
def test_an_eval_report_in_a_new_folder_is_written(
    tiny_model_dir: Path, tmp_path: Path, task: str
) -> None:
    items = tmp_path / "items.jsonl"
    record = {"text": "画龙点晴", "correct": "画龙点睛"}
    if task == "fill":
        record = {"text": "画龙点[MASK]", "answers": ["睛"]}
    items.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    report = tmp_path / "reports" / "new" / "r.json"
    flags = ["--task", task, "--json", str(report), *model_flags(tiny_model_dir)]
    done = run_cli("eval", str(items), *flags)
    assert done.returncode == 0, done.stderr
    assert json.loads(report.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "args",
    [
        ["check", LONG_SENTENCE, "-o", "x.jsonl"],
        ["fill", LONG_SENTENCE, "-o", "x.jsonl"],
        ["eval", LONG_SENTENCE],
        ["eval", "--task", "check", LONG_SENTENCE],
    ],
)
def test_a_sentence_in_place_of_a_file_does_not_exist(tmp_path: Path, args: list[str]) -> None:
    refused(run_cli(*args, *NO_MODEL, cwd=tmp_path), "does not exist")


def test_a_device_in_place_of_a_file_is_named_so(tmp_path: Path) -> None:
    done = run_cli("eval", "/dev/null", *NO_MODEL, cwd=tmp_path)
    refused(done, "Evaluation file '/dev/null' is not a regular file.")


def test_index_build_names_its_own_flag(tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("画龙点睛\n", encoding="utf-8")
    (tmp_path / "a.txt").write_text("x\n", encoding="utf-8")
    done = run_cli("index", "build", "in.txt", "-o", "a.txt", cwd=tmp_path)
    refused(done, "--output 'a.txt' is a file; name a folder.")


def test_fill_of_a_folder_says_it_is_a_folder(tmp_path: Path) -> None:
    (tmp_path / "texts").mkdir()
    done = run_cli("fill", "texts", "-o", "out.jsonl", *NO_MODEL, cwd=tmp_path)
    refused(done, "Input file 'texts' is a folder, not a file.")


@pytest.mark.parametrize(
    ("command", "name", "data"),
    [("fill", "empty.txt", ""), ("fill", "header.csv", "id,text\n"), ("check", "empty.txt", "")],
)
def test_an_input_with_no_record_is_refused_before_any_file_is_made(
    tmp_path: Path, command: str, name: str, data: str
) -> None:
    """It said "filled 0 lines, 0 bad" and then this error, and left an empty output, an
    errors file and a lock (a review). Refused before the model: NO_MODEL never loads."""
    (tmp_path / name).write_text(data, encoding="utf-8")
    done = run_cli(command, name, "-o", "out.jsonl", *NO_MODEL, cwd=tmp_path)
    verb = "filled" if command == "fill" else "checked"
    refused(done, f"{name} holds no text, so no line was {verb}.")
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_fill_of_stdin_says_it_reads_a_file(tmp_path: Path) -> None:
    done = run_cli("fill", "-", "-o", "out.jsonl", *NO_MODEL, cwd=tmp_path, stdin="画龙点[MASK]\n")
    refused(done, "fill reads a file, not standard input ('-')")
    assert list(tmp_path.iterdir()) == []


def test_eval_field_of_the_wrong_type_names_the_line(tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text(
        '{"text": "画龙点[MASK]", "answers": ["睛"], "candidates": 5}\n', encoding="utf-8"
    )
    refused(run_cli("eval", str(items), *NO_MODEL), "items.jsonl line 1: 'candidates' must be")


def test_check_strips_crlf_from_stdin_lines(tiny_model_dir: Path) -> None:
    done = run_cli(
        "check", "--json", *model_flags(tiny_model_dir), stdin="画龙点晴\r\n走头无路\r\n"
    )
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(a["text"], a["corrected"]) for a in answers] == [
        ("画龙点晴", "画龙点睛"),
        ("走头无路", "走投无路"),  # two known misspellings: fixed with any model
    ]


@pytest.mark.parametrize(
    ("args", "sentence"),
    [
        (
            ["fill", "in.txt", "-o", "o.jsonl", "--ray-address", "auto"],
            "--ray-address applies only with --ray; add --ray, or leave it out.",
        ),
        (["serve", "--ray-address", "auto"], "--ray-address applies only with --ray"),
        (["serve", "--replicas", "3"], "--replicas applies only with --ray"),
        (
            ["serve", "--replicas", "1", "--max-replicas", "4"],
            "--replicas and --max-replicas apply only with --ray; add --ray, or leave them out",
        ),
    ],
)
def test_a_flag_only_ray_reads_is_refused_without_ray(
    tmp_path: Path, args: list[str], sentence: str
) -> None:
    """They were accepted and ignored: the run went on here, on one process."""
    (tmp_path / "in.txt").write_text("画龙点[MASK]\n", encoding="utf-8")
    refused(run_cli(*args, *NO_MODEL, cwd=tmp_path), sentence)
    assert not (tmp_path / "o.jsonl").exists()


def test_ray_address_in_the_environment_leaves_a_run_without_ray_alone(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """RAY_ADDRESS speaks for every Ray program of a shell, not for this run: a plain fill
    runs here and is not refused."""
    (tmp_path / "in.txt").write_text("画龙点[MASK]\n", encoding="utf-8")
    done = run_cli(
        "fill",
        "in.txt",
        "-o",
        "o.jsonl",
        *model_flags(tiny_model_dir),
        env={"RAY_ADDRESS": "auto"},
        cwd=tmp_path,
    )
    assert done.returncode == 0 and "filled 1 line, 0 bad" in done.stderr, done.stderr
    # a shell set up for `serve run` (the TIANKONG_* twins): a plain serve goes on to load its
    # model (exit 3 for one that isn't there), not refused for the replicas
    done = run_cli("serve", *NO_MODEL, env={"TIANKONG_REPLICAS": "3", "RAY_ADDRESS": "auto"})
    assert done.returncode == 3 and "applies only with --ray" not in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("args", "sentence"),
    [
        (
            ["check", "守株待免", "--chunk-size", "0", "--restart", "--field", "nope"],
            "--field, --chunk-size and --restart apply only with -o, which checks a file; "
            "add -o OUT.jsonl, or leave them out.",
        ),
        (["check", "in.txt", "-o", "o.jsonl", "--json"], "--json applies only without -o"),
        (["check", "in.txt", "-o", "o.jsonl", "--field", "x"], "--field applies only to JSONL"),
        (["fill", "in.txt", "-o", "o.jsonl", "--field", "x"], "--field applies only to JSONL"),
        (["fill", "in.txt", "-o", "o.jsonl", "--field", "x", "--ray"], "--field applies only"),
    ],
)
def test_a_flag_the_run_would_not_read_is_refused(
    tmp_path: Path, args: list[str], sentence: str
) -> None:
    """Each was accepted and ignored: check TEXT ran without the file flags, check -o wrote
    JSONL under --json, and a TXT input has no field to name."""
    (tmp_path / "in.txt").write_text("画龙点[MASK]\n", encoding="utf-8")
    refused(run_cli(*args, *NO_MODEL, cwd=tmp_path), sentence)
    assert not (tmp_path / "o.jsonl").exists()


def test_index_build_refuses_a_field_for_text_inputs(tmp_path: Path) -> None:
    """The field was ignored and written into the manifest as if it had been read."""
    (tmp_path / "notes.txt").write_text("画龙点睛\n", encoding="utf-8")
    done = run_cli("index", "build", "notes.txt", "-o", "idx", "--field", "foo", cwd=tmp_path)
    refused(done, "--field 'foo' names the text field of JSONL or CSV inputs")
    assert not (tmp_path / "idx").exists()


def test_sigterm_ends_fill_on_ray_as_ctrl_c_does(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Ray's own handler answered SIGTERM with a stack dump and exit code 15 (the plain run's
    handler was set after the --ray branch); it is the one message and 130 now."""
    import contextlib
    import signal
    import sys
    import time

    import psutil

    source = tmp_path / "in.txt"
    source.write_text("".join(f"第{i}句，画龙点[MASK]。\n" for i in range(300_000)), "utf-8")
    command = [sys.executable, "-m", "tiankong", "fill", str(source), "-o", str(tmp_path / "o")]
    command += ["--ray", *model_flags(tiny_model_dir)]
    run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while run.poll() is None and time.monotonic() < deadline:  # until the fill's actors run
            titles = []
            for child in psutil.Process(run.pid).children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    titles.append(" ".join(child.cmdline()))
            if any("FillActor" in title for title in titles):
                break
            time.sleep(0.5)
        assert run.poll() is None, run.stderr.read() if run.stderr else ""
        run.send_signal(signal.SIGTERM)
        _, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 130, stderr[-2000:]
    assert "interrupted (Ctrl-C or SIGTERM)" in stderr and "SIGTERM received" not in stderr


def test_fill_on_ray_that_fills_no_line_is_exit_2(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Every row an error row said "wrote 2 rows to the folder …" with exit 0, where fill
    without --ray is exit 2, and a script took the run for done (a review)."""
    (tmp_path / "bad.txt").write_text("没有\n也没有\n", encoding="utf-8")
    flags = ["--ray", "--workers", "1", *model_flags(tiny_model_dir)]
    done = run_cli("fill", "bad.txt", "-o", "out", *flags, cwd=tmp_path, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "No line of bad.txt could be filled (2 bad; each row's error is in its 'error'" in (
        done.stderr
    )
    assert "Traceback" not in done.stderr


def test_fill_on_ray_refuses_its_files_before_ray_starts(tmp_path: Path) -> None:
    """An output that is a file was refused only after the model loaded and a local Ray started
    (about 9 s); the docs say before. The model named does not exist: its load never ran."""
    (tmp_path / "in.txt").write_text("画龙点[MASK]\n", encoding="utf-8")
    (tmp_path / "afile").write_text("x\n", encoding="utf-8")
    done = run_cli("fill", "in.txt", "-o", "afile", "--ray", *NO_MODEL, cwd=tmp_path)
    refused(done, "--ray writes a folder, and 'afile' is a file; name a folder.")
    assert "Ray" not in done.stderr.replace("--ray", "")
    # an empty input is refused before Ray starts too (it started Ray, about 20 s, first), and
    # neither refusal leaves the output folder behind (the missing model's left it, empty)
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    done = run_cli("fill", "empty.txt", "-o", "out1", "--ray", *NO_MODEL, cwd=tmp_path)
    refused(done, "empty.txt holds no text, so no line was filled.")
    done = run_cli("fill", "in.txt", "-o", "out2", "--ray", *NO_MODEL, cwd=tmp_path)
    assert done.returncode == 3 and "Ray" not in done.stderr.replace("--ray", "")
    assert not (tmp_path / "out1").exists() and not (tmp_path / "out2").exists()
    # ... nor the parents it made (r/a/b were left, empty: a verifying review)
    done = run_cli("fill", "in.txt", "-o", "r/a/b/out", "--ray", *NO_MODEL, cwd=tmp_path)
    assert done.returncode == 3 and not (tmp_path / "r").exists()


@pytest.mark.parametrize("command", ["fill", "check"])
def test_a_file_run_that_answers_no_line_is_exit_2(
    command: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    """An empty input, or one whose every line is bad, said "filled 0 lines, 1 bad" with exit
    0, and a script took the run for done (a review's reproduction). A run that answers some
    lines keeps exit 0, its bad lines in the errors file; a finished run rerun does too."""
    empty, bad, mixed = tmp_path / "empty.txt", tmp_path / "bad.txt", tmp_path / "mixed.txt"
    empty.write_text("", encoding="utf-8")
    bad.write_text("字" * 10_001 + "[MASK]\n", encoding="utf-8")
    mixed.write_text("字" * 10_001 + "[MASK]\n画龙点[MASK]\n", encoding="utf-8")
    flags = model_flags(tiny_model_dir)
    refused(run_cli(command, str(empty), "-o", str(tmp_path / "e.jsonl"), *flags), "holds no text")
    done = run_cli(command, str(bad), "-o", str(tmp_path / "b.jsonl"), *flags)
    refused(done, f"No line of {bad} could be")
    assert "(1 bad; see" in done.stderr
    for _ in range(2):  # the second run resumes the finished one
        done = run_cli(command, str(mixed), "-o", str(tmp_path / "m.jsonl"), *flags)
        assert done.returncode == 0, done.stderr


def test_fill_on_an_output_another_run_writes_is_refused_before_the_model_loads(
    tmp_path: Path,
) -> None:
    """The CLI loaded the model to check the options before the library took the lock, so the
    refusal came after a model load (and the model loaded twice for one worker: a review)."""
    from filelock import FileLock

    source = tmp_path / "in.txt"
    source.write_text("画龙点[MASK]\n", encoding="utf-8")
    output = tmp_path / "out.jsonl"
    with FileLock(str(output) + ".lock"):  # the first run, running
        done = run_cli("fill", str(source), "-o", str(output), "--model", str(tmp_path / "none"))
    assert done.returncode == 2
    assert "'out.jsonl' is being written by another run now" in done.stderr
    assert not output.exists()
