"""Helpers for the reliability and security tests: a FakeEngine masker on the tiny model's
tokenizer, an app served by the production runner (drain, slow-client deadlines) in a thread,
and a `tiankong serve` process that can be slowed down."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from fastapi import FastAPI
from server_helpers import START_TIMEOUT_S, free_port, wait_until_ready

from tiankong import FillMasker, Settings
from tiankong.engines.fake import FakeEngine
from tiankong.server.uvicorn_server import DrainingServer, uvicorn_config

SLOW_SERVE = Path(__file__).resolve().parent / "slow_serve.py"


def fake_masker(tiny_masker: FillMasker, settings: Settings, engine: object = None) -> FillMasker:
    """The tiny model's tokenizer with a FakeEngine (or ``engine``): no model compute."""
    encoder = tiny_masker.encoder
    chosen = engine if engine is not None else FakeEngine(len(encoder.vocab))
    return FillMasker(tiny_masker.model, encoder, chosen, settings)  # type: ignore[arg-type]


@contextmanager
def serve_with_runner(app: FastAPI, settings: Settings) -> Iterator[tuple[str, DrainingServer]]:
    """``app`` under the production uvicorn config (head deadline, keep-alive, drain) in a
    thread on a free loopback port; yields the base URL and the server."""
    port = free_port()
    settings = replace(settings, host="127.0.0.1", port=port, log_level="warning")
    server = DrainingServer(
        uvicorn_config(app, settings), app.state.tiankong.drain, settings.drain_timeout_s
    )
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", server
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@contextmanager
def serve_process(
    *args: str, delay_s: float = 0.0, env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`tiankong serve ARGS` (through tests/slow_serve.py, whose FakeEngine sleeps ``delay_s``
    per engine call) on a free loopback port; always stopped after."""
    port = free_port()
    full_env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TIANKONG_TEST_ENGINE_DELAY_S": str(delay_s),
        **(env or {}),
    }
    command = [sys.executable, str(SLOW_SERVE), "serve", "--port", str(port), *args]
    process = subprocess.Popen(
        command, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(base_url, START_TIMEOUT_S, lambda: process.poll() is None)
        yield base_url, process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        if process.stdout:
            process.stdout.close()
