"""JSON bodies written straight from the frozen results, not through the response models.

FastAPI would validate a route's return value against its response model (``schemas.py``) and
serialise that: a second copy of every candidate per request. The routes here return these
bodies as they are; the models still declare the responses, so the OpenAPI document is the
same, and ``tests/server/test_responses.py`` checks that every body equals what its model makes
of it. Every field of a result and of its candidates is carried (a field added to a result type
needs no change here); ``raw_score`` and ``model_score`` are left out when None, as the
``Candidate`` model does; ``memory`` is always there (null: no evidence).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic_core import to_json
from starlette.responses import FileResponse, MalformedRangeHeader, RangeNotSatisfiable, Response

from tiankong.core.results import FillResult
from tiankong.errors import BadRangeError, RangeNotSatisfiableError, TiankongError
from tiankong.server.error_handlers import error_body

# Candidate fields the ``Candidate`` model leaves out when None (``memory`` stays: null says
# the corpus index didn't contribute).
OMITTED_WHEN_NONE = frozenset({"raw_score", "model_score"})


class JSONBody(Response):
    """A JSON response from plain data (dicts, lists, scalars and dataclasses)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return to_json(content)


def fill_payload(result: FillResult, **extra: Any) -> dict[str, Any]:
    """One text's answer in the ``Fill`` shape; ``extra`` adds fields (``latency_ms``)."""
    masks = [
        [
            {
                name: value
                for name, value in vars(candidate).items()
                if value is not None or name not in OMITTED_WHEN_NONE
            }
            for candidate in candidates
        ]
        for candidates in result.masks
    ]
    payload = {"text": result.text, "predictions": masks[0] if masks else [], **vars(result)}
    payload["masks"] = masks  # the nested dataclasses (sequences, candidates) serialise as is
    payload.update(extra)
    return payload


def error_payload(error: TiankongError) -> dict[str, Any]:
    """A batch item's error entry: the one error shape (``error_id`` only when there is one)."""
    return error_body(error.code, error.message, error.error_id)


def batch_payload(
    answers: Sequence[FillResult | TiankongError], model: str, latency_ms: float
) -> dict[str, Any]:
    results = [
        fill_payload(answer) if isinstance(answer, FillResult) else error_payload(answer)
        for answer in answers
    ]
    return {"results": results, "model": model, "latency_ms": latency_ms}


class RangedFile(FileResponse):
    """A file (the page, its modules) whose bad Range header raises a typed error, answered in
    the one JSON shape: Starlette's FileResponse answered 400 and 416 itself, in plain text. A
    range unit other than bytes is ignored and the whole file sent, as RFC 9110 (14.2) requires
    of a unit the server doesn't understand."""

    @classmethod
    def _parse_range_header(cls, http_range: str, file_size: int) -> list[tuple[int, int]]:
        unit, equals, _ = http_range.partition("=")
        if equals and unit.strip() and unit.strip().lower() != "bytes":
            return []  # no ranges: Starlette sends the whole file, 200
        try:
            return super()._parse_range_header(http_range, file_size)
        except RangeNotSatisfiable:
            raise RangeNotSatisfiableError(
                f"The Range header asks for bytes the file doesn't have ({file_size:,} bytes).",
                file_size,
            ) from None
        except MalformedRangeHeader as error:
            raise BadRangeError(
                f"The Range header can't be read ({error.content}); send bytes=START-END."
            ) from None
