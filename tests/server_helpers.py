"""Running a real HTTP server in tests (uvicorn in a thread, or `tiankong serve` in a process),
and the one check of the error shape."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient

START_TIMEOUT_S = 180.0  # two busy cores: importing torch and loading the model can be slow


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve_in_thread(app: FastAPI) -> Iterator[str]:
    """Serve ``app`` on a free loopback port; yields the base URL, stops the server after."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the test server stopped during startup")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the test server did not start in {START_TIMEOUT_S:.0f} s")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def wait_until_ready(
    base_url: str, timeout_s: float, alive: Callable[[], bool] = lambda: True
) -> None:
    """Poll GET /ready until it answers 200; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"the server exited before it was ready ({last})")
        try:
            response = httpx.get(f"{base_url}/ready", timeout=5)
            if response.status_code == 200:
                return
            last = f"/ready answered {response.status_code}"
        except httpx.TransportError as error:
            last = type(error).__name__
        time.sleep(0.25)
    raise TimeoutError(f"{base_url} was not ready after {timeout_s:.0f} s ({last})")


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The one error shape, with a readable message and no internals; a 500 (a server fault)
    also carries the ``error_id`` that finds its traceback in the server log."""
    assert response.status_code == status, response.text
    body = response.json()
    fields = {"code", "message", "error_id"} if status == 500 else {"code", "message"}
    assert set(body) == {"error"} and set(body["error"]) == fields
    assert body["error"]["code"] == code
    message = body["error"]["message"]
    assert isinstance(message, str) and len(message) > 10
    for leak in ("Traceback", ".py", "/work", "site-packages", 'File "'):
        assert leak not in response.text
    return body["error"]


def capture_serve_settings(monkeypatch: Any) -> list[Any]:
    """Stand in for ``FillMasker.load``: record the Settings that `tiankong serve` built, then
    stop with a BadOptionError before anything loads. Returns the list the Settings go into."""
    from tiankong.cli import serve as cli_serve
    from tiankong.errors import BadOptionError
    from tiankong.service import FillMasker

    assert cli_serve.serve_command  # importing cli_serve registers `serve` on the app
    seen: list[Any] = []

    def load(source: str | None = None, settings: Any = None) -> FillMasker:
        assert settings is not None
        seen.append(settings)
        raise BadOptionError("stop here; the settings are what this test is about")

    monkeypatch.setattr(FillMasker, "load", staticmethod(load))
    return seen


# TestClient's own Host, "testserver", is not a name a server on a loopback address answers to
# (the DNS-rebinding guard's 400 bad_host): the tests' clients name the host as a user's would.
LOCAL_URL = "http://localhost"


def local_client(app: FastAPI, **kwargs: Any) -> TestClient:
    """A ``TestClient`` of ``app`` that sends ``Host: localhost``."""
    return TestClient(app, base_url=LOCAL_URL, **kwargs)
