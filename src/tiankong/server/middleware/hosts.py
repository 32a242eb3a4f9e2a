"""Which ``Host`` a server answers: the guard against DNS rebinding.

A page on another site can't read a local server's answers (the browser's same-origin rule)
unless its own name is pointed at 127.0.0.1 after the page loaded (DNS rebinding): the browser
then takes the server for the page's own site, and sends the page's name in ``Host``. So a
server listening on a loopback address (the default, 127.0.0.1) answers only a ``Host`` that is
``localhost``, an IP address, or a name given with ``--allowed-host``; any other gets 400
``bad_host``. A server listening on another address (0.0.0.0 in a container) answers any
``Host`` unless ``--allowed-host`` names some; ``--allowed-host '*'`` answers any everywhere. So
does a replica behind a Ray Serve proxy that ``serve run`` or a cluster started (``proxied``:
it listens where Ray's config says, ``0.0.0.0`` on KubeRay), unless names are given. A request
without a ``Host`` (no browser leaves it out) is answered.

>>> check = HostCheck(frozenset({"tiankong.example.com", "填空.example"}))
>>> [check.allows(host) for host in (b"localhost:8000", b"[::1]:8000", b"10.0.0.7",
...                                   b"TianKong.example.com.:443", b"evil.example:8000",
...                                   b"xn--cnso60f.example")]
[True, True, True, True, False, True]
"""

from __future__ import annotations

import ipaddress

from tiankong.config import Settings, ascii_host, host_name_problem
from tiankong.errors import BadHostError

ANY_HOST = "*"
LOCAL_NAMES = frozenset({"localhost"})  # IP addresses are answered as well (``is_address``)
MAX_REMEMBERED = 256  # Host values whose verdict is kept; a browser sends one or two


def is_loopback(address: str) -> bool:
    """Whether a listening address (``--host``) is reachable from this machine only."""
    if address.strip().lower() in LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(address.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def host_name(header: bytes) -> str:
    """A ``Host`` header's name, without its port, in lower case, without a final dot."""
    text = header.decode("latin-1").strip().lower()
    if text.startswith("["):  # an IPv6 address: [::1]:8000
        end = text.find("]")
        return text[1:end] if end > 0 else text
    if ":" in text:
        text = text.rpartition(":")[0]
    return text.removesuffix(".")


class HostCheck:
    """The names a server answers to: ``localhost``, IP addresses and ``names``."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = LOCAL_NAMES | {ascii_host(name).removesuffix(".") for name in names}
        self.verdicts: dict[bytes, bool] = {}

    def allows(self, header: bytes | None) -> bool:
        if header is None:
            return True
        verdict = self.verdicts.get(header)
        if verdict is None:
            name = host_name(header)
            verdict = name in self.names or is_address(name)
            if len(self.verdicts) < MAX_REMEMBERED:
                self.verdicts[header] = verdict
        return verdict

    def refusal(self, header: bytes) -> BadHostError:
        name = host_name(header)
        shown = name if name.isprintable() and 0 < len(name) <= 100 else None
        # the flag named only with a name it takes (a Host of "localhost x" or "::1" was told
        # to start with --allowed-host localhost x, or :)
        flag_name = shown if shown and host_name_problem(shown) is None else "NAME"
        answered = ["localhost", "its IP addresses", *sorted(self.names - LOCAL_NAMES)]
        return BadHostError(
            f"This server answers requests for {', '.join(answered[:-1])} and {answered[-1]}, "
            "not for "
            f"{repr(shown) if shown else 'the Host this request named'} (a guard against DNS "
            f"rebinding); start it with --allowed-host {flag_name} to answer that name."
        )


def host_check(settings: Settings, proxied: bool = False) -> HostCheck | None:
    """The check ``settings`` asks for: None where any ``Host`` is answered. ``proxied``: the
    server listens elsewhere than ``settings.host`` (module docstring)."""
    names = frozenset(settings.allowed_hosts)
    if ANY_HOST in names or (not names and (proxied or not is_loopback(settings.host))):
        return None
    return HostCheck(names)
