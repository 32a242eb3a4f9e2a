"""An open-ended blank ([BLANK], candidates) is answered by a whole corpus fill, never by a
piece of one: 白日依[BLANK]，黄河入海流。 showed 尽 with the 出处 白日依山尽 (the user's text would
read 白日依尽), and [BLANK]不觉晓 ranked 眠 level with 春眠 on the line 春眠不觉晓. Such a fill
keeps the model's score and shows no 出处 (docs/INDEX.md, "Spans")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from index_corpus import ids
from tokenizers import Tokenizer

from tiankong import FillMasker, Settings
from tiankong.core.results import SequenceFill
from tiankong.index import BlankLookup, build_index, combine, open_index
from tiankong.index.options import option_match, spanning_fills

PASSAGES = [
    "白日依山尽，黄河入海流。欲穷千里目，更上一层楼。",
    "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。",
    "他只想守株待兔。",
    "守株待兔",
    "与其守株待兔，不如自己去找。",
    "画蛇添足",
    "画蛇添足者",
    "画蛇添足矣",
]


@pytest.fixture(scope="module", autouse=True)
def no_plausibility_floor() -> Iterator[None]:
    """A tiny random model finds every real word absurd; the plausibility rule has its own
    tests (test_index_combine.py)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(combine, "MIN_MODEL_RATIO", 0.0)
        yield


@pytest.fixture(scope="module")
def poem_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("poem-index")
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(PASSAGES) + "\n", encoding="utf-8")
    build_index([corpus], folder / "index", progress=False)
    return folder / "index"


@pytest.fixture(scope="module")
def grounded(tiny_model_dir: Path, poem_index: Path) -> FillMasker:
    return FillMasker.load(
        str(tiny_model_dir), Settings(engine="torch", threads=1), index=str(poem_index)
    )


def weighed_only(fill: SequenceFill) -> bool:
    """An unsupported fill of a blank the index supports another fill of: its score is the
    model's weighed by the supported fill's model share, never lifted (no evidence)."""
    return fill.model_score is not None and 0 < fill.score < fill.model_score


def test_a_piece_of_the_corpus_fill_is_no_blank_fill(grounded: FillMasker) -> None:
    fills = {f.fill: f for f in grounded.predict("白日依[BLANK]，黄河入海流。", top_k=50).sequences}
    assert fills["山尽"].memory is not None and fills["山尽"].memory["match"].startswith(
        "白日依山尽"
    )
    piece = fills["尽"]  # proposed by the index, which holds 尽，黄河入海流。
    assert piece.memory is None and weighed_only(piece)


def test_at_the_text_start_the_corpus_must_start_the_fill(grounded: FillMasker) -> None:
    fills = {f.fill: f for f in grounded.predict("[BLANK]不觉晓，处处闻啼鸟。", top_k=50).sequences}
    assert fills["春眠"].memory is not None
    assert fills["眠"].memory is None and weighed_only(fills["眠"])


def test_at_the_text_end_the_corpus_must_end_the_fill(grounded: FillMasker) -> None:
    fills = {f.fill: f for f in grounded.predict("守株[BLANK]", top_k=50).sequences}
    assert fills["待兔"].memory is not None
    assert fills["待"].memory is None and weighed_only(fills["待"])
    assert grounded.predict("守株待[BLANK]", top_k=50).sequences[0].memory is not None


def test_a_candidate_that_is_a_piece_of_the_corpus_fill_gets_no_evidence(
    grounded: FillMasker,
) -> None:
    result = grounded.predict("白日依[MASK]，黄河入海流。", candidates=["尽", "山尽", "西山"])
    options = {c.option: c for c in result.candidates}
    assert options["山尽"].memory is not None
    assert options["尽"].memory is None and options["西山"].memory is None
    # the unsupported options are weighed alike, by the supported one's model share
    shares = [options[o].score / options[o].model_score for o in ("尽", "西山")]
    assert 0 < shares[0] < 1 and shares[0] == pytest.approx(shares[1], rel=1e-9)


def test_a_fixed_blank_of_one_character_is_judged_as_the_others_are(
    grounded: FillMasker,
) -> None:
    """One [MASK] says the fill is one character, and the corpus's 尽 before ，黄河入海流。 was
    evidence for it although the corpus has 山 where the user typed 依 (白日依山尽): a passage
    that goes on with another character than the user's next to the blank is no evidence
    (``BlankMatch.contradicted``), as the [BLANK] fill 尽 and the option 尽 were not already. The
    whole line still grounds the two characters the blank stands for."""
    single = grounded.predict("白日依[MASK]，黄河入海流。", top_k=50).masks[0]
    assert all(candidate.memory is None for candidate in single)
    two = grounded.predict("白日依[MASK][MASK]，黄河入海流。", mode="whole_word").sequences[0]
    assert two.fill == "山尽" and two.memory is not None


def test_option_match_of_an_open_ended_blank(poem_index: Path, tokenizer: Tokenizer) -> None:
    lookup = BlankLookup(open_index(poem_index), tokenizer)
    right = ids(tokenizer, "不觉晓，处处闻啼鸟。")

    def match(left: str, right_ids: list[int], option: str, open_ended: bool) -> object:
        return option_match(
            lookup, ids(tokenizer, left), right_ids, ids(tokenizer, option), open_ended
        )

    assert match("", right, "眠", open_ended=False) is not None  # a fixed blank: as before
    assert match("", right, "眠", open_ended=True) is None  # 春 before 眠 in the corpus
    assert match("", right, "春眠", open_ended=True) is not None  # the passage starts there
    assert match("秋", right, "眠", open_ended=True) is None  # the user's 秋 is not matched
    assert match("守株待", [], "兔", open_ended=True) is not None  # ends every passage
    assert match("守株", [], "待", open_ended=True) is None  # 兔 follows in every passage
    # ends once, reads on with 者 once and 矣 once: no one longer fill is more common
    assert match("画蛇添", [], "足", open_ended=True) is not None
    # the corpus's passage ends where the user's text has punctuation: a whole fill there
    mid = ids(tokenizer, "，没错。")
    assert match("他说画蛇添", mid, "足", open_ended=True) is not None
    assert match("他说守", ids(tokenizer, "待兔"), "株", open_ended=True) is not None


def test_the_per_mask_rows_of_an_open_ended_blank_are_grounded_by_the_same_rule(
    grounded: FillMasker,
) -> None:
    """A [BLANK] request's per-mask rows (the CLI's ``[MASK] 1`` table) read the blank as one
    character, which the user did not fix: 尽 there, from 白日依山尽, is no more evidence than
    the [BLANK] fill 尽 is, so nothing in the row is moved or shows a 出处."""
    for text in ("白日依[BLANK]，黄河入海流。", "[BLANK]不觉晓，处处闻啼鸟。", "守株[BLANK]"):
        row = grounded.predict(text, top_k=50).masks[0]
        assert all(c.memory is None and c.score == c.model_score for c in row), text
    candidates = grounded.predict("白日依[MASK]，黄河入海流。", candidates=["尽", "山尽"], top_k=50)
    assert all(c.memory is None and c.score == c.model_score for c in candidates.masks[0])


def test_a_whole_fill_keeps_its_evidence_in_the_per_mask_rows(grounded: FillMasker) -> None:
    """Where the one character is a whole fill, the row is grounded, and its 出处 is an
    occurrence that ends it (画蛇添足, not 画蛇添足者)."""
    best = {c.token: c for c in grounded.predict("画蛇添[BLANK]", top_k=50).masks[0]}["足"]
    assert best.memory is not None and best.memory["example"] == "画蛇添足"
    assert best.score > best.model_score
    both = {
        c.token: c for c in grounded.predict("春眠不觉晓，处处闻啼[BLANK]。", top_k=50).masks[0]
    }
    assert both["鸟"].memory is not None  # context on both sides: as a fixed blank


def test_spanning_fills_keeps_the_share_of_the_fills_it_keeps(
    poem_index: Path, tokenizer: Tokenizer
) -> None:
    lookup = BlankLookup(open_index(poem_index), tokenizer)
    left, right = ids(tokenizer, "白日依"), ids(tokenizer, "，黄河入海流。")
    match = lookup.lookup(left, right, 1)
    assert match is not None and match.fills  # 尽，黄河入海流。 on the right side only
    assert spanning_fills(lookup, match, left, right) is None
    left = ids(tokenizer, "画蛇添")
    match = lookup.lookup(left, [], 1)
    assert match is not None
    kept = spanning_fills(lookup, match, left, [])
    assert kept is not None and set(kept.fills) == set(match.fills)
    fill = next(iter(kept.fills))
    assert kept.probability(fill) == match.probability(fill)
