"""What the contender apps share: flags, the FastAPI app and top-k at the masks.

Each app loads its model, runs one warm-up fill, and only then starts uvicorn, so ``/health``
answering 200 means ready (tiankong's own ``/ready`` means the same). The ``/predict`` handler
is a plain ``def``, which is how these apps are usually written: FastAPI runs it in its thread
pool, so concurrent requests run concurrent forwards.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel

Fill = Callable[[str, int], list[list[dict[str, Any]]]]
WARMUP_TEXT = "今天天气很[MASK]，我们去公园散步吧。"


class PredictRequest(BaseModel):
    text: str
    top_k: int = 5


def parse_args(description: str, argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", required=True, help="local model folder")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads")
    parser.add_argument("--precision", choices=("fp32", "int8"), default="fp32")
    return parser.parse_args(argv)


def top_k_at_masks(
    mask_logits: np.ndarray, k: int, tokens: Callable[[list[int]], Any]
) -> list[list[dict[str, Any]]]:
    """Softmax over the vocabulary of each mask's logits ``[masks, vocab]``, then the k best."""
    rows = mask_logits.astype(np.float64)
    rows = np.exp(rows - rows.max(axis=-1, keepdims=True))
    rows /= rows.sum(axis=-1, keepdims=True)
    answers = []
    for row in rows:
        best = np.argpartition(-row, k)[:k]
        best = best[np.argsort(-row[best])]
        answers.append(
            [
                {"token": token, "token_id": int(token_id), "score": float(row[token_id])}
                for token, token_id in zip(list(tokens(best.tolist())), best, strict=True)
            ]
        )
    return answers


def serve(fill: Fill, args: argparse.Namespace) -> None:
    import uvicorn
    from fastapi import FastAPI

    fill(WARMUP_TEXT, 5)
    app = FastAPI()

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/predict")
    def predict(request: PredictRequest) -> dict[str, Any]:
        return {"masks": fill(request.text, request.top_k)}

    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
