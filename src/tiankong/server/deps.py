"""FastAPI dependencies: typed access to the app's ServerState and its ready Predictor."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from tiankong.server.middleware.security import Allowance, allowance_of
from tiankong.server.state import ServerState, server_state
from tiankong.serving.predictor import Predictor


def ready_predictor(state: Annotated[ServerState, Depends(server_state)]) -> Predictor:
    """The predictor, or a 503 (model_unavailable) while the model is loading."""
    return state.require_predictor()


def request_allowance(request: Request) -> Allowance:
    """The client's rate-limit allowance, spent by each request's cost in forward rows."""
    return allowance_of(request.scope)


StateDep = Annotated[ServerState, Depends(server_state)]
AllowanceDep = Annotated[Allowance, Depends(request_allowance)]
PredictorDep = Annotated[Predictor, Depends(ready_predictor)]
