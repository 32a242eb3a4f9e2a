"""GPU latency, throughput and agreement with the CPU for the bert-base-shaped model.

Run it through ``bash bench/gpu.sh`` (which finds or installs torch with CUDA), or directly::

    PYTHONPATH=src python -m bench.gpu_bench --out-dir bench/results
    PYTHONPATH=src python -m bench.gpu_bench --device cpu --quick --out-dir /tmp/bench  # the CPU
    # path with a tiny model: checks the script itself on a machine without a GPU

It builds a random BERT of bert-base's shape (``BertConfig(vocab_size=21128)``, fixed seed) with
the bert-base-chinese vocabulary, and times, at batch 1, 8, 16, 32 and 64, on short sentences
(the INT8 guard's fixed set) and on ~128-token texts:

- ``engine``: one ``mask_logits`` call on a padded batch (host-to-device copy, forward,
  logits at the masks back to the host);
- ``e2e``: ``FillMasker.predict_batch`` (tokenize, the engine call, softmax and top-5).

Targets: torch FP16 on CUDA, ONNX Runtime's CUDA provider in FP32 where onnxruntime-gpu and the
export tools are installed, and torch FP32 on the CPU as the baseline. Each GPU target's top-5
must equal the CPU's for at least 99% of the masks (up to near-ties, ``NEAR_TIE_LOGIT``; the
strict in-order figure is reported too), with scores within 1e-2; the exit status is 1 when
one does not. Results go to ``gpu-bench.json`` and ``gpu-bench.md`` in ``--out-dir``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tiankong import FillMasker, Settings
from tiankong.core.decoding import softmax, top_k
from tiankong.engines.base import EncodedBatch, pad_batch
from tiankong.export.quality_guard import guard_sentences
from tiankong.host import usable_cores

BATCH_SIZES = (1, 8, 16, 32, 64)
VOCAB_SIZE = 21128  # bert-base-chinese
SEED = 0
# A random model's output is nearly flat, so near-ties would make the top-5 comparison measure
# tie-breaking, not precision. A spread-out output bias separates the rankings (the tests' tiny
# model does the same); std 1 leaves the encoder's share of the logits (std ~0.5) large enough
# that a wrong mask gather or attention mask still changes the rankings.
OUTPUT_BIAS_STD = 1.0
TOP_K = 5
MIN_TOP5_EQUAL = 0.99
MAX_SCORE_DIFF = 1e-2
# Two candidates whose reference logits are this close are a tie at FP16's precision: the
# encoder's FP16 rounding moves logits by ~5e-3 (measured on the CPU for this model), and a
# random model's top-5 often holds such near-ties, so "equal" forgives swaps within them. The
# strict, in-order equality is reported beside it. A broken path (a wrong mask gather, a bad
# attention mask) moves logits by tenths and fails either way.
NEAR_TIE_LOGIT = 0.02
LONG_TEXT_CHARS = 110  # ~128 tokens with [CLS]/[SEP] for Chinese text
LONG_TEXT_MASKS = 4


@dataclass(frozen=True)
class Target:
    """One engine configuration to time and to check against the CPU reference."""

    label: str
    engine: str
    device: str
    precision: str


@dataclass(frozen=True)
class Timing:
    target: str
    workload: str
    batch: int
    iterations: int
    engine_p50_ms: float
    engine_p95_ms: float
    engine_texts_per_s: float
    e2e_p50_ms: float
    e2e_texts_per_s: float
    masks_per_batch: float
    tokens_per_batch: float


@dataclass(frozen=True)
class Agreement:
    target: str
    masks: int
    top1_equal: float
    top5_equal: float
    top5_equal_up_to_ties: float
    max_score_diff: float
    max_logit_diff: float
    passed: bool


@dataclass(frozen=True)
class Budget:
    """How long each (target, workload, batch) point is timed."""

    seconds: float
    min_iterations: int
    max_iterations: int
    warmup: int


def build_model(folder: Path, quick: bool) -> Path:
    """Save a random bert-base-shaped (or, ``quick``, tiny) Chinese MLM with a fixed seed."""
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertTokenizer

    from tiankong.core.models import VOCAB_FILE

    torch.manual_seed(SEED)
    tokenizer = BertTokenizer(str(VOCAB_FILE), do_lower_case=False)
    assert tokenizer.vocab_size == VOCAB_SIZE, tokenizer.vocab_size
    if quick:
        config = BertConfig(
            vocab_size=VOCAB_SIZE,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=128,
        )
    else:
        config = BertConfig(vocab_size=VOCAB_SIZE)  # 12 layers, hidden 768, 12 heads
    model = BertForMaskedLM(config)
    with torch.no_grad():
        model.cls.predictions.bias.normal_(0.0, OUTPUT_BIAS_STD)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def workloads() -> dict[str, list[str]]:
    """Short: the guard's fixed sentences. Long: consecutive ones joined to ~128 tokens, with
    their first ``LONG_TEXT_MASKS`` blanks kept and the others filled with a character."""
    short = guard_sentences()
    long: list[str] = []
    for start in range(len(short)):
        text = ""
        offset = 0
        while len(text.replace("[MASK]", "_")) < LONG_TEXT_CHARS:
            text += short[(start + offset) % len(short)].rstrip("。") + "。"
            offset += 1
        head, *rest = text.split("[MASK]")
        kept = [head]
        for index, piece in enumerate(rest):
            kept.append(("[MASK]" if index < LONG_TEXT_MASKS else "字") + piece)
        long.append("".join(kept))
    return {"short": short, "long": long}


def load(folder: Path, target: Target, threads: int, cache: Path) -> FillMasker:
    settings = Settings(
        engine=target.engine,
        device=target.device,
        precision=target.precision,
        threads=threads,
        max_batch_size=max(BATCH_SIZES),
        onnx_cache_dir=str(cache),
    )
    masker = FillMasker.load(str(folder), settings)
    engine = masker.engine
    actual = (engine.name, engine.device, engine.precision)
    wanted = (target.engine, target.device, target.precision)
    if actual != wanted:
        raise RuntimeError(f"{target.label}: asked for {wanted}, got {actual}")
    return masker


def batches_of(texts: Sequence[str], size: int, count: int) -> list[list[str]]:
    """``count`` batches of ``size`` texts, walking round the set so batches differ."""
    return [[texts[(start * size + i) % len(texts)] for i in range(size)] for start in range(count)]


def encode(masker: FillMasker, texts: Sequence[str]) -> EncodedBatch:
    prepared = [masker.prepare(text) for text in texts]
    return pad_batch(
        [item.input_ids for item in prepared],
        [item.mask_indices for item in prepared],
        masker.encoder.pad_id,
    )


def timed_calls(call: Any, items: Sequence[Any], budget: Budget) -> list[float]:
    """Seconds per call, after ``budget.warmup`` untimed calls; at least ``min_iterations``
    calls, then more until ``seconds`` have passed or ``max_iterations`` is reached."""
    for index in range(budget.warmup):
        call(items[index % len(items)])
    durations: list[float] = []
    started = time.perf_counter()
    while len(durations) < budget.max_iterations and (
        len(durations) < budget.min_iterations or time.perf_counter() - started < budget.seconds
    ):
        item = items[len(durations) % len(items)]
        begin = time.perf_counter()
        call(item)  # the engines return host arrays, so a CUDA call has finished here
        durations.append(time.perf_counter() - begin)
    return durations


def time_target(
    masker: FillMasker, label: str, texts_by_workload: dict[str, list[str]], budget: Budget
) -> list[Timing]:
    timings: list[Timing] = []
    for workload, texts in texts_by_workload.items():
        for size in BATCH_SIZES:
            text_batches = batches_of(texts, size, 8)
            encoded = [encode(masker, batch) for batch in text_batches]
            engine_s = timed_calls(masker.engine.mask_logits, encoded, budget)
            e2e_s = timed_calls(
                lambda b: masker.predict_batch(b, top_k=TOP_K), text_batches, budget
            )
            timings.append(
                Timing(
                    target=label,
                    workload=workload,
                    batch=size,
                    iterations=len(engine_s),
                    engine_p50_ms=1e3 * float(np.median(engine_s)),
                    engine_p95_ms=1e3 * float(np.percentile(engine_s, 95)),
                    engine_texts_per_s=size / float(np.mean(engine_s)),
                    e2e_p50_ms=1e3 * float(np.median(e2e_s)),
                    e2e_texts_per_s=size / float(np.mean(e2e_s)),
                    masks_per_batch=float(np.mean([b.mask_positions.size for b in encoded])),
                    tokens_per_batch=float(np.mean([b.token_count for b in encoded])),
                )
            )
            print(f"  {label} {workload} batch {size}: {timings[-1].engine_p50_ms:.2f} ms")
    return timings


def agreement(
    masker: FillMasker, reference: FillMasker, label: str, texts: Sequence[str]
) -> Agreement:
    """``masker`` against the CPU reference on the same padded batches, per mask, through
    tiankong's own decoding (softmax, special tokens left out, top-5 best first)."""
    top1: list[bool] = []
    top5: list[bool] = []
    top5_up_to_ties: list[bool] = []
    score_diff = logit_diff = 0.0
    token_string = reference.encoder.token_string
    for start in range(0, len(texts), 16):
        encoded = encode(reference, texts[start : start + 16])
        ours = masker.engine.mask_logits(encoded)
        theirs = reference.engine.mask_logits(encoded)
        logit_diff = max(logit_diff, float(np.abs(ours - theirs).max()))
        for our_row, their_row in zip(ours, theirs, strict=True):
            our_top = top_k(softmax(our_row), TOP_K, reference.banned, token_string)
            their_top = top_k(softmax(their_row), TOP_K, reference.banned, token_string)
            our_ids = [candidate.token_id for candidate in our_top]
            their_ids = [candidate.token_id for candidate in their_top]
            top1.append(our_ids[0] == their_ids[0])
            top5.append(our_ids == their_ids)
            top5_up_to_ties.append(
                all(
                    abs(their_row[ours_id] - their_row[theirs_id]) <= NEAR_TIE_LOGIT
                    for ours_id, theirs_id in zip(our_ids, their_ids, strict=True)
                )
            )
            for our_candidate, their_candidate in zip(our_top, their_top, strict=True):
                score_diff = max(score_diff, abs(our_candidate.score - their_candidate.score))
    equal = float(np.mean(top5_up_to_ties))
    return Agreement(
        target=label,
        masks=len(top5),
        top1_equal=float(np.mean(top1)),
        top5_equal=float(np.mean(top5)),
        top5_equal_up_to_ties=equal,
        max_score_diff=score_diff,
        max_logit_diff=logit_diff,
        passed=equal >= MIN_TOP5_EQUAL and score_diff <= MAX_SCORE_DIFF,
    )


def onnx_target_problem(device: str) -> str:
    """Why ONNX Runtime can't be benchmarked on ``device`` here, or '' when it can."""
    missing = [
        name
        for name in ("onnxruntime", "onnx", "filelock", "platformdirs")
        if importlib.util.find_spec(name) is None
    ]
    if missing:
        return f"not installed: {', '.join(missing)}"
    import onnxruntime

    if device == "cuda" and "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        return "this onnxruntime has no CUDAExecutionProvider (install onnxruntime-gpu)"
    return ""


def environment(device: str) -> dict[str, Any]:
    import torch

    versions: dict[str, str | None] = {}
    for name in ("torch", "transformers", "onnxruntime", "onnxruntime-gpu", "numpy"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "cpu_threads_used": usable_cores(),
        "versions": versions,
        "torch_cuda": torch.version.cuda,
    }
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name(0)
        info["gpu_memory_gib"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
    return info


def markdown(report: dict[str, Any]) -> str:
    env = report["environment"]
    lines = [
        f"# GPU bench: {report['model']}",
        "",
        f"{env.get('gpu', 'no GPU')}; torch {env['versions']['torch']} (CUDA {env['torch_cuda']}),"
        f" onnxruntime {env['versions']['onnxruntime'] or env['versions']['onnxruntime-gpu']},"
        f" Python {env['python']}, {env['cpu_count']} CPUs ({env['cpu_threads_used']} threads"
        f" for the CPU baseline). Total {report['seconds']:.0f} s.",
        "",
        "| target | workload | batch | tokens/batch | engine p50 ms | engine p95 ms "
        "| engine texts/s | e2e p50 ms | e2e texts/s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in report["timings"]:
        lines.append(
            f"| {row['target']} | {row['workload']} | {row['batch']} "
            f"| {row['tokens_per_batch']:.0f} | {row['engine_p50_ms']:.2f} "
            f"| {row['engine_p95_ms']:.2f} | {row['engine_texts_per_s']:.0f} "
            f"| {row['e2e_p50_ms']:.2f} | {row['e2e_texts_per_s']:.0f} |"
        )
    lines += [
        "",
        f"Agreement with {report['reference']}, per mask: top-5 in order, strictly and up to"
        f" near-ties (reference logits within {NEAR_TIE_LOGIT}); pass: the latter for"
        f" >= {MIN_TOP5_EQUAL:.0%} of masks and every score within {MAX_SCORE_DIFF}.",
        "",
        "| target | masks | top-1 equal | top-5 equal | top-5 equal up to ties "
        "| max abs score diff | max abs logit diff | pass |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in report["agreement"]:
        lines.append(
            f"| {row['target']} | {row['masks']} | {row['top1_equal']:.2%} "
            f"| {row['top5_equal']:.2%} | {row['top5_equal_up_to_ties']:.2%} "
            f"| {row['max_score_diff']:.1e} | {row['max_logit_diff']:.1e} "
            f"| {'yes' if row['passed'] else 'NO'} |"
        )
    for label, reason in report["skipped"].items():
        lines.append(f"\n{label} not run: {reason}.")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("No CUDA GPU is visible to torch; use --device cpu to check the script.")
        return 2
    started = time.perf_counter()
    gpu_precision = "fp16" if args.device == "cuda" else "fp32"
    targets = [Target(f"torch-{args.device}-{gpu_precision}", "torch", args.device, gpu_precision)]
    skipped: dict[str, str] = {}
    onnx_label = f"onnx-{args.device}-fp32"
    problem = onnx_target_problem(args.device)
    if problem:
        skipped[onnx_label] = problem
    else:
        targets.append(Target(onnx_label, "onnx", args.device, "fp32"))
    reference_target = Target("torch-cpu-fp32", "torch", "cpu", "fp32")
    threads = usable_cores()
    quick = Budget(seconds=0.2, min_iterations=2, max_iterations=20, warmup=1)
    gpu_budget = quick if args.quick else Budget(1.0, 10, 500, 5)
    cpu_budget = quick if args.quick else Budget(1.0, 2, 100, 1)
    texts = workloads()
    check_texts = texts["short"] + texts["long"][:: max(1, len(texts["long"]) // 20)]
    with tempfile.TemporaryDirectory(prefix="tiankong-gpu-bench-") as temp:
        folder = build_model(Path(temp) / "model", args.quick)
        cache = Path(temp) / "onnx-cache"
        reference = load(folder, reference_target, threads, cache)
        timings: list[Timing] = []
        agreements: list[Agreement] = []
        for target in targets:
            print(f"{target.label}: loading")
            masker = load(folder, target, threads, cache)
            agreements.append(agreement(masker, reference, target.label, check_texts))
            print(f"  {agreements[-1]}")
            timings += time_target(masker, target.label, texts, gpu_budget)
            del masker
        if not args.skip_cpu_baseline:
            timings += time_target(reference, reference_target.label, texts, cpu_budget)
    report: dict[str, Any] = {
        "model": "random bert-base-shaped BERT, vocab 21128"
        if not args.quick
        else "tiny random BERT (--quick)",
        "reference": reference_target.label,
        "environment": environment(args.device),
        "seconds": time.perf_counter() - started,
        "timings": [asdict(row) for row in timings],
        "agreement": [asdict(row) for row in agreements],
        "skipped": skipped,
    }
    if args.device == "cuda":
        report["environment"]["gpu_peak_allocated_gib"] = round(
            torch.cuda.max_memory_allocated() / 2**30, 2
        )
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "gpu-bench.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out_dir / "gpu-bench.md").write_text(markdown(report))
    print(markdown(report))
    return 0 if all(row.passed for row in agreements) else 1


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--quick", action="store_true", help="tiny model, short timings")
    parser.add_argument("--skip-cpu-baseline", action="store_true")
    default_out = Path(os.environ.get("OUT") or Path(__file__).parent / "results")
    parser.add_argument("--out-dir", type=Path, default=default_out)
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(run(parse_args()))
