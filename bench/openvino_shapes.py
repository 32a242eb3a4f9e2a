"""What OpenVINO's dynamic input shapes cost a lone request: the served graph (dynamic batch and
length) against the same graph compiled once for each exact shape the bench's sentences take.

    python -m bench.openvino_shapes GRAPH --model MODEL [--threads 2] [--sentences 60]
        [--hint bf16] [--config KEY=VALUE ...] [--onnx FILE ...] [--bounded 128]

``GRAPH`` is what the OpenVINO engine serves: an ``auto`` cache entry's ``openvino-int8.xml``
(``--precision auto``'s choice where it is OpenVINO INT8) or an FP32 ``model.onnx``. Every
request here is one sentence (``bench.sentences``, one mask each, as the bench's c=1 load
sends), so each static model is ``[1, length]``. The graphs take turns, a few rounds; the
script prints each one's median time a call, what each static compile added to the process's
resident memory, whether the static models' top-1 answers equal the dynamic one's, how much of
each graph's time OpenVINO's own per-node counters (``PERF_COUNT``) account for (the rest of
the dynamic one's is its per-call shape work) and how many nodes each runs, by type.

``--hint`` sets ``INFERENCE_PRECISION_HINT`` on every compile, as the engine does for an FP32
graph served in bf16 (an INT8 IR is served with the plugin's default, no hint). Each
``--config`` is one more dynamic graph in the turns, compiled with that one plugin property
added (``INFERENCE_PRECISION_HINT=bf16``, ``ENABLE_CPU_PINNING=YES``, ...). Each ``--onnx`` is
an ONNX Runtime session in the turns too, at its defaults and the same threads, fed the inputs
its graph names (``token_type_ids`` zeros): the hand-written recipe's ``model-int8.onnx``
(``bench/contenders/ort_recipe_app.py``), so the engines alone compare as the bench's c=1 rows
do with their servers around them. ``--bounded N`` adds the graph compiled for bounded shapes,
``[1, 1..N]`` (one sentence of up to N tokens: the plugin knows the largest shape and the batch
size ahead of the call), to the turns.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from bench.sentences import sentence
from tiankong.engines.base import EncodedBatch, pad_prepared
from tiankong.export.quality_guard import model_encoder
from tiankong.model_sources import resolve_model

ROUNDS = 5
PROFILED_ROUNDS = 2


def compile_graph(
    graph: Path,
    threads: int,
    length: int | None,
    profile: bool = False,
    extra: dict[str, str] | None = None,
    bounded: int | None = None,
) -> Any:
    """An infer request on ``graph`` compiled as the engine compiles it (one stream, the latency
    hint), for ``[1, length]`` inputs when ``length`` is given, ``[1, 1..bounded]`` when
    ``bounded`` is, else the served dynamic shapes."""
    import openvino as ov

    core = ov.Core()
    model = core.read_model(str(graph))
    if length is not None or bounded is not None:
        tokens = length if length is not None else ov.Dimension(1, bounded)
        shapes = {
            "input_ids": ov.PartialShape([1, tokens]),
            "attention_mask": ov.PartialShape([1, tokens]),
            "mask_positions": ov.PartialShape([1]),
        }
        model.reshape({name: shapes[name] for name in model_inputs(model)})
    config = {"PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": "1"}
    config["INFERENCE_NUM_THREADS"] = str(threads)
    if profile:
        config["PERF_COUNT"] = "YES"
    config |= extra or {}
    return core.compile_model(model, "CPU", config).create_infer_request()


def model_inputs(model: Any) -> list[str]:
    return [min(port.get_names() & {"input_ids", "attention_mask", "mask_positions"})
            for port in model.inputs]  # fmt: skip


def runner(request: Any) -> Callable[[EncodedBatch], np.ndarray]:
    known = {"input_ids", "attention_mask", "mask_positions"}  # a port may carry more names
    names = [min(port.get_names() & known) for port in request.model_inputs]

    def run(batch: EncodedBatch) -> np.ndarray:
        request.infer(batch.feed(names))
        return np.array(request.get_output_tensor(0).data)

    return run


def onnx_runner(graph: Path, threads: int) -> Callable[[EncodedBatch], np.ndarray]:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
    names = [node.name for node in session.get_inputs()]

    def run(batch: EncodedBatch) -> np.ndarray:
        arrays = batch.feed(["input_ids", "attention_mask", "mask_positions"])
        arrays["token_type_ids"] = np.zeros_like(batch.input_ids)
        return np.asarray(session.run(None, {name: arrays[name] for name in names})[0])

    return run


def executed(item: Any) -> bool:
    """Whether a ``PERF_COUNT`` entry ran (not folded into another node or left out)."""
    return str(item.status).rsplit(".", 1)[-1] == "EXECUTED"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graph", type=Path)
    parser.add_argument("--model", required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sentences", type=int, default=60)
    parser.add_argument("--hint", choices=["f32", "bf16"], default="")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--onnx", action="append", default=[], type=Path, metavar="FILE")
    parser.add_argument("--bounded", type=int, metavar="N", help="add [1, 1..N] to the turns")
    args = parser.parse_args()
    base = {"INFERENCE_PRECISION_HINT": args.hint} if args.hint else {}
    encoder = model_encoder(resolve_model(args.model).path)
    batches = [
        pad_prepared([encoder.prepare(sentence(index))], encoder.pad_id)
        for index in range(args.sentences)
    ]
    process = psutil.Process()
    before = process.memory_info().rss
    dynamic = runner(compile_graph(args.graph, args.threads, None, extra=base))
    print(f"dynamic shapes: compiled, +{(process.memory_info().rss - before) / 2**20:.0f} MiB")
    static: dict[int, Callable[[EncodedBatch], np.ndarray]] = {}
    for length in sorted({batch.input_ids.shape[1] for batch in batches}):
        before, began = process.memory_info().rss, time.perf_counter()
        static[length] = runner(compile_graph(args.graph, args.threads, length, extra=base))
        print(
            f"[1, {length}]: compiled in {time.perf_counter() - began:.2f} s, "
            f"+{(process.memory_info().rss - before) / 2**20:.0f} MiB"
        )

    def run_static(batch: EncodedBatch) -> np.ndarray:
        return static[batch.input_ids.shape[1]](batch)

    graphs = {"dynamic": dynamic, "static": run_static}
    if args.bounded:
        before = process.memory_info().rss
        graphs[f"bounded [1, 1..{args.bounded}]"] = runner(
            compile_graph(args.graph, args.threads, None, extra=base, bounded=args.bounded)
        )
        print(f"bounded: compiled, +{(process.memory_info().rss - before) / 2**20:.0f} MiB")
    for item in args.config:
        key, _, value = item.partition("=")
        graphs[f"dynamic, {item}"] = runner(
            compile_graph(args.graph, args.threads, None, extra=base | {key: value})
        )
    for path in args.onnx:
        graphs[f"onnxruntime {path.parent.name}/{path.name}"] = onnx_runner(path, args.threads)
    same = sum(
        int(dynamic(batch).argmax(-1)[0] == run_static(batch).argmax(-1)[0]) for batch in batches
    )
    print(f"top-1 equal, static against dynamic: {same} of {len(batches)}")
    times: dict[str, list[float]] = {name: [] for name in graphs}
    for _ in range(ROUNDS):
        for name, run in graphs.items():
            for batch in batches:
                began = time.perf_counter()
                run(batch)
                times[name].append(time.perf_counter() - began)
    medians = {name: statistics.median(values) * 1e3 for name, values in times.items()}
    print(f"ms a call, medians of {ROUNDS} rounds taking turns, {args.threads} threads:")
    for name, value in medians.items():
        print(f"  {name}: {value:.2f}")
    for name, value in medians.items():
        if name != "dynamic":
            print(f"  {name} / dynamic: {value / medians['dynamic']:.2f}")
    for length in (None, batches[0].input_ids.shape[1]):
        request = compile_graph(args.graph, args.threads, length, profile=True, extra=base)
        run = runner(request)
        chosen = [batch for batch in batches if length in (None, batch.input_ids.shape[1])]
        wall, nodes = 0.0, 0.0
        for batch in chosen:  # warm
            run(batch)
        for _ in range(PROFILED_ROUNDS):
            for batch in chosen:
                began = time.perf_counter()
                run(batch)
                wall += time.perf_counter() - began
                nodes += sum(item.real_time.total_seconds() for item in request.profiling_info)
        calls = PROFILED_ROUNDS * len(chosen)
        print(
            f"{'dynamic' if length is None else f'static [1, {length}]'} with PERF_COUNT: "
            f"{wall / calls * 1e3:.2f} ms a call, its nodes {nodes / calls * 1e3:.2f} ms "
            f"({nodes / wall:.0%})"
        )
        ran = Counter(item.node_type for item in request.profiling_info if executed(item))
        print(
            f"  nodes {len(request.profiling_info)}, run {sum(ran.values())}: "
            + ", ".join(f"{kind} {count}" for kind, count in ran.most_common(8))
        )


if __name__ == "__main__":
    main()
