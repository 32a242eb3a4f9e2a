"""Starting a contender as a real HTTP server process on loopback, and watching it.

Cold start is measured from just before ``Popen`` to the first 200 on the readiness URL. The
server's output goes to a log file, whose tail is quoted when the server dies or never gets ready.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

POLL_S = 0.05
STOP_TIMEOUT_S = 20.0


class ServerFailed(RuntimeError):
    """The server exited or never got ready; the message ends with its log's tail."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    port: int
    started: float
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(self.base_url + path, timeout=timeout) as response:
                return int(response.status), response.read()
        except urllib.error.HTTPError as error:
            return int(error.code), error.read()

    def post_json(self, path: str, body: dict[str, Any], timeout: float = 60.0) -> Any:
        request = urllib.request.Request(
            self.base_url + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())

    def wait_ready(self, path: str, timeout_s: float) -> float:
        """Seconds from the start to the first 200 on ``path``."""
        deadline = self.started + timeout_s
        while time.perf_counter() < deadline:
            if self.process.poll() is not None:
                raise ServerFailed(
                    f"exited with code {self.process.returncode} before it was ready:\n"
                    + log_tail(self.log_path)
                )
            try:
                status, _ = self.get(path, timeout=2.0)
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                status = 0
            if status == 200:
                return time.perf_counter() - self.started
            time.sleep(POLL_S)
        raise ServerFailed(f"not ready after {timeout_s:.0f} s:\n" + log_tail(self.log_path))

    def rss_bytes(self) -> int:
        """Resident memory of the server and every process under it."""
        root = psutil.Process(self.process.pid)
        total = root.memory_info().rss
        for child in root.children(recursive=True):
            try:
                total += child.memory_info().rss
            except psutil.NoSuchProcess:
                continue
        return int(total)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL to the server's own process group if it doesn't exit."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def start(command: list[str], port: int, log_path: Path, env: dict[str, str], cwd: Path) -> Server:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        started = time.perf_counter()
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group, so a stuck one can be killed whole
        )
    return Server(process, port, started, log_path)
