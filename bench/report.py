"""From raw measurements to ``latest.json``, ``latest.md`` and ``latest.png``: the roofline
percentages, the ratios against the pipeline and the best other contender, and the goals."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

GOAL_C1_VS_PIPELINE = 0.25
GOAL_C1_VS_BEST = 0.5
GOAL_C20_VS_PIPELINE = 8.0
GOAL_C20_VS_BEST = 3.0
GOAL_RSS_VS_PIPELINE = 0.5
GOAL_INT8_AGREEMENT = 0.98


def limit_ms(model: dict[str, Any], peaks: dict[str, Any], precision: str) -> float | None:
    """The fastest one sentence could go on every core: the encoder's matmuls at the GEMM peak
    of ``precision``, attention and the head at the FP32 peak."""
    fp32 = peaks.get("fp32_gflops")
    if not fp32:
        return None
    flops = model["flops"]
    if precision == "int8" and peaks.get("int8_gops"):
        seconds = flops["encoder"] / (peaks["int8_gops"] * 1e9) + (
            flops["attention"] + flops["head_at_masks"]
        ) / (fp32 * 1e9)
    else:
        seconds = flops["total"] / (fp32 * 1e9)
    return 1e3 * seconds


def measured(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [row for row in rows if "c20" in row]


def analyse(results: dict[str, Any]) -> None:
    """Add ``limits``, per-row ``roofline_pct`` and ``ratios``, and ``goals``, in place."""
    peaks = results.get("peaks", {})
    for model in results["models"]:
        if "contenders" not in model:
            continue
        model["limits"] = {
            precision: limit_ms(model, peaks, precision) for precision in ("fp32", "int8")
        }
        rows = measured(model["contenders"])
        pipeline = next((row for row in rows if row["key"] == "pipeline"), None)
        others = [row for row in rows if row["family"] != "tiankong"]
        best_c1 = min(others, key=lambda row: row["c1"]["p50_ms"], default=None)
        best_c20 = max(others, key=lambda row: row["c20"]["requests_per_s"], default=None)
        for row in rows:
            limit = model["limits"].get(row["precision"]) or model["limits"]["fp32"]
            if limit:
                row["roofline_pct"] = {
                    "c1_p50": 100 * limit / row["c1"]["p50_ms"],
                    "c20": 100 * row["c20"]["requests_per_s"] * limit / 1e3,
                }
            ratios: dict[str, Any] = {}
            if pipeline is not None:
                ratios["c1_vs_pipeline"] = row["c1"]["p50_ms"] / pipeline["c1"]["p50_ms"]
                ratios["c20_vs_pipeline"] = (
                    row["c20"]["requests_per_s"] / pipeline["c20"]["requests_per_s"]
                )
                ratios["rss_vs_pipeline"] = row["rss_after_load_mb"] / pipeline["rss_after_load_mb"]
            if row["family"] == "tiankong" and best_c1 is not None and best_c20 is not None:
                ratios["c1_vs_best_other"] = row["c1"]["p50_ms"] / best_c1["c1"]["p50_ms"]
                ratios["best_other_c1"] = best_c1["key"]
                ratios["c20_vs_best_other"] = (
                    row["c20"]["requests_per_s"] / best_c20["c20"]["requests_per_s"]
                )
                ratios["best_other_c20"] = best_c20["key"]
            row["ratios"] = ratios
        for entry in model["offline"]:
            precision = str(entry.get("precision", "fp32"))
            limit = model["limits"].get(precision) or model["limits"]["fp32"]
            if limit and "sentences_per_s" in entry:
                entry["roofline_pct"] = 100 * entry["sentences_per_s"] * limit / 1e3
    results["goals"] = goals(results)


def primary_model(results: dict[str, Any]) -> dict[str, Any] | None:
    """The bert-base-shaped model the goals are about; else (--quick) the first one run."""
    run = [model for model in results["models"] if "contenders" in model]
    return next((model for model in run if model["key"] == "random-base"), run[0] if run else None)


def goals(results: dict[str, Any]) -> dict[str, Any]:
    model = primary_model(results)
    out: dict[str, Any] = {"model": model["key"] if model else None, "rows": []}
    tiankong_rows = (
        [r for r in measured(model["contenders"]) if r["family"] == "tiankong"] if model else []
    )

    def check(name: str, target: str, judge: Any) -> None:
        cells = {}
        for row in tiankong_rows:
            ratios = row.get("ratios", {})
            try:
                cells[row["key"]] = judge(row, ratios)
            except (KeyError, TypeError, ZeroDivisionError):
                cells[row["key"]] = {"text": "not measured", "pass": None}
        out["rows"].append({"goal": name, "target": target, "cells": cells})

    def c1(row: dict[str, Any], r: dict[str, Any]) -> dict[str, Any]:
        ok = r["c1_vs_pipeline"] <= GOAL_C1_VS_PIPELINE and r["c1_vs_best_other"] <= GOAL_C1_VS_BEST
        return {
            "text": f"{r['c1_vs_pipeline']:.2f}x pipeline, {r['c1_vs_best_other']:.2f}x "
            f"{r['best_other_c1']}",
            "pass": ok,
        }

    def c20(row: dict[str, Any], r: dict[str, Any]) -> dict[str, Any]:
        errors = row["c20"]["errors"]
        ok = (
            r["c20_vs_pipeline"] >= GOAL_C20_VS_PIPELINE
            and r["c20_vs_best_other"] >= GOAL_C20_VS_BEST
            and errors == 0
        )
        return {
            "text": f"{r['c20_vs_pipeline']:.1f}x pipeline, {r['c20_vs_best_other']:.2f}x "
            f"{r['best_other_c20']}, {errors} errors",
            "pass": ok,
        }

    def rss(row: dict[str, Any], r: dict[str, Any]) -> dict[str, Any]:
        return {
            "text": f"{r['rss_vs_pipeline']:.2f}x pipeline",
            "pass": r["rss_vs_pipeline"] <= GOAL_RSS_VS_PIPELINE,
        }

    check("c=1 p50", f"<= {GOAL_C1_VS_PIPELINE}x pipeline, <= {GOAL_C1_VS_BEST}x best other", c1)
    check(
        "c=20 requests/s",
        f">= {GOAL_C20_VS_PIPELINE:.0f}x pipeline, >= {GOAL_C20_VS_BEST:.0f}x best other, 0 errors",
        c20,
    )
    check("RSS after load", f"<= {GOAL_RSS_VS_PIPELINE}x pipeline", rss)
    out["int8_agreement"] = int8_agreement(results)
    return out


def int8_agreement(results: dict[str, Any]) -> dict[str, Any]:
    for model in results["models"]:
        if model["key"] != "bundled":
            continue
        if "contenders" not in model:
            return {"text": f"not measured: {model.get('missing')}", "pass": None}
        for row in model["contenders"]:
            quality = (row.get("server") or {}).get("quality") or {}
            if "top1_agreement" in quality:
                value = float(quality["top1_agreement"])
                return {
                    "text": f"{value:.1%} top-1, {quality.get('top5_overlap', float('nan')):.1%} "
                    f"top-5 overlap on {quality.get('masks')} masks",
                    "value": value,
                    "pass": value >= GOAL_INT8_AGREEMENT,
                }
    return {
        "text": "not measured (no bundled model with an INT8 tiankong server in this run)",
        "pass": None,
    }


def fmt(value: Any, digits: int = 1, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.{digits}f}{unit}"


def other_load(row: dict[str, Any]) -> str:
    load = row.get("other_load") or {}
    if "pct_of_machine" not in load:
        return "—"
    text = fmt(load["pct_of_machine"], 0, "%")
    if "niced_pct_of_machine" in load:
        text += f" ({fmt(load['niced_pct_of_machine'], 0, '%')} niced)"
    return text


def verdict(passed: bool | None) -> str:
    return {True: "pass", False: "**FAIL**", None: "—"}[passed]


def model_section(model: dict[str, Any], results: dict[str, Any]) -> list[str]:
    lines = [f"### {model['key']}", ""]
    if "contenders" not in model:
        return [*lines, f"Not run: {model['missing']}.", ""]
    config = model["config"]
    limits = model["limits"]
    flops = model["flops"]
    lines += [
        f"`{model['path']}`: {config['num_hidden_layers']} layers, hidden {config['hidden_size']}, "
        f"vocab {config['vocab_size']}; {model['tokens_per_sentence']:.1f} tokens per sentence. "
        f"Roofline: {flops['total'] / 1e9:.2f} GFLOP per sentence "
        f"({flops['head_at_masks'] / 1e6:.0f} MFLOP of it the head at the mask) → "
        f"{fmt(limits['fp32'], 2)} ms FP32, {fmt(limits['int8'], 2)} ms INT8 at the measured "
        "peaks.",
        "",
        "| contender | threads | cold start s | c=1 p50 / p95 / p99 ms | c=1 % limit "
        "| c=20 req/s | c=20 p50 / p99 ms | errors | c=20 % limit | RSS MB "
        "| c=1 vs pipeline | c=20 vs pipeline | RSS vs pipeline | c=1 vs best other "
        "| c=20 vs best other | other load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in model["contenders"]:
        if "c20" not in row:
            continue
        c1, c20 = row["c1"], row["c20"]
        pct = row.get("roofline_pct", {})
        r = row.get("ratios", {})
        start = fmt(row["cold_start_s"])
        if "first_start_s" in row:
            start += f" (first {fmt(row['first_start_s'])})"
        lines.append(
            f"| {row['key']} | {row.get('threads') or '—'} | {start} "
            f"| {fmt(c1['p50_ms'])} / {fmt(c1['p95_ms'])} / {fmt(c1['p99_ms'])} "
            f"| {fmt(pct.get('c1_p50'), 1, '%')} | {fmt(c20['requests_per_s'])} "
            f"| {fmt(c20['p50_ms'], 0)} / {fmt(c20['p99_ms'], 0)} | {c20['errors']} "
            f"| {fmt(pct.get('c20'), 1, '%')} | {fmt(row['rss_after_load_mb'], 0)} "
            f"| {fmt(r.get('c1_vs_pipeline'), 2, 'x')} | {fmt(r.get('c20_vs_pipeline'), 2, 'x')} "
            f"| {fmt(r.get('rss_vs_pipeline'), 2, 'x')} "
            f"| {fmt(r.get('c1_vs_best_other'), 2, 'x')} "
            f"| {fmt(r.get('c20_vs_best_other'), 2, 'x')} "
            f"| {other_load(row)} |"
        )
    skipped = [row for row in model["contenders"] if "skipped" in row]
    for row in skipped:
        reason = row["skipped"].strip().splitlines()
        short = reason[0] if len(reason) < 2 else f"{reason[0]} … {reason[-1].strip()}"
        lines.append(f"\n{row['key']} not run: {short}")
    calibrated = [row for row in model["contenders"] if row.get("calibration")]
    if calibrated:
        lines += ["", "Thread calibration (c=1, the lower p50 is kept):", ""]
        lines += ["| contender | threads | c=1 p50 ms | requests |", "|---|---:|---:|---:|"]
        for row in calibrated:
            for cal in row["calibration"]:
                kept = " (kept)" if cal["threads"] == row.get("threads") else ""
                lines.append(
                    f"| {row['key']} | {cal['threads']}{kept} | {fmt(cal['p50_ms'])} "
                    f"| {cal['requests']} |"
                )
    servers = [row for row in model["contenders"] if row.get("server")]
    if servers:
        lines += ["", "tiankong servers after the load:", ""]
        lines += [
            "| contender | engine / precision | result-cache hits / misses | engine batches "
            "| mean batch |",
            "|---|---|---:|---:|---:|",
        ]
        for row in servers:
            info = row["server"]
            lines.append(
                f"| {row['key']} | {info['engine']} / {info['precision']} "
                f"| {fmt(info['result_cache_hits'], 0)} "
                f"/ {fmt(info.get('result_cache_misses'), 0)} "
                f"| {fmt(info['engine_batches'], 0)} "
                f"| {fmt(info['mean_batch_size'], 2)} |"
            )
    if model["offline"]:
        count = results["bench"]["offline_sentences"]
        lines += [
            "",
            f"Offline batch, {count} sentences in chunks of {results['bench']['offline_chunk']}:",
            "",
        ]
        lines += [
            "| target | engine / precision | threads | sentences/s | % limit | other load |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for entry in model["offline"]:
            if "error" in entry:
                lines.append(f"| {entry['target']} | failed: {entry['error']} | | | | |")
                continue
            lines.append(
                f"| {entry['target']} | {entry['engine']} / {entry['precision']} "
                f"| {entry['threads']} | {fmt(entry['sentences_per_s'])} "
                f"| {fmt(entry.get('roofline_pct'), 1, '%')} "
                f"| {other_load(entry)} |"
            )
    return [*lines, ""]


def goals_section(results: dict[str, Any]) -> list[str]:
    goal_data = results["goals"]
    lines = [f"### Goals ({goal_data['model'] or 'no bert-base-shaped model run'})", ""]
    keys = list(dict.fromkeys(key for row in goal_data["rows"] for key in row["cells"]))
    if keys:
        lines += [
            "| goal | target | " + " | ".join(keys) + " |",
            "|---|---|" + "---|" * len(keys),
        ]
        for row in goal_data["rows"]:
            cells = [row["cells"].get(key, {"text": "—", "pass": None}) for key in keys]
            lines.append(
                f"| {row['goal']} | {row['target']} | "
                + " | ".join(f"{cell['text']}: {verdict(cell['pass'])}" for cell in cells)
                + " |"
            )
    agreement = goal_data["int8_agreement"]
    lines += [
        "",
        f"INT8 top-1 agreement with FP32 on the bundled model (goal >= {GOAL_INT8_AGREEMENT:.0%}): "
        f"{agreement['text']}: {verdict(agreement['pass'])}",
        "",
    ]
    return lines


def markdown(results: dict[str, Any]) -> str:
    bench = results["bench"]
    env = results["machine"]
    peaks = results.get("peaks", {})
    versions = ", ".join(
        f"{name} {version}" for name, version in env["versions"].items() if version
    )
    lines = [
        f"## Benchmark{' (--quick smoke run)' if bench['quick'] else ''}",
        "",
        f"`{bench['command']}` at commit {bench['commit']}, {bench['started']}, "
        f"{bench['seconds']:.0f} s. {env['cpu_model']}, {env['physical_cores']} cores "
        f"({env['logical_cpus']} logical), {env['memory_gb']} GB; {versions}.",
        "",
        f"GEMM peaks ({peaks.get('gemm_size')}³ matmuls, {peaks.get('threads')} threads): "
        f"FP32 {fmt(peaks.get('fp32_gflops'))} GFLOP/s "
        f"(numpy {fmt(peaks.get('fp32_numpy_gflops'))}, "
        f"ONNX Runtime {fmt(peaks.get('fp32_ort_gflops'))}), INT8 {fmt(peaks.get('int8_gops'))} "
        'Gop/s (ONNX Runtime MatMulInteger). "% limit" is the roofline time over the measured '
        "time (c=1) or the measured rate over the roofline rate (c=20, offline).",
        "",
        f"Each server on 127.0.0.1, driven by a closed-loop aiohttp client in the bench process "
        f"on the same cores, every request a unique ~17-character sentence with one [MASK], "
        f"top_k 5: c=1 over {bench['c1_requests']} requests (at most {bench['c1_max_s']:.0f} s), "
        f"c={bench['concurrency']} for {bench['c20_duration_s']:.0f} s, RSS (server and children) "
        "after the load, cold start from process start to the first 200 on /ready (tiankong) or "
        '/health (the others, which answer only once loaded and warmed up). "best other": the '
        'best contender that isn\'t tiankong. "other load": CPU used by other programs on the '
        "machine while that contender was measured, as a share of all cores (0% is a clean "
        "measurement); its niced part mostly fills cycles the bench leaves idle.",
        "",
    ]
    lines += goals_section(results)
    for model in results["models"]:
        lines += model_section(model, results)
    return "\n".join(lines).rstrip() + "\n"


def chart(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = [m for m in results["models"] if "contenders" in m]
    keys = [row["key"] for row in models[0]["contenders"]] if models else []
    panels = [
        ("c=1 p50 ms (log)", lambda r: r["c1"]["p50_ms"], True),
        (
            f"c={results['bench']['concurrency']} requests/s",
            lambda r: r["c20"]["requests_per_s"],
            False,
        ),
        ("RSS after load, MB", lambda r: r["rss_after_load_mb"], False),
        ("cold start to ready, s", lambda r: r["cold_start_s"], False),
    ]
    figure, axes = plt.subplots(2, 2, figsize=(14, 9))
    width = 0.8 / max(1, len(models))
    for axis, (title, value, log) in zip(axes.flat, panels, strict=True):
        for index, model in enumerate(models):
            rows = {row["key"]: row for row in model["contenders"]}
            heights = [
                value(rows[key]) if key in rows and "c20" in rows[key] else 0.0 for key in keys
            ]
            positions = [k + index * width for k in range(len(keys))]
            axis.bar(positions, heights, width, label=model["key"])
            if title.startswith("c=1") and model["limits"].get("fp32"):
                axis.axhline(
                    model["limits"]["fp32"],
                    linestyle="--",
                    linewidth=1,
                    color=f"C{index}",
                    label=f"{model['key']} FP32 limit",
                )
        axis.set_title(title)
        axis.set_xticks([k + width * (len(models) - 1) / 2 for k in range(len(keys))])
        axis.set_xticklabels(keys, rotation=30, ha="right", fontsize=8)
        if log:
            axis.set_yscale("log")
        axis.legend(fontsize=7)
    figure.suptitle(
        f"tiankong bench, {results['machine']['cpu_model']}, "
        f"{results['machine']['physical_cores']} cores, commit {results['bench']['commit']}"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def finish(results: dict[str, Any], out_dir: Path) -> None:
    analyse(results)
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        chart(results, out_dir / "latest.png")
    except ImportError as error:
        results["chart"] = f"no chart: {error} (pip install 'tiankong[bench]')"
    (out_dir / "latest.json").write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    (out_dir / "latest.md").write_text(markdown(results))


def main() -> None:
    """``python -m bench.report RESULTS.json [OUT_DIR]``: redo the analysis, table and chart
    of a finished run without measuring again."""
    import sys

    source = Path(sys.argv[1])
    out_dir = Path(sys.argv[2]) if len(sys.argv) > 2 else source.parent
    finish(json.loads(source.read_text()), out_dir)


if __name__ == "__main__":
    main()
