"""What `tiankong predict` and `tiankong check` read from stdin: bytes that aren't UTF-8 make
one bad line, not the end of the run, whatever the locale's strictness; CRLF line ends and a
byte-order mark are removed."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from cli_helpers import CLI, run_cli

from tiankong.cli import INTERRUPTED

pytestmark = [pytest.mark.processes, pytest.mark.usefixtures("onnx_exports")]


def on_strict_stdin(command: str, model: Path, lines: bytes) -> subprocess.CompletedProcess[bytes]:
    """``tiankong COMMAND --json`` reading ``lines``, where a bad byte would end a strict
    UTF-8 stdin (``PYTHONIOENCODING=utf-8:strict``)."""
    flags = ["--json", "--model", str(model), "--engine", "onnx", "--threads", "1"]
    return run_cli(command, *flags, stdin=lines, env={"PYTHONIOENCODING": "utf-8:strict"})


def test_predict_answers_the_good_lines_around_a_bad_one(tiny_model_dir: Path) -> None:
    lines = (
        "\ufeff守株待[MASK]\r\n".encode()
        + b"\xe7\x94\xbb[MASK]\xff\r\n"
        + "画龙点[MASK]\n".encode()
    )
    done = on_strict_stdin("predict", tiny_model_dir, lines)
    assert done.returncode == 2, done.stderr.decode(errors="replace")
    assert b"Traceback" not in done.stderr
    first, bad, last = (json.loads(line) for line in done.stdout.decode().splitlines())
    assert first["sequence"].startswith("守株待") and "\r" not in first["sequence"]
    assert bad["error"]["code"] == "bad_input" and bad["text"] == "画[MASK]\ufffd"
    assert "bytes that aren't UTF-8" in bad["error"]["message"]  # was "a lone surrogate" alone
    assert bad["line"] == 2  # which of the lines it was
    assert last["sequence"].startswith("画龙点")


def test_check_answers_the_good_lines_around_a_bad_one(tiny_model_dir: Path) -> None:
    lines = "画龙点晴\r\n".encode() + b"\xe7\x94\xbb\xff\n" + "守株待免\n".encode()
    done = on_strict_stdin("check", tiny_model_dir, lines)
    assert done.returncode == 2, done.stderr.decode(errors="replace")
    assert b"Traceback" not in done.stderr
    first, bad, last = (json.loads(line) for line in done.stdout.decode().splitlines())
    assert first["corrected"] == "画龙点睛"
    assert bad["error"]["code"] == "bad_input" and bad["text"] == "画\ufffd"
    assert last["text"] == "守株待免"


@pytest.mark.parametrize("command", ["predict", "check"])
@pytest.mark.parametrize("lines", [b"", b"\n  \r\n\n"])
def test_a_stdin_without_text_is_an_error_not_silence(
    command: str, lines: bytes, tiny_model_dir: Path
) -> None:
    """It exited 0 having printed nothing, as if every line had been answered."""
    done = on_strict_stdin(command, tiny_model_dir, lines)
    assert done.returncode == 2 and done.stdout == b""
    assert done.stderr.decode().strip() == (
        "error: stdin held no text (it was empty or blank); give TEXT, or one sentence a line "
        "on stdin."
    )


@pytest.mark.parametrize("command", ["predict", "check"])
def test_ctrl_c_while_reading_stdin_says_interrupted(command: str, tiny_model_dir: Path) -> None:
    """Typer turned Ctrl-C into a silent exit 130: main's "interrupted" was never printed."""
    import os
    import signal

    from cli_helpers import CLI

    flags = ["--json", "--model", str(tiny_model_dir), "--engine", "onnx", "--threads", "1"]
    process = subprocess.Popen(
        [*CLI, command, *flags],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        # as from a terminal: a runner started as a background job (`cmd &` in a script) passes
        # SIGINT on ignored, and then the CLI rightly ignores it (the test below)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write("守株待[MASK]\n".encode())
    process.stdin.flush()
    assert json.loads(process.stdout.readline())  # answered: now it waits for the next line
    process.send_signal(signal.SIGINT)
    _, errors = process.communicate(timeout=60)
    assert process.returncode == 130
    assert errors.decode().splitlines() == [INTERRUPTED]


def test_a_ctrl_c_a_callback_swallowed_still_ends_the_run_as_interrupted(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C as stdin ended landed in a thread pool's weakref callback: Python printed
    "Exception ignored ... KeyboardInterrupt" and the run went on to exit 0."""
    import sys

    from tiankong import cli

    def swallowed() -> None:
        try:
            cli.on_interrupt(2, None)
        except KeyboardInterrupt as error:  # as Python does in a callback: reported, not raised
            hook_args = type("Unraisable", (), {"exc_value": error})()
            cli.quiet_interrupts(hook_args)  # type: ignore[arg-type]
        sys.exit(0)

    import signal

    monkeypatch.setattr(cli, "app", swallowed)
    monkeypatch.setattr(cli, "INTERRUPTS", [])
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)  # main sets its own
    previous = signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(SystemExit) as stop:
            cli.main()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert stop.value.code == 130
    assert capsys.readouterr().err.splitlines() == [INTERRUPTED]


def test_a_ctrl_c_the_parent_ignores_stays_ignored(tiny_model_dir: Path) -> None:
    """A job started with SIGINT ignored (`cmd &` in a script, `trap '' INT`) ended on a Ctrl-C
    meant for its parent once main installed its own handler unasked."""
    import os
    import signal

    from cli_helpers import CLI

    flags = ["--json", "--model", str(tiny_model_dir), "--engine", "onnx", "--threads", "1"]
    process = subprocess.Popen(
        [*CLI, "predict", *flags],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write("守株待[MASK]\n".encode())
    process.stdin.flush()
    assert json.loads(process.stdout.readline())
    process.send_signal(signal.SIGINT)  # ignored: the run goes on
    process.stdin.write("画龙点[MASK]\n".encode())
    process.stdin.close()
    assert json.loads(process.stdout.readline())["sequence"].startswith("画龙点")
    assert process.wait(timeout=60) == 0


@pytest.mark.processes
@pytest.mark.parametrize("flag", ["--candidates", "--allowed", "--exclude"])
def test_an_option_of_bytes_that_are_not_utf8_is_one_sentence(flag: str) -> None:
    """GBK bytes for 天 in an option were a traceback ending in TypeError (a review's
    reproduction); they are exit 2 with one sentence, as in the text."""
    done = subprocess.run(
        [*CLI, "predict", "天[MASK]", flag, b"\xcc\xec", "--engine", "fake"],
        capture_output=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=180,
    )
    assert done.returncode == 2, done.stderr
    message = done.stderr.decode("utf-8", "replace").strip()
    assert "not valid Unicode" in message and "Traceback" not in message
    assert len(message.splitlines()) == 1, message


@pytest.mark.parametrize(("command", "line", "field"), [("predict", "画龙点[MASK]", "sequence"),
                                                        ("check", "画龙点晴", "text")])  # fmt: skip
def test_a_dash_reads_stdin(command: str, line: str, field: str, tiny_model_dir: Path) -> None:
    """``-`` names stdin, as for cat: `check -` answered the dash ("no Chinese character")
    and `predict -` said it had no [MASK] (a review)."""
    flags = ["-", "--json", "--model", str(tiny_model_dir), "--engine", "onnx", "--threads", "1"]
    done = run_cli(command, *flags, stdin=f"{line}\n".encode())
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    answer = json.loads(done.stdout.decode().splitlines()[0])
    assert answer[field].startswith("画龙点")


def test_check_o_refuses_a_dash_in_one_sentence(tiny_model_dir: Path, tmp_path: Path) -> None:
    """It said "Input file '-' does not exist." (as fill did)."""
    out = tmp_path / "out.jsonl"
    done = run_cli("check", "-", "-o", str(out), "--model", str(tiny_model_dir), stdin=b"x\n")
    assert done.returncode == 2
    assert "check -o reads a file, not standard input ('-')" in done.stderr.decode()
    assert not out.exists()
