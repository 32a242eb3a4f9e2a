"""The server under test: a `tiankong serve` process on a free loopback port, and a sampler of
its RSS, open file descriptors and threads."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil

HOST = "127.0.0.1"
START_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class ServerUnderTest:
    host: str
    port: int
    pid: int
    command: list[str]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def ready(host: str, port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/ready", timeout=5) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


@contextmanager
def served(serve_args: list[str], log_path: Path) -> Iterator[ServerUnderTest]:
    """`python -m tiankong serve SERVE_ARGS --host 127.0.0.1 --port FREE`; SIGTERM after."""
    port = free_port()
    command = [sys.executable, "-m", "tiankong", "serve", *serve_args]
    command += ["--host", HOST, "--port", str(port)]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while not ready(HOST, port):
                if process.poll() is not None:
                    raise RuntimeError(f"the server exited at start; see {log_path}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the server was not ready in {START_TIMEOUT_S:.0f} s")
                time.sleep(0.25)
            yield ServerUnderTest(HOST, port, process.pid, command)
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


@dataclass(frozen=True)
class Sample:
    at_s: float  # since sampling began
    rss_bytes: int
    fds: int
    threads: int
    requests_done: int
    other_cpu_pct: float = 0.0  # CPU used since the last sample by neither server nor client


@dataclass
class ProcessSampler:
    """Samples ``pid`` every ``interval_s`` while ``run`` is awaited (cancel to stop)."""

    pid: int
    interval_s: float
    samples: list[Sample] = field(default_factory=list)
    requests_done: int = 0  # updated by the load generator

    async def run(self) -> None:
        process, me = psutil.Process(self.pid), psutil.Process()
        started = last_at = time.monotonic()
        last_busy = busy_cpu_s(process, me)
        while True:
            now, busy = time.monotonic(), busy_cpu_s(process, me)
            other = (
                100 * (busy[0] - last_busy[0] - (busy[1] - last_busy[1])) / max(now - last_at, 1e-3)
            )
            last_at, last_busy = now, busy
            with process.oneshot():
                self.samples.append(
                    Sample(
                        at_s=now - started,
                        rss_bytes=process.memory_info().rss,
                        fds=process.num_fds() if os.name == "posix" else 0,
                        threads=process.num_threads(),
                        requests_done=self.requests_done,
                        other_cpu_pct=round(max(0.0, other), 1),
                    )
                )
            await asyncio.sleep(self.interval_s)


def busy_cpu_s(server: psutil.Process, me: psutil.Process) -> tuple[float, float]:
    """(CPU seconds the whole machine has been busy, of which the server's and this process')."""
    machine = psutil.cpu_times()
    busy = sum(machine) - machine.idle - getattr(machine, "iowait", 0.0)
    ours = sum(server.cpu_times()[:4]) + sum(me.cpu_times()[:4])
    return busy, ours
