"""From raw measurements to ``latest.json``, ``latest.md`` and ``latest.png``: the roofline
percentages, the ratios against the best peer and the pipeline, and issues 13's and 23's goals,
each computed in this run and printed met or missed."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

# Issue 13's goals, as ratios in one run on whichever machine runs it.
GOAL_C1_VS_BEST_PEER = 0.8  # c=1 p50 at most this times the best peer's
GOAL_C20_VS_BEST_PEER = 1.3  # c=20 requests/s at least this times the best peer's, 0 errors
GOAL_OVERHEAD = 1.3  # tiankong serve --engine fake over the bare-FastAPI floor, c=1 p50
GOAL_RSS_VS_PIPELINE = 0.5
GOAL_INT8_ROOFLINE_PCT = 60.0  # batched INT8 throughput as a share of the INT8 roofline (aim)
GOAL_INT8_AGREEMENT = 0.98

# Issue 23's goals: tiankong's default settings (tiankong-auto), not its best row, against the
# best peer; the serving cost against the floor at both loads; the index's cost at c=1.
GOAL23_C1_VS_BEST_PEER = 0.8
GOAL23_C20_VS_BEST_PEER = {"bundled": 1.5}  # other models: GOAL_C20_VS_BEST_PEER
GOAL23_OVERHEAD_C1 = 2.0  # tiankong-fake c=1 p50 at most this times the floor's
GOAL23_OVERHEAD_C20 = 0.5  # tiankong-fake c=20 rate at least this times the floor's
GOAL23_INDEX_C1 = 1.25  # tiankong-auto-index c=1 p50 at most this times tiankong-auto's (bundled)


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


def role(row: dict[str, Any]) -> str:
    """``peer``, ``tiankong`` or ``reference`` (floor, fake engine); older runs lack the field."""
    if "role" in row:
        return str(row["role"])
    return "tiankong" if row["family"] == "tiankong" else "peer"


def best_peers(rows: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The error-free peer (no failed request at c=1 or c=20) with the lowest c=1 p50, and the
    one with the highest c=20 rate; any peer where none was error-free."""
    every = [row for row in rows if role(row) == "peer"]
    clean = [row for row in every if row["c1"].get("errors", 0) == 0 == row["c20"]["errors"]]
    peers = clean or every
    best_c1 = min(peers, key=lambda row: row["c1"]["p50_ms"], default=None)
    best_c20 = max(
        peers,
        key=lambda row: (row["c20"]["errors"] == 0, row["c20"]["requests_per_s"]),
        default=None,
    )
    return best_c1, best_c20


def analyse(results: dict[str, Any]) -> None:
    """Add ``limits``, per-row ``roofline_pct`` and ``ratios``, the serving ``overhead``, and
    ``goals``, in place."""
    peaks = results.get("peaks", {})
    for model in results["models"]:
        if "contenders" not in model:
            continue
        model["limits"] = {
            precision: limit_ms(model, peaks, precision) for precision in ("fp32", "int8")
        }
        rows = measured(model["contenders"])
        pipeline = next((row for row in rows if row["key"] == "pipeline"), None)
        best_c1, best_c20 = best_peers(rows)
        model["best_peers"] = {
            "c1": best_c1["key"] if best_c1 else None,
            "c20": best_c20["key"] if best_c20 else None,
        }
        for row in rows:
            limit = model["limits"].get(row["precision"]) or model["limits"]["fp32"]
            if limit and role(row) != "reference":
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
            if best_c1 is not None and best_c20 is not None:
                ratios["c1_vs_best_peer"] = row["c1"]["p50_ms"] / best_c1["c1"]["p50_ms"]
                ratios["c20_vs_best_peer"] = (
                    row["c20"]["requests_per_s"] / best_c20["c20"]["requests_per_s"]
                )
            row["ratios"] = ratios
        by_key = {row["key"]: row for row in rows}
        if "floor" in by_key and "tiankong-fake" in by_key:
            floor_ms = by_key["floor"]["c1"]["p50_ms"]
            fake_ms = by_key["tiankong-fake"]["c1"]["p50_ms"]
            model["overhead"] = {
                "floor_p50_ms": floor_ms,
                "fake_p50_ms": fake_ms,
                "ratio": fake_ms / floor_ms,
            }
        for entry in model["offline"]:
            precision = str(entry.get("precision", "fp32"))
            limit = model["limits"].get(precision) or model["limits"]["fp32"]
            if limit and "sentences_per_s" in entry:
                entry["roofline_pct"] = 100 * entry["sentences_per_s"] * limit / 1e3
    results["goals"] = goals(results)


def goal(
    model: str, name: str, target: str, text: str, ratio: float | None, ok: bool | None
) -> dict[str, Any]:
    return {
        "model": model,
        "goal": name,
        "target": target,
        "measured": text,
        "ratio": ratio,
        "pass": ok,
    }


def c1_goal(
    model: str, name: str, ours: dict[str, Any] | None, best: dict[str, Any] | None, limit: float
) -> dict[str, Any]:
    """``ours``'s c=1 p50 at most ``limit`` times the best c=1 peer's."""
    target = f"<= {limit}x best peer"
    if not (ours and best):
        return goal(model, name, target, "not measured", None, None)
    ratio = ours["c1"]["p50_ms"] / best["c1"]["p50_ms"]
    text = (
        f"{ours['key']} {ours['c1']['p50_ms']:.2f} ms vs {best['key']} "
        f"{best['c1']['p50_ms']:.2f} ms"
    )
    return goal(model, name, target, text, ratio, ratio <= limit)


def c20_goal(
    model: str,
    name: str,
    ours: dict[str, Any] | None,
    best: dict[str, Any] | None,
    wanted: float,
    errors: int,
) -> dict[str, Any]:
    """``ours``'s c=20 rate at least ``wanted`` times the best c=20 peer's, with no ``errors``."""
    target = f">= {wanted}x best peer, 0 errors"
    if not (ours and best):
        return goal(model, name, target, "not measured", None, None)
    ratio = ours["c20"]["requests_per_s"] / best["c20"]["requests_per_s"]
    text = (
        f"{ours['key']} {ours['c20']['requests_per_s']:.1f} req/s ({errors} errors) vs "
        f"{best['key']} {best['c20']['requests_per_s']:.1f}"
    )
    return goal(model, name, target, text, ratio, ratio >= wanted and errors == 0)


def model_goals(model: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 13's goals on one model, each judged on tiankong's best row for it (named)."""
    key = model["key"]
    rows = measured(model["contenders"])
    judged = [row for row in rows if role(row) == "tiankong"]
    best_c1, best_c20 = best_peers(rows)
    pipeline = next((row for row in rows if row["key"] == "pipeline"), None)
    out = []
    missing = "not measured"
    fastest = min(judged, key=lambda row: row["c1"]["p50_ms"], default=None)
    out.append(c1_goal(key, "c=1 p50", fastest, best_c1, GOAL_C1_VS_BEST_PEER))
    ours = max(
        judged,
        key=lambda r: (r["c20"]["errors"] == 0, r["c20"]["requests_per_s"]),
        default=None,
    )
    errors = ours["c20"]["errors"] if ours else 0
    out.append(c20_goal(key, "c=20 requests/s", ours, best_c20, GOAL_C20_VS_BEST_PEER, errors))
    target = f"<= {GOAL_OVERHEAD}x floor"
    overhead = model.get("overhead")
    if overhead:
        text = (
            f"tiankong-fake {overhead['fake_p50_ms']:.2f} ms vs floor "
            f"{overhead['floor_p50_ms']:.2f} ms"
        )
        ratio = overhead["ratio"]
        out.append(
            goal(key, "serving overhead (c=1 p50)", target, text, ratio, ratio <= GOAL_OVERHEAD)
        )
    else:
        out.append(goal(key, "serving overhead (c=1 p50)", target, missing, None, None))
    target = f"<= {GOAL_RSS_VS_PIPELINE}x pipeline"
    if judged and pipeline:
        ours = min(judged, key=lambda row: row["rss_after_load_mb"])
        ratio = ours["rss_after_load_mb"] / pipeline["rss_after_load_mb"]
        text = (
            f"{ours['key']} {ours['rss_after_load_mb']:.0f} MB vs pipeline "
            f"{pipeline['rss_after_load_mb']:.0f} MB"
        )
        out.append(goal(key, "RSS after load", target, text, ratio, ratio <= GOAL_RSS_VS_PIPELINE))
    else:
        out.append(goal(key, "RSS after load", target, missing, None, None))
    target = f">= {GOAL_INT8_ROOFLINE_PCT:.0f}% of the INT8 roofline (aim)"
    batched = next((e for e in model["offline"] if e.get("target") == "tiankong-onnx-int8"), None)
    if batched and "roofline_pct" in batched:
        share = float(batched["roofline_pct"])
        text = (
            f"offline tiankong-onnx-int8 {batched['sentences_per_s']:.1f} sentences/s "
            f"(served as {batched.get('precision')})"
        )
        out.append(
            goal(
                key,
                "batched INT8 throughput",
                target,
                f"{text}: {share:.1f}%",
                share / 100,
                share >= GOAL_INT8_ROOFLINE_PCT,
            )
        )
    else:
        out.append(goal(key, "batched INT8 throughput", target, missing, None, None))
    return out


def served_agreement(row: dict[str, Any]) -> float | None:
    """Top-1 agreement with FP32 of what a tiankong server serves (its /info): the chosen
    candidate's under ``--precision auto`` (the lower of two split by batch size), the INT8
    guard's for INT8, 1.0 for ONNX FP32."""
    server = row.get("server") or {}
    quality = server.get("quality") or {}
    choice = quality.get("choice") or {}
    served = [(part["engine"], part["precision"]) for part in (choice, choice.get("split")) if part]
    agreed = [
        float(candidate["top1_agreement"])
        for candidate in choice.get("candidates", [])
        if (candidate["engine"], candidate["precision"]) in served
    ]
    if agreed:
        return min(agreed)
    if server.get("precision") == "int8" and "top1_agreement" in quality:
        return float(quality["top1_agreement"])
    return 1.0 if server.get("precision") == "fp32" else None


def issue23_goals(model: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 23's goals on one model: the defaults (tiankong-auto) against the best peer, the
    agreement of what they serve, the fake engine against the floor, and the index's cost.
    Where the bench took a goal's pair again taking turns (``bench.paired``), the goal is judged
    on those rounds and the sequential rows' ratio is shown beside it."""
    key = model["key"]
    rows = {row["key"]: row for row in measured(model["contenders"])}
    best_c1, best_c20 = best_peers(list(rows.values()))
    auto = rows.get("tiankong-auto")
    out = []
    missing = "not measured"
    out.append(c1_goal(key, "defaults, c=1 p50", auto, best_c1, GOAL23_C1_VS_BEST_PEER))
    wanted, _ = issue23_limit("defaults, c=20 requests/s", key)
    errors = auto["c1"].get("errors", 0) + auto["c20"]["errors"] if auto else 0
    out.append(c20_goal(key, "defaults, c=20 requests/s", auto, best_c20, wanted, errors))
    target = f">= {GOAL_INT8_AGREEMENT:.0%} top-1 with FP32"
    agreement = served_agreement(auto) if auto else None
    if auto and agreement is not None:
        server = auto["server"]
        text = f"{server['engine']} {server['precision']}: {agreement:.1%}"
        ok = agreement >= GOAL_INT8_AGREEMENT
        out.append(goal(key, "defaults, agreement", target, text, agreement, ok))
    else:
        out.append(goal(key, "defaults, agreement", target, missing, None, None))
    floor, fake = rows.get("floor"), rows.get("tiankong-fake")
    target = f"<= {GOAL23_OVERHEAD_C1}x floor"
    if floor and fake:
        ratio = fake["c1"]["p50_ms"] / floor["c1"]["p50_ms"]
        text = (
            f"tiankong-fake {fake['c1']['p50_ms']:.2f} ms vs floor {floor['c1']['p50_ms']:.2f} ms"
        )
        ok = ratio <= GOAL23_OVERHEAD_C1
        out.append(goal(key, "serving overhead, c=1 p50", target, text, ratio, ok))
        ratio = fake["c20"]["requests_per_s"] / floor["c20"]["requests_per_s"]
        text = (
            f"tiankong-fake {fake['c20']['requests_per_s']:.0f} req/s vs floor "
            f"{floor['c20']['requests_per_s']:.0f}"
        )
        ok = ratio >= GOAL23_OVERHEAD_C20
        target = f">= {GOAL23_OVERHEAD_C20}x floor"
        out.append(goal(key, "serving overhead, c=20 requests/s", target, text, ratio, ok))
    else:
        out.append(goal(key, "serving overhead, c=1 p50", target, missing, None, None))
        target = f">= {GOAL23_OVERHEAD_C20}x floor"
        out.append(goal(key, "serving overhead, c=20 requests/s", target, missing, None, None))
    indexed = rows.get("tiankong-auto-index")
    target = f"<= {GOAL23_INDEX_C1}x index off"
    if auto and indexed:
        ratio = indexed["c1"]["p50_ms"] / auto["c1"]["p50_ms"]
        text = (
            f"tiankong-auto-index {indexed['c1']['p50_ms']:.2f} ms vs tiankong-auto "
            f"{auto['c1']['p50_ms']:.2f} ms"
        )
        out.append(goal(key, "index on, c=1 p50", target, text, ratio, ratio <= GOAL23_INDEX_C1))
    else:
        out.append(goal(key, "index on, c=1 p50", target, missing, None, None))
    taken = model.get("paired") or {}
    row_errors = {"defaults, c=20 requests/s": errors}
    return [judged_in_turns(row, taken, row_errors.get(row["goal"], 0)) for row in out]


def issue23_limit(name: str, model: str) -> tuple[float, bool]:
    """Issue 23's goal ``name`` on ``model``: its limit, and whether the ratio must be at most
    it (a p50 over a p50) rather than at least it (a rate over a rate)."""
    limits = {
        "defaults, c=1 p50": (GOAL23_C1_VS_BEST_PEER, True),
        "defaults, c=20 requests/s": (
            GOAL23_C20_VS_BEST_PEER.get(model, GOAL_C20_VS_BEST_PEER),
            False,
        ),
        "serving overhead, c=1 p50": (GOAL23_OVERHEAD_C1, True),
        "serving overhead, c=20 requests/s": (GOAL23_OVERHEAD_C20, False),
        "index on, c=1 p50": (GOAL23_INDEX_C1, True),
    }
    return limits[name]


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def judged_in_turns(row: dict[str, Any], taken: dict[str, Any], row_errors: int) -> dict[str, Any]:
    """``row`` (a goal judged on the sequential rows) judged instead on its pair's rounds taken
    in turns, when the bench took them; the rows' ratio stays in the text and in
    ``sequential_ratio``. Taken in turns, every goal needs its rounds free of errors and a
    ratio in each round; a rate goal also needs ``row_errors`` (the judged row's own) zero."""
    pair = next((p for p in taken.get("pairs", []) if p["goal"] == row["goal"]), None)
    if pair is None:
        return row
    limit, at_most = issue23_limit(row["goal"], row["model"])
    ratio = float(pair["ratio"])
    unit = "ms" if at_most else "req/s"
    rounds = ", ".join(f"{value:.2f}" for value in pair["round_ratios"])
    text = (
        f"taking turns, {plural(len(pair['runs']), 'round')} of {taken['seconds']:g} s: "
        f"{pair['ours']} "
        f"{pair['ours_median']:.2f} {unit} vs {pair['theirs']} {pair['theirs_median']:.2f} "
        f"(rounds {rounds}; {pair['errors']} errors)"
    )
    if row["ratio"] is not None:
        text += f"; sequential rows {row['ratio']:.2f}x"
    clean = math.isfinite(ratio) and pair["errors"] == 0 and (at_most or row_errors == 0)
    ok = clean and (ratio <= limit if at_most else ratio >= limit)
    return {**row, "measured": text, "ratio": ratio, "pass": ok, "sequential_ratio": row["ratio"]}


def goals(results: dict[str, Any]) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    issue23: list[dict[str, Any]] = []
    for model in results["models"]:
        if "contenders" in model:
            rows += model_goals(model)
            issue23 += issue23_goals(model)
    return {"rows": rows, "int8_agreement": int8_agreement(results), "issue23": issue23}


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
    return {True: "met", False: "**missed**", None: "—"}[passed]


def threads_cell(row: dict[str, Any]) -> str:
    """``c=1 / c=20`` thread settings kept; one number when they are the same."""
    c1, c20 = row.get("c1_threads", row.get("threads")), row.get("threads")
    if c1 is None and c20 is None:
        return "—"
    return str(c20) if c1 == c20 else f"{c1} / {c20}"


def model_section(model: dict[str, Any], results: dict[str, Any]) -> list[str]:
    lines = [f"### {model['key']}", ""]
    if "contenders" not in model:
        return [*lines, f"Not run: {model['missing']}.", ""]
    config = model["config"]
    limits = model["limits"]
    flops = model["flops"]
    best = model.get("best_peers", {})
    lines += [
        f"`{model['path']}`: {config['num_hidden_layers']} layers, hidden {config['hidden_size']}, "
        f"vocab {config['vocab_size']}; {model['tokens_per_sentence']:.1f} tokens per sentence. "
        f"Roofline: {flops['total'] / 1e9:.2f} GFLOP per sentence "
        f"({flops['head_at_masks'] / 1e6:.0f} MFLOP of it the head at the mask) → "
        f"{fmt(limits['fp32'], 2)} ms FP32, {fmt(limits['int8'], 2)} ms INT8 at the measured "
        f"peaks. Best peer: {best.get('c1') or '—'} at c=1, {best.get('c20') or '—'} at c=20.",
        "",
        "| contender | threads c=1 / c=20 | cold start s | c=1 p50 / p95 / p99 ms | c=1 % limit "
        "| c=20 req/s | c=20 p50 / p99 ms | errors | c=20 % limit | RSS MB "
        "| c=1 vs best peer | c=20 vs best peer | RSS vs pipeline | other load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
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
            f"| {row['key']} | {threads_cell(row)} | {start} "
            f"| {fmt(c1['p50_ms'])} / {fmt(c1['p95_ms'])} / {fmt(c1['p99_ms'])} "
            f"| {fmt(pct.get('c1_p50'), 1, '%')} | {fmt(c20['requests_per_s'])} "
            f"| {fmt(c20['p50_ms'], 0)} / {fmt(c20['p99_ms'], 0)} | {c20['errors']} "
            f"| {fmt(pct.get('c20'), 1, '%')} | {fmt(row['rss_after_load_mb'], 0)} "
            f"| {fmt(r.get('c1_vs_best_peer'), 2, 'x')} "
            f"| {fmt(r.get('c20_vs_best_peer'), 2, 'x')} "
            f"| {fmt(r.get('rss_vs_pipeline'), 2, 'x')} "
            f"| {other_load(row)} |"
        )
    skipped = [row for row in model["contenders"] if "skipped" in row]
    for row in skipped:
        reason = row["skipped"].strip().splitlines()
        short = reason[0] if len(reason) < 2 else f"{reason[0]} … {reason[-1].strip()}"
        lines.append(f"\n{row['key']} not run: {short}")
    tuned = [row for row in model["contenders"] if row.get("by_threads")]
    if tuned:
        lines += ["", "Peers at each thread setting (the best per phase is kept in the table):", ""]
        lines += [
            "| contender | threads | c=1 p50 ms | c=20 req/s | c=20 errors |",
            "|---|---:|---:|---:|---:|",
        ]
        for row in tuned:
            for run in row["by_threads"]:
                kept = [
                    phase
                    for phase, field in (("c=1", "c1_threads"), ("c=20", "threads"))
                    if run["threads"] == row.get(field)
                ]
                note = f" (kept for {', '.join(kept)})" if kept else ""
                lines.append(
                    f"| {row['key']} | {run['threads']}{note} | {fmt(run['c1']['p50_ms'])} "
                    f"| {fmt(run['c20']['requests_per_s'])} | {run['c20']['errors']} |"
                )
    notes = [row for row in model["contenders"] if row.get("threads_note")]
    for row in notes:
        lines.append(f"\n{row['key']}: {row['threads_note']}")
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
    lines = [
        "### Goals (issue 13)",
        "",
        "Each judged on tiankong's best row for that goal (named), against the best peer of the "
        "same model in this run.",
        "",
        "| model | goal | target | measured | ratio | |",
        "|---|---|---|---|---:|---|",
    ]
    for row in goal_data["rows"]:
        ratio = row["ratio"]
        shown = (
            "—" if ratio is None else (f"{ratio:.0%}" if "INT8" in row["goal"] else f"{ratio:.2f}x")
        )
        lines.append(
            f"| {row['model']} | {row['goal']} | {row['target']} | {row['measured']} "
            f"| {shown} | {verdict(row['pass'])} |"
        )
    agreement = goal_data["int8_agreement"]
    lines += [
        "",
        f"INT8 top-1 agreement with FP32 on the bundled model (goal >= {GOAL_INT8_AGREEMENT:.0%}): "
        f"{agreement['text']}: {verdict(agreement['pass'])}",
        "",
    ]
    if "issue23" not in goal_data:  # a run reported before issue 23's goals existed
        return lines
    lines += [
        "### Goals (issue 23)",
        "",
        "tiankong's default settings (tiankong-auto) against the best peer of the same model; "
        "the serving cost (tiankong-fake against the floor) at both loads; the corpus index's "
        "cost at c=1 (tiankong-auto-index against tiankong-auto). Where the bench took a "
        "goal's two servers again after the model's rows, taking turns (the same load on each "
        "in each round, the order alternating), the goal is judged on those rounds: the median "
        "of the rounds' ratios, the sequential rows' ratio beside it.",
        *turns_notes(results),
        "",
        "| model | goal | target | measured | ratio | |",
        "|---|---|---|---|---:|---|",
    ]
    for row in goal_data["issue23"]:
        ratio = row["ratio"]
        shown = (
            "—"
            if ratio is None
            else (f"{ratio:.1%}" if "agreement" in row["goal"] else f"{ratio:.2f}x")
        )
        lines.append(
            f"| {row['model']} | {row['goal']} | {row['target']} | {row['measured']} "
            f"| {shown} | {verdict(row['pass'])} |"
        )
    return [*lines, ""]


def turns_notes(results: dict[str, Any]) -> list[str]:
    """A line for each model whose pairs could not all be taken in turns, and why."""
    lines = []
    for model in results["models"]:
        taken = model.get("paired")
        if not taken:
            continue
        key = model["key"]
        if "failed" in taken:
            lines += ["", f"{key}: taking turns failed ({taken['failed']}); the rows judge it."]
        for skipped in taken.get("skipped", []):
            lines += ["", f"{key}, {skipped['goal']}: not taken in turns ({skipped['reason']})."]
    return lines


def flags_text(env: dict[str, Any]) -> str:
    flags = env.get("cpu_flags")
    kind = f"CPU kind `{env['cpu_kind']}`. " if env.get("cpu_kind") else ""
    if not flags:
        return f"{kind}CPU flags: not read (no /proc/cpuinfo)."
    have = [name for name, present in flags.items() if present]
    lack = [name for name, present in flags.items() if not present]
    return f"{kind}CPU flags: {', '.join(have) or 'none of these'}; no {', '.join(lack) or '—'}."


def peak_runs_text(results: dict[str, Any]) -> str:
    """How the peaks were taken: the higher of the runs at the start and the end, when both."""
    runs = [run for run in results.get("peak_runs", []) if "int8_gops" in run]
    if len(runs) < 2:
        return ""
    shown = " and ".join(
        f"FP32 {fmt(run.get('fp32_gflops'))} / INT8 {fmt(run.get('int8_gops'))}" for run in runs
    )
    return f", the higher of the runs at the start and the end of the bench ({shown})"


def client_text(bench: dict[str, Any]) -> str:
    if bench.get("client") == "wrk":
        return "wrk (a C load generator, one thread: the client takes the shared cores little CPU)"
    return "a closed-loop aiohttp client in the bench process on the same cores"


def c1_text(bench: dict[str, Any]) -> str:
    if bench.get("client") == "wrk":
        return f"c=1 for {bench['c20_duration_s']:.0f} s"
    return f"c=1 over {bench['c1_requests']} requests (at most {bench['c1_max_s']:.0f} s)"


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
        f"({env['logical_cpus']} logical), {env['memory_gb']} GB; {versions}. "
        f"{flags_text(env)}",
        "",
        f"GEMM peaks ({peaks.get('gemm_size')}³ matmuls, {peaks.get('threads')} threads): "
        f"FP32 {fmt(peaks.get('fp32_gflops'))} GFLOP/s "
        f"(numpy {fmt(peaks.get('fp32_numpy_gflops'))}, "
        f"ONNX Runtime {fmt(peaks.get('fp32_ort_gflops'))}), INT8 {fmt(peaks.get('int8_gops'))} "
        f'Gop/s (ONNX Runtime MatMulInteger){peak_runs_text(results)}. "% limit" is the '
        "roofline time over the measured time (c=1) or the measured rate over the roofline rate "
        "(c=20, offline).",
        "",
        f"Each server on 127.0.0.1, driven by {client_text(bench)}, every request a unique "
        f"~17-character sentence with one [MASK], top_k 5: {c1_text(bench)}, "
        f"c={bench['concurrency']} for {bench['c20_duration_s']:.0f} s, RSS (server and children) "
        "after the load, cold start from process start to the first 200 on /ready (tiankong) or "
        "/health (the others, which answer only once loaded and warmed up). Peers (pipeline, "
        "TorchScript, optimum, the hand-written ORT and OpenVINO recipes) run at 1, 2 and every "
        "core's intra-op threads and keep their best setting per phase; tiankong runs its "
        "default settings (tiankong-auto) and each engine forced, with the corpus index off "
        "(--index none), since the peers look nothing up, and its defaults once more with the "
        'bundled index on (tiankong-auto-index). "best peer": the fastest peer in '
        'that phase among those with no failed request. "floor" (bare FastAPI, fixed answer) and '
        'tiankong-fake (no model) measure serving overhead and are never peers. "other load": '
        "CPU used by other programs on the machine while that contender was measured, as a "
        "share of all cores (0% is a clean measurement); its niced part mostly fills cycles the "
        "bench leaves idle.",
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
        f"{results['machine']['physical_cores']} cores "
        f"(kind {results['machine'].get('cpu_kind', '?')}), commit {results['bench']['commit']}"
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
