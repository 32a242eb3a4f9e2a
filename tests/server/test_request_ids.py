"""Every response names its request (``X-Request-ID``) and every request gets one access line,
with the time it took and that id; the served process's lines start with the time."""

from __future__ import annotations

import logging
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from reliability_helpers import fake_masker
from server_helpers import START_TIMEOUT_S, free_port, local_client, wait_until_ready

from tiankong import FillMasker, Settings
from tiankong.server import create_app
from tiankong.server.uvicorn_server import uvicorn_config

POEM = "春眠不觉晓，处处闻啼[MASK]。"
MADE = re.compile(r"[0-9a-f]{16}")


@pytest.fixture(scope="module")
def settings_fake(tiny_model_dir: Path) -> Settings:
    return Settings(engine="fake", threads=1, model=str(tiny_model_dir), max_body_bytes=1000)


@pytest.fixture(scope="module")
def client(tiny_masker: FillMasker, settings_fake: Settings) -> TestClient:
    app = create_app(settings_fake, fake_masker(tiny_masker, settings_fake))

    async def broken() -> None:
        raise RuntimeError("a bug")

    app.add_api_route("/broken", broken)
    with local_client(app, raise_server_exceptions=False) as test_client:
        yield test_client  # type: ignore[misc]


def test_every_answer_names_its_request(client: TestClient) -> None:
    answers = [
        client.post("/predict", json={"text": POEM}),  # 200
        client.post("/predict", json={"text": POEM}),  # another request, another id
        client.post("/predict", json={"text": "没有空格"}),  # 400 no_mask
        client.post("/predict", json={"txt": POEM}),  # 422
        client.post("/predict", content=b"x" * 2000, headers={"Content-Type": "text/plain"}),
        client.get("/no-such-path"),  # 404
        client.get("/health"),
        client.get("/broken"),  # 500
    ]
    assert [a.status_code for a in answers] == [200, 200, 400, 422, 413, 404, 200, 500]
    ids = [a.headers["x-request-id"] for a in answers]
    assert all(MADE.fullmatch(one) for one in ids) and len(set(ids)) == len(ids)


@pytest.mark.parametrize(
    "given", ["abc-123", "0f8fad5b-d9cb-469f-a165-70867728950e", "a" * 128, "x.y_z:1/2+3="]
)
def test_a_clients_id_is_repeated(client: TestClient, given: str) -> None:
    answer = client.post("/predict", json={"text": POEM}, headers={"X-Request-ID": given})
    assert answer.headers["x-request-id"] == given


@pytest.mark.parametrize("given", [b"", b"a b", b"a" * 129, "编号".encode(), b"a\tb"])
def test_an_unsafe_id_is_replaced(client: TestClient, given: bytes) -> None:
    answer = client.get("/health", headers=[(b"x-request-id", given)])
    assert MADE.fullmatch(answer.headers["x-request-id"])


def test_one_access_line_a_request(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tiankong.access"):
        answer = client.post("/predict", json={"text": POEM}, headers={"X-Request-ID": "rq-1"})
        client.get("/predict?text=%E7%94%BB%0A[MASK]&top_k=2", headers={"X-Request-ID": "rq-2"})
        client.get("/evil%0Aline", headers={"X-Request-ID": "rq-3"})
    lines = [r.getMessage() for r in caplog.records if r.name == "tiankong.access"]
    assert len(lines) == 3 and answer.status_code == 200
    assert re.fullmatch(r'testclient:\d+ "POST /predict HTTP/1.1" 200 \d+\.\d ms id=rq-1', lines[0])
    # a query and a path keep to one line: what could end it is percent-encoded
    assert '"GET /predict?text=%E7%94%BB%0A[MASK]&top_k=2 HTTP/1.1" 200' in lines[1]
    assert '"GET /evil%0Aline HTTP/1.1" 404' in lines[2] and "\n" not in "".join(lines)


def test_a_bugs_traceback_names_the_request(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="tiankong.server"):
        answer = client.get("/broken", headers={"X-Request-ID": "find-me-7"})
    assert answer.status_code == 500 and answer.headers["x-request-id"] == "find-me-7"
    error_id = answer.json()["error"]["error_id"]
    (record,) = [r for r in caplog.records if error_id in r.getMessage()]
    assert "request id find-me-7" in record.getMessage() and record.exc_info


def test_uvicorn_writes_no_second_access_line(settings_fake: Settings) -> None:
    config = uvicorn_config(create_app(settings_fake), settings_fake)
    assert config.access_log is False
    assert config.log_config is not None and not isinstance(config.log_config, str)
    formats = [f["fmt"] for f in config.log_config["formatters"].values()]
    assert formats and all(fmt.startswith("%(asctime)s") for fmt in formats)


@pytest.mark.processes
def test_the_served_log_lines_start_with_the_time(tiny_model_dir: Path) -> None:
    port = free_port()
    command = [sys.executable, "-m", "tiankong", "serve", "--model", str(tiny_model_dir)]
    command += ["--engine", "fake", "--index", "none", "--port", str(port), "--no-warmup"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_ready(url, START_TIMEOUT_S, lambda: process.poll() is None)
        with httpx.Client(base_url=url, timeout=30) as http:
            sent = http.post("/predict", json={"text": POEM}).headers["x-request-id"]
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} "
    accessed = [line for line in output.splitlines() if '"POST /predict HTTP/1.1"' in line]
    assert len(accessed) == 1, output  # tiankong's line, not uvicorn's as well
    assert re.match(stamp + r"INFO: +127\.0\.0\.1:\d+ \"POST", accessed[0])
    assert accessed[0].endswith(f"id={sent}")
    (started,) = [line for line in output.splitlines() if "Started server process" in line]
    assert re.match(stamp + "INFO:", started)  # uvicorn's own lines too


def test_a_script_on_an_allowed_origin_can_send_and_read_the_id(
    tiny_masker: FillMasker, tiny_model_dir: Path
) -> None:
    origin = "https://app.example"
    settings = Settings(engine="fake", threads=1, model=str(tiny_model_dir), cors_origins=(origin,))
    with local_client(create_app(settings, fake_masker(tiny_masker, settings))) as cors:
        preflight = cors.options(
            "/predict",
            headers={
                "Origin": origin,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type, x-request-id",
            },
        )
        assert preflight.status_code == 200
        answer = cors.post(
            "/predict", json={"text": POEM}, headers={"Origin": origin, "X-Request-ID": "page-1"}
        )
    exposed = answer.headers["access-control-expose-headers"].lower()
    assert answer.headers["x-request-id"] == "page-1" and "x-request-id" in exposed


def test_the_openapi_document_names_the_headers_and_statuses(client: TestClient) -> None:
    """A client generated from the document learns what every answer may carry."""
    paths = client.get("/openapi.json").json()["paths"]
    for path, operations in paths.items():
        for method, operation in operations.items():
            responses = operation["responses"]
            assert {"415", "431", "500"} <= set(responses), (method, path)
            assert ("503" in responses) == (path != "/health"), (method, path)  # the drain's
            for status, response in responses.items():
                headers = response["headers"]
                assert "X-Request-ID" in headers, (method, path, status)
                assert ("Retry-After" in headers) == (status in ("429", "503"))
    predict = paths["/predict"]["post"]["responses"]
    assert "Server-Timing" in predict["200"]["headers"]
    assert "Server-Timing" not in paths["/info"]["get"]["responses"]["200"]["headers"]


def test_the_openapi_document_names_the_limits(
    tiny_masker: FillMasker, tiny_model_dir: Path
) -> None:
    """Enums and ranges lived in descriptions only: a generated client knew none of them."""
    settings = Settings(engine="fake", model=str(tiny_model_dir), max_top_k=20, max_batch_texts=8)
    with local_client(create_app(settings, fake_masker(tiny_masker, settings))) as limited:
        document = limited.get("/openapi.json").json()
    models = document["components"]["schemas"]
    one, many = models["PredictRequest"]["properties"], models["BatchPredictRequest"]["properties"]
    assert one["mode"]["enum"] == ["single", "whole_word", "candidates"]
    assert one["order"]["enum"] == ["left_to_right", "confident_first"]
    assert (one["beam_width"]["minimum"], one["beam_width"]["maximum"]) == (1, 64)
    assert (one["length_alpha"]["minimum"], one["length_alpha"]["maximum"]) == (0, 2)
    assert one["candidates"]["maxItems"] == 50 and many["texts"]["maxItems"] == 8
    # its words too: they said 64 where 8 were served (a review)
    assert many["texts"]["description"] == "Up to 8 texts."
    checks = models["BatchCheckBody"]["properties"]["texts"]
    assert checks["maxItems"] == 8 and checks["description"] == "Up to 8 texts."
    assert (one["top_k"]["minimum"], one["top_k"]["maximum"]) == (1, 20)  # this server's
