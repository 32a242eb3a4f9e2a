"""413 for request bodies over ``max_body_bytes``, in the one error shape.

A declared Content-Length over the limit is refused before the app runs; a body without one
(chunked) is counted as it streams and stopped as soon as it passes the limit. Starlette's own
limiter answers a declared oversize body in plain text, whatever the app's handlers say, hence
this small middleware.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tiankong.server.error_handlers import body_too_large, error_response


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.limit = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.limit:
            await error_response(body_too_large(self.limit))(scope, receive, send)
            return
        received = 0

        async def receive_within_limit() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    # FastAPI passes an HTTPException raised while reading the body straight to
                    # the handlers, which answer it from the error table.
                    raise HTTPException(413)
            return message

        await self.app(scope, receive_within_limit, send)
