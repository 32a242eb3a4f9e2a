"""Request and response models of the HTTP API, with the examples /docs shows.

Types are checked here (a wrong type is a 422); value rules that depend on Settings, such as
the top_k range or the batch cap, are checked by the predictor so the messages name the limits.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictInt

from tiankong.config import Settings
from tiankong.core.beam_search import ORDERS
from tiankong.core.decoding import PRESETS
from tiankong.core.options import (
    MAX_CANDIDATES,
    MAX_CONSTRAINT_ENTRIES,
    MAX_OPTION_CHARS,
    MODES,
    RANGES,
    PredictOptions,
)

IDIOM = "画龙点[MASK]"
POEM = "春眠不觉晓，处处闻啼[MASK]。"
# the page's examples (static/app.js), which answer right with the bundled model and its
# index: 太阳从东[MASK]升起。 answered 东北, 手机没电了，赶紧去[MASK][MASK]。 赶紧去赶紧, and
# 他做事一向[MASK] with four idioms 马马虎虎, here too (a review; test_page_examples checks both)
COMMON_SENSE = "中国的首都是北[MASK]。"
WEATHER = "今天天气很[MASK]。"  # targets 好/坏: two one-character answers that both fit
WHOLE_WORD = "我饿了，我们去[MASK][MASK]吧。"
CHOICE = "他画的龙栩栩如生，真是画龙点[MASK]。"
CHOICE_OPTIONS = ["睛", "晴", "精", "请"]
BLANK_TEXT = "今天天气很[BLANK]，我们去公园吧。"
DEFAULTS = PredictOptions()

PREDICT_EXAMPLES: dict[str, Any] = {
    "idiom": {"summary": "Idiom 成语", "value": {"text": IDIOM, "top_k": 5}},
    "poem": {"summary": "Poem 诗句", "value": {"text": POEM, "top_k": 5}},
    "common_sense": {"summary": "Common sense 常识", "value": {"text": COMMON_SENSE, "top_k": 5}},
    "whole_word": {
        "summary": "Whole word 整词: joint fills of two masks (beam search)",
        "value": {"text": WHOLE_WORD, "mode": "whole_word", "beam_width": 8, "top_k": 5},
    },
    "candidates": {
        "summary": "Candidates 候选: rank your options for one blank",
        "value": {"text": CHOICE, "mode": "candidates", "candidates": CHOICE_OPTIONS},
    },
    "blank": {
        "summary": "Unknown length [BLANK] 不定长: fills of 1 to 3 characters",
        "value": {"text": BLANK_TEXT, "max_blank_length": 3, "top_k": 5},
    },
    "constraints": {
        "summary": "Constraints 约束: Chinese characters only, never 好",
        "value": {
            "text": BLANK_TEXT.replace("[BLANK]", "[MASK]"),
            "preset": "chinese_only",
            "exclude": ["好"],
        },
    },
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
    "whole_word": {
        "summary": "Options apply to every text: whole words for each",
        "value": {"texts": [WHOLE_WORD, "画[MASK]点[MASK]"], "mode": "whole_word", "top_k": 3},
    },
}
HF_EXAMPLES: dict[str, Any] = {
    "one_input": {"summary": "One input (the pipeline's shape)", "value": {"inputs": POEM}},
    "parameters": {
        "summary": "top_k and targets",
        "value": {"inputs": WEATHER, "parameters": {"top_k": 2, "targets": ["好", "坏"]}},
    },
    "word_targets": {
        "summary": "Multi-character targets: scored as a chain, not cut to their first character",
        "value": {
            "inputs": "我饿了，我们去[MASK]吧。",
            "parameters": {"targets": ["吃饭", "睡觉"]},
        },
    },
    "several_inputs": {
        "summary": "Several inputs: one list per input",
        "value": {"inputs": [IDIOM, POEM], "parameters": {"top_k": 3}},
    },
}

TEXT_DESCRIPTION = (
    "Chinese text with one or more [MASK] (【MASK】, ［MASK］, ［ＭＡＳＫ］ and [mask] are "
    "accepted too), or one [BLANK]: a blank of unknown length (1 to max_blank_length characters)."
)
TOP_K_DESCRIPTION = (  # the limits from the settings table, where they are written once
    f"Candidates per mask, from 1 to max_top_k ({Settings.max_top_k}); "
    f"default {Settings.default_top_k}."
)
MODE_DESCRIPTION = (
    f"One of {', '.join(MODES)}. single: a ranked list per mask. whole_word: also joint fills "
    "of all masks (beam search), in `sequences`. candidates: rank the options in `candidates` "
    "for the one blank, in `candidates`. Giving `candidates` alone implies candidates mode."
)
ORDER_DESCRIPTION = (
    f"Joint decoding order, {' or '.join(ORDERS)}: reading order, or the most confident mask "
    "first (re-running the model after each fill)."
)
CANDIDATES_DESCRIPTION = (
    f"Options for the one blank (one [MASK], a run of [MASK]s or a [BLANK]); at most "
    f"{MAX_CANDIDATES}, each up to {MAX_OPTION_CHARS} characters. Ranked by the mean "
    "log-probability per token of the exact left-to-right chain."
)


def encodable(text: str) -> str:
    """JSON can carry lone surrogates (\\ud800), which no tokenizer can read. For an option's
    words (a malformed request, 422); a text to fill or check is refused by the core's
    ``check_unicode`` instead (400 ``bad_input``), as one text of a batch is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("the text is not valid Unicode (it has a lone surrogate)") from None
    return text


Text = Annotated[str, AfterValidator(encodable)]


def limits(option: str) -> dict[str, Any]:
    """An option's range (``core.options.RANGES``, where it is checked) for the document."""
    least, most = RANGES[option]
    return {"minimum": least, "maximum": most}


TopK = Annotated[StrictInt | None, Field(description=TOP_K_DESCRIPTION)]


def written_as(pattern: str, what: str) -> BeforeValidator:
    """A number in a query string written plainly: Python's own parsing took ``3_0`` for 30,
    and ``3.0``, `` 3`` and ``nan`` as well, where a JSON body takes none of them."""
    form = re.compile(pattern)

    def check(value: object) -> object:
        if isinstance(value, str) and not form.fullmatch(value):
            raise ValueError(f"Input should be {what}")
        return value

    return BeforeValidator(check)


WholeNumber = Annotated[int, written_as(r"-?[0-9]+", "a whole number written in digits, e.g. 5")]
Decimal = Annotated[
    float,
    written_as(r"-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?", "a number, e.g. 1.5"),
]


class OptionFields(BaseModel):
    """The prediction options, shared by /predict (body or query) and /batch_predict.

    Types are checked here (a wrong type is a 422; JSON bodies are strict, so "8" or true is
    not a number, while a query string is parsed, from numbers written plainly); values are
    checked by ``FillMasker.options`` (a bad value is a 400 ``bad_option`` naming the allowed
    values). NaN and infinity (which Python's JSON reader takes) are a 422 as well.
    """

    model_config = ConfigDict(allow_inf_nan=False)

    mode: Text = Field(
        default=DEFAULTS.mode, description=MODE_DESCRIPTION, json_schema_extra={"enum": [*MODES]}
    )
    beam_width: WholeNumber = Field(
        default=DEFAULTS.beam_width,
        description="Beam width for joint fills, 1 to 64.",
        json_schema_extra=limits("beam_width"),
    )
    order: Text = Field(
        default=DEFAULTS.order, description=ORDER_DESCRIPTION, json_schema_extra={"enum": [*ORDERS]}
    )
    candidates: list[Text] | None = Field(
        default=None,
        description=CANDIDATES_DESCRIPTION,
        json_schema_extra={"maxItems": MAX_CANDIDATES},
    )
    allowed: list[Text] | None = Field(
        default=None,
        description="Only these characters or words may fill a mask (a word allows its "
        "characters; where a word of several characters is listed, the whole fills of "
        "whole-word mode and [BLANK]s are the listed entries themselves).",
        json_schema_extra={"maxItems": MAX_CONSTRAINT_ENTRIES},
    )
    exclude: list[Text] | None = Field(
        default=None,
        description="Characters or words whose characters never fill a mask.",
        json_schema_extra={"maxItems": MAX_CONSTRAINT_ENTRIES},
    )
    preset: Text | None = Field(
        default=None,
        description="Constraint preset: chinese_only (Han characters only) or no_punctuation.",
        json_schema_extra={"enum": [*PRESETS, None]},
    )
    max_blank_length: WholeNumber = Field(
        default=DEFAULTS.max_blank_length,
        description="A [BLANK] is tried with fills of 1 to this many characters (1 to 4).",
        json_schema_extra=limits("max_blank_length"),
    )
    length_alpha: Decimal = Field(
        default=DEFAULTS.length_alpha,
        description="[BLANK] fills of different lengths rank by log P / length ** alpha (0 to 2).",
        json_schema_extra=limits("length_alpha"),
    )
    index: bool = Field(
        default=DEFAULTS.index,
        description="Mix in the server's corpus index (GET /info says which, if any); false "
        "gives the model's own probabilities.",
    )


class OneText(BaseModel):
    text: str = Field(description=TEXT_DESCRIPTION, examples=[POEM])
    top_k: TopK = None


class ManyTexts(BaseModel):
    texts: list[str] = Field(
        min_length=1, description="Up to max_batch_texts texts (the server's --max-batch-texts)."
    )
    top_k: TopK = None


# The text fields come first in the schema (pydantic orders fields base-first, right to left).
class PredictRequest(OptionFields, OneText):
    model_config = ConfigDict(extra="forbid", strict=True)


class QueryText(BaseModel):
    text: str = Field(description=TEXT_DESCRIPTION, examples=[POEM])
    top_k: WholeNumber | None = Field(default=None, description=TOP_K_DESCRIPTION)


class PredictQuery(OptionFields, QueryText):
    """GET /predict's query: the same fields, parsed from strings; list fields repeat the key
    (?candidates=充电&candidates=吃饭). An unknown key is a 422, as in a JSON body: ``topk=10``
    was ignored, and five answers came back."""

    model_config = ConfigDict(extra="forbid")


class BatchPredictRequest(OptionFields, ManyTexts):
    """The options apply to every text."""

    model_config = ConfigDict(extra="forbid", strict=True)


MODEL_SCORE_DESCRIPTION = (
    "The model's own {what}, before the corpus index was mixed in (equal to score when the "
    "index is off or found nothing)."
)
MEMORY_DESCRIPTION = (
    "The corpus index's evidence for this candidate, or null when the index didn't contribute."
)


class MemoryOut(BaseModel):
    """Where the corpus index saw this fill."""

    count: int = Field(
        description="Occurrences of the matched text in the index, counted up to 512 on each "
        "side of the blank (a lookup reads no more; docs/INDEX.md)."
    )
    match: str = Field(description="The matched text: left context + fill + right context.")
    example: str = Field(description="A source line, trimmed to about 60 characters (… a cut).")


class Candidate(BaseModel):
    token: str
    token_id: int
    score: float = Field(
        description="Softmax probability over the whole vocabulary; under constraints, "
        "renormalised over the allowed tokens."
    )
    raw_score: float | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="Only under constraints: the model's own softmax probability.",
    )
    model_score: float | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description=MODEL_SCORE_DESCRIPTION.format(what="score"),
    )
    memory: MemoryOut | None = Field(default=None, description=MEMORY_DESCRIPTION)


class SequenceOut(BaseModel):
    """A joint fill of every blank (whole-word mode or a [BLANK])."""

    fill: str = Field(description="The characters that fill the blanks, e.g. 充电.")
    text: str = Field(description="The sentence with the fill in place.")
    fills: list[str] = Field(
        description="Each blank's part of fill, left to right: one per [MASK] in whole-word "
        "mode, one for a [BLANK] (天|天 or |天天 in [MASK]天[MASK]气 can't be told from text)."
    )
    score: float = Field(
        description="Joint probability (chain of conditionals); renormalised under constraints."
    )
    normalised: float = Field(
        description="exp(mean log-probability per character): comparable across lengths."
    )
    model_score: float | None = Field(
        default=None, description=MODEL_SCORE_DESCRIPTION.format(what="joint probability")
    )
    memory: MemoryOut | None = Field(default=None, description=MEMORY_DESCRIPTION)
    rank_score: float = Field(
        default=0.0,
        description="What the fills are ranked by: score for whole words; for a [BLANK]'s "
        "fills the model's part of the score as exp(log P / length ** length_alpha), so "
        "lengths compare, plus the corpus index's part as it is (the list's order).",
    )


class CandidateOut(BaseModel):
    """One option of candidates mode, scored in context."""

    option: str
    text: str = Field(description="The sentence with this option in the blank.")
    score: float = Field(
        description="exp(mean log-probability per token): the ranking score, length-normalised, "
        "with the corpus index's evidence mixed in when the index is on (model_score: the "
        "model's own)."
    )
    joint: float = Field(
        description="The model's exact chain probability of all the option's tokens (the "
        "corpus index never enters it)."
    )
    in_vocabulary: bool = Field(description="False when a character is unknown to the model.")
    model_score: float | None = Field(
        default=None, description=MODEL_SCORE_DESCRIPTION.format(what="ranking score")
    )
    memory: MemoryOut | None = Field(default=None, description=MEMORY_DESCRIPTION)


# The routes write this shape straight from the result (responses.py); the model declares it.
class Fill(BaseModel):
    """The answer for one text."""

    text: str = Field(description="The input with mask variants normalised to [MASK].")
    predictions: list[Candidate] = Field(description="The first mask's ranked candidates.")
    masks: list[list[Candidate]] = Field(description="One ranked list per mask, left to right.")
    sequence: str = Field(description="The text with every mask's top candidate filled in.")
    truncated: bool = Field(description="The text was cut to a window around the masks.")
    model: str
    sequences: list[SequenceOut] = Field(
        default_factory=list,
        description="Whole-word mode and [BLANK]: joint fills, best first (else empty).",
    )
    candidates: list[CandidateOut] = Field(
        default_factory=list, description="Candidates mode: the options, best first (else empty)."
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="Readable notes on the text, e.g. that it has no Chinese character.",
    )


class PredictResponse(Fill):
    latency_ms: float = Field(description="Server-side time for this request.")


class ErrorDetail(BaseModel):
    code: str = Field(description="Stable, machine-readable, e.g. no_mask.")
    message: str = Field(description="One readable sentence.")
    # Left out of the JSON unless there is an id (the documented error shape has no null key);
    # exclude_if drops it at serialisation and leaves the published schema as it was.
    error_id: str | None = Field(
        default=None,
        exclude_if=lambda error_id: error_id is None,
        description="Server faults only (5xx): the key to the traceback in the server log.",
    )


class ErrorResponse(BaseModel):
    error: ErrorDetail


class BatchPredictResponse(BaseModel):
    results: list[Fill | ErrorResponse] = Field(
        description="In input order: a fill, or an error entry for a text that can't be filled."
    )
    model: str
    latency_ms: float


class HFParameters(BaseModel):
    """The pipeline's fill-mask parameters. An unknown key is a 422, as the pipeline refuses
    an unknown keyword."""

    model_config = ConfigDict(extra="forbid")  # "topk" was ignored: five answers came back

    top_k: TopK = None
    targets: Text | list[Text] | None = Field(
        default=None,
        description="Rank only these candidates. Characters are ranked per mask as in the "
        "pipeline; words of several characters are scored by their exact chain probability. "
        f"At most {MAX_CONSTRAINT_ENTRIES}, or {MAX_CANDIDATES} where one is of several "
        "characters.",
    )
    tokenizer_kwargs: dict[str, Any] | None = Field(
        default=None,
        description="The pipeline's parameter, refused here with any setting in it (400 "
        "bad_option; {} asks for nothing): every text is read with the model's own tokenizer, "
        "whole, within the server's token window.",
    )


class HFOptions(BaseModel):
    """The Inference API's ``options``: its two keys taken and not used; any other is a 422,
    as in ``parameters`` ({"use_cahce": false} was taken with no word: a review)."""

    model_config = ConfigDict(extra="forbid")

    wait_for_model: bool | None = Field(
        default=None, description="Taken and not used: the model is loaded before /ready."
    )
    use_cache: bool | None = Field(
        default=None,
        description="Taken and not used: answers are cached by the server's own rule "
        "(--result-cache-size).",
    )


class HFRequest(BaseModel):
    """The Hugging Face Inference API's fill-mask request. Its ``options`` are taken and not
    used; any other key is a 422, as in ``parameters`` (a top-level "top_k" or a misspelt
    "parameter" fell back to the defaults with no word: a review)."""

    model_config = ConfigDict(extra="forbid")

    inputs: str | list[str] = Field(
        description="Chinese text with one or more [MASK] (【MASK】, ［MASK］, ［ＭＡＳＫ］ and "
        "[mask] are accepted too), or a list of such texts. A [BLANK] is not taken here (400): "
        "the Hugging Face API has no blank of unknown length; POST /predict has."
    )
    parameters: HFParameters | None = None
    options: HFOptions | None = Field(
        default=None,
        description="The Inference API's options (wait_for_model, use_cache): taken and not "
        "used (the model is loaded, and answers are cached by the server's own rule); any "
        "other key is a 422.",
    )


class HFCandidate(BaseModel):
    sequence: str = Field(description="The text with this candidate filled in, no spaces added.")
    score: float = Field(
        description="The model's probability; for a multi-character target, the joint chain "
        "probability of all its characters."
    )
    token: int = Field(description="The token id; for a multi-token target, its first token's.")
    token_str: str = Field(description="The token, or the whole multi-character target.")


# One text: a list of candidates for one mask, a list of such lists for several masks.
HFOneText = list[HFCandidate] | list[list[HFCandidate]]
HFResponse = HFOneText | list[HFOneText]  # several inputs: one entry per input


def error_responses(bad_input: str) -> dict[int | str, dict[str, Any]]:
    """The error answers of a route whose 400 means ``bad_input``."""
    return {**ERROR_RESPONSES, 400: {"model": ErrorResponse, "description": bad_input}}


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": description}
    for status, description in {
        400: "Bad input: no mask, empty text, too many masks, top_k out of range, a bad option.",
        401: "API keys are on and the request carries none of them (Bearer or X-API-Key).",
        408: "The body came more slowly than client_timeout_s allows.",
        413: "The body is larger than max_body_bytes.",
        422: "Malformed request: bad JSON, a wrong type or a missing field.",
        429: "Over the rate limit; Retry-After says when to come back.",
        503: "The model is still loading, the queue is full or the server is shutting down; "
        "Retry-After says when to come back.",
        504: "The request did not finish within request_timeout_s.",
    }.items()
}
