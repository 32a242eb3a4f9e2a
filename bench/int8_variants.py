"""INT8 recipes side by side: quantize one FP32 export several ways, run the INT8 quality guard on
each, and time them, taking turns, at batch 1 and batch 32.

    python -m bench.int8_variants FP32_EXPORT_DIR [--model MODEL] [--threads N] [--no-speed]

FP32_EXPORT_DIR is a cached FP32 export (``<onnx cache>/<model>-fp32-<key>/``, made by any
command that serves the model with ``--precision fp32``); MODEL is the model it was exported from
(default: the bundled model), whose tokenizer the guard needs. Every recipe of every CPU kind's
chain (``tiankong.export.int8_recipe``) is measured, plus 7-bit weights (``reduce_range``), the
other way out of U8S8 saturation that ONNX Runtime's docs name. On a CPU with VNNI, reduce-range and
U8U8 recipes compute exactly what they compute on a CPU without it, so their guard figures hold
there too; their speed does not.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from pathlib import Path

from bench.sentences import sentences
from tiankong.core.text import TextEncoder, TextLimits
from tiankong.engines.base import pad_batch
from tiankong.engines.onnx_engine import OnnxEngine
from tiankong.export.export import read_config
from tiankong.export.int8_recipe import (
    ALL_OP_TYPES,
    FFN_OUTPUT,
    HEAD,
    Int8Recipe,
    cpu_kind,
    recipe_chain,
)
from tiankong.export.precision_choice import timed_onnx_engine
from tiankong.export.quality_guard import GuardReference
from tiankong.export.quantize import quantize_int8
from tiankong.model_sources import resolve_model

ROUNDS = {1: 40, 32: 6}  # timed rounds per batch size, after one warm-up round


def variants() -> list[Int8Recipe]:
    found: list[Int8Recipe] = []
    for kind in ("vnni", "avx2"):
        found += [step for step in recipe_chain(kind) if step not in found]
    found += [  # the head in FP32, and in INT8 without rescoring, against the rescored INT8 head
        Int8Recipe("s8", False, True, ALL_OP_TYPES, (FFN_OUTPUT, HEAD)),
        Int8Recipe("s8", False, True, ALL_OP_TYPES, (FFN_OUTPUT,), head_rescored=0),
    ]
    found += [  # 7-bit weights, the docs' other way out of saturation
        Int8Recipe("s8", True, True, ALL_OP_TYPES),
        Int8Recipe("s8", True, True, ALL_OP_TYPES, (FFN_OUTPUT,)),
        Int8Recipe("s8", True, True, ("MatMul",)),
    ]
    return found


def timings(engines: dict[str, OnnxEngine], encoder: TextEncoder) -> dict[str, dict[int, str]]:
    """Milliseconds per engine call at batch 1 and 32 (bench sentences, one mask each), as
    "median (min)". The engines take turns within each round, so load from other programs on
    the machine falls on all of them alike."""
    texts = sentences(0, 32 + max(ROUNDS.values()) + 1)
    prepared = [encoder.prepare(text) for text in texts]
    runs: dict[str, dict[int, list[float]]] = {name: {1: [], 32: []} for name in engines}
    for size, rounds in ROUNDS.items():
        for index in range(rounds + 1):
            chunk = prepared[index : index + size]
            batch = pad_batch(
                [item.input_ids for item in chunk],
                [item.mask_indices for item in chunk],
                encoder.pad_id,
            )
            for name, engine in engines.items():
                started = time.perf_counter()
                engine.mask_logits(batch)
                if index:  # round 0 warms up
                    runs[name][size].append(1000 * (time.perf_counter() - started))
    return {
        name: {
            size: f"{statistics.median(values):.1f} ({min(values):.1f})"
            for size, values in by_size.items()
        }
        for name, by_size in runs.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fp32_export", type=Path)
    parser.add_argument("--model", default=None)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--no-speed", action="store_true")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    fp32_file = args.fp32_export / "model.onnx"
    folder = resolve_model(args.model).path
    config = read_config(folder)
    encoder = TextEncoder.from_folder(folder, TextLimits())
    reference = timed_onnx_engine(fp32_file, "fp32", args.threads)  # timed in turns
    guard = GuardReference(reference, folder)
    print(f"model {folder.name}, this CPU: {cpu_kind()}, threads {args.threads}")
    engines = {"FP32": reference}
    with tempfile.TemporaryDirectory() as temp:
        for index, step in enumerate(variants()):
            out = Path(temp) / f"variant-{index}.onnx"
            quantize_int8(fp32_file, out, config["vocab_size"], config["hidden_size"], step)
            engine = timed_onnx_engine(out, "int8", args.threads)
            figures = guard.compare(engine)
            print(
                f"{step.name}: top-1 agreement {figures['top1_agreement']:.1%}, "
                f"top-5 overlap {figures['top5_overlap']:.1%} on {figures['masks']} masks",
                flush=True,
            )
            engines[step.name] = engine
        if args.no_speed:
            return
        print("ms per call, median (min), engines taking turns:")
        for name, speed in timings(engines, encoder).items():
            print(f"{name}: batch 1 {speed[1]} ms, batch 32 {speed[32]} ms")


if __name__ == "__main__":
    main()
