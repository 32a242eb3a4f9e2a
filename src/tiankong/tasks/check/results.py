"""The proofreader's result shape: one ``CheckResult`` per text, with its ``Edit``s."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from tiankong.core.results import Memory


@dataclass(frozen=True)
class Alternative:
    """Another character the checker weighed for a position."""

    suggestion: str
    score: float


@dataclass(frozen=True)
class Edit:
    """One suspected wrong character and its fix; ``start``/``end`` count characters of the
    input text (``text[start:end] == original``)."""

    start: int
    end: int
    original: str
    suggestion: str
    score: float  # how sure the checker is, 0..1 (the fix's share against the original)
    alternatives: list[Alternative] = field(default_factory=list)
    memory: Memory = None  # the corpus index's evidence (出处) for a fixed expression
    # what found it: "model" (the masked LM with the confusion sets), "index" (the corpus
    # index), "idioms" (the idiom list) or "unicode" (a radical typed for the character it
    # looks like: ⼀ for 一)
    source: str = "model"


@dataclass(frozen=True)
class CheckResult:
    """The answer for one text: ``corrected`` is ``text`` with every edit applied.

    >>> result.corrected, result.edits[0].suggestion  # doctest: +SKIP
    ('我们看美国电影，我觉得很有意思。', '们')
    """

    text: str
    corrected: str
    edits: list[Edit]
    model: str = ""
    latency_ms: float | None = None
    warnings: list[str] = field(default_factory=list)  # e.g. no Chinese character to check
    # the characters checked: 0 where none could be (no Chinese, none the model reads), so no
    # surface says "no errors found" of a text it did not read
    checked: int = 0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if data["latency_ms"] is None:
            del data["latency_ms"]
        return data


def apply_edits(text: str, edits: list[Edit]) -> str:
    """``text`` with each edit's span replaced, left to right (the edits never overlap)."""
    pieces, last = [], 0
    for edit in sorted(edits, key=lambda item: item.start):
        pieces += [text[last : edit.start], edit.suggestion]
        last = edit.end
    return "".join([*pieces, text[last:]])
