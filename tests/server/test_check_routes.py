"""POST /check and /batch_check: the library's answers over HTTP, through the batcher, with the
one error shape, the cost cap, the batch cap and the OpenAPI document."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from fastapi.testclient import TestClient
from server_helpers import assert_error, local_client

from tiankong import FillMasker, Settings
from tiankong.server import create_app
from tiankong.tasks.check import Proofreader

TEXTS = ["画龙点晴", "我门看美国电影，我觉得很有意事。", "白日依山尽，黄河入海流。"]


def library(masker: FillMasker, text: str) -> dict[str, Any]:
    data = Proofreader(masker).check(text).to_dict()
    del data["latency_ms"]
    return data


def test_check_answers_what_the_library_does(client: TestClient, tiny_masker: FillMasker) -> None:
    for text in TEXTS:
        response = client.post("/check", json={"text": text})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body.pop("latency_ms") >= 0
        assert body == library(tiny_masker, text)
    fixed = client.post("/check", json={"text": "画龙点晴"}).json()
    assert fixed["corrected"] == "画龙点睛" and fixed["edits"][0]["memory"]["match"] == "画龙点睛"


def test_batch_check_keeps_order_and_gives_a_bad_text_its_error(
    client: TestClient, tiny_masker: FillMasker
) -> None:
    response = client.post("/batch_check", json={"texts": [TEXTS[0], "  ", TEXTS[2]]})
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert results[1] == {
        "error": {"code": "empty_text", "message": "The text is empty; send a sentence to check."}
    }
    for got, text in zip([results[0], results[2]], [TEXTS[0], TEXTS[2]], strict=True):
        assert got.pop("latency_ms") >= 0
        assert got == library(tiny_masker, text)


def test_bad_input_gets_the_one_error_shape(client: TestClient, settings: Settings) -> None:
    assert_error(client.post("/check", json={"text": ""}), 400, "empty_text")
    long = client.post("/check", json={"text": "好" * (settings.max_check_chars + 1)})
    assert "max_check_chars" in assert_error(long, 400, "text_too_long")["message"]
    assert_error(client.post("/check", json={"text": 3}), 422, "invalid_request")
    assert_error(client.post("/check", json={"text": "好", "extra": 1}), 422, "invalid_request")
    assert_error(client.post("/batch_check", json={"texts": []}), 422, "invalid_request")
    many = client.post("/batch_check", json={"texts": ["好"] * (settings.max_batch_texts + 1)})
    assert_error(many, 400, "batch_too_large")


def test_clean_and_odd_text_comes_back_unchanged(client: TestClient) -> None:
    for text in ["！？。", "hello world", "Python 3.12 和 GPT-4"]:
        body = client.post("/check", json={"text": text}).json()
        assert body["edits"] == [] and body["corrected"] == text


def test_the_cost_cap_refuses_a_long_text(tiny_masker: FillMasker, settings: Settings) -> None:
    app = create_app(settings.with_overrides(max_request_cost=6), tiny_masker)
    with local_client(app) as client:
        assert client.post("/check", json={"text": "画龙点晴"}).status_code == 200
        response = client.post("/check", json={"text": "今天天气很好。" * 40})
        assert "max_request_cost" in assert_error(response, 400, "bad_option")["message"]


def test_concurrent_checks_share_the_batcher(base_url: str, tiny_masker: FillMasker) -> None:
    texts = [f"{text}{n}" for n in range(4) for text in TEXTS]

    async def all_at_once() -> list[dict[str, Any]]:
        async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
            replies = await asyncio.gather(*(http.post("/check", json={"text": t}) for t in texts))
        assert all(reply.status_code == 200 for reply in replies)
        return [reply.json() for reply in replies]

    for text, body in zip(texts, asyncio.run(all_at_once()), strict=True):
        body.pop("latency_ms")
        assert body == library(tiny_masker, text)
    metrics = httpx.get(f"{base_url}/metrics").text
    assert 'route="/check",status="200"' in metrics


def test_the_routes_are_documented(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for path in ("/check", "/batch_check"):
        operation = paths[path]["post"]
        assert operation["tags"] == ["check"] and "400" in operation["responses"]
        assert operation["requestBody"]["content"]["application/json"]["examples"]
