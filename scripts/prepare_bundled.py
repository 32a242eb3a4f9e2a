"""Make what the bundled model's first start needs, once, into the user cache: its ONNX export
(INT8 quantized from the shipped FP32 graph, checked by the INT8 guard) and its corpus index.

    .venv/bin/python scripts/prepare_bundled.py      # scripts/setup.sh runs it

Says on stderr what each step does and what it found; prints the steps' times on stdout, one
line (``export 13 s; index 25 s``), for setup.sh's closing line. Each step is a
no-op when its result is already cached (keyed by what made it), so a rerun takes about a
second. It makes what `tiankong serve` would make for the bundled model with default settings
(the environment's TIANKONG_* settings count), so the server's first start only opens them.
"""

from __future__ import annotations

import sys
import time

from tiankong import Settings
from tiankong.engines import has_module
from tiankong.engines.onnx_engine import guard_line
from tiankong.export.export_cache import ensure_export
from tiankong.index.bundled import ensure_bundled_index
from tiankong.model_sources import resolve_model


def say(message: str) -> None:
    print(f"setup: {message}", file=sys.stderr, flush=True)


def export_step(settings: Settings) -> str:
    model = resolve_model(None)
    if settings.engine not in ("auto", "onnx") or not has_module("onnxruntime"):
        return "export skipped (not the onnx engine)"
    precision = "fp32" if settings.precision == "fp32" else "int8"
    started = time.perf_counter()
    steps = "unpacking the shipped FP32 graph"
    if precision == "int8":
        steps += ", quantizing it with ONNX Runtime, the INT8 guard"
    say(f"export: {model.name} to ONNX {precision.upper()} ({steps}; made once, 10-15 s)")
    export = ensure_export(model, precision, settings)
    seconds = time.perf_counter() - started
    if precision == "int8":
        quality = {**export.quality, "int8_accepted": bool(export.quality.get("passed"))}
        served = "int8" if quality["int8_accepted"] or settings.precision == "int8" else "fp32"
        say(f"guard: {guard_line(model.name, quality, served)}")
    say(f"export: done in {seconds:.1f} s ({export.folder})")
    return f"export {seconds:.0f} s"


def index_step() -> str:
    started = time.perf_counter()
    folder = ensure_bundled_index(progress=True)
    seconds = time.perf_counter() - started
    say(f"index: ready in {seconds:.1f} s ({folder})")
    return f"index {seconds:.0f} s"


def main() -> int:
    # One after the other: run side by side on 2 busy cores, each took longer than both in turn.
    settings = Settings()
    print(f"{export_step(settings)}; {index_step()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
