"""What the decode stage asks of a corpus memory (``tiankong.index.grounding.CorpusMemory`` is
the one implementation), so ``core`` stays free of the index's machinery.

The memory runs after the model's softmax at the masks and before top-k:

* ``mix`` mixes each mask's vocabulary distribution with the index's counts for that blank;
* ``ground`` mixes the model's probability of a whole fill (a whole-word sequence, a candidate
  option, a [BLANK] fill) with the count of left + fill + right;
* ``propose`` offers the index's own fills of a blank's length, which the model then scores.

With no match, every method returns the model's numbers unchanged and no evidence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import numpy as np

from tiankong.core.results import Memory

EvidenceOf = Callable[[int, int], Memory]  # (mask number, token id) -> evidence


def no_evidence(mask_number: int, token_id: int) -> Memory:
    return None


PROPOSALS = 10  # the index's own fills offered for a whole-word or [BLANK] blank


class Grounding(NamedTuple):
    """A whole fill's score with the index mixed in, its evidence, and the share of it that
    is the model's: ``1 - w`` where the index moved it, 1 where it didn't. The fills of one
    blank that the index does not support are weighed by the share of those it does
    (``core.modes.unsupported_share``), as a mask's row is in ``mix``: a supported 睛 (0.273) had
    been ranked under an unweighed 凤 (0.29) in whole-word mode, where one mask put it first."""

    score: float
    memory: Memory
    model_share: float = 1.0


@dataclass(frozen=True)
class MixedRows:
    """Per-mask probabilities with the index mixed in, and the evidence for any token there."""

    probabilities: np.ndarray  # [masks, vocab]; the model's own array where nothing matched
    evidence: EvidenceOf = no_evidence


class FillMemory(Protocol):
    """A corpus memory as the decode stage sees it."""

    @property
    def key(self) -> str:
        """The index's identity, for result cache keys."""
        ...

    def find(self, input_ids: Sequence[int], mask_indices: Sequence[int]) -> object:
        """The lookups for a text's blanks: token ids only, no model output, so they can run
        while the engine computes (``FillMasker.start_lookups``); pass the result to ``mix``."""
        ...

    def mix(
        self,
        input_ids: Sequence[int],
        mask_indices: Sequence[int],
        probabilities: np.ndarray,
        found: object = None,  # ``find``'s result; None: look up now
        open_ended: bool = False,
    ) -> MixedRows:
        """Each mask's row mixed with the index's fills of its blank; ``open_ended``: the rows
        are the one-character reading of a blank whose length the user did not fix ([BLANK], a
        candidate), so only fills the corpus holds as a whole there count (as in ``ground``)."""
        ...

    def ground(
        self,
        input_ids: Sequence[int],
        first: int,
        fill_ids: Sequence[int],
        model_score: float,
        best_model_score: float | None = None,
        joint_over: int | None = None,
        open_ended: bool = False,
    ) -> Grounding:
        """The combined score and evidence of ``fill_ids`` in the blank at ``first`` of
        ``input_ids`` (the blank's masks are ``len(fill_ids)`` tokens from ``first``);
        ``best_model_score``: the model's score of its best fill of that blank, so the index
        never lifts a fill the model finds implausible; ``joint_over``: how many tokens the
        scores are joint over (None: all of ``fill_ids``; 1 for length-normalised scores);
        ``open_ended``: the user did not fix the blank's length ([BLANK], a candidate), so the
        corpus must hold the fill as a whole, not as a piece of a longer one."""
        ...

    def propose(self, input_ids: Sequence[int], first: int, length: int) -> list[list[int]]:
        """The index's most frequent fills of ``length`` tokens for the blank at ``first``."""
        ...
