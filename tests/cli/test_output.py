"""The CLI's tables: text in square brackets is printed as typed (rich reads ``[x]`` as markup),
and a long 出处 line is cut around its match, never before it."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import run_cli

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
