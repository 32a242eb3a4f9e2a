"""The user's own script (core/script.py): what is converted, and how answers go back."""

from __future__ import annotations

import pytest

from tiankong.core import script
from tiankong.core.results import FillResult, SequenceFill, TokenScore
from tiankong.core.script import script_of, standard, standard_lines, written_in


def test_traditional_text_is_converted_and_mixed_text_is_left_as_typed() -> None:
    assert script_of("處處聞啼[MASK]。").simplified == "处处闻啼[MASK]。"
    assert script_of("處處聞啼[MASK]。").to_typed == "s2t"
    assert script_of("臺灣的[MASK]很好吃").to_typed == "s2tw"  # Taiwan forms round-trip there
    assert not script_of("处处闻啼[MASK]。").converted  # simplified already
    assert not script_of("这裏[MASK]").converted  # mixed: as typed
    assert not script_of("The [MASK] is").converted


def test_variants_fold_to_the_standard_form() -> None:
    assert standard("天涯若比隣") == "天涯若比邻"
    assert standard("處處聞啼鳥") == "处处闻啼鸟"
    assert standard("芸芸众生") == "芸芸众生"  # a character of its own, not a variant of 艺
    assert script_of("天涯若比隣[MASK]").simplified == "天涯若比邻[MASK]"


def test_lines_are_converted_a_chunk_at_a_time_as_each_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = ["天涯若比隣", "處處聞啼鳥", "", "芸芸众生", "乾隆皇帝", "頭髮乾了", "臺灣 的 天氣"] * 3
    monkeypatch.setattr(script, "STANDARD_CHUNK", 4)  # chunks meet inside the list
    assert standard_lines(lines) == [standard(line) for line in lines]
    with pytest.raises(ValueError, match="newline"):
        standard_lines(["處處\n聞啼鳥"])


def test_answers_are_written_back_in_the_users_script() -> None:
    script = script_of("春眠不覺曉，處處聞啼[MASK]。")
    memory = {"count": 1, "match": "处处闻啼鸟。", "example": "春眠不觉晓，处处闻啼鸟。"}
    result = FillResult(
        text="春眠不觉晓，处处闻啼[MASK]。",
        masks=[[TokenScore("鸟", 1, 0.9, memory=memory)]],
        sequence="春眠不觉晓，处处闻啼鸟。",
        sequences=[SequenceFill("鸟", "春眠不觉晓，处处闻啼鸟。", 0.9, 0.9)],
    )
    back = written_in(result, script)
    assert back.text == "春眠不覺曉，處處聞啼[MASK]。"
    assert back.sequence == "春眠不覺曉，處處聞啼鳥。"
    assert back.masks[0][0].token == "鳥"
    assert back.masks[0][0].memory == {
        "count": 1,
        "match": "處處聞啼鳥。",
        "example": "春眠不覺曉，處處聞啼鳥。",
    }
    assert back.sequences[0].fill == "鳥"
