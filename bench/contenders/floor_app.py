"""The serving floor: a bare FastAPI app that validates the same body with pydantic and returns
a fixed five-candidate answer, shaped like tiankong's, without any model.

    python -m bench.contenders.floor_app --model DIR --port 8009

Its c=1 p50 is what FastAPI, uvicorn, pydantic and JSON cost on this machine and client;
``tiankong serve --engine fake`` over it is tiankong's own per-request overhead. The handler is
``async def`` (nothing to compute, so no thread-pool hop): the lowest a FastAPI app can go.
``--model``, ``--threads`` and ``--precision`` are accepted and ignored.
"""

from __future__ import annotations

from typing import Any

from bench.contenders.common import PredictRequest, parse_args

TOKENS = ("果", "苹", "水", "糖", "西")


def answer(text: str) -> dict[str, Any]:
    candidates = [
        {"token": token, "token_id": 1000 + rank, "score": 0.5 / (rank + 1)}
        for rank, token in enumerate(TOKENS)
    ]
    return {
        "text": text,
        "predictions": candidates,
        "masks": [candidates],
        "sequence": text.replace("[MASK]", TOKENS[0]),
        "truncated": False,
        "model": "floor",
        "sequences": [],
        "candidates": [],
        "latency_ms": 0.0,
    }


def make_app() -> Any:
    """The floor's FastAPI app (``bench.request_cpu --floor`` calls it in process too)."""
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/predict")
    async def predict(request: PredictRequest) -> dict[str, Any]:
        return answer(request.text)

    return app


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    import uvicorn

    uvicorn.run(make_app(), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
