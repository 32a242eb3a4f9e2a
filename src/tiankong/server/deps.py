"""FastAPI dependencies: typed access to the app's ServerState and its ready Predictor."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from tiankong.server.state import ServerState, server_state
from tiankong.serving.predictor import Predictor


def ready_predictor(state: Annotated[ServerState, Depends(server_state)]) -> Predictor:
    """The predictor, or a 503 (model_unavailable) while the model is loading."""
    return state.require_predictor()


StateDep = Annotated[ServerState, Depends(server_state)]
PredictorDep = Annotated[Predictor, Depends(ready_predictor)]
