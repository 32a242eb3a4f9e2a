"""Request and response models of the HTTP API, with the examples /docs shows.

Types are checked here (a wrong type is a 422); value rules that depend on Settings, such as
the top_k range or the batch cap, are checked by the predictor so the messages name the limits.
"""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt

from tiankong.results import FillResult

IDIOM = "画龙点[MASK]"
POEM = "春眠不觉晓，处处闻啼[MASK]。"
COMMON_SENSE = "太阳从东[MASK]升起。"

PREDICT_EXAMPLES: dict[str, Any] = {
    "idiom": {"summary": "Idiom 成语", "value": {"text": IDIOM, "top_k": 5}},
    "poem": {"summary": "Poem 诗句", "value": {"text": POEM, "top_k": 5}},
    "common_sense": {"summary": "Common sense 常识", "value": {"text": COMMON_SENSE, "top_k": 5}},
}
BATCH_EXAMPLES: dict[str, Any] = {
    "three_texts": {
        "summary": "An idiom, a poem and a common-sense sentence",
        "value": {"texts": [IDIOM, POEM, COMMON_SENSE], "top_k": 3},
    },
    "one_bad_item": {
        "summary": "A text without [MASK] gets its own error entry",
        "value": {"texts": [POEM, "没有空格的句子。"], "top_k": 3},
    },
}
HF_EXAMPLES: dict[str, Any] = {
    "one_input": {"summary": "One input (the pipeline's shape)", "value": {"inputs": POEM}},
    "parameters": {
        "summary": "top_k and targets",
        "value": {"inputs": COMMON_SENSE, "parameters": {"top_k": 2, "targets": ["东", "西"]}},
    },
    "several_inputs": {
        "summary": "Several inputs: one list per input",
        "value": {"inputs": [IDIOM, POEM], "parameters": {"top_k": 3}},
    },
}

TEXT_DESCRIPTION = (
    "Chinese text with one or more [MASK] (【MASK】, ［MASK］ and [mask] are accepted too)."
)
TOP_K_DESCRIPTION = "Candidates per mask, from 1 to max_top_k (50); default 5."


def encodable(text: str) -> str:
    """JSON can carry lone surrogates (\\ud800), which no tokenizer can read."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("the text is not valid Unicode (it has a lone surrogate)") from None
    return text


Text = Annotated[str, AfterValidator(encodable)]
TopK = Annotated[StrictInt | None, Field(description=TOP_K_DESCRIPTION)]


class PredictRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: Text = Field(description=TEXT_DESCRIPTION)
    top_k: TopK = None


class BatchPredictRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    texts: list[Text] = Field(min_length=1, description="Up to max_batch_texts (64) texts.")
    top_k: TopK = None


class Candidate(BaseModel):
    token: str
    token_id: int
    score: float = Field(description="Softmax probability over the whole vocabulary.")


class Fill(BaseModel):
    """The answer for one text."""

    text: str = Field(description="The input with mask variants normalised to [MASK].")
    predictions: list[Candidate] = Field(description="The first mask's ranked candidates.")
    masks: list[list[Candidate]] = Field(description="One ranked list per mask, left to right.")
    sequence: str = Field(description="The text with every mask's top candidate filled in.")
    truncated: bool = Field(description="The text was cut to a window around the masks.")
    model: str

    @classmethod
    def from_result(cls, result: FillResult, **extra: Any) -> Self:
        masks = [
            [Candidate(token=c.token, token_id=c.token_id, score=c.score) for c in candidates]
            for candidates in result.masks
        ]
        return cls(
            text=result.text,
            predictions=masks[0] if masks else [],
            masks=masks,
            sequence=result.sequence,
            truncated=result.truncated,
            model=result.model,
            **extra,
        )


class PredictResponse(Fill):
    latency_ms: float = Field(description="Server-side time for this request.")


class ErrorDetail(BaseModel):
    code: str = Field(description="Stable, machine-readable, e.g. no_mask.")
    message: str = Field(description="One readable sentence.")


class ErrorResponse(BaseModel):
    error: ErrorDetail


class BatchPredictResponse(BaseModel):
    results: list[Fill | ErrorResponse] = Field(
        description="In input order: a fill, or an error entry for a text that can't be filled."
    )
    model: str
    latency_ms: float


class HFParameters(BaseModel):
    top_k: TopK = None
    targets: Text | list[Text] | None = Field(
        default=None, description="Rank only these single-token candidates."
    )


class HFRequest(BaseModel):
    """The Hugging Face Inference API's fill-mask request (other keys, e.g. options, ignored)."""

    inputs: Text | list[Text] = Field(description=TEXT_DESCRIPTION)
    parameters: HFParameters | None = None


class HFCandidate(BaseModel):
    sequence: str = Field(description="The text with this candidate filled in, no spaces added.")
    score: float
    token: int
    token_str: str


# One text: a list of candidates for one mask, a list of such lists for several masks.
HFOneText = list[HFCandidate] | list[list[HFCandidate]]
HFResponse = HFOneText | list[HFOneText]  # several inputs: one entry per input

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": description}
    for status, description in {
        400: "Bad input: no mask, empty text, too many masks, top_k out of range, ...",
        413: "The body is larger than max_body_bytes.",
        422: "Malformed request: bad JSON, a wrong type or a missing field.",
        503: "The model is still loading.",
    }.items()
}
