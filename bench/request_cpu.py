"""CPU time a ``POST /predict`` costs inside the app: the ASGI app called directly, no sockets.

    python -m bench.request_cpu [--requests 3000] [--engine fake] [--floor | --canned]
    PYTHONPATH=/tmp/base/src python -m bench.request_cpu    # another checkout's code

Each request is a bench sentence no request before it used (``bench/sentences.py``, top_k 5), so
the result cache never answers; the first 300 warm up. Without sockets, uvicorn and a load
generator the figure moves far less than a served p50 does, which is what an A/B of the request
path needs on a shared 2-core machine: run two checkouts one after the other, a few times each,
alternating. ``--floor`` measures ``bench/contenders/floor_app.py``'s app the same way (FastAPI's
own cost for the same body). The index is off (``--index none``), as in the bench's
serving-overhead rows. ``--canned`` splits tiankong's figure in two: the routes' one call into
the fill-mask work (``dispatch.fill_one``) answers every request with the first request's
result, so preparing the request (token cache, tokenizer, kind), the rate-limit charge, the
batcher, the engine, the softmax, the top-k, the result cache and ``finish`` are left out, and
what is left is the framework, the guard, the route, the options check and the JSON answer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from bench.contenders.floor_app import make_app as floor_app
from bench.sentences import sentence

WARMUP = 300


def tiankong_app(engine: str) -> Any:
    from tiankong.config import Settings
    from tiankong.server.app import create_app

    return create_app(Settings(engine=engine, index="none"))


@contextmanager
def canned_answers() -> Iterator[None]:
    """Within the block, the routes' one call into the fill-mask work (``fill_one``) answers
    every request with the first one's result."""
    from tiankong.server import routes

    fill_one, answered = routes.fill_one, list[Any]()

    async def canned(*args: Any, **kwargs: Any) -> Any:
        if not answered:
            answered.append(await fill_one(*args, **kwargs))
        return answered[0]

    routes.fill_one = canned
    try:
        yield
    finally:
        routes.fill_one = fill_one


async def post(app: Any, number: int) -> None:
    body = json.dumps({"text": sentence(number), "top_k": 5}).encode()
    headers = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]  # fmt: skip
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/predict", "raw_path": b"/predict", "root_path": "",
        "query_string": b"", "headers": headers, "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000), "state": {},
    }  # fmt: skip
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)  # the client never disconnects
        return {"type": "http.disconnect"}

    statuses: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    await app(scope, receive, send)
    if statuses != [200]:
        raise SystemExit(f"POST /predict answered {statuses}; the measurement needs 200s")


async def measure(app: Any, requests: int) -> tuple[float, float]:
    """(CPU, wall) microseconds a request, after the warm-up."""
    async with app.router.lifespan_context(app):
        for number in range(WARMUP):
            await post(app, 100_000 + number)
        cpu, wall = time.process_time(), time.perf_counter()
        for number in range(requests):
            await post(app, 100_000 + WARMUP + number)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu / requests * 1e6, wall / requests * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--engine", default="fake")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--floor", action="store_true", help="the bare FastAPI app instead")
    which.add_argument("--canned", action="store_true", help="every answer the first one's")
    args = parser.parse_args()
    app = floor_app() if args.floor else tiankong_app(args.engine)
    with canned_answers() if args.canned else nullcontext():
        cpu, wall = asyncio.run(measure(app, args.requests))
    name = "floor" if args.floor else f"tiankong --engine {args.engine}"
    name += " (canned answers)" if args.canned else ""
    print(f"{name}: {cpu:.1f} us of CPU and {wall:.1f} us wall a request ({args.requests})")


if __name__ == "__main__":
    main()
