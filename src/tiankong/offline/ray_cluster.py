"""Joining Ray for ``fill --ray`` and ``serve --ray``: the cluster at ``--ray-address`` (or
``RAY_ADDRESS``), else a new local one. A cluster that isn't there is one sentence, not Ray's
``ConnectionError``; work a local Ray can never place (replicas whose threads exceed its CPUs)
is refused instead of waiting forever."""

from __future__ import annotations

import os
import re
import signal
import socket
import threading
from types import FrameType

from tiankong.errors import BadOptionError

CONNECT_TIMEOUT_S = 5.0  # a host:port where nothing listens: Ray retried for minutes


def init_ray(address: str | None) -> None:
    """``ray.init`` for ``address`` (None: ``RAY_ADDRESS``, else a new local Ray: Ray's own
    default joined a cluster that ``ray start`` had left running on this machine, whose Serve
    ``serve --ray`` then shut down on exit, and the other applications on it with it)."""
    import ray

    where = address or os.environ.get("RAY_ADDRESS") or ""
    named = f"--ray-address '{where}'" if address else f"RAY_ADDRESS '{where}'"
    refusal = BadOptionError(
        f"No Ray cluster answers at {named}; start one (ray start --head) "
        "or leave --ray-address and RAY_ADDRESS unset for a local Ray."
    )
    if where and not answers(where):
        raise refusal
    # SIGTERM while Ray starts (a pod stopped as it starts) is Ctrl-C's exit 130, once Ray has
    # started: Ray's C++ failure handler, which this process's core worker installs, took it
    # for a crash (a stack dump, exit 134); ray.init's own handler exits 15 with no word; and
    # an interruption raised inside ray.init left a half-made worker that crashed the exit
    # (SIGSEGV) (reviews). So the driver's C++ handler is off (Ray's own processes keep
    # theirs), ray.init sets none, and a SIGTERM meanwhile is noted and acted on after it.
    import ray._private.ray_constants as ray_constants
    import ray._private.utils as ray_utils

    ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = True
    main = threading.current_thread() is threading.main_thread()
    stops: list[int] = []
    ray_sets_handler = ray_utils.set_sigterm_handler
    if main:
        ray_utils.set_sigterm_handler = lambda handler: None
        signal.signal(signal.SIGTERM, lambda signum, frame: stops.append(signum))
    try:
        ray.init(address=where or "local", include_dashboard=False, log_to_driver=False)
    except ConnectionError as error:
        if refused_token(error):  # a cluster answered: "no cluster answers" hid why (a review)
            raise BadOptionError(
                f"The Ray cluster at {named} refused this process's authentication token "
                "(`ray start` turns token authentication on); set RAY_AUTH_MODE=token here, "
                "with the cluster's token in ~/.ray/auth_token or RAY_AUTH_TOKEN."
            ) from None
        raise refusal from None
    finally:
        ray_utils.set_sigterm_handler = ray_sets_handler
    if main:
        signal.signal(signal.SIGTERM, interrupt)
    if stops:  # stopped while Ray started: it is up, so it stops cleanly
        ray.shutdown()
        raise KeyboardInterrupt


def interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM as Ctrl-C: ``tiankong.cli.main`` says "interrupted" and exits 130."""
    raise KeyboardInterrupt


def refused_token(error: BaseException) -> bool:
    """Whether Ray's failure to connect came from the cluster refusing its token: Ray 2.60
    raises a ConnectionError whose cause's text names InvalidAuthToken."""
    from ray.exceptions import AuthenticationError

    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, AuthenticationError) or "InvalidAuthToken" in str(cause):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def answers(address: str) -> bool:
    """Whether something listens at a ``host:port`` or ``ray://host:port`` address (``auto``
    and other forms are Ray's to resolve: True)."""
    found = re.fullmatch(r"(?:ray://)?\[?([^\]/]+?)\]?:(\d+)/?", address.strip())
    if found is None:
        return True
    try:
        with socket.create_connection((found[1], int(found[2])), timeout=CONNECT_TIMEOUT_S):
            return True
    except (OSError, ValueError):
        return False


def starts_local_ray(address: str | None) -> bool:
    """Whether ``init_ray(address)`` starts a new local Ray rather than joining a cluster."""
    return not (address or os.environ.get("RAY_ADDRESS"))


def check_replicas_fit(replicas: int, threads: int, cpus: float) -> None:
    """Refuse ``replicas`` of ``threads`` CPUs each where the local Ray has ``cpus``: Ray would
    keep the ones it can't place pending, and ``serve --ray`` waited for them forever."""
    needed = replicas * threads
    if needed > cpus:
        raise BadOptionError(
            f"{replicas} replica(s) of {threads} threads need {needed} CPUs and the local Ray "
            f"has {cpus:g} (each replica reserves its --threads as CPUs); lower --threads or "
            "--replicas, or join a larger cluster with --ray-address."
        )
