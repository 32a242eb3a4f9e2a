"""Engine-only time at each batch size, and the memory each engine adds, for the engines that
``--precision auto`` may split a model's batches between.

    python -m bench.engine_batches MODEL [--threads 2]

MODEL is a model folder or bundled name; its FP32, INT8 and ``auto`` exports come from the export
cache (made there if missing; OpenVINO INT8 is the IR the ``auto`` entry kept, if it did). It
loads ONNX Runtime INT8, OpenVINO INT8 (when the auto entry kept its IR) and OpenVINO bf16 (on a
CPU with bf16 units) into one process that has already imported both runtimes, printing the
resident memory each engine added (after ``gc.collect()``), then times them in turns on the
guard's first 1, 2, 4, 8 and 16 sentences (``precision_choice.time_in_turns``: medians of
``max(6, 40 // size)`` calls after a warm-up call, ms).
"""

from __future__ import annotations

import argparse
import gc
from typing import Any

import psutil

from tiankong import Settings
from tiankong.core.text import TextEncoder, TextLimits
from tiankong.engines.base import pad_prepared
from tiankong.export.export_cache import ensure_export
from tiankong.export.int8_recipe import cpu_has_bf16
from tiankong.export.openvino_int8 import IR_FILE
from tiankong.export.precision_choice import time_in_turns, timed_onnx_engine
from tiankong.export.quality_guard import guard_sentences
from tiankong.model_sources import resolve_model

SIZES = (1, 2, 4, 8, 16)


def resident_mb() -> float:
    gc.collect()
    return psutil.Process().memory_info().rss / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import onnxruntime  # noqa: F401  (the runtimes' own libraries are not an engine's cost)
    import openvino  # noqa: F401

    from tiankong.engines.openvino_engine import OpenVinoEngine

    model = resolve_model(args.model)
    settings = Settings(threads=args.threads)
    fp32, int8 = (ensure_export(model, precision, settings) for precision in ("fp32", "int8"))
    ir = ensure_export(model, "auto", settings).folder / IR_FILE  # kept when OpenVINO INT8 serves
    builders: dict[str, Any] = {
        "onnx int8": lambda: timed_onnx_engine(int8.onnx_file, "int8", args.threads)
    }
    if ir.is_file():
        builders["openvino int8"] = lambda: OpenVinoEngine(ir, "int8", args.threads)
    if cpu_has_bf16():
        builders["openvino bf16"] = lambda: OpenVinoEngine(fp32.onnx_file, "bf16", args.threads)
    engines = {}
    for key, build in builders.items():
        before = resident_mb()
        engines[key] = build()
        print(f"{key}: +{resident_mb() - before:.0f} MB resident", flush=True)
    encoder = TextEncoder.from_folder(model.path, TextLimits())
    prepared = [encoder.prepare(text) for text in guard_sentences()[: SIZES[-1]]]
    print("| batch | " + " | ".join(engines) + " |")
    print("|---:|" + "---:|" * len(engines))
    for size in SIZES:
        batch = pad_prepared(prepared[:size], encoder.pad_id)
        ms = time_in_turns(engines, batch, max(6, 40 // size))
        cells = " | ".join(f"{ms[key]:.2f}" for key in engines)
        print(f"| {size} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
