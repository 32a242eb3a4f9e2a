"""``create_app``: the FastAPI application for one Settings (and optionally a loaded model).

>>> from tiankong import Settings
>>> from tiankong.server import create_app
>>> app = create_app(Settings(model="tiankong-mini-zh"))   # the model loads in lifespan
>>> # uvicorn.run(app, host="127.0.0.1", port=8000)          # or: tiankong serve

The model loads once in lifespan (unless a FillMasker is passed in, as ``tiankong serve`` and the
tests do), the dynamic batcher starts, a warm-up inference runs, what startup built is frozen out
of the garbage collector's way (``heap_frozen``), and only then does GET /ready answer 200. At
shutdown the batcher refuses new work (503) and drains what is queued. Everything the app holds
lives on ``app.state.tiankong`` (a ServerState); the freeze is its one effect on the process.
"""

from __future__ import annotations

import gc
import importlib.util
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import Headers
from starlette.staticfiles import NotModifiedResponse

from tiankong import __version__
from tiankong.config import Settings, check_settings
from tiankong.server import check_routes, hf, routes
from tiankong.server.error_handlers import install_error_handlers
from tiankong.server.metrics import INFERENCE_ROUTES, ServerMetrics
from tiankong.server.middleware.guard import DOCS_ASSETS_PATH, STATIC_PATH, RequestGuard
from tiankong.server.middleware.hosts import host_check
from tiankong.server.middleware.security import cors_layer, is_public, security_layer
from tiankong.server.responses import RangedFile
from tiankong.server.schemas import ERROR_RESPONSES
from tiankong.server.state import ServerState
from tiankong.service import FillMasker
from tiankong.serving.checking import CheckServing
from tiankong.serving.predictor import Predictor, SchedulerFactory

logger = logging.getLogger("tiankong.server")
ROUTERS = (routes.router, hf.router, check_routes.router)  # the API's routes, in this order
DESCRIPTION = """Chinese fill-in-the-blank ([MASK] completion) with BERT masked language models.

* `POST /predict`, `GET /predict`, `POST /batch_predict`: tiankong's own API.
* `POST /check`, `POST /batch_check`: proofreading (校对): wrong characters and their fixes.
* `POST /`: Hugging Face Inference API compatible fill-mask (`InferenceClient.fill_mask`).
* Errors always look like `{"error": {"code": "no_mask", "message": "..."}}`.
"""


def create_app(
    settings: Settings,
    masker: FillMasker | None = None,
    scheduler: SchedulerFactory | None = None,
    proxied: bool = False,
) -> FastAPI:
    """Build the app. With ``masker=None`` the model in ``settings`` loads during startup.
    ``scheduler`` replaces the dynamic batcher (Ray Serve replicas pass one that wraps it).
    ``proxied``: another server listens, not at ``settings.host`` (Ray Serve's proxy under
    ``serve run``), so the Host guard checks only the names ``--allowed-host`` gives."""
    check_settings(settings)  # bad batcher or cache settings fail here, not at startup
    state = ServerState(settings=settings, metrics=ServerMetrics(), masker=masker)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        masker = state.masker
        if masker is None:
            masker = state.masker = await anyio.to_thread.run_sync(load_masker, settings)
        index = masker.index
        logger.info("corpus index: %s (--index %s: %s)", index.used, index.setting, index.reason)
        # the requests in flight besides the one asking: none lets a lone request run inline
        predictor = Predictor(
            masker, settings, state.metrics, scheduler, company=lambda: state.drain.in_flight - 1
        )
        await predictor.start()
        checking = CheckServing(predictor)
        try:
            if settings.warmup:
                await predictor.warm_up()
                await checking.warm_up()
            state.checking = checking
            state.predictor = predictor
            with heap_frozen():
                yield
        finally:
            # new requests get 503 shutting_down; queued ones finish; after a drain, the wait
            # for a running engine call ends before the watchdog would (Drain.close_wait)
            await predictor.close(state.drain.close_wait(settings.drain_timeout_s))
            checking.close()
            state.predictor = state.checking = None

    app = FastAPI(
        title="tiankong (填空)",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served below from local assets, so /docs works offline
        redoc_url=None,  # FastAPI's ReDoc page loads its script and fonts from CDNs
        # /predict/ is a 404 in the JSON shape: Starlette's 307 to the other spelling had no
        # body and put the client's Host header, over http://, in its Location
        redirect_slashes=False,
    )
    app.state.tiankong = state
    install_error_handlers(app)
    app.add_middleware(  # metrics, drain, body limit and deadline, disconnects: one layer
        RequestGuard,
        metrics=state.metrics,
        drain=state.drain,
        max_body_bytes=settings.max_body_bytes,
        client_timeout_s=settings.client_timeout_s,
        cors=cors_layer(settings),
        security=security_layer(settings),  # API keys and rate limit, before any body is read
        hosts=host_check(settings, proxied),  # the DNS-rebinding guard, before anything else
        known_paths=frozenset(
            [
                *(
                    route.path
                    for router in ROUTERS
                    for route in router.routes
                    if isinstance(route, APIRoute) and "{" not in route.path
                ),
                "/openapi.json",  # FastAPI's own route, which sets no route in the scope
            ]
        ),
    )
    for router in ROUTERS:
        app.include_router(router)
    app.mount(STATIC_PATH, RevalidatedFiles(directory=routes.STATIC_DIR), name="static")
    add_docs(app)
    declare_headers(app, settings)
    if settings.api_keys or settings.api_keys_file:
        declare_api_keys(app, rate_limited=settings.rate_limit_per_minute > 0)
    return app


def declare_limits(schema: dict[str, Any], settings: Settings) -> None:
    """top_k's range and the texts a batch may hold, wherever the document has them."""
    top_k = {"minimum": 1, "maximum": settings.max_top_k}
    for model in schema.get("components", {}).get("schemas", {}).values():
        properties = model.get("properties", {})
        if "top_k" in properties:
            properties["top_k"].update(top_k)
        if "texts" in properties:  # the description too: it said 64 where 3 were served
            properties["texts"]["maxItems"] = settings.max_batch_texts
            properties["texts"]["description"] = f"Up to {settings.max_batch_texts} texts."
    for operations in schema["paths"].values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if parameter.get("name") == "top_k":
                    parameter.setdefault("schema", {}).update(top_k)


ERROR_SCHEMA = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}
HEADERS: dict[str, dict[str, Any]] = {
    "X-Request-ID": {
        "description": "The request's id: the client's X-Request-ID when it is 1 to 128 visible "
        "ASCII characters, else one made by the server; the access log names it.",
        "schema": {"type": "string"},
    },
    "Retry-After": {
        "description": "Seconds to wait before trying again.",
        "schema": {"type": "integer"},
    },
    "Server-Timing": {
        "description": "queue, engine and total milliseconds of this request.",
        "schema": {"type": "string"},
    },
}
ANY_ROUTE_ERRORS = {  # what any route may answer, whatever its own list says
    "415": "The body is not sent as JSON: another Content-Type, or compressed (a "
    "Content-Encoding); send it as application/json, uncompressed.",
    "414": "The URL is longer than 65,535 bytes (url_too_long); send a long text by POST.",
    "431": "The request head is larger than 1 MiB.",
    "500": "A fault of the server itself (engine_error, internal_error); error_id finds the "
    "traceback in the server log.",
    "503": "The server is shutting down (every route but /health), or busy or loading where "
    "the route says so; Retry-After says when to come back.",
}


def declare_headers(app: FastAPI, settings: Settings) -> None:
    """The OpenAPI document names the headers the guard adds (``X-Request-ID`` on every answer,
    ``Server-Timing`` on a filled one, ``Retry-After`` on a 429 or 503), the statuses any
    route may answer, and the limits this server's settings set (top_k, texts a batch), so a
    client generated from it knows them."""
    plain = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = plain()
            declare_limits(schema, settings)
            for path, operations in schema["paths"].items():
                for method, operation in operations.items():
                    responses = operation["responses"]
                    for status, description in ANY_ROUTE_ERRORS.items():
                        if status != "503" or path != "/health":
                            responses.setdefault(
                                status, {"description": description, "content": ERROR_SCHEMA}
                            )
                    for status, response in responses.items():
                        named = response.setdefault("headers", {})
                        named["X-Request-ID"] = HEADERS["X-Request-ID"]
                        if status in ("429", "503"):
                            named["Retry-After"] = HEADERS["Retry-After"]
                        if status == "200" and (method.upper(), path) in INFERENCE_ROUTES:
                            named["Server-Timing"] = HEADERS["Server-Timing"]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


UNAUTHORISED = {
    "description": ERROR_RESPONSES[401]["description"],
    "content": ERROR_SCHEMA,
    "headers": {"X-Request-ID": HEADERS["X-Request-ID"]},
}


OVER_THE_LIMIT = {
    "description": ERROR_RESPONSES[429]["description"],
    "content": ERROR_SCHEMA,
    "headers": {"X-Request-ID": HEADERS["X-Request-ID"], "Retry-After": HEADERS["Retry-After"]},
}


def declare_api_keys(app: FastAPI, rate_limited: bool = False) -> None:
    """With API keys on, the OpenAPI document says so: the two ways a key may be sent, asked of
    every operation but the public ones, so that /docs offers to send one ("Authorize"). Every
    such operation may answer 401, and with a rate limit 429 too: /info and /metrics to a
    request without a valid key, which spends its address's allowance
    (``security.UNPRICED_PATHS``; the document named 429 for the inference routes only)."""
    schemes = {
        "bearer": {"type": "http", "scheme": "bearer"},
        "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
    }
    plain = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = plain()
            schema.setdefault("components", {})["securitySchemes"] = schemes
            for path, operations in schema["paths"].items():
                for method, operation in operations.items():
                    if not is_public(method.upper(), path):
                        operation["security"] = [{name: []} for name in schemes]
                        # every guarded route may answer 401, /info and /metrics too
                        operation["responses"].setdefault("401", UNAUTHORISED)
                        if rate_limited:
                            operation["responses"].setdefault("429", OVER_THE_LIMIT)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


@contextmanager
def heap_frozen() -> Iterator[None]:
    """While the app serves, what startup left on the heap (the model, the tokenizer, the
    libraries' modules) sits in the garbage collector's permanent generation (``gc.freeze``), so
    the full collections that requests' allocations trigger walk only what serving made, not the
    whole heap (docs/PERFORMANCE.md, "The thirteenth session", has the measurement). Garbage is
    collected first, so none is kept for good.

    The freeze is the process's, not the app's: an app freezes only where nothing is frozen yet
    (another app of the process, or a program embedding it, may have frozen its own heap) and
    unfreezes at shutdown only what it froze. A frozen object is never collected as part of a
    reference cycle, so anything that replaces what startup built (a model reloaded in place,
    say) must unfreeze first."""
    freezing = not gc.get_freeze_count()
    if freezing:
        gc.collect()
        gc.freeze()
    try:
        yield
    finally:
        if freezing:
            gc.unfreeze()


def load_masker(settings: Settings) -> FillMasker:
    return FillMasker.load(settings=settings)


class RevalidatedFiles(StaticFiles):
    """The page's own modules, asked for again (with their ETag) on every load, as the page is
    (``routes.PAGE_HEADERS``): without a Cache-Control a browser could keep an old app.js
    beside a new index.html after an upgrade. A Range header it can't serve is an error in the
    one JSON shape (``RangedFile``)."""

    def file_response(
        self, full_path: Any, stat_result: Any, scope: Any, status_code: int = 200
    ) -> Response:
        response: Response = RangedFile(full_path, status_code=status_code, stat_result=stat_result)
        if self.is_not_modified(response.headers, Headers(scope=scope)):
            response = NotModifiedResponse(response.headers)
        response.headers.setdefault("Cache-Control", "no-cache")
        return response


def add_docs(app: FastAPI) -> None:
    """Swagger UI at /docs, from the swagger-ui-bundle package when it is installed (offline),
    else from FastAPI's default CDN."""
    assets = swagger_assets()
    if assets is not None:
        app.mount(DOCS_ASSETS_PATH, StaticFiles(directory=assets), name="docs-assets")

    @app.api_route("/docs", methods=["GET", "HEAD"], include_in_schema=False)  # HEAD: its Allow
    async def docs() -> HTMLResponse:
        if assets is None:
            page = get_swagger_ui_html(openapi_url="/openapi.json", title=app.title)
        else:
            page = get_swagger_ui_html(
                openapi_url="/openapi.json",
                title=app.title,
                swagger_js_url="/docs-assets/swagger-ui-bundle.js",
                swagger_css_url="/docs-assets/swagger-ui.css",
                swagger_favicon_url="/docs-assets/favicon-32x32.png",
            )
        # never inside another site's frame (its inline script rules out a stricter policy)
        page.headers["Content-Security-Policy"] = "frame-ancestors 'none'"
        return page


def swagger_assets() -> Path | None:
    if importlib.util.find_spec("swagger_ui_bundle") is None:
        return None
    import swagger_ui_bundle

    path = Path(swagger_ui_bundle.swagger_ui_path)
    return path if (path / "swagger-ui-bundle.js").is_file() else None
