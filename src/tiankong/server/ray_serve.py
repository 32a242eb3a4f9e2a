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

import contextlib
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from dataclasses import fields
from typing import TYPE_CHECKING, Any, TypeVar

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tiankong import errors as errors_module
from tiankong.config import (
    ScaleOptions,
    Settings,
    check_settings,
    from_environment,
    read_environment,
    threads_per_worker,
)
from tiankong.core.request import EngineJob
from tiankong.errors import BadOptionError, TiankongError
from tiankong.host import usable_cores
from tiankong.offline.ray_cluster import check_replicas_fit, init_ray, starts_local_ray
from tiankong.server.middleware.security import load_api_keys
from tiankong.service import FillMasker, run_jobs
from tiankong.serving.batch_policy import BatchLimits, BatchObserver
from tiankong.serving.batching import DynamicBatcher
from tiankong.serving.predictor import job_tokens

if TYPE_CHECKING:
    from fastapi import FastAPI
    from ray.serve import Application

logger = logging.getLogger("tiankong.server.ray_serve")
JobT = TypeVar("JobT")

APP_NAME = "tiankong"
DEPLOYMENT_NAME = "tiankong"
REPLICA_HEADER = "x-tiankong-replica"
BATCH_HEADER = "x-tiankong-batch-size"
# The batch sizes of the request being handled, for BATCH_HEADER (set by ReplicaHeaders).
BATCH_SIZES: ContextVar[list[int] | None] = ContextVar("tiankong_batch_sizes", default=None)

# One plain job's answer from the batch, and the size of that batch.
Outcome = tuple[Any, int]  # a FillResult (plain) or a search row's probabilities


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
        self.batcher = DynamicBatcher[EngineJob, Outcome](
            self.run_batch,
            size_of=job_tokens,
            limits=BatchLimits.from_settings(settings),  # checked by build_application
            observer=observer,
        )

    async def start(self) -> None:
        await self.batcher.start()

    async def close(self, timeout_s: float | None = None) -> None:
        await self.batcher.close(timeout_s)

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

    async def submit_many(
        self, items: Sequence[EngineJob], search: bool = False, deadline: float | None = None
    ) -> list[Any]:
        outcomes = await self.batcher.submit_many(items, search, deadline)
        sizes = BATCH_SIZES.get()
        if sizes is not None and not search:
            sizes.extend(batch_size for _, batch_size in outcomes)
        return [result for result, _ in outcomes]

    def search_admission(
        self, cost: int, deadline: float | None = None
    ) -> AbstractAsyncContextManager[None]:
        return self.batcher.search_admission(cost, deadline)

    def run_batch(self, jobs: list[EngineJob]) -> list[Any]:  # Outcome, or a job's own error
        """One forward pass for the batch, on the engine thread; each result with its batch size."""
        results = run_jobs(self.masker, jobs)
        self.batches += 1
        self.largest_batch = max(self.largest_batch, len(jobs))
        # a job's own error (``run_jobs``) stays bare, so the batcher raises it for that job alone
        return [
            result if isinstance(result, Exception) else (result, len(jobs)) for result in results
        ]

    async def run_exclusive(self, job: Callable[[], JobT], bounded: bool = True) -> JobT:
        return await self.batcher.run_exclusive(job, bounded)


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
                # Ray Serve's proxy sends its own X-Request-ID, the id the guard was given
                # (``request_ids``): the client got the header twice
                del headers["x-request-id"]
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
    """One replica: ``create_app`` with a ``RayBatchScheduler``; the model loads in the
    constructor, so that a model or setting it can't serve fails the deployment with tiankong's
    sentence in Ray's status (``replica_error`` reads it there; from the app's lifespan, Ray
    said only "ASGI lifespan startup failed").

    Wrapped by ``serve.ingress()`` (late-bound: Ray calls ``__serve_build_asgi_app__`` on the
    replica, after ``__init__``) and ``serve.deployment`` in ``build_application``.
    """

    def __init__(self, settings: Settings, proxied: bool = True) -> None:
        from ray import serve

        from tiankong.server.uvicorn_server import show_logs

        self.settings = settings
        self.proxied = proxied  # create_app's: Ray's proxy listens where Ray's config says
        self.replica = serve.get_replica_context().replica_id.unique_id
        # tiankong's lines on the replica's stderr, which Ray keeps in the replica's log: the
        # access line with the request's id was written nowhere (a review's reproduction)
        show_logs(settings.log_level)
        self.masker = FillMasker.load(settings=settings)

    def __serve_build_asgi_app__(self) -> FastAPI:
        from tiankong.server import create_app

        app = create_app(self.settings, self.masker, scheduler=self.scheduler, proxied=self.proxied)
        app.add_middleware(ReplicaHeaders, replica=self.replica)
        return app

    def scheduler(
        self, masker: FillMasker, settings: Settings, observer: BatchObserver
    ) -> RayBatchScheduler:
        return RayBatchScheduler(masker, settings, observer, self.replica)


def deployment_options(settings: Settings, scale: ScaleOptions) -> dict[str, Any]:
    """``serve.deployment`` keyword arguments for these settings."""
    scale = scale.checked()
    options: dict[str, Any] = {
        "name": DEPLOYMENT_NAME,
        # a full batch on the engine and the next one filling up
        "max_ongoing_requests": 2 * settings.max_batch_size,
        "ray_actor_options": {"num_cpus": reserved_cpus(settings)},
        # --drain-timeout: how long a replica that is stopped finishes its requests in flight
        # (Ray's default, 20 s, cut off a longer request at SIGTERM: a review)
        "graceful_shutdown_timeout_s": settings.drain_timeout_s,
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


def reserved_cpus(settings: Settings) -> int:
    """The CPUs a replica reserves: its engine's intra-op threads. ``threads`` 0 (the engine's
    own choice) takes every core, so it reserves the cores of this machine: it reserved none,
    and eight replicas, each with every core, fit a 2-CPU node (a review)."""
    return settings.threads or usable_cores()


def build_application(
    settings: Settings, scale: ScaleOptions | None = None, proxied: bool = True
) -> Application:
    """The Ray Serve application: ``serve.run(build_application(settings), route_prefix="/")``.
    ``proxied``: Serve's proxy listens where Ray's own config says (``serve run``, a cluster),
    not at ``settings.host`` (the local Serve that ``tiankong serve --ray`` starts there)."""
    from ray import serve

    check_settings(settings)  # a bad batching value fails here, not on every replica
    # and so does a keys file that can't be read: `serve run` logged six tracebacks and kept
    # waiting for replicas that failed as they started (a review)
    load_api_keys(settings)
    options = deployment_options(settings, scale or ScaleOptions())
    deployment = serve.deployment(**options)(serve.ingress()(TiankongReplica))
    return deployment.bind(settings, proxied)


def replica_threads(scale: ScaleOptions) -> int:
    """Default threads per replica: the cores this process may use (``host.usable_cores``)
    shared by the most replicas."""
    return threads_per_worker(usable_cores(), scale.most_replicas)


def build_app(args: Mapping[str, object]) -> Application:
    """The ``serve run`` builder: ``serve run tiankong.ray_serve:build_app model=... threads=2``."""
    settings, scale = settings_and_scale(args)
    if settings.forwarded_allow_ips:  # Ray's proxy reads its own environment: it did nothing
        raise BadOptionError(
            "forwarded_allow_ips (TIANKONG_FORWARDED_ALLOW_IPS) applies only to the local Ray "
            "that `tiankong serve --ray` starts: under `serve run`, Ray Serve's proxy believes "
            "X-Forwarded-For from the addresses in its own FORWARDED_ALLOW_IPS; set that in "
            "Ray's environment (empty: no one), or leave this out."
        )
    return build_application(settings, scale)


def settings_and_scale(args: Mapping[str, object]) -> tuple[Settings, ScaleOptions]:
    """``serve run`` arguments: Settings field names plus ScaleOptions' (``replicas``,
    ``max_replicas``, ``target_ongoing_requests``). They override the TIANKONG_* environment
    (the ``tiankong serve`` flags' twins, read where the application is built), which overrides
    the defaults; config.py's tables say each one's type and twin."""
    scale_names = {row.name for row in fields(ScaleOptions)}
    unknown = sorted(set(args) - scale_names - {row.name for row in fields(Settings)})
    if unknown:
        raise BadOptionError(
            f"Unknown setting(s) {', '.join(unknown)}; use Settings field names or "
            f"{', '.join(sorted(scale_names))}."
        )
    scale_args = {name: value for name, value in args.items() if name in scale_names}
    scale = from_environment(ScaleOptions, scale_args).checked()
    values = read_environment(Settings, {k: v for k, v in args.items() if k not in scale_names})
    values.setdefault("threads", replica_threads(scale))  # unless given or set by its env twin
    return Settings(**values), scale


def __getattr__(name: str) -> Application:
    """``tiankong.ray_serve:app``, built from the environment when ``serve run`` asks for it."""
    if name == "app":
        return build_app({})
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Ray Serve kills an HTTP proxy that is not ready 5 s after it was created (its
# RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S), and ``serve.start`` then fails with ActorDiedError
# ("killed by ray.kill ... cancelled before it started running"). A worker process that imports
# Serve can take longer than that on a busy 2-core machine: the test suite saw it in two full
# runs out of two. A local Ray started after ``patient_proxy_start`` inherits this default.
PROXY_READY_TIMEOUT_S = 60


def patient_proxy_start() -> None:
    """Give a Ray started from this process ``PROXY_READY_TIMEOUT_S`` for Serve's proxy to start
    (a value already set in the environment wins)."""
    os.environ.setdefault("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", str(PROXY_READY_TIMEOUT_S))


def trust_forwarded_from(proxies: tuple[str, ...]) -> None:
    """Give the local Ray started from this process the ``--forwarded-allow-ip`` setting, for
    its Serve proxy: a uvicorn of Ray's, which reads uvicorn's FORWARDED_ALLOW_IPS from its
    environment and by default believes X-Forwarded-For from loopback, so a client on this
    machine named its own address with each request and was never rate-limited (a review).
    Without the setting it believes no one, as ``tiankong serve`` does."""
    from tiankong.server.uvicorn_server import trusted_proxies

    os.environ["FORWARDED_ALLOW_IPS"] = ",".join(trusted_proxies(proxies) or [])


def serve_on_ray(settings: Settings, scale: ScaleOptions, address: str | None = None) -> None:
    """``tiankong serve --ray``: deploy on a new local Ray (or the cluster at ``address``) and
    serve until Ctrl-C or SIGTERM; then the application is deleted (and a local Ray stopped)."""
    import ray
    from ray import serve

    local = starts_local_ray(address)  # else: leave the cluster's Serve up
    application = build_application(settings, scale, proxied=not local)
    patient_proxy_start()
    if local:
        trust_forwarded_from(settings.forwarded_allow_ips)
    init_ray(address)  # from here SIGTERM is Ctrl-C (exit 130) until wait_for_stop's (exit 0)
    if local:  # a replica Ray can't place kept serve.run waiting forever
        try:
            cpus = float(ray.cluster_resources().get("CPU", 0.0))
            check_replicas_fit(max(1, scale.replicas), reserved_cpus(settings), cpus)
        except BaseException:
            ray.shutdown()
            raise
    try:
        serve.start(http_options={"host": settings.host, "port": settings.port})
        try:
            serve.run(application, name=APP_NAME, route_prefix="/")
        except RuntimeError:
            raise replica_error(serve.status()) from None
        where = f"http://{settings.host}:{settings.port}/"
        if not local:  # a Serve already running there keeps its own host and port
            where = f"the cluster's Serve proxy ({where} if this run started Serve there)"
        print(
            f"tiankong: {scale.replicas} replica(s) on Ray Serve; page and API at {where} "
            "(replica logs: Ray's session log folder)",
            file=sys.stderr,
            flush=True,
        )
        wait_for_stop()
    finally:
        # the application first, while the proxy still answers: its replicas finish what they
        # hold (up to --drain-timeout: graceful_shutdown_timeout_s); serve.shutdown() alone
        # took the proxy down with them, cutting off every request in flight (a review)
        from ray.serve.exceptions import RayServeException

        # stopped (SIGTERM, Ctrl-C) before Serve had started: no application to delete, and
        # its "no Serve instance" error was a traceback where exit 130 is due
        with contextlib.suppress(RayServeException):
            serve.delete(APP_NAME)
        if local:
            serve.shutdown()
        ray.shutdown()


# the last line of a replica's traceback in Ray's deployment status, where its constructor
# raised one of tiankong's errors
REPLICA_ERROR = re.compile(r"tiankong\.errors\.(\w+): ([^\n]+)")


def replica_error(status: Any) -> Exception:
    """The error a failed deployment's replicas raised, as tiankong's own (one sentence and its
    exit code, as ``tiankong serve`` without --ray gives), or a RuntimeError that says where
    Ray keeps the rest."""
    application = status.applications.get(APP_NAME)
    messages = [d.message for d in application.deployments.values()] if application else []
    for message in messages:
        found = REPLICA_ERROR.findall(message)
        if found:
            name, sentence = found[-1]
            kind = getattr(errors_module, name, None)
            if isinstance(kind, type) and issubclass(kind, TiankongError):
                return kind(sentence)
    return RuntimeError(
        "The replicas failed to start on Ray Serve; Ray's session log folder has their logs."
    )


def wait_for_stop() -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass
