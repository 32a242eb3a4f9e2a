"""``bench.check_memory``: a server's memory around long proofreading requests."""

from __future__ import annotations

import sys

import pytest

from bench import check_memory


def test_the_long_text_is_the_test_split_joined_to_the_length_asked() -> None:
    text = check_memory.long_text(1990)
    assert len(text) == 1990 and text.startswith("不好意思，酒店周边没有景点。")
    with pytest.raises(SystemExit, match="fewer than"):
        check_memory.long_text(10**8)


def test_it_reports_the_memory_around_the_checks(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["check_memory", "--chars", "300", "--checks", "2", "--predicts", "2", "--trim"]
    monkeypatch.setattr(sys, "argv", argv)
    check_memory.main()
    line = capsys.readouterr().out
    assert "after 2 checks of 300 characters" in line and "after malloc_trim(0)" in line
    assert "after 2 predicts; check median" in line and "one check's traced peak" in line
