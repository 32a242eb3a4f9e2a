"""FastAPI dependencies: typed access to the app's ServerState and its ready Predictor.

Every one is ``async def`` although none waits: FastAPI runs a plain ``def`` dependency in
anyio's worker thread, so each would cost every request a round trip to another thread (two
wake-ups, which on a busy machine is most of a fast request's time). The inference routes take
one dependency, ``ServingDep`` (the predictor and the client's allowance together): FastAPI
solves each dependency of each request anew, so one costs a third of the three it replaced.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin
from urllib.parse import parse_qsl, unquote_to_bytes

from fastapi import Depends, Request

from tiankong.errors import InvalidRequestError
from tiankong.server.middleware.security import Allowance, allowance_of
from tiankong.server.schemas import PredictQuery
from tiankong.server.state import ServerState, server_state
from tiankong.serving.predictor import Predictor


async def state_of(request: Request) -> ServerState:
    return server_state(request)


async def request_allowance(request: Request) -> Allowance:
    """The client's rate-limit allowance, spent by each request's cost in forward rows."""
    return allowance_of(request.scope)


@dataclass(frozen=True, slots=True)
class Serving:
    """What an inference route needs: the ready predictor and the client's allowance."""

    predictor: Predictor
    allowance: Allowance


def serving_now(request: Request) -> Serving:
    """The predictor (or a 503 ``model_unavailable`` while the model is loading) and the
    client's rate-limit allowance, spent by each request's cost in forward rows."""
    return Serving(server_state(request).require_predictor(), allowance_of(request.scope))


async def serving_of(request: Request) -> Serving:
    """``serving_now`` as a dependency (``ServingRoute`` calls ``serving_now`` itself)."""
    return serving_now(request)


async def utf8_query(request: Request) -> None:
    """A query string percent-encodes UTF-8: other bytes (a surrogate's among them) are a 422,
    not read as U+FFFD as Starlette reads them, so GET /predict answers what a POST body with
    the same bytes answers."""
    for part in request.scope.get("query_string", b"").split(b"&"):
        try:
            unquote_to_bytes(part.replace(b"+", b" ")).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRequestError(
                "The query string is not valid UTF-8; percent-encode the text as UTF-8."
            ) from None


async def once_each(request: Request) -> None:
    """A key that takes one value, given twice in the query string, is a 422: the last one
    was used without a word (``?text=画龙点[MASK]&text=abc`` answered abc's error). List
    options repeat their key (``?candidates=充电&candidates=吃饭``)."""
    counts = Counter(
        key
        for key, _ in parse_qsl(
            request.scope.get("query_string", b"").decode(), keep_blank_values=True
        )
    )
    for key, count in counts.items():
        field = PredictQuery.model_fields.get(key)
        if (
            count > 1
            and field is not None
            and get_origin(strip_optional(field.annotation)) is not list
        ):
            raise InvalidRequestError(
                f"'{key}' is given {count} times in the query string; give it once."
            )


def strip_optional(annotation: Any) -> Any:
    """``X | None`` -> ``X``."""
    args = [arg for arg in get_args(annotation) if arg is not type(None)]
    return (
        args[0] if get_origin(annotation) in (Union, UnionType) and len(args) == 1 else annotation
    )


StateDep = Annotated[ServerState, Depends(state_of)]
AllowanceDep = Annotated[Allowance, Depends(request_allowance)]
ServingDep = Annotated[Serving, Depends(serving_of)]
