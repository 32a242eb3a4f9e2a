"""Request and response models of the proofreading routes (POST /check, /batch_check)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tiankong.server.schemas import ErrorResponse, MemoryOut

CHECK_TEXT_DESCRIPTION = (
    "Chinese text to proofread: one sentence or many (a long text is checked in windows of "
    "max_length tokens), up to max_check_chars characters."
)
CHECK_EXAMPLES: dict[str, Any] = {
    "sentence": {
        "summary": "A sentence with a wrong character",
        "value": {"text": "这个问题很复杂，我们需要仔细考律一下。"},
    },
    "idiom": {
        "summary": "An idiom one character off (出处 in memory)",
        "value": {"text": "守株待免"},
    },
    "poem": {
        "summary": "A poem line one character off",
        "value": {"text": "欲穷千里目，更上一层搂。"},
    },
}
BATCH_CHECK_EXAMPLES: dict[str, Any] = {
    "three_texts": {
        "summary": "Two with errors, one clean",
        "value": {"texts": ["画龙点晴", "白日依山尽，黄河入海流。", "欲穷千里目，更上一层搂。"]},
    },
}


class CheckBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    text: str = Field(description=CHECK_TEXT_DESCRIPTION, examples=["画龙点晴"])


class BatchCheckBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    texts: list[str] = Field(
        min_length=1, description="Up to max_batch_texts texts (the server's --max-batch-texts)."
    )


class AlternativeOut(BaseModel):
    suggestion: str
    score: float


class EditOut(BaseModel):
    """One suspected wrong character and its fix."""

    start: int = Field(description="Offset of the character in the input, in characters.")
    end: int = Field(description="End offset (exclusive): text[start:end] is the original.")
    original: str
    suggestion: str
    score: float = Field(description="How sure the checker is, 0 to 1.")
    alternatives: list[AlternativeOut] = Field(description="Other characters it weighed.")
    memory: MemoryOut | None = Field(
        description="出处: where the corpus index or the idiom list has the fixed expression."
    )
    source: str = Field(
        description="What found it: model, index, idioms or unicode (a radical typed for the "
        "character it looks like)."
    )


class CheckOut(BaseModel):
    """The answer for one text: ``corrected`` is ``text`` with every edit applied."""

    text: str
    corrected: str
    edits: list[EditOut] = Field(description="Empty for a clean text.")
    model: str
    latency_ms: float | None = None
    warnings: list[str] = Field(
        default_factory=list, description="E.g. the text has no Chinese character to check."
    )
    checked: int = Field(
        default=0,
        description="How many characters were checked; 0: none could be (no Chinese character, "
        "or none the model reads), so no edits says nothing about the text.",
    )


class BatchCheckResponse(BaseModel):
    results: list[CheckOut | ErrorResponse] = Field(
        description="In input order: a check result, or an error entry for a text that can't "
        "be checked."
    )
    model: str
    latency_ms: float
