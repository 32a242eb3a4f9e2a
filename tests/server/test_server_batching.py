"""Dynamic batching and caches through the HTTP app: concurrent requests (``asyncio.gather``)
on a deterministic FakeEngine whose calls can be held at a gate, so batches form on purpose."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, ClassVar

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families
from server_helpers import assert_error, capture_serve_settings, serve_in_thread
from typer.testing import CliRunner

from tiankong import FillMasker, Settings
from tiankong.engines.base import EncodedBatch
from tiankong.engines.fake import FakeEngine
from tiankong.errors import BadOptionError
from tiankong.server import create_app
from tiankong.server.state import ServerState
from tiankong.serving.predictor import Predictor

GATE_TIMEOUT_S = 30.0
POEM = "春眠不觉晓，处处闻啼[MASK]。"


# Before any request: the fill warm-up's one call, then the check task's two steps (one unmasked
# row, then its suspects' rows; serving/checking.py).
WARM_UP_CALLS = [1, 1, 4]


class GatedEngine(FakeEngine):
    """FakeEngine whose calls wait at ``gate`` (open unless a test closes it) and which records
    every batch's rows and how many calls ever ran at once."""

    def __init__(self, vocab_size: int, fail_token_id: int | None = None) -> None:
        super().__init__(vocab_size, fail_token_id)
        self.gate = threading.Event()
        self.gate.set()
        self.waiting = threading.Event()  # a call is at the closed gate
        self.rows: list[list[list[int]]] = []  # each batch's rows, without padding
        self.widths: list[int] = []  # each batch's padded length
        self.active = 0
        self.most_active = 0
        self.lock = threading.Lock()

    def mask_logits(self, batch: EncodedBatch) -> np.ndarray:
        with self.lock:
            self.active += 1
            self.most_active = max(self.most_active, self.active)
        try:
            self.waiting.set()
            self.gate.wait(GATE_TIMEOUT_S)
            self.widths.append(int(batch.input_ids.shape[1]))
            self.rows.append(
                [
                    row[mask == 1].tolist()
                    for row, mask in zip(batch.input_ids, batch.attention_mask, strict=True)
                ]
            )
            return super().mask_logits(batch)
        finally:
            with self.lock:
                self.active -= 1


class QualityEngine(GatedEngine):
    """Stands in for an ONNX INT8 engine: it carries the guard's figures."""

    precision = "int8"
    quality: ClassVar[dict[str, Any]] = {
        "sentences": 40,
        "masks": 52,
        "top1_agreement": 0.9808,
        "top5_overlap": 0.95,
        "min_agreement": 0.97,
        "int8_accepted": True,
    }


pytestmark = pytest.mark.anyio


def gated_masker(
    tiny_masker: FillMasker, fail_on: str | None = None, engine_class: type = GatedEngine
) -> tuple[FillMasker, GatedEngine]:
    vocab = tiny_masker.encoder.vocab
    engine = engine_class(len(vocab), vocab[fail_on] if fail_on else None)
    masker = FillMasker(tiny_masker.model, tiny_masker.encoder, engine, tiny_masker.settings)
    return masker, engine


def server_settings(tiny_model_dir: Path, **changes: Any) -> Settings:
    return Settings(engine="torch", threads=1, model=str(tiny_model_dir), **changes)


@asynccontextmanager
async def http_client(
    settings: Settings, masker: FillMasker
) -> AsyncIterator[tuple[httpx.AsyncClient, ServerState]]:
    app = create_app(settings, masker)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            yield client, app.state.tiankong


async def until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.002)


def predictor_of(state: ServerState) -> Predictor:
    assert state.predictor is not None
    return state.predictor


@asynccontextmanager
async def engine_held(
    client: httpx.AsyncClient, engine: GatedEngine, text: str = "占[MASK]位"
) -> AsyncIterator[asyncio.Task[httpx.Response]]:
    """A request that sits in the engine (at the closed gate) until the block ends."""
    engine.gate.clear()
    engine.waiting.clear()
    holder = asyncio.create_task(client.post("/predict", json={"text": text}))
    await until(engine.waiting.is_set)
    try:
        yield holder
    finally:
        engine.gate.set()


def metric(text: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return 0.0


# --- sharing batches ---------------------------------------------------------------------


async def test_concurrent_routes_share_one_engine_call(
    tiny_model_dir: Path, tiny_masker: FillMasker
) -> None:
    masker, engine = gated_masker(tiny_masker)
    texts = [f"第{i}句：春眠不觉晓，处处闻啼[MASK]。" for i in range(14)]
    async with http_client(server_settings(tiny_model_dir), masker) as (client, state):
        async with engine_held(client, engine) as holder:
            requests = asyncio.gather(
                *(client.post("/predict", json={"text": text, "top_k": 2}) for text in texts[:6]),
                *(client.get("/predict", params={"text": text}) for text in texts[6:8]),
                client.post("/batch_predict", json={"texts": texts[8:12]}),
                client.post("/", json={"inputs": texts[12:14]}),
            )
            await until(lambda: predictor_of(state).batcher.depth == 14)
        responses = await requests
        assert (await holder).status_code == 200
        metrics_text = (await client.get("/metrics")).text
    assert [response.status_code for response in responses] == [200] * len(responses)
    for text, response in zip(texts[:8], responses, strict=False):
        assert response.json()["text"] == text  # each answer belongs to its own request
    assert [item["text"] for item in responses[8].json()["results"]] == texts[8:12]
    assert engine.calls == [*WARM_UP_CALLS, 1, 14]  # the holder, then everyone else at once
    assert metric(metrics_text, "tiankong_batch_size_count") == 2
    assert metric(metrics_text, "tiankong_batch_size_bucket", le="16.0") == 2
    assert metric(metrics_text, "tiankong_batch_size_bucket", le="8.0") == 1


async def test_a_lone_request_does_not_wait_for_the_window(
    tiny_model_dir: Path, tiny_masker: FillMasker
) -> None:
    masker, _ = gated_masker(tiny_masker)
    settings = server_settings(tiny_model_dir, batch_window_ms=500, result_cache_size=0)
    async with http_client(settings, masker) as (client, _):
        for index in range(3):
            started = time.perf_counter()
            response = await client.post("/predict", json={"text": f"{index}画龙点[MASK]"})
            assert response.status_code == 200
            assert time.perf_counter() - started < 0.25  # far under the 500 ms window
            assert response.json()["latency_ms"] < 250


class ThreadEngine(GatedEngine):
    """GatedEngine that notes the thread each call ran on."""

    def __init__(self, vocab_size: int, fail_token_id: int | None = None) -> None:
        super().__init__(vocab_size, fail_token_id)
        self.threads: list[str] = []

    def mask_logits(self, batch: EncodedBatch) -> np.ndarray:
        self.threads.append(threading.current_thread().name)
        return super().mask_logits(batch)


async def test_a_lone_request_runs_on_the_loop_and_concurrent_ones_on_the_engine_thread(
    tiny_model_dir: Path, tiny_masker: FillMasker
) -> None:
    masker, engine = gated_masker(tiny_masker, engine_class=ThreadEngine)
    assert isinstance(engine, ThreadEngine)
    settings = server_settings(tiny_model_dir, result_cache_size=0)
    loop_thread = threading.current_thread().name
    async with http_client(settings, masker) as (client, _):
        engine.threads.clear()  # the warm-up's calls
        for index in range(3):  # one at a time: alone in the server
            response = await client.post("/predict", json={"text": f"{index}画龙点[MASK]"})
            assert response.status_code == 200
        alone = list(engine.threads)
        engine.threads.clear()
        texts = [f"第{i}句：春眠不觉晓，处处闻啼[MASK]。" for i in range(6)]
        together = await asyncio.gather(
            *(client.post("/predict", json={"text": text}) for text in texts)
        )
        assert [response.status_code for response in together] == [200] * 6
    # the first lone run has no measure yet and takes the engine thread; then the loop's own
    assert alone[0] != loop_thread and alone[1:] == [loop_thread, loop_thread]
    assert loop_thread not in engine.threads  # company: the batcher, on the engine thread


async def test_batches_are_bucketed_by_length(
    tiny_model_dir: Path, tiny_masker: FillMasker
) -> None:
    masker, engine = gated_masker(tiny_masker)
    short = [f"{i}点[MASK]" for i in range(3)]
    long = [f"{i}" + "春眠不觉晓，处处闻啼鸟。" * 4 + "[MASK]" for i in range(3)]
    settings = server_settings(tiny_model_dir, max_batch_size=3)
    async with http_client(settings, masker) as (client, state):
        async with engine_held(client, engine):
            mixed = [short[0], long[0], short[1], long[1], short[2], long[2]]
            requests = asyncio.gather(*(client.post("/predict", json={"text": t}) for t in mixed))
            await until(lambda: predictor_of(state).batcher.depth == 6)
        assert [r.status_code for r in await requests] == [200] * 6
    short_length = len(masker.prepare(short[0]).input_ids)
    long_length = len(masker.prepare(long[0]).input_ids)
    last_two = list(zip(engine.widths[-2:], engine.rows[-2:], strict=True))
    # one batch of the short texts, one of the long ones, each padded only to its own longest
    assert sorted((width, sorted(map(len, rows))) for width, rows in last_two) == [
        (short_length, [short_length] * 3),
        (long_length, [long_length] * 3),
    ]


# --- failures, backpressure, timeouts ----------------------------------------------------


async def test_an_engine_error_fails_only_its_batch_each_with_the_error_id(
    tiny_model_dir: Path, tiny_masker: FillMasker, caplog: pytest.LogCaptureFixture
) -> None:
    masker, engine = gated_masker(tiny_masker, fail_on="炸")
    settings = server_settings(tiny_model_dir, max_batch_size=3)
    async with http_client(settings, masker) as (client, state):
        batcher = predictor_of(state).batcher
        async with engine_held(client, engine):
            doomed = asyncio.gather(
                *(client.post("/predict", json={"text": t}) for t in ("炸[MASK]", "好[MASK]"))
            )
            await until(lambda: batcher.depth == 2)
            doomed_hf = asyncio.create_task(client.post("/", json={"inputs": "天[MASK]"}))
            await until(lambda: batcher.depth == 3)
            fine = asyncio.gather(
                *(client.post("/predict", json={"text": t}) for t in ("山[MASK]", "水[MASK]"))
            )
            await until(lambda: batcher.depth == 5)
        failed = [*await doomed, await doomed_hf]
        error_ids = {assert_error(r, 500, "engine_error")["error_id"] for r in failed}
        assert len(error_ids) == 1  # one batch, one id, on every request in it
        [error_id] = error_ids
        assert len(error_id) == 12 and error_id in caplog.text  # the log has its traceback
        assert [r.status_code for r in await fine] == [200, 200]
        assert (await client.post("/predict", json={"text": POEM})).status_code == 200
        metrics_text = (await client.get("/metrics")).text
    assert metric(metrics_text, "tiankong_batcher_events_total", event="failed_batch") == 1


async def test_a_text_the_model_gives_no_numbers_for_fails_alone(
    tiny_model_dir: Path, tiny_masker: FillMasker
) -> None:
    """A broken model's NaN row failed the whole batch it ran in with a 500 and a traceback:
    every other request in it too. Now only the requests holding such a row fail (503, the
    model's error), in a batch and run inline, on fill, batch and check routes; in a
    /batch_predict or /batch_check, only that text's entry."""
    masker, engine = gated_masker(tiny_masker)
    engine.nan_token_id = tiny_masker.encoder.vocab["炸"]  # a model broken on some texts
    settings = server_settings(tiny_model_dir, result_cache_size=0)
    async with http_client(settings, masker) as (client, state):
        batcher = predictor_of(state).batcher
        async with engine_held(client, engine):
            requests = asyncio.gather(
                client.post("/predict", json={"text": "炸[MASK]"}),
                client.post("/predict", json={"text": "好[MASK]"}),
                client.post("/batch_predict", json={"texts": ["山[MASK]", "水[MASK]"]}),
                client.post("/batch_predict", json={"texts": ["山[MASK]", "炸[MASK]"]}),
                client.post("/", json={"inputs": "天[MASK]"}),
                client.post("/predict", json={"text": "炸[MASK][MASK]", "mode": "whole_word"}),
            )
            await until(lambda: batcher.depth >= 6)
        responses = await requests
        checked = await client.post("/check", json={"text": "他昨天炸了一盘花生米。"})
        fine_check = await client.post("/check", json={"text": "他昨天吃了一盘花生米。"})
        # a batch's such text was a 503 for every text of it (a verifying review)
        both = ["他昨天吃了一盘花生米。", "他昨天炸了一盘花生米。"]
        batch_checked = await client.post("/batch_check", json={"texts": both})
        lone = [
            await client.post("/predict", json={"text": f"{index}炸[MASK]"}) for index in range(3)
        ]
        after = await client.post("/predict", json={"text": POEM})
        metrics_text = (await client.get("/metrics")).text
    statuses = [response.status_code for response in responses]
    assert statuses == [503, 200, 200, 200, 200, 503]
    assert len(engine.calls) > len(WARM_UP_CALLS) + 1  # the held one, then the batch together
    for failed in [responses[0], responses[5], checked, *lone]:
        error = assert_error(failed, 503, "model_unavailable")
        assert "scores are not numbers (NaN)" in error["message"]
    for batch, key in ((responses[3], "results"), (batch_checked, "results")):
        assert batch.status_code == 200
        fine, broken = batch.json()[key]
        assert "error" not in fine and broken["error"]["code"] == "model_unavailable"
    assert responses[3].json()["results"][0]["text"] == "山[MASK]"
    assert fine_check.status_code == 200 and after.status_code == 200
    assert metric(metrics_text, "tiankong_batcher_events_total", event="failed_batch") == 0


async def test_a_full_queue_is_503_with_retry_after(
    tiny_model_dir: Path, tiny_masker: FillMasker
) -> None:
    masker, engine = gated_masker(tiny_masker)
    async with http_client(server_settings(tiny_model_dir, max_queue=2), masker) as (
        client,
        state,
    ):
        async with engine_held(client, engine):
            queued = asyncio.gather(
                *(client.post("/predict", json={"text": f"{i}[MASK]"}) for i in range(2))
            )
            await until(lambda: predictor_of(state).batcher.depth == 2)
            refused = await client.post("/predict", json={"text": "再来[MASK]"})
            assert_error(refused, 503, "overloaded")
            assert refused.headers["retry-after"] == "1"
            refused_batch = await client.post("/batch_predict", json={"texts": ["一[MASK]"]})
            assert_error(refused_batch, 503, "overloaded")
            assert_error(await client.post("/", json={"inputs": "二[MASK]"}), 503, "overloaded")
            metrics_text = (await client.get("/metrics")).text
        assert [r.status_code for r in await queued] == [200, 200]
    assert metric(metrics_text, "tiankong_queue_depth") == 2
    assert metric(metrics_text, "tiankong_batcher_events_total", event="overloaded") == 3
    assert metric(metrics_text, "tiankong_requests_total", route="/predict", status="503") == 1


async def test_a_request_over_the_timeout_is_504_and_never_runs(
    tiny_model_dir: Path, tiny_masker: FillMasker
) -> None:
    masker, engine = gated_masker(tiny_masker)
    settings = server_settings(tiny_model_dir, request_timeout_s=0.3)
    async with http_client(settings, masker) as (client, _):
        async with engine_held(client, engine) as holder:
            assert_error(await client.post("/predict", json={"text": "慢[MASK]"}), 504, "timeout")
            assert_error(await holder, 504, "timeout")  # it waited at the gate too long
        assert (await client.post("/predict", json={"text": POEM})).status_code == 200
    ran = [row for batch in engine.rows for row in batch]
    slow_ids = masker.prepare("慢[MASK]").input_ids
    assert slow_ids not in ran


# --- clients that go away ----------------------------------------------------------------


def post_scope(path: str, declared: int) -> dict[str, Any]:
    """An ASGI scope for a JSON ``POST path`` whose Content-Length is ``declared``."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % declared)],
        "client": ("127.0.0.1", 5000),
        "server": ("test", 80),
    }


@pytest.mark.parametrize("path", ["/predict", "/batch_predict", "/check"])
async def test_a_client_that_goes_mid_body_is_recorded_as_gone(
    tiny_model_dir: Path, tiny_masker: FillMasker, path: str
) -> None:
    """The body stopped half way and the client hung up: FastAPI's parse error was answered as
    a 422 invalid_request, to nobody, and counted as one in /metrics."""
    app = create_app(server_settings(tiny_model_dir), tiny_masker)
    sent: list[dict[str, Any]] = []
    messages = [
        {"type": "http.request", "body": b'{"text": "\u753b', "more_body": True},
        {"type": "http.disconnect"},
    ]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = post_scope(path, declared=100)  # 100 bytes declared, 11 sent
    async with app.router.lifespan_context(app):
        await asyncio.wait_for(app(scope, receive, send), 10)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            metrics_text = (await client.get("/metrics")).text
    assert [message["status"] for message in sent if "status" in message] == [499]
    assert metric(metrics_text, "tiankong_requests_total", route=path, status="499") == 1
    assert metric(metrics_text, "tiankong_requests_total", route=path, status="422") == 0


async def test_a_disconnected_client_is_dropped_before_it_runs(
    tiny_model_dir: Path, tiny_masker: FillMasker
) -> None:
    """ASGI level: the client's ``http.disconnect`` arrives while its text is queued."""
    masker, engine = gated_masker(tiny_masker)
    app = create_app(server_settings(tiny_model_dir), masker)
    body = b'{"text": "\\u8d70[MASK]"}'  # 走[MASK]
    gone = asyncio.Event()
    sent: list[dict[str, Any]] = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = post_scope("/predict", declared=len(body))
    async with app.router.lifespan_context(app):
        state = app.state.tiankong
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            async with engine_held(client, engine) as holder:
                leaving = asyncio.create_task(app(scope, receive, send))
                await until(lambda: predictor_of(state).batcher.depth == 1)
                gone.set()  # the client hangs up while its text waits
                await asyncio.wait_for(leaving, 10)
                assert predictor_of(state).batcher.depth == 0
            assert (await holder).status_code == 200
            metrics_text = (await client.get("/metrics")).text
    assert engine.calls == [*WARM_UP_CALLS, 1]  # the holder: the gone request never ran
    assert [message["status"] for message in sent if "status" in message] == [499]
    assert metric(metrics_text, "tiankong_batcher_events_total", event="skipped") == 1
    assert metric(metrics_text, "tiankong_requests_total", route="/predict", status="499") == 1


def test_a_client_that_hangs_up_over_tcp_is_dropped(
    tiny_model_dir: Path, tiny_masker: FillMasker
) -> None:
    """Real uvicorn on loopback: the closed socket reaches the batcher as a cancellation."""
    masker, engine = gated_masker(tiny_masker)
    app = create_app(server_settings(tiny_model_dir), masker)
    state: ServerState = app.state.tiankong
    with serve_in_thread(app) as base_url:
        engine.gate.clear()
        engine.waiting.clear()
        holder_result: list[int] = []
        holder = threading.Thread(
            target=lambda: holder_result.append(
                httpx.post(
                    f"{base_url}/predict", json={"text": "占[MASK]位"}, timeout=60
                ).status_code
            )
        )
        holder.start()
        assert engine.waiting.wait(GATE_TIMEOUT_S)
        port = int(base_url.rsplit(":", 1)[1])
        body = '{"text": "走[MASK]"}'.encode()
        request = (
            b"POST /predict HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        with socket.create_connection(("127.0.0.1", port)) as client:
            client.sendall(request)
            wait_for(lambda: predictor_of(state).batcher.depth == 1)
        wait_for(lambda: predictor_of(state).batcher.depth == 0)  # dropped on hang-up
        engine.gate.set()
        holder.join(GATE_TIMEOUT_S)
        metrics_text = httpx.get(f"{base_url}/metrics").text
    assert holder_result == [200]
    assert engine.calls == [*WARM_UP_CALLS, 1]
    assert metric(metrics_text, "tiankong_batcher_events_total", event="skipped") == 1


def wait_for(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


# --- shutdown ----------------------------------------------------------------------------


async def test_shutdown_drains_queued_requests_and_refuses_new_ones(
    tiny_model_dir: Path, tiny_masker: FillMasker
) -> None:
    masker, engine = gated_masker(tiny_masker)
    app = create_app(server_settings(tiny_model_dir), masker)
    lifespan = app.router.lifespan_context(app)
    await lifespan.__aenter__()
    state: ServerState = app.state.tiankong
    batcher = predictor_of(state).batcher
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        async with engine_held(client, engine) as holder:
            queued = asyncio.gather(
                *(client.post("/predict", json={"text": f"{i}[MASK]"}) for i in range(3))
            )
            await until(lambda: batcher.depth == 3)
            stopping = asyncio.create_task(lifespan.__aexit__(None, None, None))
            await until(lambda: batcher.closing)
            late = await client.post("/predict", json={"text": "晚[MASK]"})
            assert_error(late, 503, "shutting_down")
            assert late.headers["retry-after"] == "1"
        assert [r.status_code for r in await queued] == [200, 200, 200]
        assert (await holder).status_code == 200
        await asyncio.wait_for(stopping, 10)
    assert engine.calls == [*WARM_UP_CALLS, 1, 3] and state.predictor is None


# --- exclusive modes next to batches -----------------------------------------------------


async def test_option_modes_and_batches_share_the_engine_without_overlap(
    tiny_model_dir: Path, tiny_masker: FillMasker
) -> None:
    masker, engine = gated_masker(tiny_masker)
    settings = server_settings(tiny_model_dir, result_cache_size=0)
    async with http_client(settings, masker) as (client, _):
        plain = [client.post("/predict", json={"text": f"{i}画龙点[MASK]"}) for i in range(12)]
        words = [
            client.post(
                "/predict",
                json={"text": f"{i}手机没电了，赶紧去[MASK][MASK]。", "mode": "whole_word"},
            )
            for i in range(4)
        ]
        responses = await asyncio.wait_for(asyncio.gather(*plain, *words), 60)
    assert [r.status_code for r in responses] == [200] * 16
    assert all(r.json()["sequences"] for r in responses[12:])
    assert engine.most_active == 1  # never two engine calls at once


# --- caches, metrics and /info -----------------------------------------------------------


async def test_a_repeated_request_is_a_cache_hit_with_its_own_latency(
    tiny_model_dir: Path, tiny_masker: FillMasker
) -> None:
    masker, engine = gated_masker(tiny_masker)
    async with http_client(server_settings(tiny_model_dir), masker) as (client, _):
        first = await client.post("/predict", json={"text": POEM, "top_k": 3})
        second = await client.post("/predict", json={"text": POEM, "top_k": 3})
        other_k = await client.post("/predict", json={"text": POEM, "top_k": 4})
        hf = await client.post("/", json={"inputs": POEM, "parameters": {"top_k": 3}})
        metrics_text = (await client.get("/metrics")).text
    assert first.json()["masks"] == second.json()["masks"]
    assert second.json()["latency_ms"] > 0  # the hit's own server time, not the first's
    assert len(other_k.json()["predictions"]) == 4 and hf.status_code == 200
    assert engine.calls == [*WARM_UP_CALLS, 1, 1]  # POEM top 3, POEM top 4; the rest were hits
    assert metric(metrics_text, "tiankong_cache_hits_total", cache="results") == 2
    assert metric(metrics_text, "tiankong_cache_misses_total", cache="results") == 2
    assert metric(metrics_text, "tiankong_cache_hits_total", cache="tokens") == 3
    assert metric(metrics_text, "tiankong_cache_misses_total", cache="tokens") == 1


async def test_metrics_show_batches_tokens_padding_and_queue(
    tiny_model_dir: Path, tiny_masker: FillMasker
) -> None:
    masker, engine = gated_masker(tiny_masker)
    texts = ["点[MASK]", "画龙点[MASK]"]  # 4 and 6 tokens with [CLS] and [SEP]
    async with http_client(server_settings(tiny_model_dir), masker) as (client, state):
        before = (await client.get("/metrics")).text  # the warm-ups' batches are counted too
        async with engine_held(client, engine):
            requests = asyncio.gather(*(client.post("/predict", json={"text": t}) for t in texts))
            await until(lambda: predictor_of(state).batcher.depth == 2)
            during = (await client.get("/metrics")).text
        await requests
        after = (await client.get("/metrics")).text
    assert (
        metric(during, "tiankong_queue_depth") == 2 and metric(after, "tiankong_queue_depth") == 0
    )

    def added(name: str) -> float:
        return metric(after, name) - metric(before, name)

    # the holder ("占[MASK]位", engine_held's) in a batch of its own, then the two texts together
    real = sum(len(masker.prepare(t).input_ids) for t in (*texts, "占[MASK]位"))
    padded = 2 * len(masker.prepare(texts[1]).input_ids) + len(
        masker.prepare("占[MASK]位").input_ids
    )
    assert added("tiankong_batch_real_tokens_total") == real
    assert added("tiankong_batch_padded_tokens_total") == padded
    assert added("tiankong_batch_tokens_sum") == padded
    assert added("tiankong_batch_padding_ratio_count") == 2


async def test_info_shows_batching_caches_and_the_int8_guard(
    tiny_model_dir: Path, tiny_masker: FillMasker
) -> None:
    settings = server_settings(
        tiny_model_dir, batch_window_ms=3, max_batch_size=8, max_batch_tokens=512, max_queue=9
    )
    masker, _ = gated_masker(tiny_masker, engine_class=QualityEngine)
    async with http_client(settings, masker) as (client, _):
        await client.post("/predict", json={"text": POEM})
        info = (await client.get("/info")).json()
    assert info["batching"] == {
        "policy": "continuous",
        "batch_window_ms": 3.0,
        "max_batch_size": 8,
        "max_batch_tokens": 512,
        "max_queue": 9,
        "request_timeout_s": 30.0,
        "search_rows_per_batch": 2,
        "search_rows_beside_plain": 1,
        "queue_depth": 0,
        "searches": 0,
        "search_rows_reserved": 0,
        "searches_waiting": 0,
        "engine_busy": False,
    }
    assert info["caches"]["results"] == {"size": 1024, "entries": 1, "hits": 0, "misses": 1}
    assert info["caches"]["tokens"]["size"] == 4096
    assert info["quality"] == QualityEngine.quality and info["precision"] == "int8"
    assert info["model"]["name"] == tiny_masker.model.name  # routes' own fields are all there

    plain, _ = gated_masker(tiny_masker)
    async with http_client(settings, plain) as (client, _):
        assert "quality" not in (await client.get("/info")).json()


def test_bad_batching_settings_fail_when_the_app_is_built(
    tiny_model_dir: Path, tiny_masker: FillMasker
) -> None:
    for bad in ({"max_batch_size": 0}, {"max_queue": 0}, {"batch_window_ms": -1.0}):
        with pytest.raises(BadOptionError):
            create_app(server_settings(tiny_model_dir, **bad), tiny_masker)


# --- the CLI -----------------------------------------------------------------------------


def test_serve_flags_and_env_twins_reach_the_settings(
    monkeypatch: pytest.MonkeyPatch, tiny_model_dir: Path
) -> None:
    from tiankong.cli import app
    from tiankong.cli import predict as cli_commands  # importing registers its commands

    assert cli_commands
    seen = capture_serve_settings(monkeypatch)
    runner = CliRunner()
    flags = [
        "serve",
        "--model",
        str(tiny_model_dir),
        "--port",
        "0",
        "--batch-window-ms",
        "5",
        "--max-batch-size",
        "7",
        "--max-batch-tokens",
        "700",
        "--request-timeout",
        "9",
        "--result-cache-size",
        "0",
        "--onnx-cache-dir",
        "/tmp/tiankong-onnx-cache-test",
    ]
    env = {"TIANKONG_MAX_QUEUE": "70", "TIANKONG_TOKEN_CACHE_SIZE": "17"}
    result = runner.invoke(app, flags, env=env)
    assert isinstance(result.exception, BadOptionError), result.output
    [settings] = seen
    assert (settings.batch_window_ms, settings.max_batch_size, settings.max_batch_tokens) == (
        5.0,
        7,
        700,
    )
    assert (settings.max_queue, settings.request_timeout_s) == (70, 9.0)
    assert (settings.result_cache_size, settings.token_cache_size) == (0, 17)
    assert settings.onnx_cache_dir == "/tmp/tiankong-onnx-cache-test"

    refused = runner.invoke(app, ["serve", "--port", "0", "--max-batch-size", "0"])
    assert isinstance(refused.exception, BadOptionError) and len(seen) == 1  # before loading

    shown = runner.invoke(app, ["serve", "--help"], env={"COLUMNS": "200"}, terminal_width=200)
    for name in (
        "BATCH_WINDOW_MS",
        "MAX_BATCH_SIZE",
        "MAX_BATCH_TOKENS",
        "MAX_QUEUE",
        "REQUEST_TIMEOUT",
        "RESULT_CACHE_SIZE",
        "TOKEN_CACHE_SIZE",
        "ONNX_CACHE_DIR",
    ):
        assert f"TIANKONG_{name}" in shown.output
