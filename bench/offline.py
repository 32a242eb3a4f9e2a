"""Offline batch throughput: sentences/s through tiankong's Python API or the HF pipeline.

Each target runs in a process of its own (``python -m bench.offline --target T ...``, one JSON
line on stdout), so thread pools and memory of one target never touch the next.

- ``tiankong-<engine>-<precision>``: ``FillMasker.predict_batch`` on chunks of ``--chunk``
  texts (tokenize, one engine call, softmax and top-5 per chunk), default threads.
- ``pipeline``: ``pipeline("fill-mask")(texts, batch_size=--chunk, top_k=5)`` with
  ``torch.set_num_threads(--threads)``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.sentences import sentences

FIRST_INDEX = 100_000
WARMUP_TEXTS = 16
TOP_K = 5


def run_tiankong(target: str, model: str, texts: list[str], chunk: int) -> dict[str, Any]:
    from tiankong import FillMasker, Settings

    _, engine, precision = target.split("-")
    masker = FillMasker.load(model, Settings(engine=engine, precision=precision))
    masker.predict_batch(sentences(0, WARMUP_TEXTS), top_k=TOP_K)
    started = time.perf_counter()
    for start in range(0, len(texts), chunk):
        masker.predict_batch(texts[start : start + chunk], top_k=TOP_K)
    seconds = time.perf_counter() - started
    return {
        "engine": masker.engine.name,
        "precision": masker.engine.precision,
        "threads": masker.settings.threads,
        "seconds": seconds,
    }


def run_pipeline(model: str, texts: list[str], chunk: int, threads: int) -> dict[str, Any]:
    import torch
    from transformers import pipeline

    torch.set_num_threads(threads)
    fill_mask = pipeline("fill-mask", model=model, device="cpu", dtype=torch.float32)
    fill_mask(sentences(0, WARMUP_TEXTS), batch_size=chunk, top_k=TOP_K)
    started = time.perf_counter()
    fill_mask(texts, batch_size=chunk, top_k=TOP_K)
    seconds = time.perf_counter() - started
    return {"engine": "torch", "precision": "fp32", "threads": threads, "seconds": seconds}


def measure(target: str, model: Path, count: int, chunk: int, threads: int) -> dict[str, Any]:
    """Run one target in a child process; a failure becomes an ``error`` entry."""
    command = [
        sys.executable,
        "-m",
        "bench.offline",
        "--target",
        target,
        "--model",
        str(model),
        "--sentences",
        str(count),
        "--chunk",
        str(chunk),
        "--threads",
        str(threads),
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(
        command,
        cwd=Path(__file__).resolve().parent.parent,
        env=env,
        capture_output=True,
        text=True,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = " / ".join(done.stderr.strip().splitlines()[-3:])
        return {"target": target, "error": f"exit {done.returncode}: {tail}"}
    return dict(json.loads(lines[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--chunk", type=int, default=32)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    texts = sentences(FIRST_INDEX, args.sentences)
    if args.target == "pipeline":
        result = run_pipeline(args.model, texts, args.chunk, args.threads)
    else:
        result = run_tiankong(args.target, args.model, texts, args.chunk)
    result.update(
        target=args.target,
        sentences=len(texts),
        chunk=args.chunk,
        sentences_per_s=len(texts) / result["seconds"],
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
