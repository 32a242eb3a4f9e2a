"""POST /: the Hugging Face Inference API's fill-mask route, so existing HF clients work as-is.

Request ``{"inputs": str | [str], "parameters": {"top_k": int, "targets": [str]}}``; the answer
has the pipeline's shapes: a list of ``{sequence, score, token, token_str}`` for one mask, a list
per mask for several, and a list per input for several inputs (a list of one input is answered
like a single input, as the pipeline does). Two deliberate differences from the pipeline:
``sequence`` is clean (no [CLS]/[SEP], no spaces between Chinese characters), and in a text with
several masks the *other* masks are filled with their own top candidate instead of vanishing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Body

from tiankong.errors import BadOptionError, BatchTooLargeError, EmptyTextError
from tiankong.results import FillResult
from tiankong.server.deps import PredictorDep
from tiankong.server.predictor import Predictor
from tiankong.server.schemas import (
    ERROR_RESPONSES,
    HF_EXAMPLES,
    HFParameters,
    HFRequest,
    HFResponse,
)
from tiankong.text import fill_text

router = APIRouter()


@router.post("/", response_model=HFResponse, responses=ERROR_RESPONSES, tags=["hugging-face"])
async def hf_fill_mask(
    body: Annotated[HFRequest, Body(openapi_examples=HF_EXAMPLES)], predictor: PredictorDep
) -> Any:
    """Hugging Face Inference API compatible fill-mask (`InferenceClient.fill_mask`)."""
    parameters = body.parameters or HFParameters()
    texts = [body.inputs] if isinstance(body.inputs, str) else body.inputs
    if not texts:
        raise EmptyTextError("inputs is an empty list; send a text or a list of texts.")
    limit = predictor.settings.max_batch_texts
    if len(texts) > limit:
        raise BatchTooLargeError(f"{len(texts)} inputs is over the limit of {limit}.")
    k = predictor.check_top_k(parameters.top_k)
    allowed = None
    if parameters.targets is not None:
        targets = (
            [parameters.targets] if isinstance(parameters.targets, str) else parameters.targets
        )
        allowed = allowed_targets(predictor, targets)
    results = await predictor.run([predictor.prepare(text) for text in texts], k, allowed)
    outputs = [pipeline_output(result) for result in results]
    return outputs[0] if len(outputs) == 1 else outputs


def allowed_targets(predictor: Predictor, targets: Sequence[str]) -> np.ndarray:
    """A vocabulary mask of the targets. Each must be one token for now; multi-character
    targets (scored as a chain over several masks) will be resolved here."""
    if not targets:
        raise BadOptionError("targets is empty; give at least one candidate or leave it out.")
    encoder = predictor.masker.encoder
    unknown_id = encoder.vocab.get("[UNK]")
    allowed = np.zeros(len(encoder.vocab), dtype=bool)
    for target in targets:
        token_ids = encoder.tokenizer.encode(target.strip(), add_special_tokens=False).ids
        if not token_ids:
            raise BadOptionError("Every target must be a non-empty string.")
        if unknown_id in token_ids:
            raise BadOptionError(f"The target '{target}' is not in the model's vocabulary.")
        if len(token_ids) > 1:
            raise BadOptionError(
                f"The target '{target}' is {len(token_ids)} tokens; only single-token targets "
                "(one character or one vocabulary word) are supported for now."
            )
        allowed[token_ids[0]] = True
    return allowed


def pipeline_output(result: FillResult) -> list[dict[str, Any]] | list[list[dict[str, Any]]]:
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
