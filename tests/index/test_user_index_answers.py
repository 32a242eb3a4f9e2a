"""An index of the user's own short opinions, with the bundled model: a few words the text
shares with one passage don't reverse an answer the model is sure of; the documented limit (a
whole clause that reads the other way, the model less sure) stays as docs/INDEX.md says."""

from __future__ import annotations

import pytest

from tiankong import FillMasker, Settings
from tiankong.index import build_index
from tiankong.index.combine import CONFIDENT_MODEL

LINES = (
    "这个孩子很调皮，大家都不喜欢他。\n"
    "这家餐厅太贵了，我们不会再来了。\n"
    "很一般，服务非常慢。\n"
    "这家店的菜很难吃，不会再来。\n"
    "星澜音箱的续航时间是十二小时。\n"
    "这道菜的味道很咸，我不喜欢。\n"
)


@pytest.fixture(scope="module")
def masker(tmp_path_factory: pytest.TempPathFactory) -> FillMasker:
    folder = tmp_path_factory.mktemp("reviews")
    (folder / "reviews.txt").write_text(LINES, encoding="utf-8")
    build_index(folder / "reviews.txt", folder / "index", progress=False)
    settings = Settings(engine="onnx", precision="fp32", threads=1)
    return FillMasker.load(index=str(folder / "index"), settings=settings)


def test_a_short_match_does_not_reverse_an_answer_the_model_is_sure_of(
    masker: FillMasker,
) -> None:
    """服务非常[MASK]，很认真 answered 慢 0.52, 出处 ，服务非常慢, where the model gives 好 0.9
    and 慢 3e-4 (the forty-second session's review)."""
    text = "很不错，服务非常[MASK]，很认真"
    alone = masker.predict(text, top_k=5, index=False).masks[0]
    assert alone[0].token == "好" and alone[0].score >= CONFIDENT_MODEL
    grounded = masker.predict(text, top_k=5).masks[0]
    assert [c.token for c in grounded] == [c.token for c in alone]
    assert all(c.memory is None for c in grounded)
    assert grounded[0].score == pytest.approx(alone[0].score)


def test_a_whole_clause_that_reads_the_other_way_still_wins(masker: FillMasker) -> None:
    """The known limit (docs/INDEX.md, "What they don't catch"): the clause 大家都不喜欢他 is in
    the index whole (eight tokens of context), and the model gives 不 a tenth of its 很."""
    answer = masker.predict("这个孩子很懂事，大家都[MASK]喜欢他。", top_k=2).masks[0][0]
    assert answer.token == "不" and answer.memory is not None
    assert answer.memory["match"] == "，大家都不喜欢他。"


def test_a_matched_mark_does_not_make_a_match_long(masker: FillMasker) -> None:
    """这家店的菜很[MASK]吃，还会再来。 answered 难 0.85 (出处 这家店的菜很难吃，) where the model
    gave 好 0.94: the comma made the match eight tokens long (a review); with 。 or ！ after 吃
    it was 好. Seven Han characters of context are a short match, whatever the marks."""
    for text in ("这家店的菜很[MASK]吃，还会再来。", "这家店的菜很[MASK]吃。还会再来。"):
        alone = masker.predict(text, top_k=1, index=False).masks[0][0]
        assert alone.token == "好" and alone.score >= CONFIDENT_MODEL
        answer = masker.predict(text, top_k=1).masks[0][0]
        assert answer.token == "好" and answer.memory is None, text


def test_the_users_own_line_with_a_blank_gets_its_name_back(masker: FillMasker) -> None:
    """星[MASK]音箱的续航时间是十二小时。, a line of the index with a blank, answered 星期 with no
    出处: the model gives 澜 5e-8 of its best, under the 1e-6 floor a whole line had (a review),
    where check restored 澜 from the same line. A part of the line keeps the model's floor."""
    answer = masker.predict("星[MASK]音箱的续航时间是十二小时。", top_k=1).masks[0][0]
    assert answer.token == "澜" and answer.model_score < 1e-6
    assert answer.memory is not None and answer.memory["match"] == "星澜音箱的续航时间是十二小时。"
    part = masker.predict("我买了一台星[MASK]音箱", top_k=1).masks[0][0]
    assert part.token != "澜" and part.memory is None


def test_a_text_that_stops_at_its_blank_is_not_a_line_of_the_index(masker: FillMasker) -> None:
    """这道菜的味道很[MASK] answered 咸 (the model's 0.003) from 这道菜的味道很咸，我不喜欢。, where
    the model gives 好 0.72: a text that stops at its blank holds its whole context in every
    passage that starts so, which made it "a line of the index" with no floor (a review)."""
    alone = masker.predict("这道菜的味道很[MASK]", top_k=1, index=False).masks[0][0]
    assert alone.token == "好" and alone.score >= CONFIDENT_MODEL
    answer = masker.predict("这道菜的味道很[MASK]", top_k=1).masks[0][0]
    assert answer.token == "好" and answer.memory is None
