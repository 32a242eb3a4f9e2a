"""Mixing the index with the model: one probability per candidate.

    p(f) = (1 - w) * p_model(f) + w * n(f) / n(context)
    w    = sigmoid(bias + per_token * min(a + b, CONTEXT_CAP) + per_log_count * ln n(context))

where a + b is the matched context length in tokens and n(context) the occurrences of the
context with any fill. With no match, w = 0 and the model's numbers come back unchanged (the
same array object). The constants are fitted by scripts/fit_index_weight.py (docs/INDEX.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tiankong.index.lookup import BlankMatch

CONTEXT_CAP = 16  # matches longer than this count as this long: they are all near-certain


@dataclass(frozen=True)
class IndexWeight:
    bias: float
    per_token: float
    per_log_count: float

    def features(self, match: BlankMatch) -> tuple[float, float]:
        return float(min(match.context_length, CONTEXT_CAP)), math.log(match.total)

    def of(self, match: BlankMatch | None) -> float:
        """The index's weight w for this match (0 when nothing matched)."""
        if match is None:
            return 0.0
        tokens, log_count = self.features(match)
        z = self.bias + self.per_token * tokens + self.per_log_count * log_count
        return 1.0 / (1.0 + math.exp(-z))


# The ONE place for the fitted constants (scripts/fit_index_weight.py prints them).
FITTED_WEIGHT = IndexWeight(bias=-2.543, per_token=0.521, per_log_count=-0.127)


def combine_distribution(
    model: np.ndarray,
    match: BlankMatch | None,
    weight: IndexWeight = FITTED_WEIGHT,
    position: int = 0,
) -> np.ndarray:
    """Mix one mask's vocabulary distribution with a match: for a blank of several masks, the
    mask at ``position`` gets the index's marginal there (the fills' token at that place)."""
    w = weight.of(match)
    if match is None or w == 0.0:
        return model
    index = np.zeros_like(model)
    for fill in match.fills:
        index[fill[position]] += match.probability(fill)
    return (1.0 - w) * model + w * index


def combine_score(
    model_score: float,
    match: BlankMatch | None,
    fill: Sequence[int],
    weight: IndexWeight = FITTED_WEIGHT,
) -> float:
    """Mix the model's probability of a whole fill (several tokens, an option) with the index."""
    if match is None:
        return model_score
    w = weight.of(match)
    return (1.0 - w) * model_score + w * match.probability(fill)
