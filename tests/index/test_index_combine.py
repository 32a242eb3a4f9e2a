"""The mixing formula: the model's own numbers when nothing matches."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from index_corpus import ids
from tokenizers import Tokenizer

from tiankong.index import (
    FITTED_WEIGHT,
    BlankLookup,
    IndexWeight,
    combine_distribution,
    combine_score,
    open_index,
)
from tiankong.index.combine import (
    CONFIDENT_MODEL,
    CONFIDENT_MODEL_RATIO,
    MIN_MODEL_RATIO,
    MIN_WHOLE_MODEL_RATIO,
    SHORT_MATCH_HAN,
    Run,
    holds_evidence,
    index_row,
    kept_fills,
    min_model_ratio,
)
from tiankong.index.lookup import BlankMatch


def model_row(size: int, seed: int = 0) -> np.ndarray:
    row = np.random.default_rng(seed).random(size)
    return row / row.sum()


def test_no_match_returns_the_model_exactly(small_index: Path, tokenizer: Tokenizer) -> None:
    lookup = BlankLookup(open_index(small_index), tokenizer)
    match = lookup.lookup(ids(tokenizer, "鑫鑫"), ids(tokenizer, "鑫"), 1)
    assert match is None
    row = model_row(tokenizer.get_vocab_size())
    assert combine_distribution(row, match) is row
    assert combine_score(0.123456789, match, [1, 2]) == 0.123456789
    assert FITTED_WEIGHT.of(None) == 0.0


def test_mixture_is_a_distribution_that_favours_the_match(
    small_index: Path, tokenizer: Tokenizer
) -> None:
    lookup = BlankLookup(open_index(small_index), tokenizer)
    match = lookup.lookup(ids(tokenizer, "画龙点"), [], 1)
    assert match is not None
    row = model_row(tokenizer.get_vocab_size(), seed=1)
    mixed = combine_distribution(row, match)
    w = FITTED_WEIGHT.of(match)
    assert 0.0 < w < 1.0
    eye = ids(tokenizer, "睛")[0]
    assert mixed.sum() == pytest.approx(1.0)
    assert mixed[eye] == pytest.approx((1 - w) * row[eye] + w)
    other = ids(tokenizer, "白")[0]
    assert mixed[other] == pytest.approx((1 - w) * row[other])


def test_a_skipped_fill_keeps_its_share_with_the_model(
    small_index: Path, tokenizer: Tokenizer
) -> None:
    """The index proposes no punctuation (``CorpusMemory.mix`` skips it): a skipped fill gets
    nothing from the index and its share stays with the model, so the row still sums to 1."""
    lookup = BlankLookup(open_index(small_index), tokenizer)
    match = lookup.lookup(ids(tokenizer, "画龙点"), [], 1)
    assert match is not None
    row = model_row(tokenizer.get_vocab_size(), seed=1)
    eye = ids(tokenizer, "睛")[0]
    mixed = combine_distribution(row, match, skipped=frozenset({eye}))
    assert mixed.sum() == pytest.approx(1.0)
    assert mixed[eye] < combine_distribution(row, match)[eye]
    if len(match.fills) == 1:  # 睛 was the only fill: nothing is left to mix
        assert mixed is row


def test_weight_grows_with_match_length_and_count() -> None:
    weight = IndexWeight(bias=-2.0, per_token=0.5, per_log_count=0.3)

    class Match:
        def __init__(self, length: int, total: int) -> None:
            self.context_length, self.total = length, total
            self.context_han, self.whole = length, False  # the evidence rule holds from 3
            self.contradicted = (False, False)  # no passage reads differently from the text

    short, long = weight.of(Match(3, 5)), weight.of(Match(6, 5))  # type: ignore[arg-type]
    rare, frequent = weight.of(Match(3, 1)), weight.of(Match(3, 100))  # type: ignore[arg-type]
    assert short < long and rare < frequent


def test_candidates_get_their_index_share(small_index: Path, tokenizer: Tokenizer) -> None:
    lookup = BlankLookup(open_index(small_index), tokenizer)
    match = lookup.lookup(ids(tokenizer, "没电了，赶紧去"), ids(tokenizer, "。"), 2)
    w = FITTED_WEIGHT.of(match)
    assert combine_score(0.1, match, ids(tokenizer, "充电")) == pytest.approx(
        0.9 * 0.1 * 0 + (1 - w) * 0.1 + w
    )
    assert combine_score(0.1, match, ids(tokenizer, "关机")) == pytest.approx((1 - w) * 0.1)


def test_the_index_never_lifts_a_fill_the_model_finds_implausible(
    small_index: Path, tokenizer: Tokenizer
) -> None:
    lookup = BlankLookup(open_index(small_index), tokenizer)
    match = lookup.lookup(ids(tokenizer, "没电了，赶紧去"), ids(tokenizer, "。"), 2)
    assert holds_evidence(match)
    fill = ids(tokenizer, "充电")
    best = 0.1
    # the small index holds the text's whole context (没电了，赶紧去 … 。): the text is a corpus
    # line with its blank, and the line's fill is lifted however unlikely the model finds it
    assert match is not None and match.whole
    assert min_model_ratio(match) == MIN_WHOLE_MODEL_RATIO == 0.0
    assert combine_score(1e-30, match, fill, best_model_score=best) > 0.5
    # a part of a line: the floor
    part = lookup.lookup(ids(tokenizer, "没电了，赶紧去"), ids(tokenizer, "。吧"), 2)
    assert holds_evidence(part) and part is not None and not part.whole
    ratio = min_model_ratio(part)
    assert ratio == MIN_MODEL_RATIO
    plausible_score = best * ratio**2  # per token, just the floor
    assert combine_score(plausible_score, part, fill, best_model_score=best) > plausible_score
    absurd = plausible_score / 2
    assert combine_score(absurd, part, fill, best_model_score=best) == absurd


def test_the_floor_is_lower_only_for_a_whole_context_of_three_han_characters() -> None:
    """亡羊补[MASK]: the text is a corpus line with its blank; a part of a line, or a whole
    context of one or two characters (我[MASK]), keeps MIN_MODEL_RATIO."""

    def match(han: int, whole: bool) -> BlankMatch:
        return BlankMatch(
            left=(1, 2, 3), right=(), fills={(9,): 1}, positions={}, exact=True,
            context_han=han, whole=whole,
        )  # fmt: skip

    assert min_model_ratio(match(3, True)) == MIN_WHOLE_MODEL_RATIO < MIN_MODEL_RATIO
    assert min_model_ratio(match(3, False)) == MIN_MODEL_RATIO
    assert min_model_ratio(match(2, True)) == MIN_MODEL_RATIO
    assert min_model_ratio(None) == MIN_MODEL_RATIO
    row = np.full(100, 1e-3)
    row[10], row[9] = 0.3, 0.3 * 1e-5  # 9: between the two floors (the model unsure: 0.3)
    assert kept_fills(row, match(3, True)) == [(9,)]
    assert kept_fills(row, match(3, False)) == []
    # a text that stops at its blank holds its whole context in any passage that starts so
    # (这道菜的味道很[MASK] took 咸 from 这道菜的味道很咸，我不喜欢。: a review): a sure model and
    # a short match come first
    row[10] = 0.5
    assert min_model_ratio(match(3, True), 0.5) == CONFIDENT_MODEL_RATIO
    assert kept_fills(row, match(3, True)) == []


def test_a_less_frequent_fill_is_not_moved_where_a_more_frequent_one_was_refused() -> None:
    """A context whose most frequent fill the model finds absurd: its rarer fills are variants
    or typos of it (守株待免 beside 守株待兔), or the context is a coincidence."""
    row = np.full(100, 1e-3)
    row[10], row[20], row[30] = 0.3, 1e-9, 0.01  # 10: the model's best; 20: absurd to it
    match = BlankMatch(
        left=(1, 2, 3), right=(), fills={(20,): 4, (30,): 1, (10,): 4}, positions={}, exact=True
    )
    assert kept_fills(row, match) == [(10,)]  # 30 is held less often than the refused 20
    assert index_row(row, match)[30] == 0.0 and index_row(row, match)[10] > 0.0
    row[20] = 0.01  # now plausible: every fill is moved
    assert sorted(kept_fills(row, match)) == [(10,), (20,), (30,)]


def test_a_fill_of_a_run_is_plausible_at_every_mask_or_moves_none() -> None:
    """Two masks in a row: a fill moves one mask only where the model finds each of its tokens
    plausible at its own mask (白日[MASK][MASK]住 showed 不 with 出处 白日不堑住 where the
    model refused 堑 and the sentence read 白日不人住); the plausibility reference at a mask
    is its best token that isn't skipped (a mark)."""
    first, second = np.full(100, 1e-3), np.full(100, 1e-3)
    first[10], second[50], second[20] = 0.5, 0.3, 1e-9  # 20: absurd at the second mask
    match = BlankMatch(
        left=(1, 2, 3), right=(), fills={(10, 20): 1}, positions={}, exact=True, context_han=3
    )
    assert kept_fills(first, match, 0) == [(10, 20)]  # one mask judged alone
    assert kept_fills(first, match, 0, run=Run.of([first, second])) == []
    second[20] = 0.01
    assert kept_fills(first, match, 0, run=Run.of([first, second])) == [(10, 20)]
    # a mark the model prefers is no reference: 20 is 1.1e-5 of it, 2e-4 of the best character
    second[50], second[60], second[20] = 0.9, 0.05, 1e-5
    assert kept_fills(second, match, 1) == []
    assert kept_fills(second, match, 1, skipped=frozenset({50})) == [(10, 20)]


def test_a_match_of_one_or_two_han_characters_is_no_evidence(
    small_index: Path, tokenizer: Tokenizer
) -> None:
    lookup = BlankLookup(open_index(small_index), tokenizer)
    # 鲸鲨 never occur: only 去 + fill + 。 matches, one Han character of the context
    short = lookup.lookup(ids(tokenizer, "鲸鲨去"), ids(tokenizer, "。"), 2)
    assert short is not None and short.context_han == 1 and not short.whole
    assert not holds_evidence(short) and FITTED_WEIGHT.of(short) == 0.0
    assert combine_score(0.3, short, ids(tokenizer, "充电")) == 0.3
    # the whole query is evidence however short: 去 + fill + 。 is all there is
    whole = lookup.lookup(ids(tokenizer, "去"), ids(tokenizer, "。"), 2)
    assert whole is not None and whole.whole and holds_evidence(whole)


def test_a_short_match_lifts_no_fill_against_a_confident_model() -> None:
    """服务非常[MASK]，很认真 took 慢 (3.7e-4 of the model's 好, at 0.91) from one review saying
    服务非常慢: where the model is sure of its best fill (CONFIDENT_MODEL or more) and the match
    holds under SHORT_MATCH_HAN Han characters of context, a fill needs CONFIDENT_MODEL_RATIO
    of that best. Marks don't count (a matched comma made 这家店的菜很[MASK]吃， long enough: a
    review). A longer match (a poem's line), a less sure model, or the text's whole context as
    a corpus line keep their floors."""

    def match(han: int, marks: int = 0, whole: bool = False) -> BlankMatch:
        return BlankMatch(
            left=tuple(range(1, han + marks + 1)), right=(), fills={(9,): 1}, positions={},
            exact=True, context_han=han, whole=whole,
        )  # fmt: skip

    short, long = match(SHORT_MATCH_HAN - 1, marks=3), match(SHORT_MATCH_HAN)
    assert short.context_length > long.context_length  # tokens: the marks count there
    sure, unsure = CONFIDENT_MODEL, CONFIDENT_MODEL * 0.99
    assert min_model_ratio(short, sure) == CONFIDENT_MODEL_RATIO
    assert min_model_ratio(short, unsure) == MIN_MODEL_RATIO
    assert min_model_ratio(short) == MIN_MODEL_RATIO  # no reference: the floor it had
    assert min_model_ratio(long, sure) == MIN_MODEL_RATIO
    assert min_model_ratio(match(4, whole=True), unsure) == MIN_WHOLE_MODEL_RATIO
    assert min_model_ratio(match(SHORT_MATCH_HAN, whole=True), sure) == MIN_WHOLE_MODEL_RATIO
    row = np.full(100, 1e-3)
    row[10], row[9] = 0.9, 0.9 * CONFIDENT_MODEL_RATIO * 0.9  # 9: under the confident floor
    assert kept_fills(row, short) == []
    assert kept_fills(row, long) == [(9,)]
    assert combine_distribution(row, short) is row  # the model's numbers, unchanged
    row[10], row[9] = 0.3, 0.3 * 1e-3  # the model less sure: 9 is lifted
    assert kept_fills(row, short) == [(9,)]
    # a whole fill's score, per token against its best: the same floors
    best = 0.9**2
    under = best * (CONFIDENT_MODEL_RATIO * 0.9) ** 2
    assert combine_score(under, short, [9, 9], best_model_score=best) == under
    assert combine_score(under, long, [9, 9], best_model_score=best) != under
