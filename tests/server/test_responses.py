"""The routes write their JSON straight from the results (server/responses.py): each body must
be exactly what its response model makes of it (nothing missing, nothing extra, same values),
in every mode; and the inference routes say where the time went (Server-Timing)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel, TypeAdapter
from server_helpers import local_client

from tiankong.server.schemas import BatchPredictResponse, HFResponse, PredictResponse

BODIES: list[dict[str, Any]] = [
    {"text": "春眠不觉晓，处处闻啼[MASK]。"},
    {"text": "他[MASK]天[MASK]去公园。", "top_k": 3},
    {"text": "手机没电了，赶紧去[MASK][MASK]。", "mode": "whole_word", "top_k": 3},
    {"text": "他做事一向[MASK]，从不出错。", "candidates": ["一丝不苟", "马马虎虎"]},
    {"text": "今天天气很[BLANK]。", "max_blank_length": 2},
    {"text": "今天天气很[MASK]。", "preset": "chinese_only", "exclude": ["好"]},
]


def as_model(model: type[BaseModel] | Any, body: Any) -> Any:
    adapter = TypeAdapter(model)
    return adapter.dump_python(adapter.validate_python(body), mode="json")


@pytest.mark.parametrize("body", BODIES)
def test_predict_body_is_its_model(client: TestClient, body: dict[str, Any]) -> None:
    response = client.post("/predict", json=body)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == as_model(PredictResponse, response.json())


def test_batch_body_with_an_error_entry_is_its_model(client: TestClient) -> None:
    texts = ["春眠不觉晓，处处闻啼[MASK]。", "没有空格的句子。", "他[MASK]天去公园。"]
    for body in ({"texts": texts}, {"texts": texts, "mode": "whole_word"}):
        response = client.post("/batch_predict", json=body)
        assert response.status_code == 200
        assert response.json() == as_model(BatchPredictResponse, response.json())
        assert response.json()["results"][1]["error"]["code"] == "no_mask"


@pytest.mark.parametrize(
    "body",
    [
        {"inputs": "春眠不觉晓，处处闻啼[MASK]。"},
        {"inputs": ["[MASK]龙点睛", "他[MASK]天[MASK]去。"], "parameters": {"top_k": 2}},
        {"inputs": "太阳从东[MASK]升起。", "parameters": {"targets": ["东", "西"]}},
        {"inputs": "他做事一向[MASK]。", "parameters": {"targets": ["一丝不苟", "马虎"]}},
    ],
)
def test_hf_body_is_its_model(client: TestClient, body: dict[str, Any]) -> None:
    response = client.post("/", json=body)
    assert response.status_code == 200
    assert response.json() == as_model(HFResponse, response.json())


def test_server_timing_on_the_inference_routes_only(client: TestClient) -> None:
    response = client.post("/predict", json={"text": "画龙点[MASK]。"})
    parts = dict(
        part.strip().split(";dur=") for part in response.headers["server-timing"].split(",")
    )
    assert set(parts) == {"queue", "engine", "total"}
    queue, engine, total = (float(parts[name]) for name in ("queue", "engine", "total"))
    assert engine > 0 and queue >= 0 and queue + engine <= total
    assert "server-timing" in client.get("/predict", params={"text": "画龙[MASK]睛"}).headers
    assert "server-timing" not in client.get("/health").headers
    assert "server-timing" not in client.get("/info").headers


@pytest.mark.parametrize(
    "body",
    [
        {"text": "他做事一向很[MASK][MASK]。", "mode": "whole_word"},
        {"text": "他做事一向[BLANK]。"},
        {"text": "他做事一向[MASK][MASK]。", "candidates": ["认真", "马虎"]},
    ],
)
def test_server_timing_counts_a_searchs_engine_steps(
    client: TestClient, body: dict[str, Any]
) -> None:
    """A search's steps run in tasks of the event loop's own context, not the request's, so its
    header said engine 0 and queue 0 (a [BLANK] of 929 ms total among them)."""
    response = client.post("/predict", json=body)
    assert response.status_code == 200, response.text
    parts = dict(
        part.strip().split(";dur=") for part in response.headers["server-timing"].split(",")
    )
    assert float(parts["engine"]) > 0
    assert float(parts["queue"]) + float(parts["engine"]) <= float(parts["total"])


def engine_ms(response: Any) -> float:
    parts = dict(
        part.strip().split(";dur=") for part in response.headers["server-timing"].split(",")
    )
    return float(parts["engine"])


@pytest.mark.parametrize("cache_size", [1024, 0])
def test_a_cached_answer_shows_in_server_timing_unless_the_cache_is_off(
    tiny_masker: Any, tiny_model_dir: Any, cache_size: int
) -> None:
    """What README's "Shared result cache" says: a repeated request is answered from the cache
    with engine;dur=0.000, which another client can see; --result-cache-size 0 turns it off."""
    from reliability_helpers import fake_masker

    from tiankong import Settings
    from tiankong.server import create_app

    settings = Settings(
        engine="fake", threads=1, model=str(tiny_model_dir), result_cache_size=cache_size
    )
    with local_client(create_app(settings, fake_masker(tiny_masker, settings))) as client:
        body = {"text": "春眠不觉晓，处处闻啼[MASK]。"}
        first, again = (client.post("/predict", json=body) for _ in range(2))
    assert first.json()["predictions"] == again.json()["predictions"] and engine_ms(first) > 0
    assert (engine_ms(again) == 0) == (cache_size > 0)
