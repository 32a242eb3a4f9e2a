"""The inference routes' handler: FastAPI's own for every request, except a well-formed JSON body.

FastAPI's request handler does a great deal per request that a valid inference request never
needs: it parses the content type with ``email.message``, solves the dependency tree (reading
the cookies and query string on the way), builds a sub-response for headers and background
tasks, and records telemetry. In-process (``POST /predict`` through the ASGI app, no sockets,
the fake engine) that was about 90 µs of a 600 µs request (docs/PERFORMANCE.md, "The request
path near the floor").

``ServingRoute`` answers the plain case itself: a route whose only inputs are one JSON body model
and the ``ServingDep`` dependency, a request whose ``Content-Type`` is exactly
``application/json`` and whose body parses (``json.loads``, as Starlette's ``Request.json``)
and validates against the route's body field (``ModelField.validate``, as FastAPI calls it).
Everything else -- another content type, an empty or broken body, a validation error, dependency
overrides, OpenTelemetry's request data -- goes to FastAPI's own handler, which reads the same
cached body and raises exactly the error it always did. So the errors, their order and their
one JSON shape (``error_handlers.py``) are FastAPI's by construction; the OpenAPI document is
the route's own.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Coroutine
from typing import Any

import fastapi.routing
from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException  # the class FastAPI's handler re-raises

from tiankong.server.deps import serving_now, serving_of

# FastAPI 0.165 and later: the request's telemetry data, when OpenTelemetry is on
telemetry_data: Callable[[], object] | None
try:
    from fastapi.telemetry import get_telemetry_data as telemetry_data
except ImportError:  # pragma: no cover - older FastAPI records none
    telemetry_data = None


JSON_TYPE = "application/json"
Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class ServingRoute(APIRoute):
    """An ``APIRoute`` whose plain JSON requests skip FastAPI's generic handler (module doc)."""

    def get_route_handler(self) -> Handler:
        standard = super().get_route_handler()
        route = effective_route(self)
        names = serving_inputs(route)
        if names is None:
            return standard
        body_name, serving_name = names
        [body_field] = route.dependant.body_params
        endpoint = route.dependant.call
        assert endpoint is not None  # serving_inputs checked it

        async def handler(request: Request) -> Response:
            if (
                request.headers.get("content-type") != JSON_TYPE
                or request.app.dependency_overrides
                or (telemetry_data is not None and telemetry_data() is not None)
            ):
                return await standard(request)
            try:
                raw = await request.body()
            except HTTPException:  # the body limit's 413, the body deadline's 408: as FastAPI
                raise
            except Exception:  # the client went away mid-body...: FastAPI's own answer
                return await standard(request)
            try:
                value = json.loads(raw) if raw else None
            except Exception:  # not JSON, not UTF-8, nested too deep: FastAPI's own error
                return await standard(request)
            body, errors = body_field.validate(value, {}, loc=("body",))
            if errors:
                return await standard(request)
            response = await endpoint(**{body_name: body, serving_name: serving_now(request)})
            if not isinstance(response, Response):
                raise TypeError(f"{self.path} must return a Response on a ServingRoute")
            return response

        return handler


def effective_route(route: APIRoute) -> Any:
    """The route as FastAPI's own ``get_route_handler`` builds it: under ``include_router`` on
    FastAPI 0.165 and later, the included copy, which carries the dependencies and prefix the
    include added (an API key check added there must run on every request); else the route."""
    context_var = getattr(fastapi.routing, "_effective_route_context_var", None)
    context = context_var.get() if context_var is not None else None
    if context is not None and getattr(context, "original_route", None) is route:
        return context
    return route


def serving_inputs(route: Any) -> tuple[str, str] | None:
    """The endpoint's body and ``ServingDep`` parameter names, when those are its only inputs
    and it is a coroutine; None: the route keeps FastAPI's handler. ``route``: an ``APIRoute``,
    or the included copy ``effective_route`` found."""
    dependant = getattr(route, "dependant", None)
    if dependant is None or getattr(route, "body_field", None) is None:
        return None
    others = (
        dependant.path_params,
        dependant.query_params,
        dependant.header_params,
        dependant.cookie_params,
    )
    special = (
        dependant.request_param_name,
        dependant.websocket_param_name,
        dependant.http_connection_param_name,
        dependant.response_param_name,
        dependant.background_tasks_param_name,
        dependant.security_scopes_param_name,
    )
    if any(others) or any(name is not None for name in special):
        return None
    if len(dependant.body_params) != 1 or len(dependant.dependencies) != 1:
        return None
    [serving] = dependant.dependencies
    if serving.call is not serving_of or serving.name is None or serving.dependencies:
        return None
    if route.body_field is not dependant.body_params[0]:  # embedded: FastAPI's own shape
        return None
    if not inspect.iscoroutinefunction(dependant.call):
        return None
    return dependant.body_params[0].name, serving.name
