"""Faults: broken model files at start, clients that hang up mid-request.

Covered elsewhere, on purpose not repeated here:
* a corrupt ONNX cache is rebuilt: tests/export/test_export_cache.py
  (test_truncated_onnx_is_detected_and_rebuilt, test_same_size_corruption_is_caught_by_the_checksum,
  test_garbled_manifest_is_rebuilt, test_missing_manifest_and_crashed_build_leftovers);
* an engine raising mid-batch fails only that batch, each request with the error id, and the
  next request succeeds: tests/server/test_server_batching.py
  (test_an_engine_error_fails_only_its_batch_each_with_the_error_id).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil
import pytest
from cli_helpers import besides_first_run_notes
from reliability_helpers import fake_masker, serve_with_runner
from server_helpers import free_port
from starlette.types import ASGIApp, Receive, Scope, Send

from tiankong import FillMasker, Settings
from tiankong.engines.base import EncodedBatch
from tiankong.engines.fake import FakeEngine
from tiankong.server import create_app
from tiankong.server.state import ServerState
from tiankong.serving.batching import DynamicBatcher

SERVE = [sys.executable, "-m", "tiankong", "serve", "--threads", "1"]


def broken_copy(tiny_model_dir: Path, tmp_path: Path, damage: str) -> Path:
    folder = tmp_path / f"model-{damage}"
    shutil.copytree(tiny_model_dir, folder)
    weights = folder / "model.safetensors"
    if damage == "missing":
        weights.unlink()
    elif damage == "garbage":
        weights.write_bytes(os.urandom(4096))
    elif damage == "truncated":
        data = weights.read_bytes()
        weights.write_bytes(data[: len(data) // 2])
    elif damage == "no-config":
        (folder / "config.json").unlink()
    return folder


@pytest.mark.processes
@pytest.mark.parametrize("engine", ["torch", "onnx"])
@pytest.mark.parametrize("damage", ["missing", "garbage", "truncated", "no-config"])
def test_broken_model_files_stop_serve_with_one_sentence(
    tiny_model_dir: Path, tmp_path: Path, engine: str, damage: str
) -> None:
    folder = broken_copy(tiny_model_dir, tmp_path, damage)
    done = subprocess.run(
        [*SERVE, "--model", str(folder), "--engine", engine, "--port", str(free_port())],
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 3, done.stderr
    lines = besides_first_run_notes(done.stderr)  # "exporting ..., once" may come first
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr
    if damage in ("garbage", "truncated"):
        assert "missing, truncated or corrupt" in lines[0]


class SlowFakeEngine(FakeEngine):
    def mask_logits(self, batch: EncodedBatch) -> np.ndarray:
        time.sleep(0.02)
        return super().mask_logits(batch)


def hang_up_mid_request(base_url: str, text: str) -> None:
    host, port = base_url.removeprefix("http://").split(":")
    body = json.dumps({"text": text}).encode()
    head = (
        "POST /predict HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head + body)
        time.sleep(0.005)  # in the queue or on the engine, not yet answered


def hang_up_many(base_url: str, count: int, offset: int) -> None:
    threads = [
        threading.Thread(target=hang_up_mid_request, args=(base_url, f"{offset + i}号[MASK]"))
        for i in range(count)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)


class QueueAudit:
    """Outermost middleware: each time a request ends with no other request in flight, records
    how many entries the batcher still queues. Those can only be of requests that have ended,
    answered or cancelled, so every record must be 0, whether or not the engine is busy."""

    def __init__(self, app: ASGIApp, state: ServerState, records: list[int]) -> None:
        self.app, self.state, self.records = app, state, records

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        finally:
            if scope["type"] == "http" and self.state.drain.in_flight == 0:
                self.records.append(len(batcher_of(self.state).pending))


def batcher_of(state: ServerState) -> DynamicBatcher[Any, Any]:
    assert state.predictor is not None
    batcher = state.predictor.batcher
    assert isinstance(batcher, DynamicBatcher)
    return batcher


@dataclass(frozen=True)
class Snapshot:
    connections: int
    in_flight: int  # HTTP requests whose handler has not returned
    queued: int  # the batcher's pending entries, cancelled ones included
    on_engine: int  # the batch the engine is running
    engine_busy: bool


def snapshot(state: ServerState, server: object) -> Snapshot:
    """The server's figures, read on its event loop between two steps, so they agree."""
    batcher = batcher_of(state)
    assert batcher.scheduler is not None

    async def read() -> Snapshot:
        return Snapshot(
            connections=len(server.server_state.connections),  # type: ignore[attr-defined]
            in_flight=state.drain.in_flight,
            queued=len(batcher.pending),
            on_engine=len(batcher.running),
            engine_busy=batcher.busy,
        )

    loop = batcher.scheduler.get_loop()
    return asyncio.run_coroutine_threadsafe(read(), loop).result(timeout=10)


def settle(state: ServerState, server: object, timeout_s: float = 20.0) -> Snapshot:
    """Wait until the connections are closed, no request is in flight and the engine has
    finished the batch it was on (texts already on the engine can't be called back)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = snapshot(state, server)
        if not now.connections and not now.in_flight and not now.engine_busy:
            return now
        time.sleep(0.05)
    raise AssertionError("the server never settled after the disconnects")


def own_threads() -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t.name != "AnyIO worker thread")


class SleepyFakeEngine(FakeEngine):
    def mask_logits(self, batch: EncodedBatch) -> np.ndarray:
        time.sleep(0.6)
        return super().mask_logits(batch)


def test_a_client_that_pipelined_and_hung_up_is_a_499_without_a_traceback(
    tiny_masker: FillMasker, tiny_model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two requests pipelined on one connection, the client gone while the first runs: uvicorn
    told only the second (the one it parsed last), so the first ran on and its answer, written
    to the closed connection, was an "unhandled error" traceback counted as a 200 (a review).
    Both are told now: the first is a 499, as a lone request that hangs up is."""
    settings = Settings(engine="fake", threads=1, model=str(tiny_model_dir), result_cache_size=0)
    engine = SleepyFakeEngine(len(tiny_masker.encoder.vocab))
    app = create_app(settings, fake_masker(tiny_masker, settings, engine))
    with serve_with_runner(app, settings) as (url, _):
        host, port = url.removeprefix("http://").split(":")
        requests = b""
        for text in ("先[MASK]", "后[MASK]"):
            body = json.dumps({"text": text}).encode()
            requests += (
                b"POST /predict HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(requests)
            time.sleep(0.2)  # the first on the engine, the second parsed behind it
        time.sleep(1.5)
        metrics = httpx.get(f"{url}/metrics").text
    counted = {
        line.split('status="')[1].split('"')[0]: float(line.split()[-1])
        for line in metrics.splitlines()
        if line.startswith("tiankong_requests_total") and 'route="/predict"' in line
    }
    assert counted == {"499": 1.0}, counted
    assert "unhandled error" not in caplog.text


def test_clients_hanging_up_mid_request_leak_nothing(
    tiny_masker: FillMasker, tiny_model_dir: Path
) -> None:
    settings = Settings(engine="fake", threads=1, model=str(tiny_model_dir), result_cache_size=0)
    engine = SlowFakeEngine(len(tiny_masker.encoder.vocab))
    app = create_app(settings, fake_masker(tiny_masker, settings, engine))
    state: ServerState = app.state.tiankong
    queued_when_idle: list[int] = []
    app.add_middleware(QueueAudit, state=state, records=queued_when_idle)
    me = psutil.Process()
    with serve_with_runner(app, settings) as (url, server):
        hang_up_many(url, 40, 0)  # warm-up: thread pools and buffers reach their size
        settle(state, server)
        fds, threads = me.num_fds(), own_threads()
        calls_before = len(engine.calls)
        for round_index in range(5):
            hang_up_many(url, 40, 1000 * (round_index + 1))
        settled = settle(state, server)
        assert settled.queued == 0 and settled.on_engine == 0
        assert queued_when_idle and not any(queued_when_idle), (
            f"entries of ended requests left queued: {queued_when_idle}"
        )
        assert me.num_fds() <= fds
        # the same threads, but for AnyIO's worker pool (FastAPI's sync dependencies), which
        # is capped at 40 and whose idle workers come and go
        assert own_threads() == threads
        assert sum(t.name == "AnyIO worker thread" for t in threading.enumerate()) <= 40
        ran = sum(engine.calls[calls_before:])
        assert ran <= 100, f"{ran} of 200 texts of clients that had gone still ran"
        assert httpx.post(f"{url}/predict", json={"text": "画龙点[MASK]"}).status_code == 200
        metrics = httpx.get(f"{url}/metrics").text
    closed = [
        line
        for line in metrics.splitlines()
        if line.startswith("tiankong_requests_total") and 'status="499"' in line
    ]
    assert closed and sum(float(line.split()[-1]) for line in closed) >= 100
