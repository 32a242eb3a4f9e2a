"""A request's id: the client's ``X-Request-ID`` where it is safe to repeat, else one made here.

Every response carries it in ``X-Request-ID``, and the server's lines about the request (the
access line, an unhandled error's traceback) name it, so a client, a proxy and the log can
point at the same request.
"""

from __future__ import annotations

import os

from starlette.types import Scope

HEADER = b"x-request-id"
SCOPE_KEY = "tiankong.request_id"
MAX_CHARS = 128  # what proxies and tracing systems send fits (a UUID is 36)


def request_id(given: bytes | None) -> str:
    """``given`` (the header's value) when it is 1 to ``MAX_CHARS`` visible ASCII characters,
    no spaces: anything else could break a log line or a response header, so it is replaced
    by 16 random hex digits."""
    if given and len(given) <= MAX_CHARS and all(0x21 <= byte <= 0x7E for byte in given):
        return given.decode("ascii")
    return os.urandom(8).hex()


def request_id_of(scope: Scope) -> str | None:
    """The id ``RequestGuard`` gave the request (None outside it: a bare app in a test)."""
    value = scope.get(SCOPE_KEY)
    return value if isinstance(value, str) else None
