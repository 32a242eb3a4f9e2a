"""Typed results. Later features (joint word decoding, candidates, constraints) add fields with
defaults, so existing consumers keep working."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

# A corpus index's evidence for one candidate: {"count": N, "match": "画龙点睛", "example":
# "<the source line, trimmed around the match>"}; None where the index didn't contribute.
Memory = Mapping[str, Any] | None


@dataclass(frozen=True)
class TokenScore:
    """One candidate for one mask: probability is the softmax over the whole vocabulary."""

    token: str
    token_id: int
    score: float  # renormalised over the allowed tokens when constraints are on
    raw_score: float | None = None  # the model's own softmax, reported when constraints are on
    model_score: float | None = None  # the model's score before the corpus index was mixed in
    memory: Memory = None  # the index's evidence for this candidate


@dataclass(frozen=True)
class SequenceFill:
    """A joint fill of every blank (whole-word decoding or an unknown-length blank)."""

    fill: str  # the characters that fill the blanks, e.g. "充电"
    text: str  # the sentence with the fill in place
    # each blank's part of ``fill``, left to right: one per [MASK] (whole words), one for the
    # [BLANK]. Needed to draw the answer: 天天 in [MASK]天[MASK]气 is 天|天 or |天天 by ``text``
    fills: tuple[str, ...]
    score: float  # joint probability (chain of conditionals); renormalised under constraints
    normalised: float  # exp(mean log-probability per character): comparable across lengths
    model_score: float | None = None  # the model's joint probability before the index
    memory: Memory = None
    # what the fills are ranked by: ``score`` for whole words; for a [BLANK]'s fills of several
    # lengths the model's part normalised, exp(log P / length ** length_alpha), plus the
    # index's part as it is (``modes.rank_score``; neither ``score`` nor ``normalised``
    # follows their order, and the page and the CLI showed numbers out of rank order)
    rank_score: float = 0.0


@dataclass(frozen=True)
class CandidateScore:
    """One user-supplied option for a blank, scored in context."""

    option: str
    text: str
    score: float  # exp(mean log-probability per token): the ranking score, length-normalised
    joint: float  # the exact chain probability of all its tokens
    in_vocabulary: bool = True  # False when some character is unknown to the model
    model_score: float | None = None  # the model's ranking score before the index
    memory: Memory = None


@dataclass(frozen=True)
class FillResult:
    """The answer for one text.

    >>> result.masks[0][0].token     # best candidate for the first mask  # doctest: +SKIP
    '鸟'
    """

    text: str  # the input with mask variants normalised to [MASK]
    masks: list[list[TokenScore]]  # one ranked list per mask, left to right
    sequence: str  # the text with each mask's top candidate filled in
    truncated: bool = False  # the text was cut to a window around the masks
    model: str = ""
    sequences: list[SequenceFill] = field(default_factory=list)  # joint fills, best first
    candidates: list[CandidateScore] = field(default_factory=list)  # ranked options, best first
    warnings: list[str] = field(default_factory=list)  # e.g. a text with no Han character

    @property
    def predictions(self) -> list[TokenScore]:
        """The first mask's list: the shape of the single-mask API."""
        return self.masks[0]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)  # (memory mappings become plain dicts: asdict copies them)
        for candidates in data["masks"]:
            for candidate in candidates:
                if candidate["raw_score"] is None:  # only constrained results carry it
                    del candidate["raw_score"]
        data["predictions"] = data["masks"][0] if data["masks"] else []
        return data
