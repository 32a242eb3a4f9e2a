"""Every error response has one shape: ``{"error": {"code": ..., "message": ...}}``.

Typed errors get their status from ``tiankong.errors``' table; FastAPI's validation errors
become ``InvalidRequestError`` (422) and an oversized body ``BodyTooLargeError`` (413), both
via the same table. Messages never carry a traceback, a file path or the offending input.
"""

from __future__ import annotations

import email.message
import logging
import re
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from tiankong.errors import (
    BadInputError,
    BodyTooLargeError,
    ClientTimeoutError,
    InvalidRequestError,
    OverloadedError,
    RangeNotSatisfiableError,
    TiankongError,
    UnsupportedMediaTypeError,
    mapping_for,
    new_error_id,
)
from tiankong.server.request_ids import request_id_of
from tiankong.server.state import server_state

CLIENT_CLOSED_REQUEST = 499  # nginx's "client closed request": recorded, never sent

logger = logging.getLogger("tiankong.server")
RETRY_AFTER_S = "1"


def error_body(code: str, message: str, error_id: str | None = None) -> dict[str, Any]:
    detail = {"code": code, "message": message}
    if error_id:  # server faults: the key to the traceback in the server log
        detail["error_id"] = error_id
    return {"error": detail}


def error_response(error: TiankongError, headers: dict[str, str] | None = None) -> JSONResponse:
    status = mapping_for(error).http_status
    if isinstance(error, RangeNotSatisfiableError):
        headers = {"Content-Range": f"bytes */{error.file_size}", **(headers or {})}
    if status == 503:
        wait_s = getattr(error, "retry_after_s", None)  # a full queue's, at the engine's pace
        headers = {"Retry-After": str(wait_s) if wait_s else RETRY_AFTER_S, **(headers or {})}
    return JSONResponse(
        error_body(error.code, error.message, error.error_id), status, headers=headers
    )


def body_too_large(limit: int) -> BodyTooLargeError:
    return BodyTooLargeError(f"The request body is larger than the {limit:,}-byte limit.")


def body_encoded(encoding: str) -> UnsupportedMediaTypeError:
    shown = encoding if encoding.isprintable() and len(encoding) <= 40 else "an encoding"
    return UnsupportedMediaTypeError(
        f"The body is sent with Content-Encoding {shown}, which this server does not decode; "
        "send it uncompressed."
    )


def body_too_slow(timeout_s: float) -> ClientTimeoutError:
    return ClientTimeoutError(
        f"The request body did not arrive within {timeout_s:g} s; send it in one go."
    )


def validation_error(errors: list[Any], content_type: str) -> BadInputError:
    """The error for the most specific problem FastAPI found in the request: a 415 for a body
    sent as another content type than JSON (``text/plain``, a form), else a 422 whose sentence
    names the problem. Of a union's
    errors (``inputs``: a text or a list of texts), the one that reached furthest into the
    value (``inputs.1`` for a list with a number in it, not the text branch's "a valid
    string"); the first of equals."""
    first: Mapping[str, Any] = max(errors, key=lambda error: len(error_location(error)), default={})
    kind = first.get("type", "")
    location = error_location(first)
    if kind == "json_invalid":
        return InvalidRequestError("The body is not valid JSON.")
    if kind in ("model_attributes_type", "dict_type") and not location:
        if not read_as_json(content_type):
            return UnsupportedMediaTypeError(
                "Send the body as JSON, with the header Content-Type: application/json."
            )
        return InvalidRequestError("The body must be a JSON object.")
    if kind == "missing" and not location:
        return InvalidRequestError("The request body is missing; send a JSON object.")
    field = ".".join(location) or "request"
    # a union's other branches failing the same value are not more problems (inputs, inputs.1)
    others = [
        error
        for error in errors
        if error is not first and location[: len(error_location(error))] != error_location(error)
    ]
    more = f" ({len(others)} more problem(s))" if others else ""
    # a validator's own sentence, without pydantic's "Value error, " before it
    said = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
    return InvalidRequestError(f"{field}: {said}{more}.")


def read_as_json(content_type: str) -> bool:
    """Whether FastAPI read the body as JSON, by its own rule (strict: a Content-Type of
    application/json or application/*+json, none otherwise). text/json was told "The body must
    be a JSON object." of a JSON object that FastAPI had never read (a review): that is a 415."""
    if not content_type.strip():
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


def error_location(error: Mapping[str, Any]) -> list[str]:
    """Field names and list indices; not "body", nor pydantic's union-member tags
    (``list[str]``, or a plain type's name: ``str`` in ``inputs: str | list[str]``)."""
    return [
        str(part)
        for part in error.get("loc", ())
        if part not in NOT_LOCATIONS and re.fullmatch(r"\w+", str(part))
    ]


NOT_LOCATIONS = frozenset({"body", "query", "str", "int", "float", "bool"})


async def handle_tiankong_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, TiankongError)
    return error_response(error)


async def handle_validation_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    content_type = request.headers.get("content-type", "")
    return error_response(validation_error(list(error.errors()), content_type))


async def handle_http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    if error.status_code == 413:
        return error_response(body_too_large(server_state(request).settings.max_body_bytes))
    if error.status_code == 408:  # raised by the body deadline (middleware/guard.py)
        timeout_s = server_state(request).settings.client_timeout_s
        return error_response(body_too_slow(timeout_s), {"Connection": "close"})
    if error.status_code == 400:  # FastAPI's "error parsing the body", from the parser's error
        if isinstance(error.__cause__, ClientDisconnect):
            # the client went before its body was all sent: nothing reaches it, and the
            # metrics record 499 as for one that goes later (it was counted as a 422)
            return Response(status_code=CLIENT_CLOSED_REQUEST)
        if isinstance(error.__cause__, RecursionError):  # it said "send UTF-8" for this too
            return error_response(
                InvalidRequestError("The body's JSON is nested too deeply to read; flatten it.")
            )
        if isinstance(error.__cause__, ValueError) and "digits" in str(error.__cause__):
            return error_response(  # Python's limit on an integer's digits, not the encoding
                InvalidRequestError("The body holds a number too long to read; send a short one.")
            )
        return error_response(
            InvalidRequestError("The request body could not be read; send UTF-8 encoded JSON.")
        )
    if error.status_code == 503:
        return error_response(OverloadedError("The server is busy; retry shortly."))
    phrase = HTTPStatus(error.status_code).phrase
    message = {404: "Not found; GET /docs lists the routes."}.get(error.status_code, phrase + ".")
    headers = error.headers
    if error.status_code == 405:
        allowed = allowed_methods(request, headers or {})
        message = f"{request.method} is not allowed on {request.url.path}; use {allowed}."
        headers = {**(headers or {}), "Allow": allowed}
    return JSONResponse(
        error_body(phrase.lower().replace(" ", "_").replace("-", "_"), message),
        error.status_code,
        headers=headers,
    )


def allowed_methods(request: Request, headers: Mapping[str, str]) -> str:
    """Every method the path answers: Starlette's Allow names only the first route that
    matched the path (POST for /predict, whose GET is another route; HEAD for /health), so
    the OpenAPI document's methods for the path are added to it, and HEAD beside a GET."""
    documented = request.app.openapi().get("paths", {}).get(request.url.path, {})
    methods = {method.upper() for method in documented}
    methods.update(part.strip() for part in headers.get("Allow", "").split(",") if part.strip())
    if "GET" in methods:  # every GET route answers HEAD (routes.py), outside the document
        methods.add("HEAD")
    return ", ".join(sorted(methods))


async def handle_unexpected_error(request: Request, error: Exception) -> JSONResponse:
    """A bug, never the user's fault: log it here, answer without internals."""
    error_id = new_error_id()
    request_id = request_id_of(request.scope)
    logger.error(
        "unhandled error %s on %s %s (request id %s)",
        error_id,
        request.method,
        request.url.path,
        request_id,
        exc_info=error,
    )
    message = f"An internal error occurred; error id {error_id} in the server log."
    # Starlette answers this outside the app's middleware, so the id header is set here
    headers = {"X-Request-ID": request_id} if request_id else None
    return JSONResponse(error_body("internal_error", message, error_id), 500, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(TiankongError, handle_tiankong_error)
    app.add_exception_handler(RequestValidationError, handle_validation_error)
    app.add_exception_handler(HTTPException, handle_http_error)
    app.add_exception_handler(Exception, handle_unexpected_error)
