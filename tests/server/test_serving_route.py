"""The inference routes' own handler (server/serving_route.py): a valid JSON request skips
FastAPI's generic handler, and every other request gets exactly FastAPI's answer."""

from __future__ import annotations

import asyncio
from typing import Any

import fastapi.routing
import pytest
from fastapi import Depends, FastAPI, HTTPException
from fastapi.testclient import TestClient
from server_helpers import local_client

from tiankong import FillMasker, Settings
from tiankong.server.deps import state_of
from tiankong.server.routes import router
from tiankong.server.serving_route import ServingRoute, serving_inputs

JSON = "application/json"
VALID = '{"text": "春眠不觉晓，处处闻啼[MASK]。", "top_k": 3}'
# (path, body bytes, content type): what a client may send, well-formed or not
REQUESTS: list[tuple[str, bytes, str | None]] = [
    ("/predict", VALID.encode(), "application/json"),
    ("/predict", VALID.encode(), "application/json; charset=utf-8"),
    ("/predict", VALID.encode(), None),
    ("/predict", VALID.encode(), "text/plain"),
    ("/predict", VALID.encode(), "application/vnd.api+json"),
    ("/predict", b"", "application/json"),
    ("/predict", b"null", "application/json"),
    ("/predict", b"[1, 2]", "application/json"),
    ("/predict", b'"text"', "application/json"),
    ("/predict", b'{"text": "abc[MASK]", ', "application/json"),
    ("/predict", b"[" * 100_000, "application/json"),  # json.loads: RecursionError
    ("/batch_predict", b'{"texts": ' + b"[" * 100_000, "application/json"),
    ("/predict", b'{"text": "\xff\xfe[MASK]"}', "application/json"),
    ("/predict", b'{"text": 5}', "application/json"),
    ("/predict", b'{"top_k": 3}', "application/json"),
    ("/predict", b'{"text": "abc[MASK]", "top_k": 0}', "application/json"),
    ("/predict", b'{"text": "abc[MASK]", "top_k": NaN}', "application/json"),
    ("/predict", b'{"text": "no blank here"}', "application/json"),
    ("/predict", b'{"text": "abc[MASK]", "mode": "nope"}', "application/json"),
    ("/predict", b'{"text": "abc[MASK]", "unknown_field": 1}', "application/json"),
    ("/predict", '{"text": "他[MASK]天去公园。", "text": "x[MASK]"}'.encode(), "application/json"),
    ("/batch_predict", '{"texts": ["他[MASK]天去。", "没有"]}'.encode(), "application/json"),
    ("/batch_predict", b'{"texts": []}', "application/json"),
    ("/batch_predict", b'{"texts": "one"}', "application/json"),
]


def send(client: TestClient, path: str, body: bytes, content_type: str | None) -> Any:
    headers = {"content-type": content_type} if content_type else {}
    response = client.post(path, content=body, headers=headers)
    payload = response.json()
    if response.status_code == 200:  # the time taken differs between two runs
        for item in [payload, *payload.get("results", [])]:
            item.pop("latency_ms", None)
    return response.status_code, payload


def test_every_request_gets_fastapis_answer(client: TestClient, app: FastAPI) -> None:
    """The reference: the same app with a dependency override, which sends every request to
    FastAPI's own handler (overrides are FastAPI's business)."""
    assert not app.dependency_overrides
    ours = [send(client, *request) for request in REQUESTS]
    app.dependency_overrides[state_of] = state_of
    try:
        reference = [send(client, *request) for request in REQUESTS]
    finally:
        app.dependency_overrides.clear()
    for request, mine, theirs in zip(REQUESTS, ours, reference, strict=True):
        assert mine == theirs, request
    statuses = {status for status, _ in ours}
    assert {200, 400, 422} <= statuses  # the cases are varied


def test_a_valid_json_request_skips_fastapis_generic_handler(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    solved: list[str] = []
    solve = fastapi.routing.solve_dependencies

    async def counting(*args: Any, **kwargs: Any) -> Any:
        solved.append(kwargs["request"].url.path)
        return await solve(*args, **kwargs)

    monkeypatch.setattr(fastapi.routing, "solve_dependencies", counting)
    assert send(client, "/predict", VALID.encode(), "application/json")[0] == 200
    assert send(client, "/batch_predict", b'{"texts": ["a[MASK]"]}', "application/json")[0] == 200
    assert solved == []
    assert send(client, "/predict", VALID.encode(), "text/plain")[0] == 415
    assert send(client, "/predict", b'{"text": 5}', "application/json")[0] == 422
    assert client.get("/predict", params={"text": "a[MASK]"}).status_code == 200
    assert solved == ["/predict"] * 3


def test_only_body_and_serving_routes_take_their_own_handler() -> None:
    routes = {
        (route.path, *sorted(route.methods)): serving_inputs(route)
        for route in router.routes
        if isinstance(route, ServingRoute)
    }
    assert routes[("/predict", "POST")] == ("body", "serving")
    assert routes[("/batch_predict", "POST")] == ("body", "serving")
    assert routes[("/predict", "GET")] is None  # query parameters: FastAPI's handler
    assert routes[("/info", "GET")] is None


def test_dependencies_an_include_adds_run_on_every_request(
    settings: Settings, tiny_masker: FillMasker
) -> None:
    """An app that includes the routes behind its own check (an API key, say) gets the check on
    a valid request too: the route's own handler only serves routes whose sole dependency is
    ``ServingDep``, as FastAPI builds them for that include."""
    from tiankong.server import create_app

    def deny() -> None:
        raise HTTPException(status_code=403, detail="no key")

    app = create_app(settings, tiny_masker)
    app.include_router(router, prefix="/guarded", dependencies=[Depends(deny)])
    with local_client(app) as client:
        assert send(client, "/predict", VALID.encode(), "application/json")[0] == 200
        assert send(client, "/guarded/predict", VALID.encode(), "application/json")[0] == 403
        assert send(client, "/guarded/batch_predict", b'{"texts": ["a[MASK]"]}', JSON)[0] == 403


async def post_cut_short(app: FastAPI) -> tuple[list[int], bytes]:
    """A POST /predict whose client goes away after half of its JSON body."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/predict", "raw_path": b"/predict", "root_path": "",
        "query_string": b"", "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000),
        "headers": [(b"host", b"localhost"), (b"content-type", b"application/json"),
                    (b"transfer-encoding", b"chunked")], "state": {},
    }  # fmt: skip
    messages = iter(
        [
            {"type": "http.request", "body": b'{"text": "a', "more_body": True},
            {"type": "http.disconnect"},
        ]
    )

    async def receive() -> dict[str, Any]:
        return next(messages, {"type": "http.disconnect"})

    statuses: list[int] = []
    body = b""

    async def send_message(message: dict[str, Any]) -> None:
        nonlocal body
        if message["type"] == "http.response.start":
            statuses.append(message["status"])
        elif message["type"] == "http.response.body":
            body += message.get("body", b"")

    try:
        await app(scope, receive, send_message)
    except Exception as error:
        return [-1], type(error).__name__.encode()
    return statuses, body


def test_a_client_gone_mid_body_gets_fastapis_answer(client: TestClient, app: FastAPI) -> None:
    assert not app.dependency_overrides
    ours = asyncio.run(post_cut_short(app))
    app.dependency_overrides[state_of] = state_of
    try:
        reference = asyncio.run(post_cut_short(app))
    finally:
        app.dependency_overrides.clear()
    assert ours == reference
    assert ours[0] != [500]
