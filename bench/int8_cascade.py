"""INT8 first, FP32 again where INT8's answer is a near-tie: how many masks that takes, whether
it restores FP32's answers, and what it costs against each engine alone.

    python -m bench.int8_cascade FP32_EXPORT_DIR INT8_EXPORT_DIR CORPUS_DIR [--near 0.5 0.6 0.7]
        [--threads 2] [--texts 300]

The cascade runs the INT8 export on a batch; where a mask's runner-up (special tokens left out)
has at least ``--near`` of its best token's probability under INT8, the texts holding such masks
run again through the FP32 export and those rows replace INT8's. ``bench.int8_sensitivity``
found every answer the GPU-trained bundled model's INT8 changed among FP32's near-ties, so the
cascade's agreement should be FP32's; its price is the second pass.

Measured on held-out text (``bench.int8_sensitivity.held_out_texts``: seeds 0 and 1 for the
near-tie shares, seed 2 for the timing, so the timing's texts are not the ones the shares were
read on), on the bench's sentences (``bench/sentences.py``) and on the guard's. Times are
single calls, every engine in turn on each text: p50, mean and p95 at batch 1, and the mean
of batches of 16. OpenVINO bf16 is timed beside them where the CPU has bf16 units.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from bench.int8_sensitivity import held_out_texts, probabilities
from bench.sentences import sentence
from tiankong.core.decoding import banned_token_ids
from tiankong.core.text import PreparedText
from tiankong.engines.base import EncodedBatch, pad_prepared
from tiankong.export.int8_recipe import cpu_has_bf16
from tiankong.export.precision_choice import timed_onnx_engine
from tiankong.export.quality_guard import guard_sentences, model_encoder, prepare_to_fit
from tiankong.model_sources import resolve_model

Call = Callable[[EncodedBatch], np.ndarray]


def near_ties(logits: np.ndarray, banned: np.ndarray, near: float) -> np.ndarray:
    """Per mask: whether its runner-up's probability is at least ``near`` of its best's."""
    scores = logits.copy()
    scores[:, banned] = -np.inf
    best_two = np.partition(scores, -2, axis=1)[:, -2:]
    return np.asarray(np.exp(best_two[:, 0] - best_two[:, 1]) >= near)


def runner_up_shares(probabilities: np.ndarray) -> np.ndarray:
    """Per mask: its runner-up's probability over its best's (the rows of ``probabilities``
    with the special tokens at -1, as ``bench.int8_sensitivity.probabilities`` gives them):
    the share ``near_ties`` reads from the logits, ``exp(second - best)``."""
    best_two = np.partition(probabilities, -2, axis=1)[:, -2:]
    return np.asarray(best_two[:, 0] / best_two[:, 1])


def cascade(fast: Call, exact: Call, banned: np.ndarray, near: float) -> Call:
    def run(batch: EncodedBatch) -> np.ndarray:
        logits = fast(batch)
        close = near_ties(logits, banned, near)
        if not close.any():
            return logits
        seq_len = batch.input_ids.shape[1]
        mask_rows = batch.mask_positions // seq_len
        rows = np.unique(mask_rows[close])
        taken = np.isin(mask_rows, rows)
        positions = batch.mask_positions[taken]
        again = EncodedBatch(
            batch.input_ids[rows],
            batch.attention_mask[rows],
            (np.searchsorted(rows, positions // seq_len) * seq_len + positions % seq_len),
        )
        logits[taken] = exact(again)
        return logits

    return run


def timings(calls: dict[str, Call], prepared: Sequence[PreparedText], pad_id: int) -> None:
    lone: dict[str, list[float]] = {name: [] for name in calls}
    for item in prepared:
        batch = pad_prepared([item], pad_id)
        for name, call in calls.items():
            started = time.perf_counter()
            call(batch)
            lone[name].append(1000 * (time.perf_counter() - started))
    full: dict[str, list[float]] = {name: [] for name in calls}
    for start in range(0, len(prepared) - 15, 16):
        batch = pad_prepared(prepared[start : start + 16], pad_id)
        for name, call in calls.items():
            started = time.perf_counter()
            call(batch)
            full[name].append(1000 * (time.perf_counter() - started))
    for name, values in lone.items():
        sixteen = f"{statistics.mean(full[name]):.2f}" if full[name] else "-"
        print(
            f"    {name}: batch 1 p50 {statistics.median(values):.2f} mean "
            f"{statistics.mean(values):.2f} p95 {np.percentile(values, 95):.2f} ms; batch 16 "
            f"mean {sixteen} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fp32_export", type=Path)
    parser.add_argument("int8_export", type=Path)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--model", default=None)
    parser.add_argument("--near", type=float, nargs="+", default=[0.5, 0.6, 0.7])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--texts", type=int, default=300, help="texts timed per set")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    folder = resolve_model(args.model).path
    encoder = model_encoder(folder)
    banned = banned_token_ids(encoder.vocab)
    exact = timed_onnx_engine(args.fp32_export / "model.onnx", "fp32", args.threads)
    fast = timed_onnx_engine(args.int8_export / "model.onnx", "int8", args.threads)
    sets = {
        "held-out seed 0": held_out_texts(args.corpus, 0),
        "held-out seed 1": held_out_texts(args.corpus, 1),
        "bench sentences": [sentence(number) for number in range(args.texts)],
        "guard": guard_sentences(),
    }
    print("near-ties under INT8, and the answers INT8 changed that they leave changed:")
    for name, texts in sets.items():
        prepared = prepare_to_fit(encoder, texts)
        reference = probabilities(exact, prepared, encoder.pad_id, banned).argmax(1)
        quantized = probabilities(fast, prepared, encoder.pad_id, banned)
        changed = quantized.argmax(1) != reference
        figures = []
        shares = runner_up_shares(quantized)
        for near in args.near:
            close = shares >= near
            figures.append(
                f"at {near}: {close.mean():.1%} again, {int((changed & ~close).sum())} left"
            )
        print(
            f"  {name}: {len(reference)} masks, {int(changed.sum())} changed; " + "; ".join(figures)
        )
    calls: dict[str, Call] = {"onnx fp32": exact.mask_logits, "onnx int8": fast.mask_logits}
    if cpu_has_bf16():
        from tiankong.engines.openvino_engine import OpenVinoEngine

        calls["openvino bf16"] = OpenVinoEngine(
            args.fp32_export / "model.onnx", "bf16", args.threads
        ).mask_logits
    near = args.near[len(args.near) // 2]
    calls[f"cascade at {near}"] = cascade(fast.mask_logits, exact.mask_logits, banned, near)
    timed = {
        "held-out seed 2": held_out_texts(args.corpus, 2)[: args.texts],
        "bench sentences": sets["bench sentences"],
        "guard": sets["guard"],
    }
    print(f"times ({args.threads} threads):")
    for name, texts in timed.items():
        prepared = prepare_to_fit(encoder, texts)
        print(f"  {name}, {len(prepared)} texts:")
        timings(calls, prepared, encoder.pad_id)


if __name__ == "__main__":
    main()
