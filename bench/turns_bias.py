"""How ``--precision auto``'s timing in turns treats each engine, and what idle time costs a call.

    python -m bench.turns_bias FP32_ONNX_FILE --model MODEL_FOLDER [--threads 2]

On the model's FP32 export (a ``<name>-fp32-<key>/model.onnx`` in the ONNX cache), engine-only,
on the INT8 guard's first sentence (batch 1) and first 16 (batch 16), median milliseconds:

1. **Alone**: ONNX Runtime FP32 (built as the measurement builds it, ``timed_onnx_engine``) and
   OpenVINO bf16, each timed in a run of its own calls.
2. **In turns, one call each**: how ``--precision auto`` timed its candidates before the
   twenty-ninth session, with OpenVINO FP32 and bf16 beside ONNX Runtime FP32.
3. **In turns, in blocks**: each engine makes ``--settle`` untimed calls, then ``--per-block``
   timed ones, in turns; the untimed calls let the engine timed before it go quiet.
4. **As measured now**: ``precision_choice.time_in_turns`` (blocks, its own settings).
5. **After idle**: ONNX Runtime FP32 at batch 1 (stopped after each run, and as served and timed
   by the measurement, spinning after a run), one call after each of several sleeps, as a lone
   request after a pause.

Markdown to stdout. No server and no export: run it after ``tiankong export`` or a first start.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from tiankong.engines.base import EncodedBatch, Engine, pad_prepared
from tiankong.engines.onnx_engine import OnnxEngine
from tiankong.engines.openvino_engine import OpenVinoEngine
from tiankong.export.precision_choice import time_in_turns, timed_onnx_engine
from tiankong.export.quality_guard import guard_sentences, model_encoder, prepare_to_fit

PAUSES_MS = (0.0, 1.0, 3.0, 10.0, 30.0)


def alone(engine: Engine, batch: EncodedBatch, calls: int) -> float:
    engine.mask_logits(batch)
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        engine.mask_logits(batch)
        samples.append(1000 * (time.perf_counter() - started))
    return statistics.median(samples)


def one_call_each(engines: dict[str, Engine], batch: EncodedBatch, rounds: int) -> dict[str, float]:
    for engine in engines.values():
        engine.mask_logits(batch)
    samples: dict[str, list[float]] = {key: [] for key in engines}
    for _ in range(rounds):
        for key, engine in engines.items():
            started = time.perf_counter()
            engine.mask_logits(batch)
            samples[key].append(1000 * (time.perf_counter() - started))
    return {key: statistics.median(values) for key, values in samples.items()}


def after_idle(engine: Engine, batch: EncodedBatch, calls: int) -> list[float]:
    for _ in range(3):
        engine.mask_logits(batch)
    medians = []
    for pause_ms in PAUSES_MS:
        samples = []
        for _ in range(calls):
            if pause_ms:
                time.sleep(pause_ms / 1000)
            started = time.perf_counter()
            engine.mask_logits(batch)
            samples.append(1000 * (time.perf_counter() - started))
        medians.append(statistics.median(samples))
    return medians


def row(label: str, figures: dict[str, float], keys: Sequence[str]) -> str:
    return f"| {label} | " + " | ".join(f"{figures[key]:.3f}" for key in keys) + " |"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.turns_bias", description=__doc__)
    parser.add_argument("fp32_file", type=Path, help="the model's FP32 export (model.onnx)")
    parser.add_argument("--model", type=Path, required=True, help="the model's folder")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--per-block", type=int, default=5)
    parser.add_argument("--settle", type=int, default=2)
    args = parser.parse_args(argv)

    encoder = model_encoder(args.model)
    prepared = prepare_to_fit(encoder, guard_sentences())
    batches = {
        1: pad_prepared(prepared[:1], encoder.pad_id),
        16: pad_prepared(prepared[:16], encoder.pad_id),
    }
    engines: dict[str, Engine] = {
        "onnx fp32": timed_onnx_engine(args.fp32_file, "fp32", args.threads),
        "openvino fp32": OpenVinoEngine(args.fp32_file, "fp32", args.threads),
        "openvino bf16": OpenVinoEngine(args.fp32_file, "bf16", args.threads),
    }
    keys = list(engines)
    print(f"Engine-only, {args.threads} threads, median ms a call ({args.model.name}).\n")
    print("| timing | batch | " + " | ".join(keys) + " |")
    print("|---|---:|" + "---:|" * len(keys))
    for size, batch in batches.items():
        calls, rounds = (40, 8) if size == 1 else (10, 5)
        lone = {key: alone(engine, batch, calls) for key, engine in engines.items()}
        turns = one_call_each(engines, batch, calls)
        measured = time_in_turns(engines, batch, calls)
        blocks = time_in_turns(engines, batch, rounds * args.per_block, rounds, args.settle)
        print(row(f"alone | {size}", lone, keys))
        print(row(f"in turns, one call each (before) | {size}", turns, keys))
        print(
            row(
                f"in turns, blocks ({args.settle} untimed, {args.per_block} timed) | {size}",
                blocks,
                keys,
            )
        )
        print(row(f"time_in_turns (as measured now) | {size}", measured, keys))
    print("\nONNX Runtime FP32, batch 1, one call after a sleep (median ms of 30):\n")
    print("| engine | " + " | ".join(f"after {pause:g} ms" for pause in PAUSES_MS) + " |")
    print("|---|" + "---:|" * len(PAUSES_MS))
    built = {
        "stopped after each run": OnnxEngine(
            args.fp32_file, "cpu", "fp32", args.threads, spin_after_run=False
        ),
        "as served and timed (spins after a run)": engines["onnx fp32"],
    }
    for label, engine in built.items():
        medians = after_idle(engine, batches[1], 30)
        print(f"| {label} | " + " | ".join(f"{value:.2f}" for value in medians) + " |")


if __name__ == "__main__":
    main()
