"""`python -m bench --quick` on the tiny test model: the bench runs end to end, and its JSON
holds every contender's figures or the recorded reason it was skipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes  # starts processes: the CLI, a server, Ray or export workers

REPO_ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("aiohttp")
pytest.importorskip("matplotlib")


@pytest.mark.timeout(300)
def test_bench_quick_smoke(tiny_model_dir: Path, tmp_path: Path) -> None:
    from bench.contenders.registry import CONTENDERS
    from bench.suite import OFFLINE_TARGETS

    out = tmp_path / "results"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "bench", "--quick", "--models", str(tiny_model_dir)),
            *("--out-dir", str(out), "--model-cache", str(tmp_path / "models")),
        ],
        cwd=REPO_ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for name in ("latest.json", "latest.md", "latest.png"):
        assert (out / name).stat().st_size > 0, name
    results = json.loads((out / "latest.json").read_text())
    assert results["bench"]["quick"] is True
    assert results["peaks"]["fp32_gflops"] > 0
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
        assert "c1_p50" in row["roofline_pct"] and "c1_vs_pipeline" in row["ratios"]
        if row["family"] == "tiankong":
            server = row["server"]
            assert (server["engine"], server["precision"]) == tuple(key.split("-")[1:])
            assert server["result_cache_hits"] == 0  # every request is a new sentence
    assert [len(row["calibration"]) for row in rows.values() if "calibration" in row] == [2]
    offline = {entry["target"]: entry for entry in model["offline"]}
    assert set(offline) == set(OFFLINE_TARGETS)
    assert all(entry["sentences_per_s"] > 0 for entry in offline.values()), offline
    assert [row["goal"] for row in results["goals"]["rows"]] == [
        "c=1 p50",
        "c=20 requests/s",
        "RSS after load",
    ]
    assert "## Benchmark" in (out / "latest.md").read_text()
