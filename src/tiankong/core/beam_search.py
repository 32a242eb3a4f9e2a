"""Joint decoding over several masks, candidate scoring and unknown-length blanks.

Pure numpy over an injected ``RowScorer``, which runs ONE forward pass for many rows and returns
the softmax at the requested mask indices of each row. Every search step batches all of its
hypotheses into a single call; nothing here calls the engine per hypothesis.

Scores are chains of conditional probabilities: a fill ``c1 c2`` scores
``P(c1 | text with both blanks masked) * P(c2 | text with c1 filled, c2 masked)`` in the order
the masks were filled.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tiankong.core.decoding import restrict

# rows of token ids, and for each row the indices whose distribution is wanted
RowScorer = Callable[[Sequence[list[int]], Sequence[list[int]]], list[np.ndarray]]
ORDERS = ("left_to_right", "confident_first")


@dataclass(frozen=True)
class Hypothesis:
    token_ids: tuple[int | None, ...]  # one per mask, None while unfilled
    log_prob: float

    @property
    def complete(self) -> bool:
        return all(token is not None for token in self.token_ids)


def fill_row(input_ids: list[int], mask_indices: list[int], hypothesis: Hypothesis) -> list[int]:
    row = list(input_ids)
    for index, token in zip(mask_indices, hypothesis.token_ids, strict=True):
        if token is not None:
            row[index] = token
    return row


def beam_search(
    input_ids: list[int],
    mask_indices: list[int],
    scorer: RowScorer,
    allowed: np.ndarray,
    beam_width: int,
    order: str = "left_to_right",
    renormalise: bool = False,
    fills: Sequence[tuple[int, ...]] | None = None,
) -> list[Hypothesis]:
    """Joint fills for all masks of one text, best first (at most ``beam_width``).

    ``left_to_right`` fills masks in reading order; ``confident_first`` fills, in each
    hypothesis, the still-masked position whose best allowed token is most probable, then
    re-runs the model with that token in place. ``fills``: the only whole fills allowed (the
    constraints' words of this length, as token ids); a beam then takes at each position only
    the tokens that some fill agreeing with it so far has there, so none is pruned for
    partial fills that could never be completed (一丝不苟 was lost among the 256 mixtures of
    its own characters), and each token keeps the score ``allowed`` gives it.
    """
    beams = [Hypothesis((None,) * len(mask_indices), 0.0)]
    for _ in mask_indices:
        open_slots = [
            [slot for slot, token in enumerate(beam.token_ids) if token is None] for beam in beams
        ]
        asked = [[slots[0]] for slots in open_slots] if order == "left_to_right" else open_slots
        rows = [fill_row(input_ids, mask_indices, beam) for beam in beams]
        distributions = scorer(rows, [[mask_indices[slot] for slot in slots] for slots in asked])
        expanded: list[Hypothesis] = []
        for beam, slots, probabilities in zip(beams, asked, distributions, strict=True):
            probabilities = restrict_or_mask(probabilities, allowed, renormalise)
            if fills is not None:
                probabilities = within_fills(probabilities, beam, slots, fills)
            choice = int(np.argmax(probabilities.max(axis=-1))) if len(slots) > 1 else 0
            slot, row = slots[choice], probabilities[choice]
            width = min(beam_width, int(np.count_nonzero(row > 0)))
            for token in np.argpartition(-row, width - 1)[:width]:
                token_ids = list(beam.token_ids)
                token_ids[slot] = int(token)
                expanded.append(
                    Hypothesis(tuple(token_ids), beam.log_prob + math.log(float(row[token])))
                )
        expanded.sort(key=lambda hypothesis: -hypothesis.log_prob)
        beams = deduplicate(expanded)[:beam_width]
    return beams


def within_fills(
    probabilities: np.ndarray,
    beam: Hypothesis,
    slots: Sequence[int],
    fills: Sequence[tuple[int, ...]],
) -> np.ndarray:
    """``probabilities`` (one row per open slot of ``beam``) kept only at the tokens that a fill
    agreeing with ``beam``'s tokens so far has in that slot; zero elsewhere, not renormalised."""
    agreeing = [
        fill
        for fill in fills
        if all(token is None or token == fill[at] for at, token in enumerate(beam.token_ids))
    ]
    kept = np.zeros_like(probabilities)
    for row, slot in enumerate(slots):
        tokens = sorted({fill[slot] for fill in agreeing})
        kept[row, tokens] = probabilities[row, tokens]
    return kept


def restrict_or_mask(
    probabilities: np.ndarray, allowed: np.ndarray, renormalise: bool
) -> np.ndarray:
    if renormalise:
        return restrict(probabilities, allowed)
    return np.where(allowed, probabilities, 0.0)


def deduplicate(hypotheses: list[Hypothesis]) -> list[Hypothesis]:
    """The same fill reached in two orders (confident-first) is kept once, at its best score."""
    seen: set[tuple[int | None, ...]] = set()
    unique = []
    for hypothesis in hypotheses:
        if hypothesis.token_ids not in seen:
            seen.add(hypothesis.token_ids)
            unique.append(hypothesis)
    return unique


@dataclass(frozen=True)
class ChainScore:
    """Exact left-to-right chain probability of one option's tokens in the blank."""

    log_prob: float  # sum of log P(token_j | tokens before it filled, the rest masked)
    token_log_probs: tuple[float, ...]

    @property
    def normalised(self) -> float:
        """Mean log-probability per token: comparable across options of different lengths."""
        return self.log_prob / max(len(self.token_log_probs), 1)


def chain_rows(
    input_ids: list[int], mask_indices: list[int], option_ids: list[int]
) -> tuple[list[list[int]], list[list[int]]]:
    """Rows that score one option filling ``mask_indices`` (same length), left to right."""
    rows, asked = [], []
    for step, index in enumerate(mask_indices):
        row = list(input_ids)
        for earlier in range(step):
            row[mask_indices[earlier]] = option_ids[earlier]
        rows.append(row)
        asked.append([index])
    return rows, asked


def score_chains(
    items: Sequence[tuple[list[int], list[int], list[int]]], scorer: RowScorer
) -> list[ChainScore]:
    """Score many (input_ids, mask_indices, option_ids) in ONE scorer call."""
    all_rows: list[list[int]] = []
    all_asked: list[list[int]] = []
    spans = []
    for input_ids, mask_indices, option_ids in items:
        rows, asked = chain_rows(input_ids, mask_indices, option_ids)
        spans.append((len(all_rows), len(rows)))
        all_rows += rows
        all_asked += asked
    distributions = scorer(all_rows, all_asked) if all_rows else []
    scores = []
    for (start, count), (_, _, option_ids) in zip(spans, items, strict=True):
        token_log_probs = tuple(
            math.log(max(float(distributions[start + step][0][token]), 1e-300))
            for step, token in enumerate(option_ids[:count])
        )
        scores.append(ChainScore(sum(token_log_probs), token_log_probs))
    return scores


def length_normalised(log_prob: float, length: int, alpha: float) -> float:
    """Rank fills of different lengths: ``log P / length ** alpha`` (alpha 0 = raw joint)."""
    return log_prob / (length**alpha)
