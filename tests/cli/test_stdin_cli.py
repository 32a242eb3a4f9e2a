"""What `tiankong predict` and `tiankong check` read from stdin: bytes that aren't UTF-8 make
one bad line, not the end of the run, whatever the locale's strictness; CRLF line ends and a
byte-order mark are removed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_helpers import run_cli

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
