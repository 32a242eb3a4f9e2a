"""The HTTP API in-process (TestClient / httpx): every route and every error case."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from server_helpers import assert_error, local_client

from tiankong import FillMasker, Settings
from tiankong.engines.fake import FakeEngine
from tiankong.server import create_app

POEM = "春眠不觉晓，处处闻啼[MASK]。"
IDIOM = "画龙点[MASK]"
TWO_MASKS = "他[MASK]天去公园[MASK]步。"


def metric_value(client: TestClient, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(client.get("/metrics").text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return 0.0


def same_candidates(ours: list[list[dict[str, Any]]], theirs: list[list[dict[str, Any]]]) -> bool:
    """Same tokens in the same order; scores equal up to float noise (padding changes it)."""
    return [[c["token_id"] for c in mask] for mask in ours] == [
        [c["token_id"] for c in mask] for mask in theirs
    ] and all(
        a["score"] == pytest.approx(b["score"], rel=1e-4)
        for mask_a, mask_b in zip(ours, theirs, strict=True)
        for a, b in zip(mask_a, mask_b, strict=True)
    )


# --- /predict ----------------------------------------------------------------------------


def test_predict_post_shape_and_values(client: TestClient, tiny_masker: FillMasker) -> None:
    response = client.post("/predict", json={"text": POEM, "top_k": 3})
    assert response.status_code == 200
    data = response.json()
    expected = {"text", "predictions", "masks", "sequence", "truncated", "model", "latency_ms"}
    assert set(data) == expected | {"sequences", "candidates", "warnings"}
    assert data["sequences"] == [] and data["candidates"] == []  # only the other modes fill them
    assert data["warnings"] == []  # a Chinese text has none
    assert data["predictions"] == data["masks"][0] and len(data["predictions"]) == 3
    assert set(data["predictions"][0]) == {"token", "token_id", "score", "model_score", "memory"}
    direct = tiny_masker.predict(POEM, top_k=3)
    assert [c["token_id"] for c in data["predictions"]] == [c.token_id for c in direct.masks[0]]
    assert data["predictions"][0]["score"] == pytest.approx(direct.masks[0][0].score, abs=1e-6)
    assert data["sequence"] == direct.sequence and " " not in data["sequence"]
    assert data["model"] == tiny_masker.model.name and data["truncated"] is False
    assert data["latency_ms"] > 0


def test_predict_default_top_k_and_several_masks(client: TestClient) -> None:
    data = client.post("/predict", json={"text": TWO_MASKS}).json()
    assert len(data["masks"]) == 2 and all(len(m) == 5 for m in data["masks"])
    first, second = data["masks"][0][0]["token"], data["masks"][1][0]["token"]
    assert data["sequence"] == f"他{first}天去公园{second}步。"


def test_predict_accepts_mask_variants(client: TestClient) -> None:
    data = client.post("/predict", json={"text": "画龙点【mask】"}).json()
    assert data["text"] == IDIOM


def test_predict_get_matches_post_with_percent_encoded_utf8(client: TestClient) -> None:
    url = f"/predict?text={quote(POEM)}&top_k=4"
    assert "%E6%98%A5" in url  # really percent-encoded UTF-8, as `ab` sends it
    got = client.get(url)
    posted = client.post("/predict", json={"text": POEM, "top_k": 4}).json()
    assert got.status_code == 200
    data = got.json()
    assert data["masks"] == posted["masks"] and data["sequence"] == posted["sequence"]


def test_predict_truncates_long_text_around_the_mask(client: TestClient) -> None:
    text = "天" * 400 + "[MASK]" + "地" * 400
    data = client.post("/predict", json={"text": text}).json()
    assert data["truncated"] is True and data["text"] == text


# --- /batch_predict ----------------------------------------------------------------------


def test_batch_predict_in_order_with_per_item_errors(client: TestClient) -> None:
    runs_before = metric_value(client, "tiankong_batch_size_count")
    texts_before = metric_value(client, "tiankong_batch_size_sum")
    texts = [POEM, "没有空格。", IDIOM, "", "[MASK]" * 17, TWO_MASKS]
    response = client.post("/batch_predict", json={"texts": texts, "top_k": 2})
    # the three good texts went to the engine together, in one run
    assert metric_value(client, "tiankong_batch_size_count") == runs_before + 1
    assert metric_value(client, "tiankong_batch_size_sum") == texts_before + 3
    assert response.status_code == 200
    results = response.json()["results"]
    assert len(results) == len(texts)
    assert results[1]["error"]["code"] == "no_mask"
    assert results[3]["error"]["code"] == "empty_text"
    assert results[4]["error"]["code"] == "too_many_masks"
    for index in (1, 3, 4):  # the documented error shape: no "error_id": null on a 4xx entry
        assert set(results[index]) == {"error"}
        assert set(results[index]["error"]) == {"code", "message"}
    for index in (0, 2, 5):
        single = client.post("/predict", json={"text": texts[index], "top_k": 2}).json()
        assert results[index]["text"] == texts[index]
        assert same_candidates(results[index]["masks"], single["masks"])


def test_batch_predict_all_bad_never_reaches_the_engine(client: TestClient) -> None:
    batches_before = metric_value(client, "tiankong_batch_size_count")
    response = client.post("/batch_predict", json={"texts": ["a", "b"]})
    assert [item["error"]["code"] for item in response.json()["results"]] == ["no_mask"] * 2
    assert metric_value(client, "tiankong_batch_size_count") == batches_before


def test_batch_predict_is_capped(settings: Settings, tiny_masker: FillMasker) -> None:
    capped = settings.with_overrides(max_batch_texts=2)
    with local_client(create_app(capped, tiny_masker)) as capped_client:
        response = capped_client.post("/batch_predict", json={"texts": [POEM] * 3})
        assert_error(response, 400, "batch_too_large")
        assert capped_client.post("/batch_predict", json={"texts": [POEM] * 2}).status_code == 200


# --- errors ------------------------------------------------------------------------------

FAR_APART = "[MASK]" + "长" * 300 + "[MASK]"


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"text": "没有空格的句子。"}, 400, "no_mask"),
        ({"text": ""}, 400, "empty_text"),
        ({"text": "   "}, 400, "empty_text"),
        ({"text": "[MASK]" * 17}, 400, "too_many_masks"),
        ({"text": FAR_APART}, 400, "masks_do_not_fit"),
        ({"text": "字" * 10_001 + "[MASK]"}, 400, "text_too_long"),
        ({"text": POEM, "top_k": 0}, 400, "top_k_out_of_range"),
        ({"text": POEM, "top_k": 51}, 400, "top_k_out_of_range"),
        ({"text": POEM, "top_k": "many"}, 422, "invalid_request"),
        ({"text": POEM, "top_k": True}, 422, "invalid_request"),
        ({"text": POEM, "top_k": 2.5}, 422, "invalid_request"),
        ({"text": 123}, 422, "invalid_request"),
        ({"text": [POEM]}, 422, "invalid_request"),
        ({"top_k": 5}, 422, "invalid_request"),
        ({"text": POEM, "topk": 5}, 422, "invalid_request"),
        ([POEM], 422, "invalid_request"),
        # word pieces: an allowed ##好 put the piece 好 beside the character 好 in the answers
        ({"text": POEM, "allowed": ["##鸟"]}, 400, "bad_option"),
        ({"text": POEM, "exclude": ["##鸟"]}, 400, "bad_option"),
        ({"text": POEM, "candidates": ["鸟", "##鸟"]}, 400, "bad_option"),
    ],
)
def test_predict_bad_input(client: TestClient, body: Any, status: int, code: str) -> None:
    assert_error(client.post("/predict", json=body), status, code)


@pytest.mark.parametrize(
    ("content", "content_type", "words"),
    [
        (b'{"text": "[MASK]"', "application/json", "not valid JSON"),
        (b"", "application/json", "missing"),
        (b'{"text": "\xff[MASK]"}', "application/json", "UTF-8"),
        # valid UTF-8, told "send UTF-8" before
        (
            b'{"text": "a[MASK]", "allowed": ' + b"[" * 5000 + b"]" * 5000 + b"}",
            "application/json",
            "nested too deeply",
        ),
        # valid JSON too: an integer past Python's 4,300 digits, told "send UTF-8" before
        (b'{"text": "a[MASK]", "top_k": ' + b"1" * 5000 + b"}", "application/json", "too long"),
    ],
)
def test_predict_bad_body(
    client: TestClient, content: bytes, content_type: str, words: str
) -> None:
    headers = {"content-type": content_type} if content_type else {}
    error = assert_error(
        client.post("/predict", content=content, headers=headers), 422, "invalid_request"
    )
    assert words in error["message"]


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        (b"text=[MASK]", "application/x-www-form-urlencoded"),  # curl -d without -H
        ('{"text": "画龙点[MASK]"}'.encode(), "text/plain"),
        ('{"text": "画龙点[MASK]"}'.encode(), ""),
        # JSON-like types FastAPI doesn't read as JSON: they were "The body must be a JSON
        # object." of a JSON object (a review)
        ('{"text": "画龙点[MASK]"}'.encode(), "text/json"),
        ('{"text": "画龙点[MASK]"}'.encode(), "application/x-json"),
        ('{"text": "画龙点[MASK]"}'.encode(), "application/json, text/plain"),
    ],
)
def test_a_body_not_sent_as_json_is_415(
    client: TestClient, content: bytes, content_type: str
) -> None:
    """Another content type than JSON is 415 Unsupported Media Type, as HTTP has it for a body
    the route can't read as sent (it was a 422, a malformed request); the sentence says what
    to send."""
    headers = {"content-type": content_type} if content_type else {}
    response = client.post("/predict", content=content, headers=headers)
    error = assert_error(response, 415, "unsupported_media_type")
    assert error["message"] == (
        "Send the body as JSON, with the header Content-Type: application/json."
    )


LONE_SURROGATE = (
    "The text is not valid Unicode (bytes that aren't UTF-8, or a lone surrogate); send UTF-8."
)


@pytest.mark.parametrize(
    ("path", "content"),
    [
        ("/predict", b'{"text": "\\ud800[MASK]"}'),
        ("/check", b'{"text": "\\ud800\\u753b"}'),
        ("/", b'{"inputs": "\\ud800[MASK]"}'),
    ],
)
def test_a_lone_surrogate_is_bad_input_on_every_route(
    client: TestClient, path: str, content: bytes
) -> None:
    """One code and one sentence wherever a text comes: a lone text was a 422 whose message
    began with pydantic's "Value error,", and one text of a batch a 400 bad_input."""
    headers = {"content-type": "application/json"}
    answer = client.post(path, content=content, headers=headers)
    assert assert_error(answer, 400, "bad_input")["message"] == LONE_SURROGATE


def test_a_lone_surrogate_in_a_list_of_inputs_is_named(client: TestClient) -> None:
    content = b'{"inputs": ["\\u753b[MASK]", "\\udfff[MASK]"]}'
    answer = client.post("/", content=content, headers={"content-type": "application/json"})
    assert assert_error(answer, 400, "bad_input")["message"] == f"inputs[1]: {LONE_SURROGATE}"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("allowed", '["\\ud800"]'),
        ("mode", '"\\ud800"'),
        ("order", '"\\ud800"'),
        ("preset", '"\\ud800"'),
    ],
)
def test_a_lone_surrogate_in_an_option_is_a_malformed_request(
    client: TestClient, field: str, value: str
) -> None:
    """mode, order and preset took it, and the bad_option answer naming it failed to encode:
    a 500."""
    body = f'{{"text": "\\u753b[MASK]", "{field}": {value}}}'.encode()
    answer = client.post("/predict", content=body, headers={"content-type": "application/json"})
    message = assert_error(answer, 422, "invalid_request")["message"]
    where = f"{field}.0" if field == "allowed" else field
    assert message == f"{where}: the text is not valid Unicode (it has a lone surrogate)."


@pytest.mark.parametrize(
    ("path", "last"), [("/batch_predict", "守株待[MASK]"), ("/batch_check", "守株待免")]
)
def test_a_lone_surrogate_in_a_batch_is_that_texts_error(
    client: TestClient, path: str, last: str
) -> None:
    """Like any text that can't be filled, it gets its own error and the others their answers
    (the whole batch was a 422 before)."""
    content = json.dumps({"texts": ["画龙点[MASK]", "\ud800[MASK]", last]}).encode()  # as \\ud800
    answer = client.post(path, content=content, headers={"content-type": "application/json"})
    assert answer.status_code == 200, answer.text
    first, bad, last = answer.json()["results"]
    assert "error" not in first and "error" not in last
    assert bad["error"] == {"code": "bad_input", "message": LONE_SURROGATE}


@pytest.mark.parametrize(
    "url",
    ["/predict", f"/predict?text={quote(POEM)}&top_k=abc", "/predict?top_k=3"],
)
def test_predict_get_bad_query(client: TestClient, url: str) -> None:
    assert_error(client.get(url), 422, "invalid_request")


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("top_k=3_0", "top_k"),  # Python's int() read 30
        ("top_k=3.0", "top_k"),  # a JSON body's 3.0 is refused too
        ("top_k=%203", "top_k"),
        ("beam_width=2.0", "beam_width"),
        ("length_alpha=nan", "length_alpha"),
        ("length_alpha=1_0", "length_alpha"),
        ("length_alpha=1e999", "length_alpha"),  # infinity
    ],
)
def test_predict_get_numbers_are_written_plainly(
    client: TestClient, query: str, field: str
) -> None:
    error = assert_error(
        client.get(f"/predict?text={quote(IDIOM)}&{query}"), 422, "invalid_request"
    )
    assert error["message"].startswith(f"{field}: Input should be")


@pytest.mark.parametrize(
    "query", ["top_k=3", "length_alpha=1.5", "length_alpha=.5", "beam_width=4"]
)
def test_predict_get_plain_numbers_are_taken(client: TestClient, query: str) -> None:
    assert client.get(f"/predict?text={quote(IDIOM)}&{query}").status_code == 200


@pytest.mark.parametrize("path", ["/predict", "/batch_predict", "/check", "/"])
@pytest.mark.parametrize("compressed", [True, False])
def test_a_compressed_body_is_415(client: TestClient, path: str, compressed: bool) -> None:
    """Content-Encoding was ignored: gzip bytes were told "send UTF-8" (422) and a plain body
    labelled gzip was answered as if it were plain."""
    import gzip

    field = {"/predict": "text", "/check": "text", "/": "inputs"}.get(path, "texts")
    value = [IDIOM] if field == "texts" else IDIOM
    body = json.dumps({field: value}).encode()
    headers = {"content-type": "application/json", "content-encoding": "gzip"}
    answer = client.post(path, content=gzip.compress(body) if compressed else body, headers=headers)
    error = assert_error(answer, 415, "unsupported_media_type")
    assert "Content-Encoding gzip" in error["message"]
    assert answer.headers["connection"] == "close"  # the body was not read
    for plain in ("identity", ""):  # says "not encoded", or nothing (a 415 named ""  before)
        headers["content-encoding"] = plain
        assert client.post(path, content=body, headers=headers).status_code == 200


@pytest.mark.parametrize("value", [b"NaN", b"Infinity", b"-Infinity"])
@pytest.mark.parametrize("path", ["/predict", "/batch_predict"])
def test_json_nan_and_infinity_are_malformed(client: TestClient, path: str, value: bytes) -> None:
    """Python's JSON reader takes them (JSON has neither): they were read as numbers and
    answered 400 bad_option, as if length_alpha had been out of its range."""
    texts = b'"text": "a[MASK]"' if path == "/predict" else b'"texts": ["a[MASK]"]'
    content = b"{" + texts + b', "length_alpha": ' + value + b"}"
    answer = client.post(path, content=content, headers={"content-type": "application/json"})
    error = assert_error(answer, 422, "invalid_request")
    assert error["message"] == "length_alpha: Input should be a finite number."


@pytest.mark.parametrize(
    "query", ["text=%FF%E7%94%BB%5BMASK%5D", "text=%ED%A0%80%5BMASK%5D", "text=a%5BMASK%5D&x=%C3"]
)
def test_predict_get_bytes_that_are_not_utf8_are_refused(client: TestClient, query: str) -> None:
    """Not read as U+FFFD (a 200 for a text the user never sent): a POST body with the same
    bytes is refused too."""
    error = assert_error(client.get(f"/predict?{query}"), 422, "invalid_request")
    assert "not valid UTF-8" in error["message"]


@pytest.mark.parametrize(
    ("query", "key"),
    [
        (f"text={quote(POEM)}&text=abc", "text"),
        (f"text={quote(POEM)}&top_k=2&top_k=3", "top_k"),
        (f"text={quote(POEM)}&text=", "text"),  # a blank value counts too
    ],
)
def test_predict_get_a_key_given_twice_is_refused(client: TestClient, query: str, key: str) -> None:
    """The last value was used without a word; a list option still repeats its key."""
    error = assert_error(client.get(f"/predict?{query}"), 422, "invalid_request")
    assert error["message"] == f"'{key}' is given 2 times in the query string; give it once."
    listed = client.get(f"/predict?text={quote(POEM)}&candidates=鸟&candidates=花")
    assert listed.status_code == 200 and len(listed.json()["candidates"]) == 2


def test_predict_get_bad_values(client: TestClient) -> None:
    assert_error(client.get("/predict?text=abc"), 400, "no_mask")
    assert_error(client.get(f"/predict?text={quote(POEM)}&top_k=99"), 400, "top_k_out_of_range")


def test_oversized_body_by_content_length(client: TestClient) -> None:
    body = json.dumps({"text": "字" * 600_000 + "[MASK]"}, ensure_ascii=False).encode()
    response = client.post("/predict", content=body, headers={"content-type": "application/json"})
    error = assert_error(response, 413, "body_too_large")
    assert "1,000,000" in error["message"]
    # answered before routing, and still counted under its route, as a streamed body's 413 is,
    # but not among the requests served (/info's count and its last minute)
    assert metric_value(client, "tiankong_requests_total", route="/predict", status="413") >= 1
    served = client.get("/info").json()["requests_served"]
    client.post("/predict", content=body, headers={"content-type": "application/json"})
    assert client.get("/info").json()["requests_served"] == served


def test_oversized_body_streamed_without_content_length(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"text": "'
        for _ in range(12):
            yield b"a" * 100_000
        yield b'[MASK]"}'

    response = client.post(
        "/batch_predict", content=chunks(), headers={"content-type": "application/json"}
    )
    assert "content-length" not in response.request.headers
    assert_error(response, 413, "body_too_large")


def test_unknown_route_and_wrong_method_use_the_error_shape(client: TestClient) -> None:
    assert_error(client.get("/no/such/route"), 404, "not_found")
    response = client.put("/predict", json={"text": POEM})
    assert_error(response, 405, "method_not_allowed")


@pytest.mark.parametrize(
    ("method", "path"), [("POST", "/predict/"), ("GET", "/predict/?text=x"), ("GET", "/static")]
)
def test_another_spelling_of_a_path_is_not_found(
    client: TestClient, method: str, path: str
) -> None:
    """Not Starlette's empty 307 to the other spelling, whose Location took the client's Host
    header and http:// whatever the scheme."""
    response = client.request(
        method, path, json={"text": POEM}, headers={"Host": "10.0.0.7"}, follow_redirects=False
    )
    assert_error(response, 404, "not_found")
    assert "location" not in response.headers


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/predict", "GET, HEAD, POST"),  # Starlette's Allow said POST
        ("DELETE", "/health", "GET, HEAD"),  # and HEAD here
        ("POST", "/info", "GET, HEAD"),
        ("GET", "/batch_predict", "POST"),
    ],
)
def test_a_wrong_method_is_told_every_method_the_path_answers(
    client: TestClient, method: str, path: str, allowed: str
) -> None:
    response = client.request(method, path)
    error = assert_error(response, 405, "method_not_allowed")
    assert response.headers["allow"] == allowed
    assert error["message"] == f"{method} is not allowed on {path}; use {allowed}."


def test_engine_failure_is_a_clean_500_and_the_server_lives_on(
    settings: Settings, tiny_masker: FillMasker
) -> None:
    vocab = tiny_masker.encoder.vocab
    engine = FakeEngine(len(vocab), fail_token_id=vocab["炸"])
    masker = FillMasker(tiny_masker.model, tiny_masker.encoder, engine, settings)
    with local_client(create_app(settings, masker)) as fake_client:
        assert_error(fake_client.post("/predict", json={"text": "炸[MASK]"}), 500, "engine_error")
        assert fake_client.post("/predict", json={"text": POEM}).status_code == 200
        assert (
            metric_value(fake_client, "tiankong_requests_total", route="/predict", status="500")
            == 1
        )


# --- Hugging Face route ------------------------------------------------------------------

HF_KEYS = {"sequence", "score", "token", "token_str"}


def test_hf_single_input(client: TestClient) -> None:
    response = client.post("/", json={"inputs": POEM})
    assert response.status_code == 200
    rows = response.json()
    assert isinstance(rows, list) and len(rows) == 5 and set(rows[0]) == HF_KEYS
    ours = client.post("/predict", json={"text": POEM}).json()["predictions"]
    assert [row["token"] for row in rows] == [c["token_id"] for c in ours]
    for row in rows:
        assert row["sequence"] == POEM.replace("[MASK]", row["token_str"])
        assert "[CLS]" not in row["sequence"] and " " not in row["sequence"]


def test_hf_top_k_and_ignored_extras(client: TestClient) -> None:
    body = {"inputs": IDIOM, "parameters": {"top_k": 2}, "options": {"wait_for_model": True}}
    headers = {"Authorization": "Bearer hf_not_checked"}  # ignored until API keys exist
    rows = client.post("/", json=body, headers=headers).json()
    assert len(rows) == 2


def test_hf_an_unknown_parameter_is_refused(client: TestClient) -> None:
    """As the pipeline refuses an unknown keyword: ``topk`` was ignored, and five came back."""
    body = {"inputs": IDIOM, "parameters": {"topk": 2}}
    error = assert_error(client.post("/", json=body), 422, "invalid_request")
    assert "topk" in error["message"]


@pytest.mark.parametrize("key", ["top_k", "parameter"])
def test_hf_an_unknown_top_level_key_is_refused(client: TestClient, key: str) -> None:
    """A top-level "top_k" or a misspelt "parameter" fell back to the defaults with no word (a
    review); the Inference API's own "options" is taken."""
    body = {"inputs": IDIOM, key: 1 if key == "top_k" else {"targets": ["睛"]}}
    error = assert_error(client.post("/", json=body), 422, "invalid_request")
    assert key in error["message"]
    options = {"inputs": IDIOM, "options": {"wait_for_model": True, "use_cache": False}}
    assert client.post("/", json=options).status_code == 200


def test_hf_an_unknown_option_is_refused(client: TestClient) -> None:
    """A misspelt option ("use_cahce") was taken with no word, as "topk" once was (a review)."""
    body = {"inputs": IDIOM, "options": {"use_cahce": False}}
    error = assert_error(client.post("/", json=body), 422, "invalid_request")
    assert "use_cahce" in error["message"]


def test_hf_word_targets_name_their_cap_and_a_bad_input(client: TestClient) -> None:
    """Targets of several characters are ranked as candidates: 51 of them met the candidates'
    cap in its words ("At most 50 candidates"), of a parameter the client never sent, and a
    list's text with two blanks was refused without its place (a review)."""
    common = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年"
    words = [f"吃{char}" for char in common + "动同工也能下过子说产种面而方后多定行学法"][:51]
    assert len(words) == 51
    body = {"inputs": "我们去[MASK]吧。", "parameters": {"targets": words}}
    error = assert_error(client.post("/", json=body), 400, "bad_option")
    assert error["message"] == (
        "At most 50 targets where one is of several characters (each is scored as a whole "
        "word); got 51."
    )
    two = {"inputs": ["今天[MASK]。", "[MASK]天[MASK]"], "parameters": {"targets": ["好坏"]}}
    error = assert_error(client.post("/", json=two), 400, "bad_option")
    assert error["message"].startswith("inputs[1]: ")


def test_hf_tokenizer_kwargs_is_refused_by_name(client: TestClient) -> None:
    """One of the pipeline's own parameters was an "Extra inputs are not permitted" 422."""
    body = {"inputs": IDIOM, "parameters": {"tokenizer_kwargs": {"truncation": True}}}
    error = assert_error(client.post("/", json=body), 400, "bad_option")
    assert error["message"].startswith("tokenizer_kwargs is not taken here")
    empty = {"inputs": IDIOM, "parameters": {"tokenizer_kwargs": {}}}  # asks for nothing
    assert client.post("/", json=empty).status_code == 200


def test_hf_a_bad_input_of_a_list_is_named(client: TestClient) -> None:
    """A list with one input that can't be filled was a 400 that did not say which."""
    error = assert_error(client.post("/", json={"inputs": [POEM, "没有空格"]}), 400, "no_mask")
    assert error["message"].startswith("inputs[1]: ")
    alone = assert_error(client.post("/", json={"inputs": "没有空格"}), 400, "no_mask")
    assert not alone["message"].startswith("inputs")


def test_hf_several_masks_is_a_list_per_mask(client: TestClient) -> None:
    per_mask = client.post("/", json={"inputs": TWO_MASKS, "parameters": {"top_k": 3}}).json()
    assert len(per_mask) == 2 and all(len(rows) == 3 for rows in per_mask)
    top_second = per_mask[1][0]["token_str"]
    for row in per_mask[0]:  # the other mask holds its own top candidate, never [MASK]
        assert row["sequence"] == f"他{row['token_str']}天去公园{top_second}步。"


def test_hf_several_inputs_is_a_list_per_input(client: TestClient) -> None:
    outputs = client.post("/", json={"inputs": [POEM, TWO_MASKS, IDIOM]}).json()  # mixed nesting
    assert len(outputs) == 3
    assert set(outputs[0][0]) == HF_KEYS  # one mask: list of candidates
    assert len(outputs[1]) == 2 and set(outputs[1][0][0]) == HF_KEYS  # two masks
    single = client.post("/", json={"inputs": IDIOM}).json()
    assert [row["token"] for row in outputs[2]] == [row["token"] for row in single]
    # like the pipeline, a list of one input is answered as that input alone
    assert client.post("/", json={"inputs": [IDIOM]}).json() == single


def test_hf_targets_rank_only_the_targets_with_model_probabilities(
    client: TestClient, tiny_masker: FillMasker
) -> None:
    targets = ["鸟", "龙", "睛"]
    rows = client.post("/", json={"inputs": POEM, "parameters": {"targets": targets}}).json()
    assert sorted(row["token_str"] for row in rows) == sorted(targets)
    assert [row["score"] for row in rows] == sorted((row["score"] for row in rows), reverse=True)
    probabilities = tiny_masker.mask_probabilities([tiny_masker.prepare(POEM)])[0][0]
    for row in rows:
        assert row["score"] == pytest.approx(probabilities[row["token"]], rel=1e-5)
    one = client.post("/", json={"inputs": POEM, "parameters": {"targets": "鸟", "top_k": 3}})
    assert [row["token_str"] for row in one.json()] == ["鸟"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/predict", {"text": POEM, "exclude": ["好"] * 2001}),
        ("/predict", {"text": POEM, "allowed": ["鸟"] * 100_000}),
        ("/", {"inputs": POEM, "parameters": {"targets": ["鸟"] * 2001}}),
    ],
)
def test_long_constraint_lists_are_refused_before_their_entries_are_read(
    client: TestClient, path: str, body: dict[str, Any]
) -> None:
    """Each entry is tokenized on its own on the event loop: 100,000 of them held every other
    request (a review: /health waited 4.7 s). A list over the limit is refused by its length."""
    field = "targets" if path == "/" else next(key for key in ("allowed", "exclude") if key in body)
    error = assert_error(client.post(path, json=body), 400, "bad_option")
    assert error["message"].startswith("At most 2000 entries in") and field in error["message"]
    # the advice is one the route takes: POST / has no preset, and it was offered there
    offered = "POST /predict keeps" if path == "/" else "use the preset chinese_only"
    assert offered in error["message"]


def test_repeated_constraint_entries_are_read_once(
    client: TestClient, tiny_masker: FillMasker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within the limit, a repeated entry is tokenized once; the answer is the same."""
    calls: list[str] = []
    option_tokens = FillMasker.option_tokens

    def counting(self: FillMasker, option: str, name: str) -> list[int]:
        calls.append(option)
        return option_tokens(self, option, name)

    monkeypatch.setattr(FillMasker, "option_tokens", counting)
    once = client.post("/predict", json={"text": POEM, "exclude": ["鸟"]}).json()
    calls.clear()
    many = client.post("/predict", json={"text": POEM, "exclude": [" 鸟", "鸟"] * 1000}).json()
    assert calls == ["鸟"]
    assert many["predictions"] == once["predictions"]
    targets = {"inputs": POEM, "parameters": {"targets": ["鸟", "龙", "鸟 "] * 600}}
    calls.clear()
    assert len(client.post("/", json=targets).json()) == 2
    assert calls == ["鸟", "龙"]


def test_hf_targets_capped_by_top_k(client: TestClient) -> None:
    body = {"inputs": POEM, "parameters": {"targets": ["鸟", "龙", "睛"], "top_k": 2}}
    assert len(client.post("/", json=body).json()) == 2


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"inputs": "没有空格"}, 400, "no_mask"),
        ({"inputs": [POEM, "没有空格"]}, 400, "no_mask"),
        ({"inputs": []}, 400, "empty_text"),
        ({"inputs": POEM, "parameters": {"top_k": 0}}, 400, "top_k_out_of_range"),
        ({"inputs": POEM, "parameters": {"targets": []}}, 400, "bad_option"),
        ({"inputs": POEM, "parameters": {"targets": ["😀"]}}, 400, "bad_option"),
        ({"inputs": POEM, "parameters": {"targets": [""]}}, 400, "bad_option"),
        # a word piece: read as # # 鸟, it was scored as the token # under the name ##鸟
        ({"inputs": POEM, "parameters": {"targets": ["鸟", "##鸟"]}}, 400, "bad_option"),
        ({"inputs": 7}, 422, "invalid_request"),
        ({"text": POEM}, 422, "invalid_request"),
        ({"inputs": POEM, "parameters": {"top_k": "x"}}, 422, "invalid_request"),
    ],
)
def test_hf_bad_input(client: TestClient, body: Any, status: int, code: str) -> None:
    assert_error(client.post("/", json=body), status, code)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b'{"inputs": "[MASK]", "parameters": {"targets": ["\\ud800"]}}', "parameters.targets.0: "),
        # the list branch's error, not the text branch's "inputs: a valid string"
        # one problem, not "(1 more problem(s))": the text branch's error is the same value's
        (b'{"inputs": ["\xe7\x94\xbb[MASK]", 5]}', "inputs.1: Input should be a valid string."),
    ],
)
def test_hf_bad_texts_are_named_where_they_are(
    client: TestClient, content: bytes, problem: str
) -> None:
    response = client.post("/", content=content, headers={"content-type": "application/json"})
    error = assert_error(response, 422, "invalid_request")
    assert error["message"].startswith(problem)


def test_hf_matches_the_transformers_pipeline(client: TestClient, tiny_model_dir: Path) -> None:
    """Same nesting, tokens and scores as pipeline("fill-mask"); only `sequence` is cleaner."""
    from transformers import pipeline

    fill_mask = pipeline("fill-mask", model=str(tiny_model_dir), device="cpu")
    special = set(fill_mask.tokenizer.all_special_ids)

    def comparable(rows: list[dict[str, Any]]) -> list[tuple[int, float]]:
        return [(r["token"], round(r["score"], 5)) for r in rows if r["token"] not in special][:3]

    def nesting(value: list[Any]) -> Any:
        return "candidates" if isinstance(value[0], dict) else [nesting(item) for item in value]

    def leaves(value: list[Any]) -> list[list[dict[str, Any]]]:
        return (
            [value] if isinstance(value[0], dict) else [x for item in value for x in leaves(item)]
        )

    for inputs in (POEM, TWO_MASKS, [POEM, IDIOM], [IDIOM, TWO_MASKS], [POEM]):
        theirs = fill_mask(inputs, top_k=10)
        ours = client.post("/", json={"inputs": inputs, "parameters": {"top_k": 3}}).json()
        assert nesting(ours) == nesting(theirs)
        for our_rows, their_rows in zip(leaves(ours), leaves(theirs), strict=True):
            assert [(r["token"], round(r["score"], 5)) for r in our_rows] == comparable(their_rows)


# --- operations --------------------------------------------------------------------------


def test_ready_is_503_until_the_model_is_warm(settings: Settings, tiny_masker: FillMasker) -> None:
    not_started = local_client(create_app(settings, tiny_masker))  # no `with`: no lifespan
    assert not_started.get("/health").json() == {"status": "ok"}
    response = not_started.get("/ready")
    assert_error(response, 503, "model_unavailable")
    assert response.headers["retry-after"] == "1"
    assert_error(not_started.post("/predict", json={"text": POEM}), 503, "model_unavailable")
    assert not_started.get("/info").json()["ready"] is False


def test_warm_up_runs_before_ready(settings: Settings, tiny_masker: FillMasker) -> None:
    engine = FakeEngine(len(tiny_masker.encoder.vocab))
    masker = FillMasker(tiny_masker.model, tiny_masker.encoder, engine, settings)
    with local_client(create_app(settings, masker)) as warm:
        # before any request: the warm-up inference, then the check task's two steps
        # (serving/checking.py: one unmasked row, then its suspects' rows)
        assert engine.calls[0] == 1 and len(engine.calls) == 3
        assert warm.get("/ready").json() == {"status": "ready"}


def test_lifespan_loads_the_model_when_none_is_given(
    settings: Settings, tiny_model_dir: Path
) -> None:
    with local_client(create_app(settings)) as loading:
        assert loading.get("/ready").status_code == 200
        info = loading.get("/info").json()
        assert info["model"]["name"] == tiny_model_dir.name and info["engine"] == "torch"
        assert loading.post("/predict", json={"text": POEM}).status_code == 200


def test_startup_heap_is_frozen_while_serving(settings: Settings, tiny_masker: FillMasker) -> None:
    frozen_before = gc.get_freeze_count()  # another app of this process may have frozen its own
    gc.unfreeze()
    try:
        check_heap_frozen(settings, tiny_masker)
    finally:
        if frozen_before:  # the other app serves on frozen, as it started
            gc.freeze()


def check_heap_frozen(settings: Settings, tiny_masker: FillMasker) -> None:
    with local_client(create_app(settings, tiny_masker)) as serving:
        # the model, the tokenizer and the libraries: out of the full collections' way
        frozen = gc.get_freeze_count()
        assert frozen > 10_000
        # a second app finds the heap frozen already: it neither freezes its own objects
        # (only a freeze adds to the count; frozen objects that die leave it) nor unfreezes
        with local_client(create_app(settings, tiny_masker)) as second:
            assert second.post("/predict", json={"text": POEM}).status_code == 200
            assert gc.get_freeze_count() <= frozen
        assert gc.get_freeze_count() > 10_000
        assert serving.post("/predict", json={"text": POEM}).status_code == 200
    assert gc.get_freeze_count() == 0  # back to the collector at shutdown


def test_info(client: TestClient, tiny_masker: FillMasker) -> None:
    client.post("/predict", json={"text": POEM})
    served = client.get("/info").json()["requests_served"]
    # a refusal is no request served: counted, an overloaded server showed its 503s as served
    assert client.post("/predict", json={"text": "no mask"}).status_code == 400
    assert client.get("/info").json()["requests_served"] == served
    info = client.get("/info").json()
    assert info["model"]["name"] == tiny_masker.model.name
    assert {"name", "kind", "summary"} <= set(info["model"])
    assert (info["engine"], info["device"], info["precision"]) == ("torch", "cpu", "fp32")
    assert info["device_reason"] == tiny_masker.engine.device_reason
    assert info["threads"] == 1 and info["ready"] is True
    assert info["memory_rss_bytes"] > 10_000_000 and info["uptime_s"] > 0
    assert info["requests_served"] >= 1
    minute = info["last_minute"]
    assert minute["requests"] >= 1 and minute["qps"] > 0
    assert 0 < minute["p50_ms"] <= minute["p95_ms"]
    assert info["limits"]["max_batch_texts"] == 64
    assert (info["limits"]["max_text_chars"], info["limits"]["max_check_chars"]) == (10_000, 2_000)


def test_metrics(client: TestClient) -> None:
    client.post("/predict", json={"text": POEM})
    client.post("/predict", json={"text": "no mask"})
    response = client.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    ok = metric_value(client, "tiankong_requests_total", route="/predict", status="200")
    bad = metric_value(client, "tiankong_requests_total", route="/predict", status="400")
    assert ok >= 1 and bad >= 1
    assert metric_value(client, "tiankong_request_duration_seconds_count", route="/predict") >= 2
    assert "tiankong_queue_depth" in response.text and "tiankong_batch_size_bucket" in response.text
    client.get("/no/such/page/123")
    assert "/no/such/page/123" not in client.get("/metrics").text  # unmatched paths share a label
    assert client.get("/static/app.js").status_code == 200  # the page's files: their own label
    assert metric_value(client, "tiankong_requests_total", route="/static", status="200") >= 1
    # /docs's files and the OpenAPI document were counted among the unknown paths (a review)
    assert client.get("/docs-assets/swagger-ui.css").status_code == 200
    assert client.get("/openapi.json").status_code == 200
    for route in ("/docs-assets", "/openapi.json"):
        assert metric_value(client, "tiankong_requests_total", route=route, status="200") >= 1


def test_a_page_file_asked_for_by_a_bad_range_is_an_error_in_the_one_shape(
    client: TestClient,
) -> None:
    """Starlette's own 400 and 416 for a Range header were plain text (a review); a good range
    still gets its part, and an unchanged file its 304."""
    size = len(client.get("/static/app.js").content)
    past = assert_error(
        client.get("/static/app.js", headers={"Range": f"bytes={size}-"}),
        416,
        "range_not_satisfiable",
    )
    assert f"({size:,} bytes)" in past["message"]
    answer = client.get("/static/app.js", headers={"Range": f"bytes={size}-"})
    assert answer.headers["content-range"] == f"bytes */{size}"  # as Starlette's own 416 had
    for unreadable in ("bytes=abc", "bytes=5-2", "=0-1", "0-1"):
        answer = client.get("/static/app.js", headers={"Range": unreadable})
        assert "send bytes=START-END" in assert_error(answer, 400, "bad_range")["message"]
    # a unit it doesn't know is ignored, as RFC 9110 requires: the whole file, not a 400
    whole = client.get("/static/app.js", headers={"Range": "items=0-1"})
    assert whole.status_code == 200 and len(whole.content) == size
    assert "content-range" not in whole.headers
    # the page itself too: GET / answered them in plain text (a verifying review)
    assert_error(
        client.get("/", headers={"Range": "bytes=99999999-"}), 416, "range_not_satisfiable"
    )
    assert_error(client.get("/", headers={"Range": "bytes=abc"}), 400, "bad_range")
    part = client.get("/static/app.js", headers={"Range": "bytes=0-9"})
    assert part.status_code == 206 and len(part.content) == 10
    assert part.headers["cache-control"] == "no-cache"
    tag = client.get("/static/app.js").headers["etag"]
    unchanged = client.get("/static/app.js", headers={"If-None-Match": tag})
    assert unchanged.status_code == 304 and unchanged.headers["cache-control"] == "no-cache"


def test_docs_and_openapi_examples(client: TestClient) -> None:
    docs = client.get("/docs")
    assert docs.status_code == 200 and "swagger-ui" in docs.text
    assert "/docs-assets/swagger-ui-bundle.js" in docs.text  # served locally: works offline
    assert client.get("/docs-assets/swagger-ui-bundle.js").status_code == 200
    schema = client.get("/openapi.json").json()
    examples = schema["paths"]["/predict"]["post"]["requestBody"]["content"]["application/json"][
        "examples"
    ]
    texts = {example["value"]["text"] for example in examples.values()}
    assert {IDIOM, POEM, "中国的首都是北[MASK]。", "我饿了，我们去[MASK][MASK]吧。"} <= texts
    modes = {example["value"].get("mode") for example in examples.values()}
    assert {"whole_word", "candidates"} <= modes
    assert any("[BLANK]" in text for text in texts)
    assert {"/", "/batch_predict", "/health", "/ready", "/info", "/metrics"} <= set(schema["paths"])


def test_page_and_its_assets(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    test_ids = ["input", "predict", "insert-mask", "top-k", "results", "system", "error"]
    test_ids += ["mode-single", "mode-whole_word", "mode-candidates", "candidates-input"]
    test_ids += ["preset", "allowed", "exclude", "beam-width", "sequences", "options"]
    for test_id in test_ids:
        assert f'data-testid="{test_id}"' in page.text
    assert client.head("/").status_code == 200 and client.head("/health").status_code == 200
    assert client.head("/docs").status_code == 200  # a 405 whose Allow said GET, HEAD
    paths = client.get("/openapi.json").json()["paths"]
    gets = [path for path, item in paths.items() if "get" in item]
    assert {"/ready", "/info", "/metrics", "/predict"} <= set(gets)
    for path in gets:  # HEAD wherever GET answers (CORS allows it): /predict and /metrics were 405
        query = "?text=%E5%A5%BD%5BMASK%5D" if path == "/predict" else ""
        head = client.head(path + query)
        assert head.status_code == 200 and head.content == b"", path
    # FastAPI's ReDoc page loaded its script and fonts from CDNs (the offline /docs is local)
    assert_error(client.get("/redoc"), 404, "not_found")
    for name in ("app.js", "render.js", "i18n.js"):  # ES modules, served as JavaScript
        script = client.get(f"/static/{name}")
        assert script.status_code == 200 and "javascript" in script.headers["content-type"]
        assert "innerHTML" not in script.text and "insertAdjacentHTML" not in script.text
    assert client.get("/static/style.css").status_code == 200


# --- concurrency -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_concurrent_requests(settings: Settings, tiny_masker: FillMasker) -> None:
    app = create_app(settings, tiny_masker)
    texts = [f"第{i}句：春眠不觉晓，处处闻啼[MASK]。" for i in range(12)]
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            responses = await asyncio.gather(
                *(http.post("/predict", json={"text": text, "top_k": 2}) for text in texts),
                *(http.get("/predict", params={"text": text}) for text in texts[:4]),
                http.post("/batch_predict", json={"texts": texts}),
                http.post("/", json={"inputs": texts[:3]}),
                http.post("/predict", json={"text": "no mask"}),
            )
    assert [r.status_code for r in responses[:-1]] == [200] * (len(responses) - 1)
    assert responses[-1].status_code == 400
    for text, response in zip(texts, responses, strict=False):
        assert response.json()["text"] == text  # each answer belongs to its own request
        direct = tiny_masker.predict(text, top_k=2)
        assert response.json()["predictions"][0]["token_id"] == direct.masks[0][0].token_id
    batch = responses[len(texts) + 4].json()["results"]
    assert [item["text"] for item in batch] == texts


def test_index_asked_of_a_server_without_one_is_warned(client: TestClient) -> None:
    """ "index": true on a server with no corpus index was answered by the model alone without a
    word; left unset (the default) or false, nothing is said."""
    info = client.get("/info").json()["index"]
    assert info["used"] == "none"
    warned = f"index was asked for, but no corpus index is loaded: {info['reason']}"
    assert "((" not in warned and "))" not in warned  # it read "(… (--index none))"

    def warnings(response: Any) -> list[str]:
        assert response.status_code == 200, response.text
        return list(response.json()["warnings"])

    assert warnings(client.post("/predict", json={"text": POEM, "index": True})) == [
        warned + "; the answers are the model's own."
    ]
    assert warnings(client.get("/predict", params={"text": POEM, "index": "true"}))
    for quiet in ({"text": POEM}, {"text": POEM, "index": False}):
        assert warnings(client.post("/predict", json=quiet)) == []
    batch = client.post("/batch_predict", json={"texts": [POEM, "没有空"], "index": True}).json()
    assert batch["results"][0]["warnings"] == [warned + "; the answers are the model's own."]
    assert batch["results"][1]["error"]["code"] == "no_mask"


def test_the_library_takes_a_constraint_list_longer_than_a_request_may(
    tiny_masker: FillMasker,
) -> None:
    """The 2,000-entry limit is the server's (each entry is tokenized on its event loop): the
    library and the CLI restrict fills to a list of 3,500 common characters, say (it refused
    them too: a self-review)."""
    common = [c for c in tiny_masker.encoder.vocab if len(c) == 1 and "\u4e00" <= c <= "\u9fff"]
    options = tiny_masker.options(allowed=common[:3500])
    assert options.constraints is not None and len(options.constraints.allowed) == 3500
