"""Ray Serve on a local Ray started by the test on loopback: two replicas of the tiny model answer
concurrent requests with the same routes, answers and errors as the standalone server."""

from __future__ import annotations

import asyncio
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import ray
from fastapi.testclient import TestClient
from ray import serve
from server_helpers import assert_error, free_port, local_client

from tiankong import FillMasker, Settings
from tiankong.core.request import PlainJob
from tiankong.errors import (
    BadOptionError,
    EngineError,
    OverloadedError,
    RequestTimeoutError,
    ShuttingDownError,
)
from tiankong.host import usable_cores
from tiankong.server import create_app
from tiankong.server.metrics import ServerMetrics
from tiankong.server.ray_serve import (
    APP_NAME,
    BATCH_HEADER,
    REPLICA_HEADER,
    RayBatchScheduler,
    ScaleOptions,
    build_application,
    deployment_options,
    patient_proxy_start,
    replica_threads,
    settings_and_scale,
    trust_forwarded_from,
)

# The first test's setup starts Ray, Serve's proxy and two replicas that each import torch: 70 s
# alone, 207 s in a full run beside the bench smoke on 2 cores, under the default 300 s limit.
pytestmark = pytest.mark.timeout(480)

POEM = "春眠不觉晓，处处闻啼[MASK]。"
TEXTS = [f"第{number}句：处处闻啼[MASK]，夜来风雨[MASK]。" for number in range(20)]


@pytest.fixture(scope="module")
def settings(tiny_model_dir: Path) -> Settings:
    # No result cache, so every request reaches a batch; a wider window than the default 2 ms,
    # because requests pass through Ray's proxy and router on two busy cores.
    return Settings(
        model=str(tiny_model_dir),
        engine="torch",
        threads=1,
        result_cache_size=0,
        batch_window_ms=20,
    )


@pytest.fixture(scope="module")
def standalone(settings: Settings, tiny_masker: FillMasker) -> Iterator[TestClient]:
    with local_client(create_app(settings, tiny_masker)) as client:
        yield client


@pytest.fixture(scope="module")
def ray_url(settings: Settings) -> Iterator[str]:
    """Two replicas on a local Ray on loopback; shut down (and checked gone) after the module."""
    patient_proxy_start()  # as `tiankong serve --ray` does: a busy machine starts Serve slowly
    trust_forwarded_from(settings.forwarded_allow_ips)  # and its proxy believes no one
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(
            build_application(settings, ScaleOptions(replicas=2)),
            name=APP_NAME,
            route_prefix="/",
        )
        wait_for_both_replicas(url)
        yield url
    finally:
        serve.shutdown()
        ray.shutdown()
    assert not ray.is_initialized()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{url}/health", timeout=5)


def wait_for_both_replicas(url: str, limit_s: float = 120.0) -> None:
    """``serve.run`` returns once both replicas are healthy, but the proxy's router can learn of
    the second one a moment later (CI saw a whole burst go to one replica). Wait until requests,
    four at a time so that a busy replica makes the router pick the other, have reached both."""
    seen: set[str] = set()
    deadline = time.monotonic() + limit_s

    def ask(_: int) -> str:
        response = httpx.post(f"{url}/predict", json={"text": POEM}, timeout=60)
        assert response.status_code == 200, response.text
        return response.headers[REPLICA_HEADER]

    with ThreadPoolExecutor(4) as pool:
        while len(seen) < 2 and time.monotonic() < deadline:
            seen.update(pool.map(ask, range(4)))
    assert len(seen) == 2, f"only {seen} answered in {limit_s} s"


def same(ours: Any, theirs: Any, path: str = "") -> None:
    """Equal JSON, floats up to batching noise; ``latency_ms`` differs by nature."""
    if isinstance(ours, dict):
        assert isinstance(theirs, dict) and set(ours) == set(theirs), path
        for key in ours:
            if key != "latency_ms":
                same(ours[key], theirs[key], f"{path}.{key}")
    elif isinstance(ours, list):
        assert isinstance(theirs, list) and len(ours) == len(theirs), path
        for index, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            same(a, b, f"{path}[{index}]")
    elif isinstance(ours, float):
        assert math.isclose(ours, theirs, rel_tol=1e-4, abs_tol=1e-6), path
    else:
        assert ours == theirs, path


@pytest.mark.processes
@pytest.mark.anyio
async def test_two_replicas_batch_concurrent_requests(
    ray_url: str, standalone: TestClient, tiny_masker: FillMasker
) -> None:
    """Bursts of 20 concurrent requests: every answer is right, and between them the bursts
    reach both replicas and form batches. The router picks replicas by sampled queue lengths,
    so one burst may land on one replica; three bursts that all do mean a broken setup."""
    replicas: set[str] = set()
    batch_sizes: list[int] = []
    async with httpx.AsyncClient(base_url=ray_url, timeout=120) as client:
        for _burst in range(3):
            responses = await asyncio.gather(
                *(client.post("/predict", json={"text": text, "top_k": 3}) for text in TEXTS)
            )
            assert [response.status_code for response in responses] == [200] * len(TEXTS)
            for text, response in zip(TEXTS, responses, strict=True):
                data = response.json()
                same(data, standalone.post("/predict", json={"text": text, "top_k": 3}).json())
                direct = tiny_masker.predict(text, top_k=3)
                assert [[c["token_id"] for c in mask] for mask in data["masks"]] == [
                    [candidate.token_id for candidate in mask] for mask in direct.masks
                ]
            replicas |= {response.headers[REPLICA_HEADER] for response in responses}
            # Ray's proxy names the request; the app's own header was a second copy
            assert all(len(r.headers.get_list("x-request-id")) == 1 for r in responses)
            batch_sizes += [int(response.headers[BATCH_HEADER]) for response in responses]
            if len(replicas) == 2 and max(batch_sizes) > 1:
                break
    assert len(replicas) == 2, replicas
    assert max(batch_sizes) > 1, batch_sizes


@pytest.mark.processes
def test_same_answers_as_the_standalone_server(ray_url: str, standalone: TestClient) -> None:
    requests: list[tuple[str, str, dict[str, Any]]] = [
        ("GET", f"/predict?text={quote(POEM)}&top_k=2", {}),
        ("POST", "/predict", {"json": {"text": "手机没电了，赶紧去[MASK][MASK]。"}}),
        ("POST", "/predict", {"json": {"text": POEM, "mode": "whole_word", "top_k": 2}}),
        ("POST", "/predict", {"json": {"text": "今天[BLANK]很好。", "top_k": 2}}),
        ("POST", "/batch_predict", {"json": {"texts": [POEM, "没有空", TEXTS[0]]}}),
        ("POST", "/", {"json": {"inputs": POEM, "parameters": {"top_k": 2}}}),
        ("POST", "/", {"json": {"inputs": [POEM, TEXTS[1]]}}),
        ("GET", "/health", {}),
        ("GET", "/ready", {}),
    ]
    for method, path, options in requests:
        ours = httpx.request(method, f"{ray_url}{path}", timeout=60, **options)
        theirs = standalone.request(method, path, **options)
        assert ours.status_code == theirs.status_code == 200, (path, ours.text)
        same(ours.json(), theirs.json(), path)


@pytest.mark.processes
def test_same_errors_as_the_standalone_server(ray_url: str, standalone: TestClient) -> None:
    json_type = {"content-type": "application/json"}
    targets = {"inputs": POEM, "parameters": {"targets": ["🙂"]}}
    requests: list[tuple[str, str, dict[str, Any], int, str]] = [
        ("POST", "/predict", {"json": {"text": "没有空"}}, 400, "no_mask"),
        ("POST", "/predict", {"json": {"text": POEM, "top_k": 99}}, 400, "top_k_out_of_range"),
        ("POST", "/predict", {"json": {"text": 123}}, 422, "invalid_request"),
        (
            "POST",
            "/predict",
            {"content": b'{"text": "', "headers": json_type},
            422,
            "invalid_request",
        ),
        ("GET", "/predict?top_k=3", {}, 422, "invalid_request"),
        ("POST", "/batch_predict", {"json": {"texts": [POEM] * 65}}, 400, "batch_too_large"),
        ("POST", "/", {"json": targets}, 400, "bad_option"),
        (
            "POST",
            "/predict",
            {"content": b"a" * 1_100_000, "headers": json_type},
            413,
            "body_too_large",
        ),
        ("GET", "/no/such/route", {}, 404, "not_found"),
        ("PUT", "/predict", {"json": {"text": POEM}}, 405, "method_not_allowed"),
    ]
    for method, path, options, status, code in requests:
        ours = httpx.request(method, f"{ray_url}{path}", timeout=60, **options)
        assert_error(ours, status, code)
        assert ours.json() == standalone.request(method, path, **options).json(), path


@pytest.mark.processes
def test_operations_routes(ray_url: str, standalone: TestClient) -> None:
    page = httpx.get(f"{ray_url}/", timeout=30)
    assert page.status_code == 200 and page.text == standalone.get("/").text
    assert (
        page.headers["content-security-policy"]
        == standalone.get("/").headers["content-security-policy"]
    )
    assert httpx.get(f"{ray_url}/docs", timeout=30).status_code == 200
    openapi = httpx.get(f"{ray_url}/openapi.json", timeout=30).json()
    assert openapi == standalone.get("/openapi.json").json()
    info = httpx.get(f"{ray_url}/info", timeout=30).json()
    assert set(info) == set(standalone.get("/info").json())
    assert info["ready"] is True and info["engine"] == "torch" and info["threads"] == 1
    batching = info["batching"]
    assert batching["policy"] == "continuous" and batching["max_batch_size"] == 32
    assert batching["max_batch_tokens"] == 4096  # the dynamic batcher's token budget
    assert batching["replica"] and batching["batches"] >= 1
    metrics = httpx.get(f"{ray_url}/metrics", timeout=30)
    assert metrics.status_code == 200
    assert "tiankong_batch_size_bucket" in metrics.text
    assert 'tiankong_requests_total{method="POST",route="/predict",status="200"}' in metrics.text
    # the replica's access line names the request's id, in the replica's log (it was written
    # nowhere: the replica never showed tiankong's own lines)
    named = httpx.post(
        f"{ray_url}/predict", json={"text": POEM}, headers={"X-Request-ID": "ray-log-check-7"}
    )
    assert named.status_code == 200
    logs = Path(ray._private.worker.global_worker.node.get_logs_dir_path())
    deadline = time.monotonic() + 30
    while not any(
        'POST /predict HTTP/1.1" 200' in text and "id=ray-log-check-7" in text
        for text in (path.read_text("utf-8", "replace") for path in logs.rglob("*.err"))
    ):
        assert time.monotonic() < deadline, "no access line in the replicas' logs"
        time.sleep(0.5)


# --- without a cluster: the scheduler, and the options Ray gets ------------------------------


def gated(masker: FillMasker, gate: threading.Event) -> Any:
    def score_rows(rows: Any, asked: Any, **given: Any) -> Any:
        assert gate.wait(30)
        return FillMasker.score_rows(masker, rows, asked, **given)

    return score_rows


@pytest.mark.anyio
async def test_scheduler_batches_and_a_failed_batch_fails_alone(tiny_masker: FillMasker) -> None:
    settings = Settings(max_batch_size=4, batch_window_ms=50)
    scheduler = RayBatchScheduler(tiny_masker, settings, ServerMetrics(), "replica-1")
    await scheduler.start()
    jobs = [PlainJob(tiny_masker.prepare(text), 2) for text in TEXTS[:6]]
    results = await scheduler.submit_many(jobs)
    for text, result in zip(TEXTS, results, strict=False):
        direct = tiny_masker.predict(text, top_k=2)
        assert [c.token_id for c in result.masks[0]] == [c.token_id for c in direct.masks[0]]
    assert (scheduler.batches, scheduler.largest_batch) == (2, 4)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tiny_masker, "score_rows", lambda rows, asked: 1 / 0)
        with pytest.raises(EngineError) as failure:
            await scheduler.submit_many(jobs[:2])
    assert failure.value.error_id and "ZeroDivision" not in failure.value.message
    assert len(await scheduler.submit_many(jobs[:1])) == 1  # the replica serves on
    assert scheduler.describe()["queue_depth"] == 0
    await scheduler.close()
    with pytest.raises(ShuttingDownError):
        await scheduler.submit_many(jobs[:1])


@pytest.mark.anyio
async def test_scheduler_refuses_over_max_queue_and_times_out(
    tiny_masker: FillMasker, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = threading.Event()
    monkeypatch.setattr(tiny_masker, "score_rows", gated(tiny_masker, gate))
    settings = Settings(max_queue=2, request_timeout_s=0.5)
    scheduler = RayBatchScheduler(tiny_masker, settings, ServerMetrics(), "replica-1")
    await scheduler.start()
    jobs = [PlainJob(tiny_masker.prepare(text), 1) for text in TEXTS[:3]]
    running = asyncio.ensure_future(scheduler.submit_many(jobs[:1]))  # held on the engine
    await asyncio.sleep(0.1)
    queued = asyncio.ensure_future(scheduler.submit_many(jobs[:2]))  # fills the queue
    await asyncio.sleep(0.1)
    assert scheduler.describe()["queue_depth"] == 2
    with pytest.raises(OverloadedError):
        await scheduler.submit_many(jobs[2:])
    for request in (running, queued):
        with pytest.raises(RequestTimeoutError):
            await request
    gate.set()
    await scheduler.close()
    assert scheduler.in_flight == 0


def test_deployment_options_fixed_and_autoscaling() -> None:
    settings = Settings(threads=2, max_batch_size=16)
    fixed = deployment_options(settings, ScaleOptions(replicas=3))
    assert fixed["num_replicas"] == 3 and "autoscaling_config" not in fixed
    assert fixed["ray_actor_options"] == {"num_cpus": 2} and fixed["max_ongoing_requests"] == 32
    scaled = deployment_options(settings, ScaleOptions(replicas=1, max_replicas=6))
    assert "num_replicas" not in scaled
    assert scaled["autoscaling_config"] == {
        "min_replicas": 1,
        "initial_replicas": 1,
        "max_replicas": 6,
        "target_ongoing_requests": 4,
    }
    for bad in (ScaleOptions(replicas=0), ScaleOptions(replicas=3, max_replicas=2)):
        with pytest.raises(BadOptionError):
            deployment_options(settings, bad)
    # threads 0, the engine's own choice, is every core: it reserved none (a review)
    own = deployment_options(Settings(threads=0), ScaleOptions(replicas=8))
    assert own["ray_actor_options"] == {"num_cpus": usable_cores()}


def test_serve_run_arguments_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """``serve run`` arguments over the TIANKONG_* twins over the defaults, typed by the table."""
    for name, value in {
        "TIANKONG_MODEL": "m",
        "TIANKONG_REQUEST_TIMEOUT": "5",
        "TIANKONG_MAX_REPLICAS": "4",
        "TIANKONG_API_KEYS": "k1, k2",
        "TIANKONG_PORT": "9000",
    }.items():
        monkeypatch.setenv(name, value)
    settings, scale = settings_and_scale(
        {"threads": "2", "warmup": "false", "cors_origins": "a, b", "port": 8100}
    )
    assert (settings.model, settings.request_timeout_s, settings.port) == ("m", 5.0, 8100)
    assert settings.threads == 2 and settings.warmup is False
    assert settings.api_keys == ("k1", "k2") and settings.cors_origins == ("a", "b")
    assert (scale.replicas, scale.max_replicas) == (2, 4)
    monkeypatch.setenv("TIANKONG_THREADS", "3")
    assert settings_and_scale({})[0].threads == 3  # the twin, not the per-replica default
    monkeypatch.delenv("TIANKONG_THREADS")
    assert settings_and_scale({})[0].threads == replica_threads(ScaleOptions(max_replicas=4))
    with pytest.raises(BadOptionError, match="Unknown setting"):
        settings_and_scale({"thread": "2"})
    with pytest.raises(BadOptionError, match="threads: 'two' is not valid"):
        settings_and_scale({"threads": "two"})
    monkeypatch.setenv("TIANKONG_MAX_QUEUE", "0")
    with pytest.raises(BadOptionError, match="--max-queue must be 1 or more"):
        build_application(*settings_and_scale({}))


@pytest.mark.processes
@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--replicas", "0"], "replicas (--replicas) must be at least 1"),
        (["--replicas", "3", "--max-replicas", "2"], "0 <= replicas <= max_replicas"),
        # a 60-line traceback from serve.run, the reason only in the replicas' logs (a review)
        (["--engine", "bogus"], "--engine: unknown value 'bogus'"),
    ],
)
def test_serve_ray_flags_fail_in_one_sentence_before_ray_starts(
    tiny_model_dir: Path, flags: list[str], words: str
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tiankong",
            "serve",
            "--ray",
            "--model",
            str(tiny_model_dir),
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert words in done.stderr and "Traceback" not in done.stderr


def test_serve_run_with_a_keys_file_it_cannot_read_is_one_sentence(tmp_path: Path) -> None:
    """It built, then every replica failed with a traceback and `serve run` kept waiting."""
    from tiankong.server.ray_serve import build_app

    with pytest.raises(BadOptionError, match="Cannot read the API keys file"):
        build_app({"api_keys_file": str(tmp_path / "missing.txt")})
    # Ray's proxy reads its own FORWARDED_ALLOW_IPS: the setting did nothing (a verifying review)
    with pytest.raises(BadOptionError, match=r"^forwarded_allow_ips .* applies only to the local"):
        build_app({"forwarded_allow_ips": "10.0.0.2"})


def test_patient_proxy_start_sets_a_default_and_keeps_a_given_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = "RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S"
    monkeypatch.delenv(name, raising=False)
    patient_proxy_start()
    assert float(os.environ[name]) > 5.0  # Ray Serve's own default is 5 s
    monkeypatch.setenv(name, "7")
    patient_proxy_start()
    assert os.environ[name] == "7"


@pytest.mark.processes
def test_serve_ray_with_an_index_that_is_not_there_is_one_sentence(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """Each replica failed to open it: a 60-line traceback, where `tiankong serve` without
    --ray says "There is no index at ..." and exits 3."""
    missing = tmp_path / "nonexist"
    done = subprocess.run(
        [
            *[sys.executable, "-m", "tiankong", "serve", "--ray", "--replicas", "1"],
            *["--model", str(tiny_model_dir), "--port", str(free_port()), "--index", str(missing)],
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr
    assert f"There is no index at {missing}" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.processes
def test_a_setting_the_replicas_refuse_is_their_one_sentence(tiny_model_dir: Path) -> None:
    """A setting only the engine can judge (ONNX Runtime runs no bf16) failed each replica's
    startup, and serve --ray ended in serve.run's 60-line traceback with the reason only in
    the replicas' logs (a review); `tiankong serve` without --ray says it in one sentence."""
    done = subprocess.run(
        [
            *[sys.executable, "-m", "tiankong", "serve", "--ray", "--replicas", "1"],
            *["--model", str(tiny_model_dir), "--port", str(free_port()), "--threads", "1"],
            *["--engine", "onnx", "--precision", "bf16", "--index", "none"],
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 2, done.stderr
    assert "error: The onnx engine runs auto, fp32 or int8, not 'bf16'" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_ray_cluster_that_is_not_there_is_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--ray-address auto` with no cluster running was Ray's ConnectionError traceback."""
    from tiankong.offline.ray_cluster import init_ray

    def no_cluster(**_: Any) -> None:
        raise ConnectionError("Could not find any running Ray instance.")

    monkeypatch.setattr(ray, "init", no_cluster)
    with pytest.raises(BadOptionError, match="No Ray cluster answers at --ray-address 'auto'"):
        init_ray("auto")


def test_a_cluster_that_refuses_the_token_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray 2.60's `ray start` turns token authentication on; joining it without RAY_AUTH_MODE
    failed as Ray's ConnectionError over a RuntimeError naming InvalidAuthToken, and the
    command said no cluster answered at the address, where one did (a review). Ray's own
    exceptions, raised as ray.init raised them there."""
    import socket

    from tiankong.offline.ray_cluster import init_ray

    def refused(**_: Any) -> None:
        try:
            raise RuntimeError(
                "Failed to connect to GCS. Last connection error: Unauthenticated: RPC error: "
                "InvalidAuthToken: Authentication token is missing or incorrect"
            )
        except RuntimeError as error:
            raise ConnectionError("Failed to connect to Ray cluster at 127.0.0.1:1") from error

    monkeypatch.setattr(ray, "init", refused)
    with socket.socket() as cluster:  # something answers at the address
        cluster.bind(("127.0.0.1", 0))
        cluster.listen()
        address = f"127.0.0.1:{cluster.getsockname()[1]}"
        with pytest.raises(BadOptionError) as said:
            init_ray(address)
        monkeypatch.setenv("RAY_ADDRESS", address)
        with pytest.raises(BadOptionError) as from_env:
            init_ray(None)
    assert said.value.message.startswith(
        f"The Ray cluster at --ray-address '{address}' refused this process's authentication token"
    )
    assert "RAY_AUTH_MODE=token" in said.value.message
    assert f"at RAY_ADDRESS '{address}'" in from_env.value.message  # not a flag never given


def test_sigterm_inside_ray_init_is_an_interruption(monkeypatch: pytest.MonkeyPatch) -> None:
    """ray.init's own SIGTERM handler exited 15 with no word, the C++ failure handler its core
    worker installs in this process took SIGTERM for a crash (exit 134, a stack dump), and an
    interruption raised inside ray.init crashed the exit (SIGSEGV) (reviews): the driver's C++
    handler is off, ray.init sets none, and a SIGTERM meanwhile stops Ray cleanly once it is
    up, then is Ctrl-C's exit 130."""
    import signal

    import ray._private.ray_constants as ray_constants
    import ray._private.utils as ray_utils

    from tiankong.offline.ray_cluster import init_ray

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray_constants, "RAY_DISABLE_FAILURE_SIGNAL_HANDLER", False)
    shutdowns: list[bool] = []
    monkeypatch.setattr(ray, "shutdown", lambda: shutdowns.append(True))

    def stopped_while_starting(**_: Any) -> None:
        assert ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER  # read as the worker starts
        ray_utils.set_sigterm_handler(lambda signum, frame: sys.exit(signum))  # as ray.init
        os.kill(os.getpid(), signal.SIGTERM)  # noted, not acted on inside ray.init

    before = signal.getsignal(signal.SIGTERM)
    try:
        monkeypatch.setattr(ray, "init", stopped_while_starting)
        with pytest.raises(KeyboardInterrupt):
            init_ray(None)
        assert shutdowns == [True]
        monkeypatch.setattr(ray, "init", lambda **_: None)
        init_ray(None)
        handler = signal.getsignal(signal.SIGTERM)
        assert callable(handler)
        with pytest.raises(KeyboardInterrupt):  # after it, too: Ctrl-C's exit 130
            handler(signal.SIGTERM, None)
        assert shutdowns == [True]
    finally:
        signal.signal(signal.SIGTERM, before)


def test_an_address_where_nothing_listens_is_refused_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`--ray-address 127.0.0.1:PORT` with nothing there: Ray retried for minutes (the run was
    killed at 500 s), where the command should say so in one sentence."""
    import socket

    from tiankong.offline.ray_cluster import init_ray

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    asked: list[object] = []
    monkeypatch.setattr(ray, "init", lambda **kwargs: asked.append(kwargs))
    for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
        started = time.monotonic()
        with pytest.raises(
            BadOptionError, match=f"No Ray cluster answers at --ray-address '{address}'"
        ):
            init_ray(address)
        assert time.monotonic() - started < 10
    assert asked == []  # refused before Ray was asked


def test_without_an_address_a_new_local_ray_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray's default address joined a cluster `ray start` had left running on the machine, and
    `serve --ray` shut that cluster's Serve down on exit, other applications and all."""
    from tiankong.offline.ray_cluster import init_ray

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    asked: list[dict[str, Any]] = []
    monkeypatch.setattr(ray, "init", lambda **kwargs: asked.append(kwargs))
    init_ray(None)
    assert asked[0]["address"] == "local"
    monkeypatch.setenv("RAY_ADDRESS", "auto")  # the environment's address is still joined
    init_ray(None)
    assert asked[1]["address"] == "auto"


def test_replicas_a_local_ray_cannot_place_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """`serve --ray --replicas 1 --threads 8` on 2 CPUs waited forever for its replica."""
    calls: list[str] = []
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray, "init", lambda **_: calls.append("init"))
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0})
    monkeypatch.setattr(ray, "shutdown", lambda: calls.append("shutdown"))
    monkeypatch.setattr(serve, "start", lambda **_: calls.append("serve"))
    from tiankong.server.ray_serve import serve_on_ray

    settings = Settings(engine="fake", threads=8)
    with pytest.raises(BadOptionError, match=r"1 replica\(s\) of 8 threads need 8 CPUs .* has 2"):
        serve_on_ray(settings, ScaleOptions(replicas=1))
    assert calls == ["init", "shutdown"]  # refused before Serve starts; the local Ray stopped
    with pytest.raises(BadOptionError, match="2 replica"):
        serve_on_ray(Settings(engine="fake", threads=2), ScaleOptions(replicas=2))


@pytest.mark.processes
def test_sigterm_while_the_application_starts_is_an_interruption(tiny_model_dir: Path) -> None:
    """Kubernetes and Docker stop a pod that is still starting with SIGTERM: in that window
    Ray's own handler aborted the process, a C++ stack dump and exit 134 (a review). Now it is
    Ctrl-C's exit 130 ("interrupted"), or 0 if the application was up by then."""
    code, said = stopped_once_ray_started(
        [
            *["serve", "--ray", "--replicas", "1", "--model", str(tiny_model_dir)],
            *["--port", str(free_port()), "--threads", "1", "--index", "none"],
        ],
        after_s=1.0,
    )
    assert code in (0, 130), said[-2000:]
    assert "SIGTERM received" not in said and "Traceback" not in said
    if code == 130:
        assert "interrupted (Ctrl-C or SIGTERM)" in said


@pytest.mark.processes
def test_sigterm_to_fill_on_ray_leaves_no_empty_output(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """Interrupted once Ray had started, fill --ray exited 130 and left its output folder,
    empty (a verifying review)."""
    (tmp_path / "in.txt").write_text("画龙点[MASK]\n一石二[MASK]\n", encoding="utf-8")
    out = tmp_path / "out"
    code, said = stopped_once_ray_started(
        [
            *["fill", str(tmp_path / "in.txt"), "-o", str(out), "--ray"],
            *["--model", str(tiny_model_dir), "--threads", "1", "--index", "none"],
        ],
        after_s=2.0,
    )
    assert code == 130, said[-2000:]
    assert "SIGTERM received" not in said
    assert not out.exists() or any(out.iterdir())  # gone, or holding what was written


def stopped_once_ray_started(args: list[str], after_s: float) -> tuple[int, str]:
    """``tiankong ARGS`` sent SIGTERM ``after_s`` after Ray's "Started a local Ray instance"
    (printed while ray.init still runs: a review); its exit code and all of its stderr."""
    import signal

    process = subprocess.Popen(
        [sys.executable, "-m", "tiankong", *args], stderr=subprocess.PIPE, text=True
    )
    assert process.stderr is not None
    seen: list[str] = []
    try:
        for line in process.stderr:
            seen.append(line)
            if "Started a local Ray instance" in line:
                break
        time.sleep(after_s)
        process.send_signal(signal.SIGTERM)
        _, rest = process.communicate(timeout=120)
    finally:
        process.kill()
    return process.returncode, "".join(seen) + rest
