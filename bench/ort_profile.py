"""Where an ONNX Runtime forward spends its time, per operator type (ORT's own profiler).

    python -m bench.ort_profile --model DIR --precision int8 --batch 1,16
    python -m bench.ort_profile --model DIR --onnx-file RECIPE_DIR/model-int8.onnx --batch 1

Loads tiankong's cached export of ``DIR`` (made on first use, as ``tiankong serve`` would), or
``--onnx-file`` (any BERT graph that takes ``input_ids``, ``attention_mask`` and optionally
``token_type_ids`` or tiankong's ``mask_positions``, such as the hand-written ORT recipe's),
runs batches of the bench's sentences with ``enable_profiling``, and prints each operator
type's share of the kernel time, the five slowest nodes and the milliseconds per sentence.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from bench.sentences import sentences

RUNS = 20


def profile(
    model: Path, precision: str, batch: int, threads: int, onnx_file: Path | None = None
) -> dict[str, Any]:
    import onnxruntime as ort

    from tiankong import FillMasker, Settings
    from tiankong.engines.base import pad_batch
    from tiankong.export.export_cache import ensure_export

    masker = FillMasker.load(str(model), Settings(engine="onnx", precision=precision))
    if onnx_file is None:
        onnx_file = ensure_export(masker.model, precision, masker.settings).onnx_file
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.enable_profiling = True
    options.profile_file_prefix = f"/tmp/tiankong-ort-profile-{precision}-{batch}"
    session = ort.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])
    feeds = []
    for run in range(RUNS + 2):
        prepared = [masker.prepare(text) for text in sentences(run * batch, batch)]
        padded = pad_batch(
            [p.input_ids for p in prepared],
            [p.mask_indices for p in prepared],
            masker.encoder.pad_id,
        )
        feeds.append(
            {
                "input_ids": padded.input_ids,
                "attention_mask": padded.attention_mask,
                "mask_positions": padded.mask_positions,
                "token_type_ids": np.zeros_like(padded.input_ids),
            }
        )
    names = {node.name for node in session.get_inputs()}
    for feed in feeds[:2]:
        session.run(None, {k: v for k, v in feed.items() if k in names})
    walls = []
    for feed in feeds[2:]:
        started = time.perf_counter()
        session.run(None, {k: v for k, v in feed.items() if k in names})
        walls.append(time.perf_counter() - started)
    trace = json.loads(Path(session.end_profiling()).read_text())
    # Every run is profiled; count only the timed ones (after the two warm-up runs).
    run_starts = sorted(e["ts"] for e in trace if e.get("name") == "model_run")
    timed_from = run_starts[2] if len(run_starts) > 2 else 0
    by_op: dict[str, float] = defaultdict(float)
    by_node: dict[str, float] = defaultdict(float)
    for event in trace:
        if (
            event.get("cat") == "Node"
            and event["name"].endswith("_kernel_time")
            and event["ts"] >= timed_from
        ):
            by_op[event["args"]["op_name"]] += event["dur"]
            by_node[event["name"].removesuffix("_kernel_time")] += event["dur"]
    total = sum(by_op.values())
    runs_profiled = RUNS
    return {
        "graph": str(onnx_file),
        "precision": precision,
        "batch": batch,
        "threads": threads,
        "wall_ms_per_batch_p50": 1e3 * float(np.median(walls)),
        "wall_ms_per_sentence": 1e3 * float(np.median(walls)) / batch,
        "kernel_ms_per_batch": total / 1e3 / runs_profiled,
        "ops_pct": {
            op: round(100 * t / total, 1) for op, t in sorted(by_op.items(), key=lambda i: -i[1])
        },
        "slowest_nodes_ms": {
            node: round(t / 1e3 / runs_profiled, 3)
            for node, t in sorted(by_node.items(), key=lambda i: -i[1])[:5]
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, type=Path)
    parser.add_argument("--precision", default="int8", choices=("fp32", "int8"))
    parser.add_argument("--batch", default="1,16")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--onnx-file", type=Path, default=None)
    args = parser.parse_args()
    for batch in (int(b) for b in args.batch.split(",")):
        found = profile(args.model, args.precision, batch, args.threads, args.onnx_file)
        print(json.dumps(found, ensure_ascii=False))


if __name__ == "__main__":
    main()
