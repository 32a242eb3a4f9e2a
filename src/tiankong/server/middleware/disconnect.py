"""Cancel a request's handler when its client goes away, so its queued texts never run.

Neither Starlette nor uvicorn cancels a handler whose client has disconnected: the handler would
wait for the engine and answer no one. This middleware listens for ``http.disconnect`` once the
request body has been read (at once for a request without a body), and cancels the handler.
The cancellation reaches ``DynamicBatcher.submit_many``, which cancels the request's futures,
and the batcher drops cancelled items before they run. The response status recorded for such a
request is 499 ("client closed request", as nginx logs it); nothing is sent, the client is gone.
"""

from __future__ import annotations

import anyio
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CLIENT_CLOSED_REQUEST = 499


def has_body(scope: Scope) -> bool:
    headers = Headers(scope=scope)
    length = headers.get("content-length", "")
    return "transfer-encoding" in headers or (length.isdigit() and int(length) > 0)


class DisconnectMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body_read = not has_body(scope)
        empty_body_given = False
        response_started = False
        response_done = False
        client_gone = anyio.Event()
        app_error: Exception | None = None

        async with anyio.create_task_group() as task_group:

            async def watch() -> None:
                """Own ``receive`` once the app has its body; cancel the app on disconnect."""
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        if not response_done:
                            client_gone.set()
                            task_group.cancel_scope.cancel()
                        return

            async def app_receive() -> Message:
                nonlocal body_read, empty_body_given
                if not body_read:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return message
                    if not message.get("more_body", False):
                        body_read = True
                        task_group.start_soon(watch)
                    return message
                if not empty_body_given and not has_body(scope):
                    empty_body_given = True
                    return {"type": "http.request", "body": b"", "more_body": False}
                await client_gone.wait()  # the watcher owns receive now
                return {"type": "http.disconnect"}

            async def app_send(message: Message) -> None:
                nonlocal response_started, response_done
                if message["type"] == "http.response.start":
                    response_started = True
                elif message["type"] == "http.response.body" and not message.get("more_body"):
                    response_done = True
                await send(message)

            if body_read:
                task_group.start_soon(watch)
            try:
                await self.app(scope, app_receive, app_send)
            except Exception as error:  # re-raised below as itself, not in an ExceptionGroup
                app_error = error
            response_done = True
            task_group.cancel_scope.cancel()  # the app is done: stop watching

        if app_error is not None:
            raise app_error
        if client_gone.is_set() and not response_started:
            # Nothing reaches the client; this lets the metrics record what happened.
            await send({"type": "http.response.start", "status": CLIENT_CLOSED_REQUEST})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
