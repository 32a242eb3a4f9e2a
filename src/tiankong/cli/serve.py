"""`tiankong serve`: Settings from its flags (generated from config.py's table) and uvicorn.

The port is bound before the model loads, so a busy port fails in a second, and the model loads
before uvicorn starts, so a missing model is one sentence and exit code 3 (via cli.main and the
error table) instead of a startup traceback.
"""

from __future__ import annotations

import errno
import os
import socket
from typing import TYPE_CHECKING, Annotated

import typer

from tiankong.cli.options import ALL_FLAGS, refuse_without_ray, settings_flags
from tiankong.cli.root import app
from tiankong.config import ScaleOptions, Settings, check_blank_secrets
from tiankong.errors import BadOptionError
from tiankong.host import require
from tiankong.offline.ray_cluster import starts_local_ray

if TYPE_CHECKING:
    from tiankong.core.models import ResolvedModel


@app.command("serve")
@settings_flags
def serve_command(
    settings: Settings = ALL_FLAGS,  # every Settings row's flag (config.py), in table order
    ray: Annotated[
        bool,
        typer.Option("--ray", help="Serve on Ray Serve: replicas, dynamic batching, autoscaling."),
    ] = False,
    scale: ScaleOptions = ALL_FLAGS,  # --replicas, --max-replicas
    ray_address: Annotated[
        str | None,
        typer.Option("--ray-address", envvar="RAY_ADDRESS", help="Ray cluster (default: local)."),
    ] = None,
    given: frozenset[str] = frozenset(),
    typed: frozenset[str] = frozenset(),
) -> None:
    """Serve the HTTP API, the Hugging Face-compatible route and the web page."""
    require("serving", ("fastapi", "uvicorn"), "tiankong serve")  # not a ModuleNotFoundError
    from tiankong.server import create_app
    from tiankong.server.middleware.security import load_api_keys
    from tiankong.server.uvicorn_server import run_server, show_logs
    from tiankong.service import FillMasker

    # a bad flag was refused in one sentence when the flags were read (cli/options.py); click
    # reads a blank env twin as unset, but a blank secret (TIANKONG_API_KEYS=) is refused
    check_blank_secrets(os.environ)
    refuse_without_ray(ray, typed)
    if ray and settings.forwarded_allow_ips and not starts_local_ray(ray_address):
        # a cluster's Serve proxy is its own uvicorn, which reads X-Forwarded-For by its own
        # environment; the local Ray this command starts is given the setting (ray_serve.py)
        raise BadOptionError(
            "--forwarded-allow-ip (TIANKONG_FORWARDED_ALLOW_IPS) applies with --ray only to the "
            "local Ray this command starts: a cluster's Serve proxy believes X-Forwarded-For "
            "from the addresses in its own FORWARDED_ALLOW_IPS; set it there, or leave this out."
        )
    load_api_keys(settings)  # an unreadable or empty keys file: one sentence, before loading
    if ray:
        serve_with_ray(settings, scale, "threads" in given, ray_address)
        return
    listener = bind(settings.host, settings.port)
    try:
        masker = FillMasker.load(settings=settings)
        app = create_app(settings, masker)
    except BaseException:
        listener.close()  # listening, it held the port past a refusal (the library's callers)
        raise
    typer.echo(
        f"tiankong: model {masker.model.name} on {masker.engine.name}/{masker.engine.device} "
        f"({masker.engine.precision}, {threads_said(settings.threads)}); page and API at "
        f"{page_url(settings.host, listener.getsockname()[1])}"
        + ("; API keys required" if settings.api_keys or settings.api_keys_file else ""),
        err=True,
    )
    quality = getattr(masker.engine, "quality", None) or {}
    # the INT8 guard's and --precision auto's decisions: said once here, and in /info, never
    # by the CLI
    if "top1_agreement" in quality:
        from tiankong.engines.onnx_engine import guard_line
        from tiankong.engines.split import served_text

        served = served_text(masker.engine)
        typer.echo(f"tiankong: {guard_line(masker.model.name, quality, served)}", err=True)
    if "choice" in quality:
        from tiankong.engines import choice_line

        typer.echo(f"tiankong: {choice_line(masker.model.name, quality['choice'])}", err=True)
    show_logs(settings.log_level)  # from here: the load's decisions were said above, once
    run_server(app, settings, listener)


def serve_with_ray(
    settings: Settings, scale: ScaleOptions, threads_given: bool, address: str | None
) -> None:
    """``--ray``: threads are per replica (default: the cores shared by the most replicas)."""
    from tiankong.model_sources import resolve_model
    from tiankong.server.ray_serve import replica_threads, serve_on_ray
    from tiankong.service import check_window

    scale = scale.checked()
    if not threads_given:
        settings = settings.with_overrides(threads=replica_threads(scale))
    # a local Ray: a busy port, a missing model, a window longer than the model's or an index
    # it can't use is one sentence now, as without --ray (each replica failed with a traceback)
    if address is None:
        bind(settings.host, settings.port).close()
        model = resolve_model(settings.model)
        check_window(model, settings.max_length)
        check_index(settings, model)
    serve_on_ray(settings, scale, address)


def check_index(settings: Settings, model: ResolvedModel) -> None:
    """Open the index ``--index`` names for ``model`` as a replica will (``choose_memory``, the
    check ``tiankong serve`` without --ray makes as it loads): a missing, foreign or mismatched
    index is a typed error here."""
    from tiankong.core.text import TextEncoder, TextLimits
    from tiankong.index.grounding import choose_memory

    limits = TextLimits(settings.max_masks, settings.max_length, settings.max_text_chars)
    choose_memory(settings.index, model, TextEncoder.from_folder(model.path, limits).tokenizer)


def bind(host: str, port: int) -> socket.socket:
    """Claim ``host:port`` now, listening, or say in one sentence why not. Bound alone, it
    claimed nothing: two servers started together each bound the port (SO_REUSEADDR lets
    sockets that don't listen share it), and the second, its socket refused by uvicorn's loop
    without a word, said it had started and never served (a review). Connections made while the
    model loads wait in the queue until it serves."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
        listener.listen()
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


def page_url(host: str, port: int) -> str:
    """The startup line's address: an IPv6 host bracketed (http://::1:8000/ is no URL).

    >>> page_url("::1", 8000), page_url("127.0.0.1", 8000)
    ('http://[::1]:8000/', 'http://127.0.0.1:8000/')
    """
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def threads_said(threads: int) -> str:
    """The startup line's threads (0: the engine's own choice, ``--threads 0``)."""
    if threads == 0:
        return "the engine's own thread count"
    return f"{threads} thread" + ("s" if threads != 1 else "")
