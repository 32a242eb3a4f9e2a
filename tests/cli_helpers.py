"""The CLI run as a user runs it: ``python -m tiankong ARGS`` in a fresh process, offline.

Shared by the tests of every command. ``stdin`` as ``bytes`` runs the process in binary mode
(bytes that aren't UTF-8, a byte-order mark), as ``str`` in text mode; ``env`` adds to this
process's environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

CLI = [sys.executable, "-m", "tiankong"]


def run_cli(
    *args: str,
    stdin: str | bytes | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 180,
) -> subprocess.CompletedProcess[Any]:
    return subprocess.run(
        [*CLI, *args],
        input=stdin,
        capture_output=True,
        text=not isinstance(stdin, bytes),
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
    )
