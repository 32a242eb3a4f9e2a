"""`tiankong serve`: build Settings from flags (each with a TIANKONG_* twin) and run uvicorn.

The port is bound before the model loads, so a busy port fails in a second, and the model loads
before uvicorn starts, so a missing model is one sentence and exit code 3 (via cli.main and the
error table) instead of a startup traceback.
"""

from __future__ import annotations

import errno
import socket
from typing import Annotated

import typer

from tiankong.cli.predict import (
    DeviceOption,
    EngineOption,
    MaxLengthOption,
    ModelOption,
    OnnxCacheDirOption,
    PrecisionOption,
    ThreadsOption,
)
from tiankong.cli.root import app
from tiankong.config import Settings
from tiankong.errors import BadOptionError

LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


@app.command("serve")
def serve_command(
    model: ModelOption = None,
    host: Annotated[
        str | None,
        typer.Option(
            "--host", envvar="TIANKONG_HOST", help="Address to listen on (default 127.0.0.1)."
        ),
    ] = None,
    port: Annotated[
        int | None, typer.Option("--port", envvar="TIANKONG_PORT", help="TCP port (default 8000).")
    ] = None,
    engine: EngineOption = "auto",
    precision: PrecisionOption = "auto",
    device: DeviceOption = "auto",
    threads: ThreadsOption = None,
    max_length: MaxLengthOption = None,
    onnx_cache_dir: OnnxCacheDirOption = None,
    max_batch_texts: Annotated[
        int | None,
        typer.Option(
            "--max-batch-texts",
            envvar="TIANKONG_MAX_BATCH_TEXTS",
            help="Most texts per /batch_predict or HF request (default 64).",
        ),
    ] = None,
    max_body_bytes: Annotated[
        int | None,
        typer.Option(
            "--max-body-bytes",
            envvar="TIANKONG_MAX_BODY_BYTES",
            help="Largest request body; bigger ones get 413 (default 1000000).",
        ),
    ] = None,
    log_level: Annotated[
        str | None,
        typer.Option(
            "--log-level",
            envvar="TIANKONG_LOG_LEVEL",
            help=f"{', '.join(LOG_LEVELS)} (default info).",
        ),
    ] = None,
    warmup: Annotated[
        bool,
        typer.Option(
            "--warmup/--no-warmup",
            envvar="TIANKONG_WARMUP",
            help="Run one inference before /ready answers 200.",
        ),
    ] = True,
    batch_window_ms: Annotated[
        float | None,
        typer.Option(
            "--batch-window-ms",
            envvar="TIANKONG_BATCH_WINDOW_MS",
            help="Once the engine was busy, wait this long for a batch to fill (default 2; "
            "0 = never wait). A request to an idle engine runs at once.",
        ),
    ] = None,
    max_batch_size: Annotated[
        int | None,
        typer.Option(
            "--max-batch-size",
            envvar="TIANKONG_MAX_BATCH_SIZE",
            help="Most texts per engine call (default 32).",
        ),
    ] = None,
    max_batch_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-batch-tokens",
            envvar="TIANKONG_MAX_BATCH_TOKENS",
            help="Most padded tokens (texts x longest) per engine call (default 4096).",
        ),
    ] = None,
    max_queue: Annotated[
        int | None,
        typer.Option(
            "--max-queue",
            envvar="TIANKONG_MAX_QUEUE",
            help="Texts waiting for the engine before 503 + Retry-After (default 256).",
        ),
    ] = None,
    request_timeout: Annotated[
        float | None,
        typer.Option(
            "--request-timeout",
            envvar="TIANKONG_REQUEST_TIMEOUT",
            help="Seconds a request may queue and run before 504 (default 30).",
        ),
    ] = None,
    result_cache_size: Annotated[
        int | None,
        typer.Option(
            "--result-cache-size",
            envvar="TIANKONG_RESULT_CACHE_SIZE",
            help="Results of repeated identical requests kept (default 1024; 0 = off).",
        ),
    ] = None,
    token_cache_size: Annotated[
        int | None,
        typer.Option(
            "--token-cache-size",
            envvar="TIANKONG_TOKEN_CACHE_SIZE",
            help="Tokenized texts kept (default 4096; 0 = off).",
        ),
    ] = None,
    api_key: Annotated[
        list[str] | None,
        typer.Option(
            "--api-key",
            envvar="TIANKONG_API_KEYS",
            help="Require this API key (repeatable; the env twin takes a comma-separated list). "
            "Sent as 'Authorization: Bearer KEY' or 'X-API-Key: KEY'.",
        ),
    ] = None,
    api_keys_file: Annotated[
        str | None,
        typer.Option(
            "--api-keys-file",
            envvar="TIANKONG_API_KEYS_FILE",
            help="Require one of the API keys in this file (one a line, # comments).",
        ),
    ] = None,
    cors_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--cors-origin",
            envvar="TIANKONG_CORS_ORIGINS",
            help="Allow cross-origin requests from this origin (repeatable; the env twin takes "
            "a comma-separated list). Default: no CORS.",
        ),
    ] = None,
    rate_limit_per_minute: Annotated[
        int | None,
        typer.Option(
            "--rate-limit-per-minute",
            envvar="TIANKONG_RATE_LIMIT_PER_MINUTE",
            help="Requests a minute per API key (per client address without keys); over it, "
            "429 + Retry-After (default 0 = off).",
        ),
    ] = None,
    client_timeout: Annotated[
        float | None,
        typer.Option(
            "--client-timeout",
            envvar="TIANKONG_CLIENT_TIMEOUT",
            help="Seconds a client has to send a request's headers, and again its body "
            "(default 10).",
        ),
    ] = None,
    drain_timeout: Annotated[
        float | None,
        typer.Option(
            "--drain-timeout",
            envvar="TIANKONG_DRAIN_TIMEOUT",
            help="Seconds requests in flight get to finish after SIGTERM (default 10).",
        ),
    ] = None,
    ray: Annotated[
        bool,
        typer.Option("--ray", help="Serve on Ray Serve: replicas, dynamic batching, autoscaling."),
    ] = False,
    replicas: Annotated[
        int,
        typer.Option(
            "--replicas",
            envvar="TIANKONG_REPLICAS",
            help="With --ray: replicas, or the fewest when autoscaling (default 2).",
        ),
    ] = 2,
    max_replicas: Annotated[
        int | None,
        typer.Option(
            "--max-replicas",
            envvar="TIANKONG_MAX_REPLICAS",
            help="With --ray: autoscale between --replicas and this many replicas.",
        ),
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option("--ray-address", envvar="RAY_ADDRESS", help="Ray cluster (default: local)."),
    ] = None,
) -> None:
    """Serve the HTTP API, the Hugging Face-compatible route and the web page."""
    from tiankong.server import create_app
    from tiankong.server.middleware.security import load_api_keys
    from tiankong.server.uvicorn_server import run_server
    from tiankong.service import FillMasker
    from tiankong.serving.predictor import check_serving_settings

    settings = Settings().with_overrides(
        model=model,
        host=host,
        port=port,
        engine=engine,
        precision=precision,
        device=device,
        threads=threads,
        max_length=max_length,
        onnx_cache_dir=onnx_cache_dir,
        max_batch_texts=max_batch_texts,
        max_body_bytes=max_body_bytes,
        log_level=log_level.lower() if log_level else None,
        warmup=warmup,
        batch_window_ms=batch_window_ms,
        max_batch_size=max_batch_size,
        max_batch_tokens=max_batch_tokens,
        max_queue=max_queue,
        request_timeout_s=request_timeout,
        result_cache_size=result_cache_size,
        token_cache_size=token_cache_size,
        api_keys=split_list(api_key),
        api_keys_file=api_keys_file,
        cors_origins=split_list(cors_origin),
        rate_limit_per_minute=rate_limit_per_minute,
        client_timeout_s=client_timeout,
        drain_timeout_s=drain_timeout,
    )
    check_serving_settings(settings)  # a bad batching or cache flag: one sentence, no loading
    if settings.log_level not in LOG_LEVELS:
        raise BadOptionError(
            f"Unknown log level '{settings.log_level}'; use one of {', '.join(LOG_LEVELS)}."
        )
    check_timeouts(settings)
    load_api_keys(settings)  # an unreadable or empty keys file: one sentence, before loading
    if ray:
        serve_with_ray(settings, threads, replicas, max_replicas, ray_address)
        return
    listener = bind(settings.host, settings.port)
    masker = FillMasker.load(settings=settings)
    app = create_app(settings, masker)
    typer.echo(
        f"tiankong: model {masker.model.name} on {masker.engine.name}/{masker.engine.device}; "
        f"page and API at http://{settings.host}:{listener.getsockname()[1]}/"
        + ("; API keys required" if settings.api_keys or settings.api_keys_file else ""),
        err=True,
    )
    quality = getattr(masker.engine, "quality", None)
    if quality:  # the INT8 guard's decision: said once here, and in /info, never by the CLI
        from tiankong.engines.onnx_engine import guard_line

        typer.echo(
            f"tiankong: {guard_line(masker.model.name, quality, masker.engine.precision)}",
            err=True,
        )
    run_server(app, settings, listener)


def split_list(values: list[str] | None) -> tuple[str, ...] | None:
    """Repeated flags, or an env twin's comma-separated list, as one tuple."""
    if not values:
        return None
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


def check_timeouts(settings: Settings) -> None:
    for flag, value in (
        ("--client-timeout", settings.client_timeout_s),
        ("--drain-timeout", settings.drain_timeout_s),
    ):
        if not value > 0:
            raise BadOptionError(f"{flag} must be more than 0 seconds; got {value:g}.")
    if settings.rate_limit_per_minute < 0:
        raise BadOptionError("--rate-limit-per-minute must be 0 (off) or more.")


def serve_with_ray(
    settings: Settings,
    threads: int | None,
    replicas: int,
    max_replicas: int | None,
    address: str | None,
) -> None:
    """``--ray``: threads are per replica (default: the cores shared by the most replicas)."""
    from tiankong.core.models import resolve_model
    from tiankong.server.ray_serve import ScaleOptions, replica_threads, serve_on_ray

    scale = ScaleOptions(replicas=replicas, max_replicas=max_replicas).checked()
    if threads is None:
        settings = settings.with_overrides(threads=replica_threads(scale))
    if address is None:  # a local Ray: a busy port or a missing model is one sentence now
        bind(settings.host, settings.port).close()
        resolve_model(settings.model)
    serve_on_ray(settings, scale, address)


def bind(host: str, port: int) -> socket.socket:
    """Claim ``host:port`` now (uvicorn listens on it later), or say in one sentence why not."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as error:
        listener.close()
        if error.errno == errno.EADDRINUSE:
            raise BadOptionError(
                f"Port {port} on {host} is already in use; stop the other server or choose "
                "another port with --port."
            ) from None
        raise BadOptionError(
            f"Cannot listen on {host}:{port} ({error.strerror}); check --host and --port."
        ) from None
    return listener
