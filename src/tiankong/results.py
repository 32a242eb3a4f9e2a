"""Typed results. Later features (joint word decoding, candidates, constraints) add fields with
defaults, so existing consumers keep working."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class TokenScore:
    """One candidate for one mask: probability is the softmax over the whole vocabulary."""

    token: str
    token_id: int
    score: float


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
    sequences: list[dict[str, Any]] = field(default_factory=list)  # joint fills (word decoding)

    @property
    def predictions(self) -> list[TokenScore]:
        """The first mask's list: the shape of the single-mask API."""
        return self.masks[0]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["predictions"] = data["masks"][0]
        return data
