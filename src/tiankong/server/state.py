"""What one app holds on ``app.state``: settings, metrics, the model and its Predictor, the drain.

No module-level model or settings: ``create_app`` builds one ``ServerState`` per app.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request

from tiankong.config import Settings
from tiankong.errors import ModelUnavailableError
from tiankong.server.metrics import ServerMetrics
from tiankong.service import FillMasker
from tiankong.serving.checking import CheckServing
from tiankong.serving.drain import Drain
from tiankong.serving.predictor import Predictor


@dataclass
class ServerState:
    """What one app holds on ``app.state``: no module-level model or settings."""

    settings: Settings
    metrics: ServerMetrics
    masker: FillMasker | None = None  # given by the caller, else loaded in lifespan
    predictor: Predictor | None = None  # set once the model is loaded and warmed up
    drain: Drain = field(default_factory=Drain)  # requests in flight; draining after SIGTERM
    checking: CheckServing | None = None  # the check task (proofreading), with the predictor

    @property
    def ready(self) -> bool:
        return self.predictor is not None and not self.drain.draining

    def require_predictor(self) -> Predictor:
        if self.predictor is None:
            raise ModelUnavailableError(
                "The model is still loading; retry when GET /ready answers 200."
            )
        return self.predictor


def server_state(request: Request) -> ServerState:
    state = request.app.state.tiankong
    assert isinstance(state, ServerState)
    return state
