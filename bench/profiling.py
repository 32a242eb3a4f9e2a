"""py-spy on a server during its c=20 load (``--profile KEY``), summarised per function.

py-spy samples every thread of the server (and its children) from outside the process; the raw
output is collapsed stacks (``frame;frame;frame count``). The summary gives each function's
share of the samples, as the innermost frame (self) and anywhere on the stack (inclusive).
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

SAMPLES_PER_S = 50


def start_py_spy(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes]:
    py_spy = Path(sys.executable).parent / "py-spy"
    out.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [
            str(py_spy),
            "record",
            "--pid",
            str(pid),
            "--subprocesses",
            "--nonblocking",
            "--rate",
            str(SAMPLES_PER_S),
            "--duration",
            str(max(1, int(seconds))),
            "--format",
            "raw",
            "--output",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )


def function_name(frame: str) -> str:
    """``name (path/file.py:line)`` -> ``name (file.py)``."""
    name, _, where = frame.partition(" (")
    file = where.rsplit(":", 1)[0].rsplit("/", 1)[-1]
    return f"{name} ({file})" if file else name


def summarise(raw: Path, top: int = 15) -> dict[str, Any]:
    own: Counter[str] = Counter()
    anywhere: Counter[str] = Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [function_name(frame) for frame in stack.split(";")]
        total += count
        own[frames[-1]] += count
        for name in set(frames):
            anywhere[name] += count
    share = (lambda n: round(100.0 * n / total, 1)) if total else (lambda n: 0.0)
    return {
        "samples": total,
        "self_pct": [[name, share(n)] for name, n in own.most_common(top)],
        "inclusive_pct": [[name, share(n)] for name, n in anywhere.most_common(top)],
    }
