"""FastAPI dependencies: typed access to the app's ServerState and its ready Predictor.

Both are ``async def`` although they never wait: FastAPI runs a plain ``def`` dependency in
anyio's worker thread, so each would cost every request a round trip to another thread (two
wake-ups, which on a busy machine is most of a fast request's time).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from tiankong.server.middleware.security import Allowance, allowance_of
from tiankong.server.state import ServerState, server_state
from tiankong.serving.predictor import Predictor


async def state_of(request: Request) -> ServerState:
    return server_state(request)


async def ready_predictor(state: Annotated[ServerState, Depends(state_of)]) -> Predictor:
    """The predictor, or a 503 (model_unavailable) while the model is loading."""
    return state.require_predictor()


async def request_allowance(request: Request) -> Allowance:
    """The client's rate-limit allowance, spent by each request's cost in forward rows."""
    return allowance_of(request.scope)


StateDep = Annotated[ServerState, Depends(state_of)]
AllowanceDep = Annotated[Allowance, Depends(request_allowance)]
PredictorDep = Annotated[Predictor, Depends(ready_predictor)]
