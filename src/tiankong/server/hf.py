"""POST /: the Hugging Face Inference API's fill-mask route, so existing HF clients work as-is.

Request ``{"inputs": str | [str], "parameters": {"top_k": int, "targets": [str]}}``; the answer
has the pipeline's shapes: a list of ``{sequence, score, token, token_str}`` for one mask, a list
per mask for several, and a list per input for several inputs (a list of one input is answered
like a single input, as the pipeline does). Two deliberate differences from the pipeline:
``sequence`` is clean (no [CLS]/[SEP], no spaces between Chinese characters), and in a text with
several masks the *other* masks are filled with their own top candidate instead of vanishing.

``targets`` that are all single tokens are ranked per mask, exactly as the pipeline does. A target
of several tokens (a word such as 飞鸟) is never cut to its first token: the text's one blank is
scored with each target by the exact chain probability (tiankong's candidates mode).

A ``[BLANK]`` (a blank of unknown length) is a 400 ``bad_input`` here: the pipeline's shapes have
no place for a fill of unknown length. ``POST /predict`` answers it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Body

from tiankong.core.options import (
    MASK_RUN,
    MAX_CANDIDATES,
    PredictOptions,
    check_entry_count,
    check_option,
)
from tiankong.core.request import PreparedRequest
from tiankong.core.results import FillResult
from tiankong.core.text import BLANK, fill_text, normalize_masks
from tiankong.errors import (
    BadInputError,
    BadOptionError,
    EmptyTextError,
    TextTooLongError,
    TiankongError,
    each_named,
)
from tiankong.server.deps import ServingDep
from tiankong.server.dispatch import check_batch_size
from tiankong.server.middleware.security import Allowance
from tiankong.server.responses import JSONBody
from tiankong.server.schemas import (
    ERROR_RESPONSES,
    HF_EXAMPLES,
    HFParameters,
    HFRequest,
    HFResponse,
)
from tiankong.serving.predictor import Predictor

router = APIRouter()
# The route's contract is transformers' pipeline("fill-mask") output, whose shape has no place
# for the corpus index's evidence: it answers with the model's own probabilities (the index is
# off here). POST /predict gives the grounded answer with its evidence.
HF_USES_INDEX = False
# One text's answer: a list of candidates for one mask, a list of such lists for several.
PipelineOutput = list[dict[str, Any]] | list[list[dict[str, Any]]]


@router.post("/", response_model=HFResponse, responses=ERROR_RESPONSES, tags=["hugging-face"])
async def hf_fill_mask(
    body: Annotated[HFRequest, Body(openapi_examples=HF_EXAMPLES)], serving: ServingDep
) -> Any:
    """Hugging Face Inference API compatible fill-mask (`InferenceClient.fill_mask`)."""
    predictor, allowance = serving.predictor, serving.allowance
    parameters = body.parameters or HFParameters()
    texts = [body.inputs] if isinstance(body.inputs, str) else body.inputs
    if not texts:
        raise EmptyTextError("inputs is an empty list; send a text or a list of texts.")
    check_batch_size(predictor.settings, len(texts), "inputs")
    if parameters.tokenizer_kwargs:  # {} asks for nothing, as in the pipeline
        raise BadOptionError(
            "tokenizer_kwargs is not taken here: the server reads every text with the model's "
            "own tokenizer, whole, within its token window (--max-length)."
        )
    options = predictor.options(parameters.top_k, index=HF_USES_INDEX)
    prepared = each_input(body.inputs, lambda text: plain_request(predictor, text, options))
    if parameters.targets is None:
        outputs = await plain_outputs(predictor, prepared, None, allowance)
    else:
        targets = (
            [parameters.targets] if isinstance(parameters.targets, str) else parameters.targets
        )
        target_ids = target_tokens(predictor, targets)
        if all(len(ids) == 1 for ids in target_ids.values()):
            allowed = allowed_targets(predictor, target_ids)
            outputs = await plain_outputs(predictor, prepared, allowed, allowance)
        else:
            outputs = await ranked_targets(
                predictor, body.inputs, target_ids, options.top_k, allowance
            )
    return JSONBody(outputs[0] if len(outputs) == 1 else outputs)  # as is: responses.py


def each_input(
    inputs: str | list[str], prepare: Callable[[str], PreparedRequest]
) -> list[PreparedRequest]:
    """Each text ``prepare``d; a list's bad one named, ``inputs[1]: …`` (the pipeline refuses
    them all): the targets' path said which rule a text broke and not which text (a review)."""
    if isinstance(inputs, str):
        return [prepare(inputs)]
    return each_named(inputs, prepare, "inputs")


async def plain_outputs(
    predictor: Predictor,
    requests: Sequence[PreparedRequest],
    allowed: np.ndarray | None,
    allowance: Allowance,
) -> list[PipelineOutput]:
    """The pipeline's answers for plain requests (``allowed``: single-token targets), run like
    every other route's (``Predictor.run_many``: priced once, batched, finished). The
    pipeline's shape has no place for a per-text error, so a list's first text with one (a
    text the model gives no numbers for, one past the deadline) answers the request."""
    outputs: list[PipelineOutput] = []
    for answer in await predictor.run_many(requests, allowed, allowance=allowance):
        if isinstance(answer, TiankongError):
            raise answer
        outputs.append(pipeline_output(whole(answer)))
    return outputs


def plain_request(predictor: Predictor, text: str, options: PredictOptions) -> PreparedRequest:
    """The pipeline fills [MASK] tokens only. A [BLANK] (a blank of unknown length) has no
    answer in the pipeline's shape, so it is a 400 that points to POST /predict, which answers it,
    rather than a guess."""
    request = whole_text(predictor.prepare_request(text, options))
    if not request.plain:
        raise BadInputError(
            "The Hugging Face route fills [MASK] only; for a [BLANK] (a blank of unknown "
            "length) use POST /predict."
        )
    return request


NOT_WHOLE = (
    "The text is longer than the token window this server reads (--max-length); the Hugging "
    "Face route answers as the pipeline does, on the whole text, so it refuses it. POST "
    '/predict fills it in a window around the masks ("truncated": true).'
)


def whole_text(request: PreparedRequest) -> PreparedRequest:
    """The pipeline reads a text whole; a text longer than the server's window was cut to a
    window around its masks, and the answer, in the pipeline's shape with no place to say so,
    differed from the pipeline's without a word. POST /predict cuts it and says so. Checked
    before any engine work on the one-mask reading, and after it on the answer (``whole``):
    a target of several characters makes the text longer."""
    if request.prepared.truncated:
        raise TextTooLongError(NOT_WHOLE)
    return request


def whole(result: FillResult) -> FillResult:
    """``result`` if none of its readings was cut (``whole_text``)."""
    if result.truncated:
        raise TextTooLongError(NOT_WHOLE)
    return result


def target_tokens(predictor: Predictor, targets: Sequence[str]) -> dict[str, list[int]]:
    """Each distinct target (stripped, in order) and its token ids; an empty target, one with
    a character the model doesn't know or a special token is a 400, so no score is ever made up
    for it and no special token is ever an answer."""
    if not targets:
        raise BadOptionError("targets is empty; give at least one candidate or leave it out.")
    # this route has no preset: it was offered here, and refused (a review)
    check_entry_count(
        targets, "targets", "POST /predict keeps to Han characters with its preset chinese_only"
    )
    masker = predictor.masker
    unknown_id = masker.encoder.vocab.get("[UNK]")
    target_ids: dict[str, list[int]] = {}
    for target in targets:
        check_option(target, "target")  # the candidates' rule (a word piece too), named so
        if target.strip() in target_ids:
            continue  # read once
        token_ids = masker.option_tokens(target, "target")
        if unknown_id in token_ids:
            raise BadOptionError(
                f"The target '{target}' has a character that is not in the model's vocabulary."
            )
        target_ids[target.strip()] = token_ids
    words = any(len(ids) > 1 for ids in target_ids.values())
    if words and len(target_ids) > MAX_CANDIDATES:
        # ranked as candidates (``ranked_targets``), whose cap it met in their words: "At most
        # 50 candidates", of a parameter the client never sent (a review)
        raise BadOptionError(
            f"At most {MAX_CANDIDATES} targets where one is of several characters (each is "
            f"scored as a whole word); got {len(target_ids)}."
        )
    return target_ids


def allowed_targets(predictor: Predictor, target_ids: dict[str, list[int]]) -> np.ndarray:
    """A vocabulary mask of single-token targets: each mask ranks them as the pipeline does."""
    allowed = np.zeros(predictor.masker.width, dtype=bool)
    for ids in target_ids.values():
        allowed[ids[0]] = True
    return allowed


async def ranked_targets(
    predictor: Predictor,
    inputs: str | list[str],
    target_ids: dict[str, list[int]],
    k: int,
    allowance: Allowance,
) -> list[PipelineOutput]:
    """Multi-token targets: candidate ranking of the one blank of each text.

    ``score`` is the exact chain probability of the target's tokens (for a one-token target,
    the model's softmax probability, as in the pipeline); the list is ordered by the
    length-normalised score (mean log-probability per token), so words of different lengths
    compare fairly. ``token`` is the first token's id; ``token_str`` is the whole target.
    The request is priced, and spent from the client's allowance, like a ``/batch_predict`` in
    candidates mode; one deadline covers every text, and the pipeline's shape has no place for
    a per-text error, so the first text's error (a 504 past the deadline) answers the request.
    """
    options = predictor.masker.options(
        k, mode="candidates", candidates=tuple(target_ids), index=HF_USES_INDEX
    )
    several = next(target for target, ids in target_ids.items() if len(ids) > 1)

    def prepare(text: str) -> PreparedRequest:
        try:
            return whole_text(predictor.prepare_request(text, options))
        except BadOptionError:
            marked = normalize_masks(text)
            if len(MASK_RUN.findall(marked)) + marked.count(BLANK) == 1:
                raise
            # it said "Candidate ranking takes exactly one blank", which no client asked for
            raise BadOptionError(
                f"A target of several tokens ('{several}') is scored as the fill of one blank, "
                "so each text needs exactly one [MASK] (or one run of [MASK]s); give "
                "one-token targets for a text with several."
            ) from None

    # every text has one blank, checked before any engine work
    requests = each_input(inputs, prepare)
    outputs: list[PipelineOutput] = []
    for answer in await predictor.run_many(requests, allowance=allowance):
        if isinstance(answer, TiankongError):
            raise answer
        outputs.append(
            [
                {
                    "sequence": candidate.text,
                    "score": candidate.joint,
                    "token": target_ids[candidate.option][0],
                    "token_str": candidate.option,
                }
                for candidate in whole(answer).candidates[:k]
            ]
        )
    return outputs


def pipeline_output(result: FillResult) -> PipelineOutput:
    """The pipeline's shape for one text: a list for one mask, a list of lists for several."""
    top_tokens = [candidates[0].token for candidates in result.masks]
    per_mask = [
        [
            {
                "sequence": fill_text(
                    result.text, [*top_tokens[:index], candidate.token, *top_tokens[index + 1 :]]
                ),
                # with targets, HF reports the model's probability, not a renormalised one
                "score": candidate.score if candidate.raw_score is None else candidate.raw_score,
                "token": candidate.token_id,
                "token_str": candidate.token,
            }
            for candidate in candidates
        ]
        for index, candidates in enumerate(result.masks)
    ]
    return per_mask[0] if len(per_mask) == 1 else per_mask
