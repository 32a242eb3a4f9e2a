"""Ray Serve: the same HTTP API as ``tiankong serve``, on replicas that Ray places and scales.

    tiankong serve --ray --replicas 2                         # a local Ray, or --ray-address
    serve run tiankong.ray_serve:app                          # settings from TIANKONG_* env
    serve run tiankong.ray_serve:build_app model=tiankong-mini-zh threads=2 max_replicas=4

Each replica builds the ordinary app with ``create_app`` (the same routers, error handlers,
middleware, page and metrics) and loads the model in its lifespan; Ray Serve runs the app through
its FastAPI ingress, and batches with the standalone server's dynamic batcher
(``RayBatchScheduler`` wraps it), so one forward pass serves the texts of every request the
replica holds, within the same window, size, token budget, queue, timeout and drain. Responses
say which replica answered (``x-tiankong-replica``) and the largest batch their texts ran in
(``x-tiankong-batch-size``). Ray is imported only when a function here runs.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, TypeVar

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tiankong.config import Settings, physical_cores
from tiankong.core.results import FillResult
from tiankong.errors import (
    BadOptionError,
)
from tiankong.service import FillMasker
from tiankong.serving.batching import BatchObserver, DynamicBatcher
from tiankong.serving.predictor import PlainJob, check_serving_settings, run_plain_batch

if TYPE_CHECKING:
    from fastapi import FastAPI
    from ray.serve import Application

logger = logging.getLogger("tiankong.server.ray_serve")
JobT = TypeVar("JobT")

APP_NAME = "tiankong"
DEPLOYMENT_NAME = "tiankong"
REPLICA_HEADER = "x-tiankong-replica"
BATCH_HEADER = "x-tiankong-batch-size"
SCALE_KEYS = ("replicas", "max_replicas", "target_ongoing_requests")
# The batch sizes of the request being handled, for BATCH_HEADER (set by ReplicaHeaders).
BATCH_SIZES: ContextVar[list[int] | None] = ContextVar("tiankong_batch_sizes", default=None)

# One plain job's answer from the batch, and the size of that batch.
Outcome = tuple[FillResult, int]


class RayBatchScheduler:
    """A Predictor's engine scheduler inside a Ray Serve replica (``EngineScheduler``).

    It is the standalone server's ``DynamicBatcher`` (``serving/batching.py``): the same
    admission and backpressure (``max_queue``, 503), token budget (``max_batch_tokens``),
    window, request timeout (504), failed-batch handling, stats and drain. What a replica adds
    is what it reports: its name, how many batches it ran and the largest one (GET /info), and
    the size of each request's batch (the ``x-tiankong-batch-size`` header).
    """

    def __init__(
        self, masker: FillMasker, settings: Settings, observer: BatchObserver, replica: str
    ) -> None:
        self.masker = masker
        self.replica = replica
        self.batches = 0  # written only on the engine thread
        self.largest_batch = 0
        self.batcher = DynamicBatcher[PlainJob, Outcome](
            self.run_batch,
            size_of=lambda job: len(job.prepared.input_ids),
            limits=check_serving_settings(settings),
            observer=observer,
        )

    async def start(self) -> None:
        await self.batcher.start()

    async def close(self) -> None:
        await self.batcher.close()

    @property
    def in_flight(self) -> int:
        return self.batcher.depth

    def describe(self) -> dict[str, Any]:
        return {
            **self.batcher.describe(),
            "batches": self.batches,
            "largest_batch": self.largest_batch,
            "replica": self.replica,
        }

    async def submit_many(self, items: Sequence[PlainJob]) -> list[FillResult]:
        outcomes = await self.batcher.submit_many(items)
        sizes = BATCH_SIZES.get()
        if sizes is not None:
            sizes.extend(batch_size for _, batch_size in outcomes)
        return [result for result, _ in outcomes]

    def run_batch(self, jobs: list[PlainJob]) -> list[Outcome]:
        """One forward pass for the batch, on the engine thread; each result with its batch size."""
        results = run_plain_batch(self.masker, jobs)
        self.batches += 1
        self.largest_batch = max(self.largest_batch, len(jobs))
        return [(result, len(jobs)) for result in results]

    async def run_exclusive(self, job: Callable[[], JobT]) -> JobT:
        return await self.batcher.run_exclusive(job)


class ReplicaHeaders:
    """Pure ASGI middleware: which replica answered, and the largest batch the request ran in."""

    def __init__(self, app: ASGIApp, replica: str) -> None:
        self.app = app
        self.replica = replica

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sizes: list[int] = []

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.append(REPLICA_HEADER, self.replica)
                if sizes:
                    headers.append(BATCH_HEADER, str(max(sizes)))
            await send(message)

        token = BATCH_SIZES.set(sizes)
        try:
            await self.app(scope, receive, send_with_headers)
        finally:
            BATCH_SIZES.reset(token)


class TiankongReplica:
    """One replica: ``create_app`` with a ``RayBatchScheduler``; the model loads in lifespan.

    Wrapped by ``serve.ingress()`` (late-bound: Ray calls ``__serve_build_asgi_app__`` on the
    replica, after ``__init__``) and ``serve.deployment`` in ``build_application``.
    """

    def __init__(self, settings: Settings) -> None:
        from ray import serve

        self.settings = settings
        self.replica = serve.get_replica_context().replica_id.unique_id

    def __serve_build_asgi_app__(self) -> FastAPI:
        from tiankong.server import create_app

        app = create_app(self.settings, scheduler=self.scheduler)
        app.add_middleware(ReplicaHeaders, replica=self.replica)
        return app

    def scheduler(
        self, masker: FillMasker, settings: Settings, observer: BatchObserver
    ) -> RayBatchScheduler:
        return RayBatchScheduler(masker, settings, observer, self.replica)


@dataclass(frozen=True)
class ScaleOptions:
    """``replicas`` fixed, or autoscaling between ``replicas`` and ``max_replicas``.

    The autoscaler adds replicas while the replicas average more than
    ``target_ongoing_requests`` requests each (default: a quarter of ``max_batch_size``, a
    starting point to tune with a load test).
    """

    replicas: int = 2
    max_replicas: int | None = None
    target_ongoing_requests: float | None = None

    @property
    def autoscaling(self) -> bool:
        return self.max_replicas is not None and self.max_replicas != self.replicas

    @property
    def most_replicas(self) -> int:
        return self.max_replicas if self.max_replicas is not None else self.replicas

    def checked(self) -> ScaleOptions:
        if self.autoscaling:
            if self.replicas < 0 or self.most_replicas < max(1, self.replicas):
                raise BadOptionError(
                    f"Autoscaling needs 0 <= replicas <= max_replicas and max_replicas >= 1; "
                    f"got {self.replicas} and {self.max_replicas}."
                )
        elif self.replicas < 1:
            raise BadOptionError(f"replicas must be at least 1; got {self.replicas}.")
        if self.target_ongoing_requests is not None and self.target_ongoing_requests <= 0:
            raise BadOptionError("target_ongoing_requests must be above 0.")
        return self


def deployment_options(settings: Settings, scale: ScaleOptions) -> dict[str, Any]:
    """``serve.deployment`` keyword arguments for these settings."""
    scale = scale.checked()
    options: dict[str, Any] = {
        "name": DEPLOYMENT_NAME,
        # a full batch on the engine and the next one filling up
        "max_ongoing_requests": 2 * settings.max_batch_size,
        "ray_actor_options": {"num_cpus": settings.threads},  # the engine's intra-op threads
    }
    if scale.autoscaling:
        target = scale.target_ongoing_requests or max(1, settings.max_batch_size // 4)
        options["autoscaling_config"] = {
            "min_replicas": scale.replicas,
            "initial_replicas": max(1, scale.replicas),
            "max_replicas": scale.most_replicas,
            "target_ongoing_requests": target,
        }
    else:
        options["num_replicas"] = scale.replicas
    return options


def build_application(settings: Settings, scale: ScaleOptions | None = None) -> Application:
    """The Ray Serve application: ``serve.run(build_application(settings), route_prefix="/")``."""
    from ray import serve

    check_serving_settings(settings)  # a bad batching value fails here, not on every replica
    options = deployment_options(settings, scale or ScaleOptions())
    deployment = serve.deployment(**options)(serve.ingress()(TiankongReplica))
    return deployment.bind(settings)


def replica_threads(scale: ScaleOptions) -> int:
    """Default threads per replica: this machine's physical cores shared by the most replicas."""
    return max(1, physical_cores() // max(1, scale.most_replicas))


def build_app(args: Mapping[str, object]) -> Application:
    """The ``serve run`` builder: ``serve run tiankong.ray_serve:build_app model=... threads=2``.

    Keys are Settings field names plus ``replicas``, ``max_replicas`` and
    ``target_ongoing_requests``; they override the TIANKONG_* environment (the ``tiankong
    serve`` flags' twins, read where the application is built), which overrides the defaults.
    """
    values: dict[str, object] = {**environment_values(os.environ), **args}
    scale_values = {name: values.pop(name) for name in SCALE_KEYS if name in values}
    scale = ScaleOptions(
        replicas=parse_value("replicas", "int", scale_values.get("replicas", 2)),
        max_replicas=optional_value(scale_values, "max_replicas", "int"),
        target_ongoing_requests=optional_value(scale_values, "target_ongoing_requests", "float"),
    ).checked()
    settings = settings_from(values)
    if "threads" not in values:
        settings = settings.with_overrides(threads=replica_threads(scale))
    return build_application(settings, scale)


def __getattr__(name: str) -> Application:
    """``tiankong.ray_serve:app``, built from the environment when ``serve run`` asks for it."""
    if name == "app":
        return build_app({})
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def environment_values(environ: Mapping[str, str]) -> dict[str, str]:
    """Settings fields and scale options given as TIANKONG_* variables."""
    names = [field.name for field in fields(Settings)] + list(SCALE_KEYS)
    values = {}
    for name in names:
        variable = "TIANKONG_" + name.removesuffix("_s").upper()  # request_timeout_s: ..._TIMEOUT
        if variable in environ:
            values[name] = environ[variable]
    return values


def settings_from(values: Mapping[str, object]) -> Settings:
    """Settings from text values (``serve run`` arguments, environment variables)."""
    kinds = {field.name: str(field.type) for field in fields(Settings)}
    unknown = sorted(set(values) - set(kinds))
    if unknown:
        raise BadOptionError(
            f"Unknown setting(s) {', '.join(unknown)}; use Settings field names "
            f"({', '.join(kinds)}) or {', '.join(SCALE_KEYS)}."
        )
    return Settings(**{name: parse_value(name, kinds[name], raw) for name, raw in values.items()})


def optional_value(values: Mapping[str, object], name: str, kind: str) -> Any:
    return parse_value(name, kind, values[name]) if name in values else None


def parse_value(name: str, kind: str, raw: object) -> Any:
    """``raw`` as the Settings field type named ``kind`` (a bad value is a BadOptionError)."""
    text = str(raw).strip()
    try:
        if kind == "bool":
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
        if kind.startswith("tuple"):
            return tuple(part.strip() for part in text.split(",") if part.strip())
    except ValueError:
        raise BadOptionError(f"{name}: '{text}' is not a valid {kind}.") from None
    return text


def serve_on_ray(settings: Settings, scale: ScaleOptions, address: str | None = None) -> None:
    """``tiankong serve --ray``: deploy on a new local Ray (or the cluster at ``address``) and
    serve until Ctrl-C or SIGTERM; then the application is deleted (and a local Ray stopped)."""
    import ray
    from ray import serve

    application = build_application(settings, scale)
    local = not (address or os.environ.get("RAY_ADDRESS"))  # else: leave the cluster's Serve up
    ray.init(address=address, include_dashboard=False, log_to_driver=False)
    try:
        serve.start(http_options={"host": settings.host, "port": settings.port})
        serve.run(application, name=APP_NAME, route_prefix="/")
        print(
            f"tiankong: {scale.replicas} replica(s) on Ray Serve; page and API at "
            f"http://{settings.host}:{settings.port}/ (replica logs: Ray's session log folder)",
            file=sys.stderr,
            flush=True,
        )
        wait_for_stop()
    finally:
        if local:
            serve.shutdown()
        else:
            serve.delete(APP_NAME)
        ray.shutdown()


def wait_for_stop() -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass
