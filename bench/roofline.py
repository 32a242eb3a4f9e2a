"""The compute limit: FLOPs per sentence and GEMM peaks measured on this machine.

FLOPs of one sentence of ``T`` tokens with ``M`` masks through a BERT encoder of ``L`` layers,
hidden ``H``, intermediate ``I`` and vocabulary ``V`` (a multiply-add is 2 FLOPs):

- encoder matmuls: ``2 * T * L * (4 * H^2 + 2 * H * I)`` (Q, K, V, output, and the two FFN
  matrices);
- attention scores and their use: ``L * 4 * T^2 * H``;
- the MLM head at the masks only: ``2 * M * (H^2 + H * V)``. A deployment that projects every
  token onto the vocabulary does ``T / M`` times this; the limit counts the work the answer needs.

The peak is the best of several large fp32 matmuls (numpy's BLAS and ONNX Runtime's MLAS) and,
for INT8, ONNX Runtime's ``MatMulInteger`` (u8 x s8 -> s32), all on every core. ``python -m
bench.roofline`` measures the peaks in a process of its own and prints them as JSON.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

GEMM_SIZE = 2048
REPEATS = 7


def flops_per_sentence(
    config: dict[str, int], tokens: float, masks: float = 1.0
) -> dict[str, float]:
    hidden = config["hidden_size"]
    layers = config["num_hidden_layers"]
    inner = config["intermediate_size"]
    vocab = config["vocab_size"]
    encoder = 2.0 * tokens * layers * (4 * hidden * hidden + 2 * hidden * inner)
    attention = layers * 4.0 * tokens * tokens * hidden
    head = 2.0 * masks * (hidden * hidden + hidden * vocab)
    return {
        "encoder": encoder,
        "attention": attention,
        "head_at_masks": head,
        "total": encoder + attention + head,
    }


def best_seconds(call: Callable[[], Any], repeats: int = REPEATS) -> float:
    call()
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best


def ort_matmul_session(integer: bool, size: int, threads: int) -> tuple[Any, dict[str, Any]]:
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weight: np.ndarray
    feed: dict[str, np.ndarray]
    if integer:
        weight = rng.integers(-127, 127, (size, size), dtype=np.int8)
        feed = {"a": rng.integers(0, 255, (size, size), dtype=np.uint8)}
        node = helper.make_node("MatMulInteger", ["a", "b"], ["c"])
        input_type, output_type = TensorProto.UINT8, TensorProto.INT32
    else:
        weight = rng.standard_normal((size, size), dtype=np.float32)
        feed = {"a": rng.standard_normal((size, size), dtype=np.float32)}
        node = helper.make_node("MatMul", ["a", "b"], ["c"])
        input_type = output_type = TensorProto.FLOAT
    graph = helper.make_graph(
        [node],
        "gemm",
        [helper.make_tensor_value_info("a", input_type, [size, size])],
        [helper.make_tensor_value_info("c", output_type, [size, size])],
        [numpy_helper.from_array(weight, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session, feed


def measure_peaks(threads: int, size: int = GEMM_SIZE) -> dict[str, Any]:
    """GFLOP/s (INT8: giga-ops/s) of ``size``-cube matmuls, best of ``REPEATS``."""
    flops = 2.0 * size**3
    rng = np.random.default_rng(0)
    left = rng.standard_normal((size, size), dtype=np.float32)
    right = rng.standard_normal((size, size), dtype=np.float32)
    peaks: dict[str, Any] = {"gemm_size": size, "threads": threads}
    peaks["fp32_numpy_gflops"] = flops / best_seconds(lambda: left @ right) / 1e9
    try:
        for name, integer in (("fp32_ort_gflops", False), ("int8_ort_gops", True)):
            session, feed = ort_matmul_session(integer, size, threads)
            peaks[name] = flops / best_seconds(partial(session.run, None, feed)) / 1e9
    except ImportError as error:
        peaks["ort_missing"] = str(error)
    peaks["fp32_gflops"] = max(peaks["fp32_numpy_gflops"], peaks.get("fp32_ort_gflops", 0.0))
    peaks["int8_gops"] = peaks.get("int8_ort_gops")
    return {
        key: round(value, 1) if isinstance(value, float) else value for key, value in peaks.items()
    }


def main() -> None:
    threads = int(os.environ.get("BENCH_THREADS") or os.cpu_count() or 1)
    size = int(os.environ.get("BENCH_GEMM_SIZE") or GEMM_SIZE)
    print(json.dumps(measure_peaks(threads, size)))


if __name__ == "__main__":
    main()
