"""Optional API keys, per-client rate limiting and CORS.

With API keys set (``--api-key``, ``--api-keys-file``, ``TIANKONG_API_KEYS``), every request
except the public paths must carry one of them, as ``Authorization: Bearer <key>`` (what the
Hugging Face client sends) or ``X-API-Key: <key>``; anything else is a 401 with
``WWW-Authenticate: Bearer``. Keys are compared in constant time: the SHA-256 of the given key
is checked with ``hmac.compare_digest`` against that of every key, with no early exit, so
neither a key's content nor its length shows in the timing.

Public, whatever the keys: ``/health`` and ``/ready`` (probes must not need a secret, and say
nothing but up/ready) and the static shell that is the same on every install: the page
(``GET /``), its ``/static/`` assets, and the API docs (``/docs``, ``/docs-assets/``,
``/openapi.json``). The page asks for a key and sends it as a bearer token. Everything that
runs the model or shows the server's state (``POST /``, ``/predict``, ``/batch_predict``,
``/info``, ``/metrics``) and every unknown path needs a key.

With ``rate_limit_per_minute`` set, each key (or each client address when keys are off) gets
that many forward rows a minute on the non-public paths (a plain text is one; a request is let
in while a token is left, and the route debits the rest of its cost: ``Allowance``); past it,
429 with ``Retry-After``. ``/info`` and ``/metrics`` run no forward rows and spend none
(``UNPRICED_PATHS``). A request without a valid key counts against its address, whatever its
path, so keys can't be guessed at speed.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from tiankong.config import Settings, api_key_problem
from tiankong.errors import (
    BadInputError,
    BadOptionError,
    RateLimitedError,
    UnauthorizedError,
)
from tiankong.server.error_handlers import error_response
from tiankong.server.middleware.rate_limit import RateLimiter

Layer = Callable[[ASGIApp], ASGIApp]  # a middleware, given the app it wraps
ALLOWANCE_KEY = "tiankong_allowance"  # the request's Allowance, in the ASGI scope's state
PUBLIC_PATHS = frozenset({"/health", "/ready", "/docs", "/openapi.json"})
PUBLIC_PREFIXES = ("/static/", "/docs-assets/")
PAGE_METHODS = frozenset({"GET", "HEAD"})  # POST / is the Hugging Face API, not the page


# Paths that run no forward rows: they need a key, and spend no allowance of a client whose key
# matched (or of any client, with keys off). The page polls /info; the rate limit is counted in
# forward rows, and a poll took one, so a page user got about half the allowance asked for.
UNPRICED_PATHS = frozenset({"/info", "/metrics"})


def is_public(method: str, path: str) -> bool:
    if path == "/":
        return method in PAGE_METHODS
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


def load_api_keys(settings: Settings) -> tuple[str, ...]:
    """The keys from ``settings.api_keys`` (checked with the settings: ``config.api_key_problem``)
    and the keys file (one a line; blank lines and ``#`` comments skipped, each line held to the
    same rule). A keys file that can't be read, or holds no key, is an error: a server meant to
    be locked never starts open."""
    keys = [key.strip() for key in settings.api_keys]
    if settings.api_keys_file:
        path = Path(settings.api_keys_file)
        try:  # utf-8-sig: a BOM (Notepad's) refused the whole file as a key of odd bytes
            lines = path.read_text(encoding="utf-8-sig").splitlines()
        except (OSError, UnicodeDecodeError) as error:
            reason = getattr(error, "strerror", None) or type(error).__name__
            raise BadOptionError(
                f"Cannot read the API keys file {settings.api_keys_file} ({reason})."
            ) from None
        from_file = []
        for number, line in enumerate(lines, start=1):
            key = line.strip()
            if not key or key.startswith("#"):
                continue
            problem = api_key_problem(key)
            if problem is not None:  # the rule's sentence named no file or line (a review)
                raise BadOptionError(
                    f"{settings.api_keys_file}, line {number}: {problem.rstrip('.')}; a comment "
                    "is a line of its own, starting with #."
                )
            from_file.append(key)
        if not from_file:
            raise BadOptionError(f"The API keys file {settings.api_keys_file} holds no key.")
        keys.extend(from_file)
    return tuple(dict.fromkeys(keys))


class KeyRing:
    """Finds which key (by index) a request carries, in constant time."""

    def __init__(self, keys: Iterable[str]) -> None:
        self.digests = [hashlib.sha256(key.encode()).digest() for key in keys]

    def match(self, given: str) -> int | None:
        given_digest = hashlib.sha256(given.encode("latin-1")).digest()  # the header's bytes
        found: int | None = None
        for index, digest in enumerate(self.digests):  # no early exit: every key is compared
            if hmac.compare_digest(given_digest, digest) and found is None:
                found = index
        return found


def presented_key(headers: Headers) -> str | None:
    authorization = headers.get("authorization", "")
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return headers.get("x-api-key") or None


def unauthorized(had_key: bool) -> UnauthorizedError:
    if had_key:
        return UnauthorizedError("The API key is not valid.")
    return UnauthorizedError(
        "An API key is required; send it as 'Authorization: Bearer <key>' or 'X-API-Key: <key>'."
    )


class SecurityMiddleware:
    """API keys, then the rate limit, on every non-public HTTP request."""

    def __init__(self, app: ASGIApp, keys: tuple[str, ...], rate_limit_per_minute: int) -> None:
        self.app = app
        self.keyring = KeyRing(keys) if keys else None
        self.limiter = RateLimiter(rate_limit_per_minute) if rate_limit_per_minute > 0 else None
        self.per_minute = rate_limit_per_minute

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or is_public(scope["method"], scope["path"]):
            await self.app(scope, receive, send)
            return
        client = self.client_of(scope)
        # A request without a valid key spends its address's tokens: guessing keys is limited.
        if self.limiter is not None and (client is None or scope["path"] not in UNPRICED_PATHS):
            wait_s = self.limiter.retry_after(client or address_of(scope))
            scope.setdefault("state", {})[ALLOWANCE_KEY] = Allowance(self.limiter, client or "")
            if wait_s > 0:
                # the wait in the sentence too: the page showed "retry later" where it was 14
                # minutes (a review), and a person reads the message, not the header
                error = RateLimitedError(
                    f"Too many requests: at most {self.per_minute} forward rows a minute (a "
                    f"plain text is 1, a search its rows, a check about 5 a sentence); retry in "
                    f"{math.ceil(wait_s)} s."
                )
                headers = {"Retry-After": str(math.ceil(wait_s))}
                await error_response(error, headers)(scope, receive, send)
                return
        if client is None:
            had_key = presented_key(Headers(scope=scope)) is not None
            headers = {"WWW-Authenticate": "Bearer"}
            await error_response(unauthorized(had_key), headers)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def client_of(self, scope: Scope) -> str | None:
        """Who is asking: ``key:N`` for the N-th key, the address without keys, None if the
        keys are on and none matched. The key itself is never kept."""
        if self.keyring is None:
            return address_of(scope)
        given = presented_key(Headers(scope=scope))
        index = self.keyring.match(given) if given is not None else None
        return None if index is None else f"key:{index}"


class Allowance:
    """A request's client's bucket: ``spend(cost)`` debits a priced request's cost beyond the
    one token its admission took, ``refund(cost)`` gives it back
    (``serving.predictor.Spending``)."""

    def __init__(self, limiter: RateLimiter | None = None, client: str = "") -> None:
        self.limiter = limiter
        self.client = client

    def spend(self, cost: int) -> None:
        if self.limiter is not None and self.client:
            self.limiter.debit(self.client, cost - 1)

    def refund(self, cost: int) -> None:
        """Give back what ``spend(cost)`` took: the request was refused before any of its work
        ran (a full queue's 503), and a client that waited the Retry-After it was given was
        then refused again, by the rate limit, for rows that never ran (a review)."""
        if self.limiter is not None and self.client:
            self.limiter.credit(self.client, cost - 1)


def allowance_of(scope: Scope) -> Allowance:
    """The request's Allowance (one that spends nothing when the rate limit is off)."""
    allowance = scope.get("state", {}).get(ALLOWANCE_KEY)
    return allowance if isinstance(allowance, Allowance) else Allowance()


def address_of(scope: Scope) -> str:
    address = scope.get("client")
    return f"address:{address[0]}" if address else "address:unknown"


def security_layer(settings: Settings) -> Layer | None:
    """The API-key and rate-limit layer for ``RequestGuard``; None when both are off."""
    keys = load_api_keys(settings)
    if not keys and settings.rate_limit_per_minute <= 0:
        return None
    return partial(
        SecurityMiddleware, keys=keys, rate_limit_per_minute=settings.rate_limit_per_minute
    )


class JsonCORSMiddleware(CORSMiddleware):
    """Starlette's CORS, with a refused preflight (an origin, method or header not allowed) a
    400 in the one JSON error shape instead of its plain-text body."""

    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code < 400:
            return response
        reason = bytes(response.body).decode("utf-8", "replace")  # "Disallowed CORS origin"
        return error_response(BadInputError(f"{reason}; this server does not allow it."))


def cors_layer(settings: Settings) -> Layer | None:
    """CORS only for the allow-listed origins; with none, no CORS headers at all (the browser's
    same-origin rule applies). Preflights are answered before the drain and the API-key check."""
    if not settings.cors_origins:
        return None
    return partial(
        JsonCORSMiddleware,
        allow_origins=list(settings.cors_origins),
        allow_methods=["GET", "POST", "HEAD"],
        allow_headers=["Authorization", "Content-Type", "X-API-Key", "X-Request-ID"],
        expose_headers=["X-Request-ID", "Retry-After"],  # readable by an allowed origin's script
        max_age=600,
    )
