"""tiankong's app in several processes that share one listening socket: what worker processes
would give a request path whose Python keeps one process's event loop busy (issue 23's
serving-overhead goals), measured as a ``bench.serve_ab`` peer:

    python -m bench.serve_ab --tree one=src --engine fake --client wrk \\
        --peer "two=bench.contenders.workers_app|--workers 2|--engine fake|--model DIR"

A measurement, not a way to serve: each process has its own batcher, caches, rate-limit
allowance and ``/metrics``, which ``tiankong serve`` would have to share before serving this
way. The socket is bound once, then ``--workers`` children each load the model and run the
app on it (the kernel hands each connection to one of them); the parent only waits, and passes
SIGTERM or SIGINT on to the children so that the whole group stops.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tiankong.config import Settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--engine", default="fake")
    parser.add_argument("--index", default="none")
    args = parser.parse_args(argv)
    from tiankong.cli.serve import bind
    from tiankong.config import Settings

    settings = Settings(
        model=args.model, engine=args.engine, index=args.index, port=args.port, log_level="warning"
    )
    listener = bind(settings.host, settings.port)
    children = []
    for _ in range(args.workers):
        pid = os.fork()
        if pid == 0:
            serve(settings, listener)
            os._exit(0)
        children.append(pid)

    def stop(signum: int, frame: object) -> None:
        for pid in children:
            os.kill(pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for pid in children:
        os.waitpid(pid, 0)
    return 0


def serve(settings: Settings, listener: socket.socket) -> None:
    from tiankong.server import create_app
    from tiankong.server.uvicorn_server import run_server
    from tiankong.service import FillMasker

    masker = FillMasker.load(settings=settings)
    run_server(create_app(settings, masker), settings, listener)


if __name__ == "__main__":
    sys.exit(main())
