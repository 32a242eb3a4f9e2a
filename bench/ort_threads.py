"""ONNX Runtime's threads on one export: spin-waiting settings at one sentence, and one batch at a
time against two at once.

    python -m bench.ort_threads ONNX_FILE [--runs 200] [--seconds 6] [--batch 10]

ONNX_FILE is a tiankong export (``<onnx cache>/<model>-int8-<key>/model.onnx``). Part 1 runs one
~19-token sentence on 2 intra-op threads under three spinning settings, with a 2 ms idle gap
after each run as between requests, and prints the median run time and the process's CPU time
per run (every thread: a spinning thread's idle gap counts). Part 2 drives batches of
``--batch`` sentences for ``--seconds`` each: a 2-thread session from one thread, the same from
two threads at once, and a 1-thread session from one and from two threads (two forward passes
in parallel on one copy of the weights); with one sentence's latency for each session. Part 2's
sessions spin as ORT does by default, as tiankong's do.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

SEQ_LEN = 19  # the bench sentences' mean length in tokens
SPINNING = {
    "spinning (ORT's default)": {},
    "no spinning (allow_spinning=0)": {"session.intra_op.allow_spinning": "0"},
    "spinning, stopped after each run": {"session.force_spinning_stop": "1"},
}


def session(onnx_file: Path, threads: int, config: dict[str, str]) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    for key, value in config.items():
        options.add_session_config_entry(key, value)
    return ort.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])


def feed(batch: int, wanted: list[str], seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = {
        "input_ids": rng.integers(1000, 20000, size=(batch, SEQ_LEN), dtype=np.int64),
        "attention_mask": np.ones((batch, SEQ_LEN), dtype=np.int64),
        "mask_positions": np.arange(batch, dtype=np.int64) * SEQ_LEN + 8,
    }
    return {name: arrays[name] for name in wanted}


def spinning(onnx_file: Path, runs: int) -> None:
    print("| ORT setting | p50 per run | CPU per run (all threads) |")
    print("|---|---:|---:|")
    for name, config in SPINNING.items():
        engine = session(onnx_file, 2, config)
        inputs = feed(1, [node.name for node in engine.get_inputs()])
        for _ in range(20):
            engine.run(None, inputs)
        times = []
        cpu_started = time.process_time()
        for _ in range(runs):
            started = time.perf_counter()
            engine.run(None, inputs)
            times.append(time.perf_counter() - started)
            time.sleep(0.002)
        cpu = (time.process_time() - cpu_started) / runs
        print(f"| {name} | {1000 * statistics.median(times):.2f} ms | {1000 * cpu:.2f} ms |")


def sentences_per_second(
    engine: Any, inputs: dict[str, np.ndarray], callers: int, seconds: float
) -> float:
    done = [0] * callers
    stop = time.perf_counter() + seconds

    def work(index: int) -> None:
        while time.perf_counter() < stop:
            engine.run(None, inputs)
            done[index] += 1

    workers = [threading.Thread(target=work, args=(index,)) for index in range(callers)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    batch = len(next(iter(inputs.values())))
    return sum(done) * batch / (time.perf_counter() - started)


def batches_at_once(onnx_file: Path, seconds: float, batch: int) -> None:
    print(f"\n| intra-op threads | batches at once | sentences/s (batch {batch}) | one sentence |")
    print("|---:|---:|---:|---:|")
    for threads, callers in ((2, 1), (2, 2), (1, 1), (1, 2)):
        engine = session(onnx_file, threads, {})  # ORT's default spinning, as tiankong's
        wanted = [node.name for node in engine.get_inputs()]
        one, many = feed(1, wanted), feed(batch, wanted, seed=1)
        for _ in range(3):
            engine.run(None, many)
        latency = []
        for _ in range(30):
            started = time.perf_counter()
            engine.run(None, one)
            latency.append(time.perf_counter() - started)
        rate = sentences_per_second(engine, many, callers, seconds)
        print(
            f"| {threads} | {callers} | {rate:.1f} | {1000 * statistics.median(latency):.2f} ms |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("onnx_file", type=Path)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--batch", type=int, default=10)
    args = parser.parse_args()
    spinning(args.onnx_file, args.runs)
    batches_at_once(args.onnx_file, args.seconds, args.batch)


if __name__ == "__main__":
    main()
