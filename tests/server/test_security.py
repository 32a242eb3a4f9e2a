"""API keys, rate limiting, CORS, binding and leak-free errors (in-process, fake engine)."""

from __future__ import annotations

import hmac
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import besides_first_run_notes
from fastapi.testclient import TestClient
from reliability_helpers import fake_masker
from server_helpers import assert_error, capture_serve_settings, local_client, serve_in_thread

from tiankong import FillMasker, Settings
from tiankong.cli.serve import bind
from tiankong.config import check_settings, read_environment
from tiankong.errors import BadOptionError
from tiankong.server import create_app
from tiankong.server.middleware.rate_limit import RateLimiter
from tiankong.server.middleware.security import KeyRing, is_public, load_api_keys

POEM = "春眠不觉晓，处处闻啼[MASK]。"
KEYS = ("key-one-0123456789", "key-two-abcdefghij")
BODIES: dict[str, Any] = {
    "/predict": {"text": POEM},
    "/batch_predict": {"texts": [POEM]},
    "/": {"inputs": POEM},
}


def make_client(tiny_masker: FillMasker, tiny_model_dir: Path, **changes: Any) -> TestClient:
    settings = Settings(engine="fake", threads=1, model=str(tiny_model_dir), **changes)
    return local_client(create_app(settings, fake_masker(tiny_masker, settings)))


@pytest.fixture(scope="module")
def keyed(tiny_masker: FillMasker, tiny_model_dir: Path) -> Iterator[TestClient]:
    with make_client(tiny_masker, tiny_model_dir, api_keys=KEYS) as client:
        yield client


def api_routes(client: TestClient) -> list[tuple[str, str]]:
    """Every (method, path) of the app's OpenAPI, so a new route is covered, and the routes
    outside it (the page, the docs)."""
    paths = client.get("/openapi.json").json()["paths"]
    documented = [(method.upper(), path) for path, item in paths.items() for method in item]
    heads = [("HEAD", path) for method, path in documented if method == "GET"]
    return sorted({*documented, *heads, ("GET", "/"), ("HEAD", "/"), ("GET", "/docs")})


def call(client: TestClient, method: str, path: str, **kwargs: Any) -> Any:
    if method == "POST":
        return client.post(path, json=BODIES.get(path, {}), **kwargs)
    return client.request(method, path, **kwargs)


# --- API keys ------------------------------------------------------------------------------


def test_every_non_public_route_needs_a_key(keyed: TestClient) -> None:
    routes = api_routes(keyed)
    protected = [(m, p) for m, p in routes if not is_public(m, p)]
    assert {("POST", "/predict"), ("GET", "/info"), ("GET", "/metrics"), ("POST", "/")} <= set(
        protected
    )
    for method, path in [*protected, ("GET", "/no/such/route"), ("DELETE", "/predict")]:
        response = call(keyed, method, path)
        assert response.headers["www-authenticate"] == "Bearer", (method, path)
        if method != "HEAD":
            error = assert_error(response, 401, "unauthorized")
            assert "Authorization: Bearer" in error["message"]
        else:
            assert response.status_code == 401
        wrong = call(keyed, method, path, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401, (method, path)


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": f"Bearer {KEYS[0]}"},
        {"Authorization": f"bearer {KEYS[1]}"},
        {"X-API-Key": KEYS[1]},
    ],
)
def test_a_valid_key_opens_every_route(keyed: TestClient, headers: dict[str, str]) -> None:
    for path, body in BODIES.items():
        assert keyed.post(path, json=body, headers=headers).status_code == 200, path
    assert keyed.get("/info", headers=headers).status_code == 200
    assert keyed.get("/metrics", headers=headers).status_code == 200


def test_wrong_keys_are_refused(keyed: TestClient) -> None:
    for headers in (
        {"Authorization": f"Bearer {KEYS[0]}x"},
        {"Authorization": f"Bearer {KEYS[0][:-1]}"},
        {"Authorization": f"Basic {KEYS[0]}"},
        {"Authorization": "Bearer"},
        {"X-API-Key": ""},
        {"X-API-Key": "é".encode("latin-1")},  # type: ignore[dict-item]
        # both sent: the bearer token is the key checked, as the README says
        {"Authorization": f"Bearer {KEYS[0]}x", "X-API-Key": KEYS[1]},
    ):
        error = assert_error(
            keyed.post("/predict", json=BODIES["/predict"], headers=headers), 401, "unauthorized"
        )
        assert KEYS[0] not in error["message"]


def test_probes_page_and_docs_stay_public(keyed: TestClient) -> None:
    for path in ("/health", "/ready", "/", "/static/app.js", "/docs", "/openapi.json"):
        assert keyed.get(path).status_code == 200, path
    assert keyed.head("/health").status_code == 200 and keyed.head("/ready").status_code == 200


def test_the_openapi_document_says_how_to_send_a_key(
    keyed: TestClient, tiny_masker: FillMasker, tiny_model_dir: Path
) -> None:
    """With keys on, /docs had no way to send one: the document declared no security scheme."""
    document = keyed.get("/openapi.json").json()
    assert document["components"]["securitySchemes"] == {
        "bearer": {"type": "http", "scheme": "bearer"},
        "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
    }
    paths = document["paths"]
    public = {"/health", "/ready"}
    for path, operations in paths.items():
        for operation in operations.values():
            wanted = None if path in public else [{"bearer": []}, {"apiKey": []}]
            assert operation.get("security") == wanted, path
            # every guarded route says it may answer 401 (/info and /metrics listed only 200)
            assert (path in public) != ("401" in operation["responses"]), path
    assert public <= set(paths)
    # the statuses a key, the rate limit and the deadlines answer are declared
    assert {"401", "408", "429", "503", "504"} <= set(paths["/predict"]["post"]["responses"])
    with make_client(tiny_masker, tiny_model_dir) as plain:  # keys off: no scheme
        assert "securitySchemes" not in plain.get("/openapi.json").json().get("components", {})


def test_the_openapi_document_names_429_where_the_rate_limit_applies(
    tiny_masker: FillMasker, tiny_model_dir: Path
) -> None:
    """With keys and a rate limit, /info answered 429 to a request without a key, a status the
    document did not name (a docs review's find): every guarded operation names it now, with
    Retry-After; public ones don't. Without keys /info spends no allowance and never is 429."""
    with make_client(tiny_masker, tiny_model_dir, api_keys=KEYS, rate_limit_per_minute=2) as client:
        paths = client.get("/openapi.json").json()["paths"]
        for path in ("/info", "/metrics"):
            limited = paths[path]["get"]["responses"]["429"]
            assert set(limited["headers"]) == {"X-Request-ID", "Retry-After"}, path
        assert "429" not in paths["/health"]["get"]["responses"]
        assert [client.get("/info").status_code for _ in range(3)] == [401, 401, 429]
    with make_client(tiny_masker, tiny_model_dir, rate_limit_per_minute=2) as plain:
        assert "429" not in plain.get("/openapi.json").json()["paths"]["/info"]["get"]["responses"]
        assert [plain.get("/info").status_code for _ in range(3)] == [200, 200, 200]


def test_keys_are_compared_in_constant_time_against_every_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ring = KeyRing(["a" * 20, "b" * 20, "c" * 20])
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", counting)
    assert ring.match("a" * 20) == 0  # a match on the first key still compares the others
    assert len(compared) == 3
    assert ring.match("short") is None and len(compared) == 6
    assert {len(a) for a, _ in compared} == {32}  # digests: the key's length never shows


def test_keys_from_flags_file_and_env(tmp_path: Path) -> None:
    keys_file = tmp_path / "keys.txt"
    keys_file.write_text("# ops keys\nfile-key-1\n\n  file-key-2  \nflag-key\n")
    settings = Settings(api_keys=("flag-key",), api_keys_file=str(keys_file))
    assert load_api_keys(settings) == ("flag-key", "file-key-1", "file-key-2")
    assert load_api_keys(Settings()) == ()


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, "Cannot read"),
        ("# only a comment\n\n", "holds no key"),
        ("a b\n", "without spaces"),
        # the file and the line are named (a key with a comment after it was refused unnamed)
        ("# ci\nkey-one-0123\nkeyB   # ci key\n", r"keys.txt, line 3: .* starting with #\.$"),
    ],
)
def test_bad_keys_file_is_one_sentence(tmp_path: Path, content: str | None, words: str) -> None:
    keys_file = tmp_path / "keys.txt"
    if content is not None:
        keys_file.write_text(content)
    with pytest.raises(BadOptionError, match=words):
        load_api_keys(Settings(api_keys_file=str(keys_file)))


def test_a_keys_file_saved_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    """Notepad's BOM made the whole file's first key "not printable ASCII" (a review)."""
    keys_file = tmp_path / "keys.txt"
    keys_file.write_text("key-one-0123\nkey-two-4567\n", encoding="utf-8-sig")
    assert load_api_keys(Settings(api_keys_file=str(keys_file))) == ("key-one-0123", "key-two-4567")


def test_a_blank_keys_file_twin_says_it_is_the_file_that_is_empty(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TIANKONG_API_KEYS_FILE", " ")
    with pytest.raises(BadOptionError, match="TIANKONG_API_KEYS_FILE is set but empty; give the"):
        read_environment(Settings)


@pytest.mark.parametrize("keys", [("",), ("  ",), ("key-one-0123456789", "")])
def test_an_empty_key_is_refused_not_dropped(keys: tuple[str, ...]) -> None:
    """``--api-key "$UNSET"`` or ``TIANKONG_API_KEYS=" , "`` would have started the server open."""
    with pytest.raises(BadOptionError, match="An API key is empty"):
        check_settings(Settings(api_keys=keys))  # with the settings: Ray's replicas too


@pytest.mark.processes
@pytest.mark.parametrize(
    "twin", [{"TIANKONG_API_KEYS": " , "}, {"TIANKONG_API_KEYS": ""}, {"TIANKONG_API_KEYS": " "}]
)
def test_an_all_blank_key_list_in_the_env_stops_serve(twin: dict[str, str]) -> None:
    """A set but blank secret (a manifest's missing secret) started the server open: click
    reads an empty twin as unset. Ray's reading refuses it too (test_ray_serve)."""
    done = subprocess.run(
        [sys.executable, "-m", "tiankong", "serve", "--port", "1"],
        env={**twin, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "An API key is empty" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("keys", ["correct horse battery staple", "k1 k2", "k1, k 2"])
def test_a_key_list_in_the_env_is_split_at_commas_only(keys: str) -> None:
    """click split the twin at whitespace first: TIANKONG_API_KEYS='correct horse battery
    staple' was four keys, each let in (Bearer horse answered 200), where --api-key with the
    phrase is refused (a review's reproduction). Commas alone split it now, so the phrase is
    one key and the key rule refuses it, as it refuses the flag."""
    from typer.testing import CliRunner

    from tiankong.cli import app, register_commands

    register_commands()
    done = CliRunner().invoke(
        app, ["serve", "--model", "/nonexistent/model"], env={"TIANKONG_API_KEYS": keys}
    )
    assert isinstance(done.exception, BadOptionError), done.exception
    assert done.exception.message == (
        "An API key (--api-key, api_keys) must be printable ASCII without spaces."
    )
    fine = CliRunner().invoke(
        app, ["serve", "--model", "/nonexistent/model"], env={"TIANKONG_API_KEYS": "k1, k2"}
    )
    assert "does not exist" in str(getattr(fine.exception, "message", fine.exception))


@pytest.mark.processes
def test_serve_takes_keys_from_the_env_twins(tmp_path: Path) -> None:
    """The CLI: TIANKONG_API_KEYS (comma-separated) and a keys file that doesn't exist, which
    stops `tiankong serve` with one sentence before any model loads."""
    done = subprocess.run(
        [sys.executable, "-m", "tiankong", "serve", "--port", "1"],
        env={"TIANKONG_API_KEYS_FILE": str(tmp_path / "missing.txt"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert f"Cannot read the API keys file {tmp_path / 'missing.txt'}" in done.stderr
    assert "Traceback" not in done.stderr and len(besides_first_run_notes(done.stderr)) == 1


# --- rate limiting -------------------------------------------------------------------------


def test_token_bucket_refills_at_the_minute_rate() -> None:
    now = [0.0]
    limiter = RateLimiter(per_minute=6, clock=lambda: now[0])
    assert [limiter.retry_after("a") for _ in range(6)] == [0.0] * 6
    assert limiter.retry_after("a") == pytest.approx(10.0)  # one token every 10 s
    assert limiter.retry_after("b") == 0.0  # each client has its own bucket
    now[0] = 10.0
    assert limiter.retry_after("a") == 0.0
    assert limiter.retry_after("a") == pytest.approx(10.0)


def test_token_bucket_forgets_the_least_recent_clients() -> None:
    limiter = RateLimiter(per_minute=1, clock=lambda: 0.0, max_clients=3)
    for client in "abcd":
        limiter.retry_after(client)
    assert list(limiter.buckets) == ["b", "c", "d"]


def test_rate_limit_per_key_is_429_with_retry_after(
    tiny_masker: FillMasker, tiny_model_dir: Path
) -> None:
    with make_client(tiny_masker, tiny_model_dir, api_keys=KEYS, rate_limit_per_minute=3) as client:
        first = {"Authorization": f"Bearer {KEYS[0]}"}
        second = {"X-API-Key": KEYS[1]}
        codes = [
            client.post("/predict", json=BODIES["/predict"], headers=first).status_code
            for _ in range(3)
        ]
        assert codes == [200, 200, 200]
        limited = client.post("/predict", json=BODIES["/predict"], headers=first)
        error = assert_error(limited, 429, "rate_limited")
        assert "at most 3 forward rows a minute (a plain text is 1" in error["message"]
        assert 1 <= int(limited.headers["retry-after"]) <= 20
        # the wait in the sentence a person reads (the page showed only "retry later")
        assert error["message"].endswith(f"retry in {limited.headers['retry-after']} s.")
        assert client.post("/predict", json=BODIES["/predict"], headers=second).status_code == 200
        assert client.get("/health").status_code == 200  # probes are never limited
        assert client.get("/ready").status_code == 200


def test_info_and_metrics_spend_no_allowance(tiny_masker: FillMasker, tiny_model_dir: Path) -> None:
    """They run no forward rows; the page polls /info, which used up half a page user's limit.
    Without a valid key they still count against the address (key guessing stays limited)."""
    with make_client(tiny_masker, tiny_model_dir, api_keys=KEYS, rate_limit_per_minute=2) as client:
        key = {"Authorization": f"Bearer {KEYS[0]}"}
        polls = [client.get(path, headers=key).status_code for path in ["/info", "/metrics"] * 3]
        assert polls == [200] * 6
        codes = [
            client.post("/predict", json=BODIES["/predict"], headers=key).status_code
            for _ in range(3)
        ]
        assert codes == [200, 200, 429]
        guesses = [
            client.get("/info", headers={"X-API-Key": "wrong"}).status_code for _ in range(3)
        ]
        assert guesses == [401, 401, 429]


def test_the_rate_limit_spends_a_client_allowance_by_cost(
    tiny_masker: FillMasker, tiny_model_dir: Path
) -> None:
    """A whole-word search of 4 masks at beam 8 costs 1 + 4 * 8 = 33 forward rows: with 40 a
    minute, it leaves 7 plain texts for the minute (the other key's allowance is its own)."""
    with make_client(
        tiny_masker, tiny_model_dir, api_keys=KEYS, rate_limit_per_minute=40
    ) as client:
        first, second = {"X-API-Key": KEYS[0]}, {"X-API-Key": KEYS[1]}
        search = {"text": "手机没电了，赶紧去[MASK][MASK][MASK][MASK]。", "mode": "whole_word"}
        searched = client.post("/predict", json={**search, "beam_width": 8}, headers=first)
        assert searched.status_code == 200, searched.text
        codes = [
            client.post("/predict", json=BODIES["/predict"], headers=first).status_code
            for _ in range(8)
        ]
        assert codes == [200] * 7 + [429]
        batch = client.post("/batch_predict", json={"texts": [POEM] * 30}, headers=second)
        assert batch.status_code == 200
        codes = [
            client.post("/predict", json=BODIES["/predict"], headers=second).status_code
            for _ in range(11)
        ]
        assert codes == [200] * 10 + [429]


def test_the_hugging_face_route_spends_the_allowance_by_cost_too(
    tiny_masker: FillMasker, tiny_model_dir: Path
) -> None:
    """POST / with 30 inputs costs 30 rows; with two-character targets, one text costs
    1 + 2 + 2 = 5. Of 40 a minute that leaves 5 plain texts."""
    with make_client(
        tiny_masker, tiny_model_dir, api_keys=KEYS, rate_limit_per_minute=40
    ) as client:
        key = {"X-API-Key": KEYS[0]}
        assert client.post("/", json={"inputs": [POEM] * 30}, headers=key).status_code == 200
        targets = {"inputs": POEM, "parameters": {"targets": ["飞鸟", "小鸟"]}}
        ranked = client.post("/", json=targets, headers=key)
        assert ranked.status_code == 200, ranked.text
        assert [entry["token_str"] for entry in ranked.json()] in (
            ["飞鸟", "小鸟"],
            ["小鸟", "飞鸟"],
        )
        codes = [client.post("/", json={"inputs": POEM}, headers=key).status_code for _ in range(6)]
        assert codes == [200] * 5 + [429]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/predict", {"text": "画龙点[MASK]", "candidates": ["睛", "[SEP]"]}),
        ("/", {"inputs": POEM, "parameters": {"targets": ["飞鸟", "[SEP]"]}}),
    ],
)
def test_a_special_token_option_is_refused_before_any_allowance_is_spent(
    tiny_masker: FillMasker, tiny_model_dir: Path, path: str, body: dict[str, Any]
) -> None:
    """A candidate or target that holds a special token is a 400 found where the options are
    checked: the request takes the one token of its admission, and the 7 rows it would have
    cost stay the client's (9 of 10 left)."""
    with make_client(
        tiny_masker, tiny_model_dir, api_keys=KEYS, rate_limit_per_minute=10
    ) as client:
        key = {"X-API-Key": KEYS[0]}
        assert_error(client.post(path, json=body, headers=key), 400, "bad_option")
        codes = [
            client.post("/predict", json=BODIES["/predict"], headers=key).status_code
            for _ in range(11)
        ]
        assert codes == [200] * 9 + [429, 429]


def test_key_guessing_is_rate_limited_per_address(
    tiny_masker: FillMasker, tiny_model_dir: Path
) -> None:
    with make_client(tiny_masker, tiny_model_dir, api_keys=KEYS, rate_limit_per_minute=2) as client:
        guesses = [
            client.get("/info", headers={"X-API-Key": f"guess-{i}"}).status_code for i in range(3)
        ]
        assert guesses == [401, 401, 429]
        valid = client.get("/info", headers={"X-API-Key": KEYS[0]})
        assert valid.status_code == 200  # a valid key has its own bucket


def test_rate_limit_without_keys_is_per_client_address(
    tiny_masker: FillMasker, tiny_model_dir: Path
) -> None:
    with make_client(tiny_masker, tiny_model_dir, rate_limit_per_minute=1) as client:
        assert client.post("/predict", json=BODIES["/predict"]).status_code == 200
        assert_error(client.post("/predict", json=BODIES["/predict"]), 429, "rate_limited")


# --- CORS ------------------------------------------------------------------------------------

ORIGIN = "https://app.example"


def test_cors_is_off_by_default(keyed: TestClient) -> None:
    response = keyed.get("/health", headers={"Origin": ORIGIN})
    assert "access-control-allow-origin" not in response.headers
    preflight = keyed.options(
        "/predict",
        headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"},
    )
    assert "access-control-allow-origin" not in preflight.headers


def test_cors_allow_list(tiny_masker: FillMasker, tiny_model_dir: Path) -> None:
    with make_client(tiny_masker, tiny_model_dir, api_keys=KEYS, cors_origins=(ORIGIN,)) as client:
        preflight = client.options(
            "/predict",
            headers={
                "Origin": ORIGIN,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization, content-type",
            },
        )  # a browser's preflight carries no key and must not need one
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == ORIGIN
        assert "authorization" in preflight.headers["access-control-allow-headers"].lower()
        answer = client.post(
            "/predict",
            json=BODIES["/predict"],
            headers={"Origin": ORIGIN, "Authorization": f"Bearer {KEYS[0]}"},
        )
        assert answer.headers["access-control-allow-origin"] == ORIGIN
        refused = client.post("/predict", json=BODIES["/predict"], headers={"Origin": ORIGIN})
        assert refused.status_code == 401  # the browser can read why
        assert refused.headers["access-control-allow-origin"] == ORIGIN
        other = client.get("/health", headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in other.headers


def test_a_refused_preflight_is_the_json_error_shape(
    tiny_masker: FillMasker, tiny_model_dir: Path
) -> None:
    with make_client(tiny_masker, tiny_model_dir, cors_origins=(ORIGIN,)) as client:
        for origin, method in (("https://evil.example", "POST"), (ORIGIN, "DELETE")):
            preflight = client.options(
                "/predict", headers={"Origin": origin, "Access-Control-Request-Method": method}
            )
            assert_error(preflight, 400, "bad_input")
            assert "Disallowed CORS" in preflight.json()["error"]["message"]


@pytest.mark.parametrize(
    "origin", ["https://app.example/", "app.example", "not a url", "", "https://app.example/x"]
)
def test_an_origin_that_could_never_match_is_refused_at_start(
    tiny_masker: FillMasker, tiny_model_dir: Path, origin: str
) -> None:
    with pytest.raises(BadOptionError, match="is not an origin"):
        make_client(tiny_masker, tiny_model_dir, cors_origins=(ORIGIN, origin))


def test_origins_as_browsers_send_them_are_taken(
    tiny_masker: FillMasker, tiny_model_dir: Path
) -> None:
    origins = (ORIGIN, "http://localhost:5173", "https://[::1]:8443", "*")
    with make_client(tiny_masker, tiny_model_dir, cors_origins=origins) as client:
        assert client.get("/health").status_code == 200


# --- binding ---------------------------------------------------------------------------------


def test_the_default_bind_is_loopback() -> None:
    assert Settings().host == "127.0.0.1"
    listener = bind(Settings().host, 0)
    try:
        assert listener.getsockname()[0] == "127.0.0.1"
    finally:
        listener.close()


def test_two_servers_claiming_one_port_at_once_are_one_too_many() -> None:
    """Two servers started together both bound the port, which SO_REUSEADDR lets sockets that
    don't listen share; the second said it had started and never served (a review). The claim
    listens, so the second is the busy port's one sentence."""
    first = bind("127.0.0.1", 0)
    try:
        port = first.getsockname()[1]
        with pytest.raises(BadOptionError, match=f"Port {port} on 127.0.0.1 is already in use"):
            bind("127.0.0.1", port).close()
    finally:
        first.close()


# --- nothing internal in any answer ----------------------------------------------------------


class LeakyEngine:
    """Fails with a message full of internals, as a real engine's exception might be."""

    name, device, precision = "fake", "cpu", "fp32"
    device_reason = None

    def mask_logits(self, batch: object) -> Any:
        raise RuntimeError(
            'Traceback (most recent call last):\n  File "/work/secret/site-packages/x.py", '
            "line 1\nOSError: /models/private/model.safetensors is corrupt"
        )


def test_engine_errors_leak_no_path_or_traceback(
    tiny_masker: FillMasker, tiny_model_dir: Path
) -> None:
    settings = Settings(engine="fake", threads=1, model=str(tiny_model_dir), warmup=False)
    masker = fake_masker(tiny_masker, settings, LeakyEngine())
    with local_client(create_app(settings, masker)) as client:
        requests = [
            ("/predict", {"text": POEM}),
            ("/predict", {"text": POEM, "mode": "whole_word"}),
            ("/predict", {"text": POEM, "candidates": ["鸟", "花"]}),
            ("/batch_predict", {"texts": [POEM, "画龙点[MASK]"]}),
            ("/", {"inputs": POEM}),
            ("/", {"inputs": "画龙点[MASK]", "parameters": {"targets": ["睛", "眼睛"]}}),
        ]
        for path, body in requests:
            response = client.post(path, json=body)
            error = assert_error(response, 500, "engine_error")
            for leak in ("/models", "private", "safetensors", "OSError", str(tiny_model_dir)):
                assert leak not in response.text, (path, leak)
            assert error["error_id"] in error["message"]
        info = client.get("/info").text
        assert "Traceback" not in info


@pytest.mark.processes
def test_serve_help_lists_the_security_flags_and_env_twins() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tiankong", "serve", "--help"],
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    for flag, env in [
        ("--api-key", "TIANKONG_API_KEYS"),
        ("--api-keys-file", "TIANKONG_API_KEYS_FILE"),
        ("--cors-origin", "TIANKONG_CORS_ORIGINS"),
        ("--rate-limit-per-minute", "TIANKONG_RATE_LIMIT_PER_MINUTE"),
        ("--client-timeout", "TIANKONG_CLIENT_TIMEOUT"),
        ("--drain-timeout", "TIANKONG_DRAIN_TIMEOUT"),
    ]:
        assert flag in done.stdout and env in done.stdout, flag


def test_flags_and_env_twins_reach_the_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tiny_model_dir: Path
) -> None:
    """TIANKONG_API_KEYS and TIANKONG_CORS_ORIGINS are comma-separated; flags repeat."""
    from typer.testing import CliRunner

    from tiankong.cli import app

    seen = capture_serve_settings(monkeypatch)
    keys_file = tmp_path / "keys.txt"
    keys_file.write_text("file-key\n")
    env = {
        "TIANKONG_API_KEYS": "env-key-1,env-key-2",
        "TIANKONG_API_KEYS_FILE": str(keys_file),
        "TIANKONG_CORS_ORIGINS": "https://a.example,https://b.example",
        "TIANKONG_RATE_LIMIT_PER_MINUTE": "30",
    }
    base = ["serve", "--model", str(tiny_model_dir), "--port", "0"]
    flags = [*base, "--client-timeout", "3", "--drain-timeout", "4"]
    result = CliRunner().invoke(app, flags, env=env)
    assert isinstance(result.exception, BadOptionError), result.output
    [settings] = seen
    assert settings.api_keys == ("env-key-1", "env-key-2")
    assert settings.api_keys_file == str(keys_file)
    assert settings.cors_origins == ("https://a.example", "https://b.example")
    assert (settings.rate_limit_per_minute, settings.client_timeout_s) == (30, 3.0)
    assert settings.drain_timeout_s == 4.0
    flags = [*base, "--api-key", "a-1", "--api-key", "a-2", "--cors-origin", "https://c.example"]
    CliRunner().invoke(app, flags)
    assert seen[1].api_keys == ("a-1", "a-2") and seen[1].cors_origins == ("https://c.example",)
    refused = CliRunner().invoke(app, [*base, "--drain-timeout", "0"])
    assert isinstance(refused.exception, BadOptionError) and len(seen) == 2  # before loading


def test_a_request_refused_for_its_key_is_counted_under_its_route(keyed: TestClient) -> None:
    """A 401 on /info or /metrics (a scraper with the wrong key) was counted under
    route="unmatched", as a probe of unknown paths is."""
    assert keyed.get("/info").status_code == 401
    assert (
        keyed.get("/no/such/path", headers={"Authorization": f"Bearer {KEYS[0]}"}).status_code
        == 404
    )
    metrics = keyed.get("/metrics", headers={"Authorization": f"Bearer {KEYS[0]}"}).text
    assert 'method="GET",route="/info",status="401"' in metrics
    assert 'route="unmatched",status="404"' in metrics


def test_every_answer_says_nosniff_and_the_page_modules_are_revalidated(
    tiny_masker: FillMasker, tiny_model_dir: Path
) -> None:
    """JSON answers and the page's modules had no X-Content-Type-Options (only the page had
    it); the modules had no Cache-Control, so a browser could keep an old app.js beside a new
    page after an upgrade; /docs could be framed by another site (a review)."""
    with make_client(tiny_masker, tiny_model_dir) as client:
        answers = {
            "page": client.get("/"),
            "module": client.get("/static/app.js"),
            "predict": client.post("/predict", json={"text": POEM}),
            "error": client.post("/predict", json={"text": "没有空"}),
            "missing": client.get("/no-such-path"),
            "docs": client.get("/docs"),
        }
        for name, response in answers.items():
            assert response.headers.get_list("x-content-type-options") == ["nosniff"], name
        assert answers["error"].status_code == 400 and answers["missing"].status_code == 404
        assert answers["module"].headers["cache-control"] == "no-cache"
        assert answers["module"].headers["etag"]
        assert "frame-ancestors 'none'" in answers["docs"].headers["content-security-policy"]


def client_seen(settings: Settings, peer: str, forwarded: str) -> str:
    """The client address an app sees under ``tiankong serve``'s uvicorn configuration, for a
    connection from ``peer`` that sends ``X-Forwarded-For: forwarded``."""
    import asyncio

    from tiankong.server.uvicorn_server import uvicorn_config

    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["client"][0])

    config = uvicorn_config(app, settings)  # type: ignore[arg-type]
    config.load()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/info",
        "raw_path": b"/info",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"x-forwarded-for", forwarded.encode())],
        "client": (peer, 50000),
        "server": ("127.0.0.1", 8000),
    }
    asyncio.run(config.loaded_app(scope, None, None))
    return seen[0]


def test_x_forwarded_for_names_the_client_only_from_a_named_proxy() -> None:
    """uvicorn's default trusted X-Forwarded-For from 127.0.0.1, so behind a local proxy that
    passes the client's header on, each request could name a new address and the per-address
    rate limit (and the key-guessing limit) never applied (a review). Now only the proxies
    given with --forwarded-allow-ip are believed."""
    plain = Settings(engine="fake")
    assert client_seen(plain, "127.0.0.1", "203.0.113.7") == "127.0.0.1"
    proxied = Settings(engine="fake", forwarded_allow_ips=("127.0.0.1",))
    assert client_seen(proxied, "127.0.0.1", "203.0.113.7") == "203.0.113.7"
    assert client_seen(proxied, "198.51.100.2", "203.0.113.7") == "198.51.100.2"  # not a proxy
    network = Settings(engine="fake", forwarded_allow_ips=("10.0.0.0/8",))
    assert client_seen(network, "10.1.2.3", "203.0.113.7") == "203.0.113.7"
    # * beside an address: uvicorn trusted that address alone (a review); * is every address
    anyone = Settings(engine="fake", forwarded_allow_ips=("*", "10.0.0.1"))
    assert client_seen(anyone, "198.51.100.2", "203.0.113.7") == "203.0.113.7"


# 10.0.0.1/8 (host bits set): uvicorn reads networks strictly, and it matched nothing
@pytest.mark.parametrize("address", ["nonsense", "127.0.0.1:8000", "", "10.0.0.0/33", "10.0.0.1/8"])
def test_a_forwarded_allow_ip_that_matches_nothing_is_refused(address: str) -> None:
    with pytest.raises(BadOptionError, match="--forwarded-allow-ip"):
        check_settings(Settings(forwarded_allow_ips=(address,)))


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--ray-address", "ray://nowhere:10001", "--forwarded-allow-ip", "127.0.0.1"], {}),
        (["--forwarded-allow-ip", "10.0.0.0/8"], {"RAY_ADDRESS": "ray://nowhere:10001"}),
        ([], {"RAY_ADDRESS": "ray://nowhere:10001", "TIANKONG_FORWARDED_ALLOW_IPS": "10.0.0.1"}),
    ],
)
def test_forwarded_allow_ip_is_refused_on_a_ray_cluster(
    args: list[str], env: dict[str, str]
) -> None:
    """A cluster's Serve proxy is its own uvicorn, which reads X-Forwarded-For by its own
    environment: the setting was accepted and did nothing there (a review), from its env twin
    too. Refused before any cluster is asked."""
    done = subprocess.run(
        [sys.executable, "-m", "tiankong", "serve", "--ray", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )
    assert done.returncode == 2
    assert done.stderr.startswith(
        "error: --forwarded-allow-ip (TIANKONG_FORWARDED_ALLOW_IPS) applies with --ray only to "
        "the local Ray this command starts"
    )


@pytest.mark.parametrize(
    ("given", "trusted"),
    [((), ""), (("127.0.0.1", "10.0.0.0/8"), "127.0.0.1,10.0.0.0/8"), (("*", "10.0.0.1"), "*")],
)
def test_the_local_rays_proxy_believes_x_forwarded_for_as_tiankong_does(
    monkeypatch: pytest.MonkeyPatch, given: tuple[str, ...], trusted: str
) -> None:
    """Ray Serve's proxy is a uvicorn that reads FORWARDED_ALLOW_IPS from its environment
    (default: loopback), which the local Ray of `serve --ray` inherits: a client on the
    machine named its own address in X-Forwarded-For with each request and was never
    rate-limited (a review). The setting is handed on; without it no one is believed."""
    import uvicorn
    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

    from tiankong.server.ray_serve import trust_forwarded_from

    monkeypatch.delenv("FORWARDED_ALLOW_IPS", raising=False)
    trust_forwarded_from(given)
    assert os.environ["FORWARDED_ALLOW_IPS"] == trusted
    config = uvicorn.Config(lambda: None, factory=True)  # as Ray's proxy makes its own
    believed = ProxyHeadersMiddleware(lambda *_: None, config.forwarded_allow_ips).trusted_hosts
    assert ("127.0.0.1" in believed) == (trusted in ("*", "127.0.0.1,10.0.0.0/8"))
    assert ("::1" in believed) == (trusted == "*")


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"text": POEM, "mode": "x" * 100_000}, 400),
        ({"text": POEM, "order": "y" * 100_000}, 400),
        ({"text": POEM, "z" * 100_000: 1}, 422),
    ],
)
def test_an_error_never_quotes_a_client_at_length(
    client: TestClient, body: dict[str, Any], status: int
) -> None:
    """A 100 kB mode, order or field name came back whole in a 100 kB error (a review): an
    error message keeps its start and its advice, at most about 900 characters."""
    answer = client.post("/predict", json=body)
    assert answer.status_code == status
    message = answer.json()["error"]["message"]
    assert len(message) <= 910 and " … " in message
    assert len(answer.content) < 2_000


# --- the Host guard (DNS rebinding) ------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    ["localhost", "LocalHost.:8000", "127.0.0.1:8000", "[::1]:8000", "10.0.0.7", "[fe80::1]"],
)
def test_a_loopback_server_answers_localhost_and_ip_addresses(
    tiny_masker: FillMasker, tiny_model_dir: Path, host: str
) -> None:
    with make_client(tiny_masker, tiny_model_dir) as client:
        response = client.post("/predict", json={"text": POEM}, headers={"Host": host})
        assert response.status_code == 200, response.text


@pytest.mark.parametrize("path", ["/predict", "/health", "/", "/static/app.js", "/nowhere"])
def test_a_loopback_server_refuses_another_name_on_every_path(
    tiny_masker: FillMasker, tiny_model_dir: Path, path: str
) -> None:
    """A page whose name was pointed at 127.0.0.1 after it loaded (DNS rebinding) sends its
    own name: the server answers it nothing, not even /health, and reads no body."""
    with make_client(tiny_masker, tiny_model_dir) as client:
        response = client.post(path, json={"text": POEM}, headers={"Host": "evil.example:8000"})
        error = assert_error(response, 400, "bad_host")
        assert "'evil.example'" in error["message"]
        assert "--allowed-host evil.example" in error["message"]
        assert response.headers["connection"] == "close"  # its body was never read
        metrics = client.get("/metrics").text
    assert 'status="400"' in metrics  # counted like any other answer


def test_the_first_host_header_is_the_one_checked(
    tiny_masker: FillMasker, tiny_model_dir: Path
) -> None:
    """The guard read the last of two Host headers, Starlette the first: evil.com then
    localhost was answered (a verifying review)."""
    request = b"GET /health HTTP/1.1\r\nHost: evil.com\r\nHost: localhost\r\n\r\n"
    answer = raw_answer(tiny_masker, tiny_model_dir, request)
    assert answer.startswith(b"HTTP/1.1 400"), answer
    assert b"bad_host" in answer


@pytest.mark.parametrize(("host", "named"), [("localhost x", "NAME"), ("::1", "NAME"),
                                             ("Box.Example:80", "box.example")])  # fmt: skip
def test_the_refusal_names_the_flag_with_a_name_it_takes(
    tiny_masker: FillMasker, tiny_model_dir: Path, host: str, named: str
) -> None:
    """A Host of "localhost x" was told --allowed-host localhost x, and "::1" --allowed-host :."""
    with make_client(tiny_masker, tiny_model_dir) as client:
        message = assert_error(client.get("/health", headers={"Host": host}), 400, "bad_host")
    assert f"start it with --allowed-host {named} to answer" in message["message"]


def test_allowed_hosts_are_answered_and_named_in_the_refusal(
    tiny_masker: FillMasker, tiny_model_dir: Path
) -> None:
    names = ("tiankong.example.com", "Box.Internal.")
    with make_client(tiny_masker, tiny_model_dir, allowed_hosts=names) as client:
        for host in ("tiankong.example.com:443", "box.internal", "localhost:8000"):
            assert client.get("/health", headers={"Host": host}).status_code == 200, host
        refused = client.get("/health", headers={"Host": "example.com"})
        message = assert_error(refused, 400, "bad_host")["message"]
        assert "localhost, its IP addresses, box.internal and tiankong.example.com" in message


def test_an_allowed_host_in_another_script_answers_its_ascii_form(
    tiny_masker: FillMasker, tiny_model_dir: Path
) -> None:
    """Browsers send a name such as 填空.example in its IDNA form; --allowed-host 中文.com was
    refused as "not a host name" (a review)."""
    with make_client(tiny_masker, tiny_model_dir, allowed_hosts=("填空.Example",)) as client:
        answered = client.get("/health", headers={"Host": "xn--cnso60f.example:8000"})
        assert answered.status_code == 200, answered.text
        assert_error(client.get("/health", headers={"Host": "xn--fiq228c.com"}), 400, "bad_host")


def test_another_address_answers_every_name_unless_names_are_given(
    tiny_masker: FillMasker, tiny_model_dir: Path
) -> None:
    """0.0.0.0 (a container's): clients name it as they reach it; --allowed-host checks it."""
    with make_client(tiny_masker, tiny_model_dir, host="0.0.0.0") as client:
        assert client.get("/health", headers={"Host": "gpu-box:8000"}).status_code == 200
    checked = make_client(tiny_masker, tiny_model_dir, host="0.0.0.0", allowed_hosts=("a.b",))
    with checked as client:
        assert client.get("/health", headers={"Host": "a.b:8000"}).status_code == 200
        assert_error(client.get("/health", headers={"Host": "gpu-box:8000"}), 400, "bad_host")
    with make_client(tiny_masker, tiny_model_dir, allowed_hosts=("*",)) as client:
        assert client.get("/health", headers={"Host": "evil.example"}).status_code == 200


def test_behind_a_proxy_ray_started_every_name_is_answered_unless_names_are_given(
    tiny_masker: FillMasker, tiny_model_dir: Path
) -> None:
    """A replica of `serve run` or a cluster: Ray's proxy listens where Ray's config says
    (0.0.0.0 on KubeRay, reached by a Service's name), whatever ``host`` says."""
    for names, refused in (((), False), (("a.b",), True)):
        settings = Settings(engine="fake", threads=1, model=str(tiny_model_dir))
        settings = settings.with_overrides(allowed_hosts=names)
        app = create_app(settings, fake_masker(tiny_masker, settings), proxied=True)
        with local_client(app) as client:
            response = client.get("/health", headers={"Host": "tiankong-serve-svc:8000"})
            assert response.status_code == (400 if refused else 200), response.text


@pytest.mark.parametrize(
    "name", ["http://a.example", "a.example:8000", "-a", "a..b", "", "a b", "中 文.com"]
)
def test_an_allowed_host_that_could_never_match_is_refused_at_start(
    tiny_masker: FillMasker, tiny_model_dir: Path, name: str
) -> None:
    with pytest.raises(BadOptionError, match="is not a host name"):
        make_client(tiny_masker, tiny_model_dir, allowed_hosts=("a.example", name))


def test_a_request_without_a_host_is_answered(
    tiny_masker: FillMasker, tiny_model_dir: Path
) -> None:
    """HTTP/1.0 needs no Host, and no browser leaves it out."""
    answer = raw_answer(tiny_masker, tiny_model_dir, b"GET /health HTTP/1.0\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200"), answer


def raw_answer(tiny_masker: FillMasker, tiny_model_dir: Path, request: bytes) -> bytes:
    """The start of a served app's answer to ``request``, sent as raw bytes (headers no HTTP
    client sends: two Hosts, or none)."""
    settings = Settings(engine="fake", threads=1, model=str(tiny_model_dir))
    with serve_in_thread(create_app(settings, fake_masker(tiny_masker, settings))) as base_url:
        address = base_url.removeprefix("http://").split(":")
        with socket.create_connection((address[0], int(address[1])), timeout=30) as sock:
            sock.sendall(request)
            return sock.recv(4096)
