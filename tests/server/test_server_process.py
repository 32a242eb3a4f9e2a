"""The real `tiankong serve` process on a free loopback port, configured through env twins."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from cli_helpers import besides_first_run_notes
from server_helpers import START_TIMEOUT_S, free_port, wait_until_ready

pytestmark = pytest.mark.processes  # starts processes: the CLI, a server, Ray or export workers

SERVE = [sys.executable, "-m", "tiankong", "serve"]
POEM = "春眠不觉晓，处处闻啼[MASK]。"


def serve_env(**values: str) -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", **values}


@pytest.fixture(scope="module")
def served(tiny_model_dir: Path) -> Iterator[str]:
    """`tiankong serve` with its settings from TIANKONG_* variables; always stopped after."""
    port = free_port()
    env = serve_env(
        TIANKONG_MODEL=str(tiny_model_dir),
        TIANKONG_PORT=str(port),
        TIANKONG_ENGINE="torch",
        TIANKONG_THREADS="1",
        TIANKONG_MAX_BATCH_TEXTS="2",
        TIANKONG_LOG_LEVEL="warning",
    )
    process = subprocess.Popen(
        SERVE, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        wait_until_ready(
            f"http://127.0.0.1:{port}", START_TIMEOUT_S, lambda: process.poll() is None
        )
        yield f"http://127.0.0.1:{port}"
        process.send_signal(signal.SIGTERM)  # uvicorn drains, then lets the signal end it
        assert process.wait(timeout=30) in (0, -signal.SIGTERM), "no clean shutdown"
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout:
            process.stdout.close()


def test_served_over_loopback(served: str, tiny_model_dir: Path) -> None:
    with httpx.Client(base_url=served, timeout=30) as http:
        assert http.get("/health").json() == {"status": "ok"}
        posted = http.post("/predict", json={"text": POEM, "top_k": 3}).json()
        assert len(posted["predictions"]) == 3 and posted["model"] == tiny_model_dir.name
        got = http.get(f"/predict?text={quote(POEM)}&top_k=3").json()  # as `ab` would send it
        assert [c["token_id"] for c in got["predictions"]] == [
            c["token_id"] for c in posted["predictions"]
        ]
        assert len(http.post("/", json={"inputs": POEM}).json()) == 5
        batch = http.post("/batch_predict", json={"texts": [POEM] * 3})
        assert batch.status_code == 400 and batch.json()["error"]["code"] == "batch_too_large"
        info = http.get("/info").json()
        assert (info["engine"], info["threads"]) == ("torch", 1)
        assert info["limits"]["max_batch_texts"] == 2
        page = http.get("/")
        assert page.status_code == 200 and 'data-testid="input"' in page.text


def test_busy_port_is_one_sentence_and_nonzero(tiny_model_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [*SERVE, "--model", str(tiny_model_dir), "--port", str(port)],
            env=serve_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode != 0
    assert "already in use" in done.stderr and str(port) in done.stderr
    assert "Traceback" not in done.stderr and len(besides_first_run_notes(done.stderr)) == 1


def test_missing_model_exits_3_with_one_sentence(tmp_path: Path) -> None:
    done = subprocess.run(
        [*SERVE, "--model", str(tmp_path / "no-such-model"), "--port", str(free_port())],
        env=serve_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3
    assert "Traceback" not in done.stderr and len(besides_first_run_notes(done.stderr)) == 1


def test_serve_help_lists_every_env_twin() -> None:
    done = subprocess.run(
        [*SERVE, "--help"], env=serve_env(COLUMNS="200"), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0
    for name in (
        "MODEL",
        "HOST",
        "PORT",
        "ENGINE",
        "PRECISION",
        "DEVICE",
        "THREADS",
        "MAX_LENGTH",
        "MAX_BATCH_TEXTS",
        "MAX_BODY_BYTES",
        "LOG_LEVEL",
        "WARMUP",
    ):
        assert f"TIANKONG_{name}" in done.stdout
