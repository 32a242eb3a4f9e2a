"""`python -m bench --quick` on the tiny test model: the bench runs end to end, and its JSON
holds every contender's figures (the hand-written ORT recipe, the bare-FastAPI floor and the
fake engine among them) or the recorded reason it was skipped, the CPU flags, and issue 13's
goals judged met or missed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tiankong.engines.split import served_by

pytestmark = pytest.mark.processes  # starts processes: the CLI, a server, Ray or export workers

REPO_ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("aiohttp")
pytest.importorskip("matplotlib")


@pytest.mark.timeout(600)
def test_bench_quick_smoke(
    tiny_model_dir: Path, onnx_cache_copy: Callable[[Path], Path], tmp_path: Path
) -> None:
    from bench.contenders.registry import CONTENDERS
    from bench.suite import OFFLINE_TARGETS

    out = tmp_path / "results"
    # tiankong's own contenders serve the tiny model's exports that the session already made
    # (a copy: the bench may add to it), instead of exporting it again in each server
    onnx_cache = onnx_cache_copy(tmp_path / "onnx")
    done = subprocess.run(
        [
            *(sys.executable, "-m", "bench", "--quick", "--models", str(tiny_model_dir)),
            *("--out-dir", str(out), "--model-cache", str(tmp_path / "models")),
        ],
        cwd=REPO_ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TIANKONG_ONNX_CACHE_DIR": str(onnx_cache)},
        capture_output=True,
        text=True,
        timeout=580,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for name in ("latest.json", "latest.md", "latest.png"):
        assert (out / name).stat().st_size > 0, name
    results = json.loads((out / "latest.json").read_text())
    assert results["bench"]["quick"] is True
    assert results["peaks"]["fp32_gflops"] > 0
    # taken at the start and the end; the report's peaks are each figure's higher one
    first, last = results["peak_runs"]
    assert results["peaks"]["int8_gops"] == max(first["int8_gops"], last["int8_gops"])
    assert "the higher of the runs at the start and the end" in (out / "latest.md").read_text()
    (model,) = results["models"]
    rows = {row["key"]: row for row in model["contenders"]}
    assert set(rows) == {contender.key for contender in CONTENDERS}
    for key, row in rows.items():
        if "skipped" in row:
            # Only optimum-onnx may be missing (its venv is made by full runs, not --quick).
            assert key.startswith("optimum-") and row["skipped"].strip(), row
            continue
        assert row["c1"]["requests"] == 10 and row["c1"]["errors"] == 0, row["c1"]
        assert row["c20"]["requests"] > 0 and row["c20"]["errors"] == 0, row["c20"]
        assert row["rss_after_load_mb"] > 0 and row["cold_start_s"] > 0
        assert "c1_vs_best_peer" in row["ratios"] and "c1_vs_pipeline" in row["ratios"]
        if row["role"] != "reference":
            assert "c1_p50" in row["roofline_pct"]
        if row["family"] == "tiankong":
            server = row["server"]
            engine, *precision = key.split("-")[1:]
            if engine == "auto":  # the defaults: whatever --precision auto measured fastest
                choice = server["quality"]["choice"]
                assert (server["engine"], server["precision"]) == served_by(choice)
            else:
                assert server["engine"] == engine
                assert [server["precision"]] == (precision or ["fp32"])
            assert server["result_cache_hits"] == 0  # every request is a new sentence
    # Peers keep their best thread setting per phase; --quick runs one of them through every
    # setting and says so for the others.
    from bench.contenders.registry import thread_settings
    from bench.suite import QUICK_TUNED, cores

    tuned = rows[QUICK_TUNED]
    assert [run["threads"] for run in tuned["by_threads"]] == list(thread_settings(cores()))
    c1_best = min(tuned["by_threads"], key=lambda run: run["c1"]["p50_ms"])
    assert tuned["c1"] == c1_best["c1"] and tuned["c1_threads"] == c1_best["threads"]
    c20_best = max(
        tuned["by_threads"],
        key=lambda run: (run["c20"]["errors"] == 0, run["c20"]["requests_per_s"]),
    )
    assert tuned["c20"] == c20_best["c20"] and tuned["threads"] == c20_best["threads"]
    for row in rows.values():
        if row["role"] == "peer" and "c20" in row and row["key"] != QUICK_TUNED:
            assert "--quick" in row["threads_note"], row["key"]
    # The serving-overhead pair is measured and never counted as a peer.
    assert {rows["floor"]["role"], rows["tiankong-fake"]["role"]} == {"reference"}
    assert model["overhead"]["ratio"] == (
        rows["tiankong-fake"]["c1"]["p50_ms"] / rows["floor"]["c1"]["p50_ms"]
    )
    assert model["best_peers"]["c1"] not in ("floor", "tiankong-fake")
    offline = {entry["target"]: entry for entry in model["offline"]}
    assert set(offline) == set(OFFLINE_TARGETS)
    assert all(entry["sentences_per_s"] > 0 for entry in offline.values()), offline
    assert [row["goal"] for row in results["goals"]["rows"]] == [
        "c=1 p50",
        "c=20 requests/s",
        "serving overhead (c=1 p50)",
        "RSS after load",
        "batched INT8 throughput",
    ]
    assert all(row["pass"] in (True, False) for row in results["goals"]["rows"])
    # Issue 23's goals: the defaults, the serving cost at both loads and the index's cost, each
    # judged (the index row serves the same model with the bundled corpus index on).
    assert [row["goal"] for row in results["goals"]["issue23"]] == [
        "defaults, c=1 p50",
        "defaults, c=20 requests/s",
        "defaults, agreement",
        "serving overhead, c=1 p50",
        "serving overhead, c=20 requests/s",
        "index on, c=1 p50",
    ]
    assert all(row["pass"] in (True, False) for row in results["goals"]["issue23"])
    # ... and, after the rows, taken again in turns (one round under --quick), which judges them
    from bench.paired import PAIRS

    taken = model["paired"]
    assert (taken["rounds"], taken["skipped"]) == (1, [])
    assert [pair["goal"] for pair in taken["pairs"]] == [pair.goal for pair in PAIRS]
    judged = {row["goal"]: row for row in results["goals"]["issue23"]}
    for pair in taken["pairs"]:
        (round_,) = pair["runs"]
        assert round_["ours"]["requests"] > 0 and round_["theirs"]["requests"] > 0, pair
        assert pair["errors"] == 0, pair
        assert judged[pair["goal"]]["ratio"] == pair["ratio"]
        assert judged[pair["goal"]]["measured"].startswith("taking turns, 1 round of 1 s: ")
    assert taken["pairs"][0]["theirs"] == model["best_peers"]["c1"]
    assert taken["pairs"][1]["theirs"] == model["best_peers"]["c20"]
    assert (
        rows["tiankong-auto-index"]["server"]["index"] != rows["tiankong-auto"]["server"]["index"]
    )
    flags = results["machine"]["cpu_flags"]
    assert set(flags) >= {"AVX2", "AVX-512F", "AVX512_VNNI", "AVX_VNNI", "AMX", "AMX-BF16"}
    from tiankong.export.int8_recipe import cpu_kind

    assert results["machine"]["cpu_kind"] == cpu_kind()
    assert f"CPU kind `{cpu_kind()}`" in (out / "latest.md").read_text()
    assert "skipped" not in rows["openvino-recipe"]  # the dev lock installs openvino
    text = (out / "latest.md").read_text()
    assert "CPU flags:" in text and "### Goals (issue 13)" in text
    assert "### Goals (issue 23)" in text
    assert "## Benchmark" in (out / "latest.md").read_text()
