"""``bench.request_cpu``: the request path's CPU in process, and its ``--canned`` split."""

from __future__ import annotations

import asyncio

from bench import request_cpu
from tiankong.engines.fake import FakeEngine
from tiankong.server import dispatch, routes


def engine_calls(canned: bool, requests: int) -> int:
    """The fake engine's calls while ``measure`` sends its warm-up and ``requests``."""
    app = request_cpu.tiankong_app("fake")
    if canned:
        with request_cpu.canned_answers():
            asyncio.run(request_cpu.measure(app, requests))
    else:
        asyncio.run(request_cpu.measure(app, requests))
    engine = app.state.tiankong.masker.engine
    assert isinstance(engine, FakeEngine)
    return len(engine.calls)


def test_canned_answers_leave_the_engine_to_the_first_request() -> None:
    plain = engine_calls(canned=False, requests=20)
    canned = engine_calls(canned=True, requests=20)
    warm_up = plain - request_cpu.WARMUP - 20  # the server's own warm-up runs
    assert warm_up >= 1 and canned == warm_up + 1  # every other request: the first one's answer
    assert routes.fill_one is dispatch.fill_one  # put back after the block
