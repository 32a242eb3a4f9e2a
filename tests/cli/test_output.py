"""The CLI's tables: text in square brackets is printed as typed (rich reads ``[x]`` as markup),
and a long 出处 line is cut around its match, never before it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_helpers import CLI, besides_first_run_notes, run_cli

from tiankong.cli.predict import SOURCE_WIDTH, excerpt

LINE = (
    "潭不见，龙不现，亲到龙潭须活荐。莫学承虚接响人，守株待兔亡机变。"
    "知机变，盏子扑落地，楪子成七片。"
)


def test_a_long_source_line_is_cut_around_its_match() -> None:
    shown = excerpt(LINE, "守株待兔")
    assert "守株待兔" in shown and shown.startswith("…") and shown.endswith("…")
    assert len(shown) == SOURCE_WIDTH + 2
    assert shown.strip("…") in LINE


def test_a_source_line_is_cut_only_where_needed() -> None:
    assert excerpt("画龙点睛", "画龙点睛") == "画龙点睛"
    assert excerpt(LINE, None) == LINE  # nothing to centre on: the whole line
    assert excerpt(LINE, "不在这里") == LINE
    head = excerpt(LINE, "潭不见")  # at the start: no … before it
    assert head.startswith("潭不见") and head.endswith("…")
    tail = excerpt(LINE, "楪子成七片。")  # at the end: no … after it
    assert tail.endswith("楪子成七片。") and tail.startswith("…")
    long_match = LINE[5:45]  # longer than the width: the whole match
    assert long_match in excerpt(LINE, long_match)


@pytest.mark.processes
@pytest.mark.usefixtures("onnx_exports")
def test_square_brackets_in_the_text_are_printed_as_typed(tiny_model_dir: Path) -> None:
    flags = ("--model", str(tiny_model_dir), "--engine", "onnx")
    done = run_cli("predict", "好[/b]很[MASK]。", *flags)  # a closing tag rich can't match
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout.startswith("好[/b]很")
    done = run_cli("predict", "[b]好[MASK]。", *flags)  # an opening tag rich would swallow
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("[b]好")
    done = run_cli("check", "他[/b]说画龙点晴", *flags)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    # after any note (the tiny random model passes suspects over: "more may remain")
    assert "他[/b]说画龙点睛" in done.stdout.splitlines()


@pytest.mark.processes
@pytest.mark.usefixtures("onnx_exports")
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
@pytest.mark.parametrize(
    "args",
    [
        ("predict", "画龙点[MASK]"),
        ("predict", "画龙点[MASK]", "--json"),
        ("check", "画龙点晴"),
        ("check", "画龙点晴", "--json"),
    ],
)
def test_output_that_cant_be_written_is_one_sentence(
    tiny_model_dir: Path, args: tuple[str, ...]
) -> None:
    """A full disk under the output was a traceback (OSError: No space left on device) and
    exit 1 (a review): now one sentence, exit 1, and no second error at the interpreter's exit."""
    flags = ("--model", str(tiny_model_dir), "--engine", "onnx", "--threads", "1")
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [*CLI, *args, *flags], stdout=full, stderr=subprocess.PIPE, text=True, timeout=180
        )
    assert done.returncode == 1, done.stderr
    assert besides_first_run_notes(done.stderr) == [
        "error: The output can't be written (No space left on device)."
    ], done.stderr


@pytest.mark.processes
@pytest.mark.usefixtures("onnx_exports")
def test_control_characters_are_written_out_not_sent_to_the_terminal(
    tiny_model_dir: Path,
) -> None:
    """A text piped in with ESC ] 0; … BEL set the terminal's title, ESC [ 2 J cleared the
    screen (a review): the tables write control characters out; --json escapes them as JSON."""
    flags = ("--model", str(tiny_model_dir), "--engine", "onnx", "--threads", "1")
    title = "\x1b]0;pwned\x07"
    done = run_cli("predict", f"{title}画龙点[MASK]", "-k", "1", *flags)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert done.stdout.startswith("\\x1b]0;pwned\\x07画龙点")
    done = run_cli("check", *flags, stdin="画龙\x1b[2J点晴\n")
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "画龙\\x1b[2J点" in done.stdout
    done = run_cli("predict", f"{title}画龙点[MASK]", "--json", *flags)
    assert json.loads(done.stdout)["text"].startswith(title)
    # an error quoting the text writes them out too
    done = run_cli("predict", f"{title}画龙点", *flags)
    assert done.returncode == 2 and "\x1b" not in done.stderr and "\x07" not in done.stderr


@pytest.mark.processes
@pytest.mark.usefixtures("onnx_exports")
def test_a_closed_stdout_is_one_sentence(tiny_model_dir: Path) -> None:
    """Run with ``>&-`` Python has no sys.stdout, and the first write was an AttributeError's
    traceback (a verifying review's variant)."""
    flags = ("--model", str(tiny_model_dir), "--engine", "onnx", "--threads", "1")
    command = [*CLI, "predict", "画龙点[MASK]", *flags]
    done = subprocess.run(
        ["bash", "-c", 'exec "$@" >&-', "bash", *command],
        stderr=subprocess.PIPE,
        text=True,
        timeout=180,
    )
    assert done.returncode == 1, done.stderr
    assert besides_first_run_notes(done.stderr) == [
        "error: The output can't be written (standard output is closed)."
    ], done.stderr
