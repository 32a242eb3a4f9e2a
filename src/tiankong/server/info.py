"""GET /info: the routes module's answer plus the serving section (batcher, caches, INT8 guard).

``routes.info`` describes the model, limits and traffic; ``Predictor.serving_info`` adds the
batcher's settings and queue depth, the caches' sizes and hit counts, and, when the engine has a
``quality`` record (the ONNX INT8 guard), its figures. This router is included before
``routes.router``, so its GET /info is the one that answers. (routes.py is being changed by
another piece of work; once it is free, ``routes.info`` can merge ``serving_info`` itself and
this module goes.)
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from tiankong.server import routes
from tiankong.server.deps import StateDep

router = APIRouter()


@router.get("/info", tags=["operations"], include_in_schema=False)
async def info_with_serving(state: StateDep) -> dict[str, Any]:
    info = await routes.info(state)
    if state.predictor is not None:
        info.update(state.predictor.serving_info())
    return info
