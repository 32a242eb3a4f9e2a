"""The CLI run as a user runs it: ``python -m tiankong ARGS`` in a fresh process, offline.

Shared by the tests of every command. ``stdin`` as ``bytes`` runs the process in binary mode
(bytes that aren't UTF-8, a byte-order mark), as ``str`` in text mode; ``env`` adds to this
process's environment.
"""

from __future__ import annotations

import os
import re
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


# What a first export or engine measurement says on stderr before it runs (export_cache)
FIRST_RUN_NOTE = re.compile(r"^tiankong: (exporting|measuring) .+, once \(later runs reuse it\)$")


def besides_first_run_notes(stderr: str) -> list[str]:
    """``stderr``'s non-blank lines other than a first run's notes."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    return [line for line in lines if not FIRST_RUN_NOTE.match(line)]
