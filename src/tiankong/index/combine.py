"""Mixing the index with the model: one probability per candidate, moved only by real evidence.

Two rules decide whether the index may touch a fill at all (docs/INDEX.md, "Evidence" and
"Plausibility", with the measurements behind the numbers):

* **evidence** (``holds_evidence``, which lives beside the lookup that uses it too:
  ``index.lookup``): the match holds at least MIN_CONTEXT_HAN Han characters of
  the query's own context beside the fill (left and right together), or the query's whole
  context, and its passages don't read differently from the text past it
  (``BlankMatch.contradicted``). A match of one or two characters (``紧去，慢``), or three
  shared inside two different clauses (每天翻地 for 他每天[MASK]地铁), is a coincidence, not a
  source: the index then says nothing, ``memory`` is null and the score is the model's;
* **plausibility** (``plausible``): the model gives the fill, per token, at least
  MIN_MODEL_RATIO of what it gives its own best fill of that blank (same length: a fill of L
  tokens needs MIN_MODEL_RATIO ** L of the best joint score; at one mask the best token that
  isn't a mark, ``best_fill_score``). The index lifts fills the model
  finds merely unlikely (画龙点睛: 1e-3 of its best), never ones it finds absurd. Where the
  match holds the query's whole context, of MIN_CONTEXT_HAN Han characters or more (the text
  is a corpus line with a blank: 亡羊补[MASK]), the floor is MIN_WHOLE_MODEL_RATIO
  (``min_model_ratio``): 牢 was 8.7e-5 of the model's best (狗) and stayed out. Where the
  model is sure of its best (CONFIDENT_MODEL) and the match is short (under
  SHORT_MATCH_HAN Han characters of context), it is CONFIDENT_MODEL_RATIO: a few words shared
  with one review (服务非常慢) are no evidence against the model's 好.

Where both hold, the fill's probability is

    p(f) = (1 - w) * p_model(f) + w * n(f) / n(context)
    w    = sigmoid(bias + per_token * min(a + b, CONTEXT_CAP) + per_log_count * ln n(context))

where a + b is the matched context length in tokens and n(context) the occurrences of the
context with any fill. In a vocabulary row, the share of index fills that fail the
plausibility rule goes back to the model, so the row still sums to 1. With no match, or no
evidence, the model's numbers come back unchanged (the same array object).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import numpy as np

from tiankong.index.lookup import MIN_CONTEXT_HAN, BlankMatch, holds_evidence

CONTEXT_CAP = 16  # matches longer than this count as this long: they are all near-certain
# The plausibility rule: the least p_model(fill) / p_model(best fill of the blank).
MIN_MODEL_RATIO = 1e-4
# ... where the match holds the query's whole context, of MIN_CONTEXT_HAN Han characters or
# more: the text is a line of the index with its blank, and the line's fill is lifted however
# unlikely the model finds it (1e-6 kept out a user's product name on its own line, 星澜音箱…,
# where check restored it from that line: a review; docs/INDEX.md "Plausibility")
MIN_WHOLE_MODEL_RATIO = 0.0
# ... where the model is sure of its best fill (at least CONFIDENT_MODEL per token) and the
# match holds fewer than SHORT_MATCH_HAN Han characters of context (marks don't count: a
# matched comma made 这家店的菜很[MASK]吃， long enough to answer 难): a few words the text shares
# with one passage are no evidence against it (服务非常[MASK]，很认真 took 慢 from a review saying
# 服务非常慢; chosen on reviews and the dev split, docs/INDEX.md "A confident answer")
CONFIDENT_MODEL = 0.4
CONFIDENT_MODEL_RATIO = 0.1
SHORT_MATCH_HAN = 8


def min_model_ratio(match: BlankMatch | None, best: float | None = None) -> float:
    """The plausibility floor for fills of ``match``, per token, given the model's ``best``
    fill's score per token (None: unknown): CONFIDENT_MODEL_RATIO where the model is sure of
    its best (at least CONFIDENT_MODEL) and the match is short (under SHORT_MATCH_HAN Han
    characters of context); else MIN_WHOLE_MODEL_RATIO where the match holds the query's whole
    context of MIN_CONTEXT_HAN Han characters or more (the text is a corpus line with its
    blank); else MIN_MODEL_RATIO."""
    if (
        match is not None
        and best is not None
        and best >= CONFIDENT_MODEL
        and match.context_han < SHORT_MATCH_HAN
    ):  # first: a text that stops at its blank holds its whole context in any passage that
        # starts so (这道菜的味道很[MASK] took 咸 from 这道菜的味道很咸，我不喜欢。: a review)
        return CONFIDENT_MODEL_RATIO
    if match is not None and match.whole and match.context_han >= MIN_CONTEXT_HAN:
        return MIN_WHOLE_MODEL_RATIO
    return MIN_MODEL_RATIO


def plausible(
    model_score: float,
    best_model_score: float | None,
    length: int = 1,
    ratio: float = MIN_MODEL_RATIO,
) -> bool:
    """Whether the model finds a fill of ``length`` tokens plausible enough for the index to
    move it: per token, at least ``ratio`` (``min_model_ratio``) of its best fill of that
    blank."""
    if best_model_score is None:
        return True
    return model_score >= best_model_score * ratio ** max(1, length)


@dataclass(frozen=True)
class IndexWeight:
    bias: float
    per_token: float
    per_log_count: float

    def features(self, match: BlankMatch) -> tuple[float, float]:
        return float(min(match.context_length, CONTEXT_CAP)), math.log(match.total)

    def of(self, match: BlankMatch | None) -> float:
        """The index's weight w for this match (0 when nothing matched or it isn't evidence)."""
        if match is None or not holds_evidence(match):
            return 0.0
        tokens, log_count = self.features(match)
        z = self.bias + self.per_token * tokens + self.per_log_count * log_count
        return 1.0 / (1.0 + math.exp(-z))


# The ONE place for the fitted constants (scripts/fit_index_weight.py prints them).
FITTED_WEIGHT = IndexWeight(bias=-2.543, per_token=0.521, per_log_count=-0.127)


def index_row(
    model: np.ndarray,
    match: BlankMatch,
    position: int = 0,
    skipped: AbstractSet[int] = frozenset(),
    run: Run | None = None,
) -> np.ndarray:
    """The index's distribution at one mask, over the fills the model finds plausible there
    (``kept_fills``) with no token in ``skipped`` at any of the blank's masks (守株[MASK][MASK]:
    the fill 人， is no evidence for 人); it sums to at most 1."""
    index = np.zeros_like(model)
    kept = kept_fills(model, match, position, skipped, run)
    for fill in kept:
        index[fill[position]] += match.probability(fill)
    return index


def best_fill_score(model: np.ndarray, skipped: AbstractSet[int] = frozenset()) -> float:
    """The plausibility rule's reference at one mask: the model's best token there that the
    index could fill, none of ``skipped`` (the corpus's punctuation: its line breaks, never a
    fill). At a text's end the model's best is often 。 (他画的龙真是画龙点[MASK]: 。 0.79), and
    the characters are judged against the best character, as a blank with a mark after it is."""
    best = int(model.argmax())
    if best not in skipped:
        return float(model[best])
    others = np.delete(model, np.fromiter(skipped, dtype=np.int64, count=len(skipped)))
    return float(others.max()) if others.size else 0.0


@dataclass(frozen=True)
class Run:
    """The model's rows at every mask of a blank, each with its plausibility reference
    (``best_fill_score``), worked out once for the blank's mixing and its evidence."""

    rows: tuple[np.ndarray, ...]
    bests: tuple[float, ...]

    @classmethod
    def of(cls, rows: Sequence[np.ndarray], skipped: AbstractSet[int] = frozenset()) -> Run:
        return cls(tuple(rows), tuple(best_fill_score(row, skipped) for row in rows))


def kept_fills(
    model: np.ndarray,
    match: BlankMatch,
    position: int = 0,
    skipped: AbstractSet[int] = frozenset(),
    run: Run | None = None,
) -> list[tuple[int, ...]]:
    """The fills the index may move at one mask: the model finds their token there plausible
    (and, given ``run``, the model's rows at every mask of the blank, each of their tokens at
    its own mask: [MASK][MASK]待兔 showed 守 with 出处 守株待兔 where the model refused 株 and
    the sentence read 守狐待兔), none of their tokens is ``skipped``, and no fill the corpus
    holds more often was refused as implausible. A corpus's less frequent fill of a context
    whose most frequent one the model finds absurd is a variant or a typo of it
    (我们不能守株待[MASK]: the model refuses 兔, held four times, and 免, one classical line's
    typo, was lifted first), or the context is a coincidence."""
    if run is None:  # this mask alone
        bests = [(position, model, best_fill_score(model, skipped))]
    else:
        pairs = zip(run.rows, run.bests, strict=True)
        bests = [(at, row, best) for at, (row, best) in enumerate(pairs)]
    floors = [(at, row, min_model_ratio(match, best) * best) for at, row, best in bests]

    def plausible_fill(fill: tuple[int, ...]) -> bool:
        return all(row[fill[at]] >= floor for at, row, floor in floors)

    fills = [fill for fill in match.fills if not any(t in skipped for t in fill)]
    held = {fill: plausible_fill(fill) for fill in fills}
    refused = max((match.fills[f] for f in fills if not held[f]), default=0)
    return [f for f in fills if held[f] and match.fills[f] >= refused]


def combine_distribution(
    model: np.ndarray,
    match: BlankMatch | None,
    weight: IndexWeight = FITTED_WEIGHT,
    position: int = 0,
    skipped: AbstractSet[int] = frozenset(),
    run: Run | None = None,
) -> np.ndarray:
    """Mix one mask's vocabulary distribution with a match: for a blank of several masks, the
    mask at ``position`` gets the index's marginal there (``run``: the model's rows at each of
    them, for the plausibility of a whole fill). The share of implausible fills, and of
    ``skipped`` ones (punctuation: ``CorpusMemory.mix``), stays with the model, so the row sums
    to 1."""
    w = weight.of(match)
    if match is None or w == 0.0 or not spans_blank(match, len(next(iter(match.fills), ()))):
        return model
    index = index_row(model, match, position, skipped, run)
    kept = float(index.sum())
    if kept == 0.0:
        return model
    return (1.0 - w * kept) * model + w * index


def combine_score(
    model_score: float,
    match: BlankMatch | None,
    fill: Sequence[int],
    weight: IndexWeight = FITTED_WEIGHT,
    best_model_score: float | None = None,
) -> float:
    """Mix the model's probability of a whole fill (several tokens, an option) with the index;
    ``best_model_score``: the model's score of its best fill of that blank (the plausibility
    rule's reference; None: no reference, e.g. a single option)."""
    if not supports(match, model_score, best_model_score, len(fill)):
        return model_score
    assert match is not None
    w = weight.of(match)
    return (1.0 - w) * model_score + w * match.probability(fill)


def model_share(match: BlankMatch | None, weight: IndexWeight = FITTED_WEIGHT) -> float:
    """What ``combine_score`` weighs the model's score of a supported fill by: 1 - w."""
    return 1.0 - weight.of(match)


def spans_blank(match: BlankMatch, length: int) -> bool:
    """A fill of several tokens (a whole word, a [BLANK] fill) must be a span of the user's
    text: the match holds context on each side where the query has some (punctuation counts;
    a passage that ends where the user's text has only punctuation does too). A fill that only
    continues the left context (我不 + 问那里逃, where the user wrote 。) says nothing about
    this blank. One character is judged by the evidence rule alone."""
    return length < 2 or all(match.sides)


def supports(
    match: BlankMatch | None,
    model_score: float,
    best_model_score: float | None,
    length: int = 1,
    tokens: int | None = None,
) -> bool:
    """Whether the index may move (and show evidence for) a fill of ``tokens`` tokens (default
    ``length``) whose scores are joint over ``length`` tokens: the rules all hold."""
    if match is None or not holds_evidence(match):
        return False
    per_token = None if best_model_score is None else best_model_score ** (1 / max(1, length))
    return spans_blank(match, length if tokens is None else tokens) and plausible(
        model_score, best_model_score, length, min_model_ratio(match, per_token)
    )
