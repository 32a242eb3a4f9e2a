"""The load and soak suites: their short versions end to end (a real `tiankong serve` with the
fake engine on loopback), and the pieces that decide pass or fail."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tiankong.reliability.client import Outcome, closed_loop
from tiankong.reliability.server import Sample
from tiankong.reliability.stats import (
    recovery_threshold_ms,
    recovery_time_s,
    slowest_window_ms,
    summarize,
    windows,
)
from tiankong.reliability.suites import SoakPlan, resource_trend

pytestmark = pytest.mark.processes  # starts processes: the CLI, a server, Ray or export workers


def test_the_quick_suites_pass_end_to_end(tiny_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "results"
    args = ["all", "--quick", "--engine", "fake", "--threads", "1", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "tiankong.reliability", *args, "--model", str(tiny_model_dir)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FAIL" not in done.stdout
    report = json.loads((out / "report.json").read_text())
    load, soak = report["load"], report["soak"]
    assert load["normal"]["statuses"] == {"200": load["normal"]["requests"]}
    assert set(load["overload"]["statuses"]) <= {"200", "503"}
    assert "503" in load["overload"]["statuses"], "c=200 never overflowed the 64-text queue"
    assert (
        load["overload"]["p99_ms"] is not None and load["recovery"]["recovered_after_s"] is not None
    )
    assert soak["requests"]["requests"] > 500 and soak["resources"]["samples_after_warmup"] >= 8
    assert (out / "rss.png").stat().st_size > 10_000
    for command in report["server"].values():
        assert "--host" in command and "127.0.0.1" in command
    assert report["server"]["load"][report["server"]["load"].index("--max-queue") + 1] == "64"
    assert soak["mix"]["kinds"] == ["plain", "whole_word", "candidates", "blank"]


def test_the_quick_expensive_suite_passes_end_to_end(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The flood of costly searches on the fake engine with a 2 s request timeout: every flood
    answer in time (504 past the deadline), plain requests all served, and the engine idle
    within a second after a deadline and after a client leaves."""
    out = tmp_path / "results"
    args = ["expensive", "--quick", "--engine", "fake", "--threads", "1", "--out", str(out)]
    args += ["--request-timeout", "2", "--model", str(tiny_model_dir)]
    done = subprocess.run(
        [sys.executable, "-m", "tiankong.reliability", *args],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((out / "report.json").read_text())["expensive"]
    assert all(report["checks"].values()), report["checks"]
    routes = report["flood"]["routes"]
    assert set(routes) == {"/batch_predict", "/predict"}
    assert "504" in routes["/batch_predict"]["statuses"], routes  # 8 x 1,025 rows can't fit in 2 s
    assert report["after_deadline"]["status"] in (200, 504)
    assert 2 - 0.1 <= report["after_deadline"]["answered_after_s"] < 2 + 1
    assert not report["after_disconnect"]["answered_before_leaving"]
    assert report["plain_idle"]["p99_ms"] and report["plain_under_flood"]["p99_ms"]
    assert "engine idle" in done.stdout and "flood /batch_predict" in done.stdout


def test_load_only_goes_to_loopback() -> None:
    with pytest.raises(ValueError, match="loopback only"):
        asyncio.run(closed_loop("10.0.0.1", 80, [b""], 1, duration_s=0.1))


def outcome(status: int, latency_ms: float, at: float, retry_after: bool = False) -> Outcome:
    return Outcome(status, latency_ms / 1000, at, retry_after)


def test_summary_counts_statuses_and_unmarked_refusals() -> None:
    outcomes = [outcome(200, 10, 1), outcome(200, 30, 2), outcome(503, 1, 2, True)]
    outcomes.append(outcome(503, 1, 3))
    summary = summarize(outcomes, 2.0)
    assert summary["statuses"] == {"200": 2, "503": 2}
    assert summary["served_per_s"] == 1.0 and summary["p50_ms"] == 20.0
    assert summary["refused_without_retry_after"] == 1


def test_recovery_needs_three_calm_windows_in_a_row() -> None:
    latencies = [90, 15, 80, 12, 11, 13, 60]  # one window per second after the overload
    outcomes = [outcome(200, ms, 100 + second + 0.5) for second, ms in enumerate(latencies)]
    series = windows(outcomes, 100.0, 1.0)
    assert [p50 for _, p50, _ in series] == latencies
    assert recovery_time_s(series, threshold_ms=20) == 3.0
    assert recovery_time_s(series, threshold_ms=5) is None


def test_the_recovery_threshold_allows_the_normal_phase_own_slowest_window() -> None:
    quiet = [(0.0, 10.0, 100), (1.0, 11.0, 100), (2.0, 10.0, 98)]
    assert slowest_window_ms(quiet) == 11.0
    assert recovery_threshold_ms(10.0, slowest_window_ms(quiet)) == 16.0  # 1.5x + 1 ms
    shared = [(0.0, 10.0, 100), (1.0, 31.0, 60), (2.0, 9.0, 100), (3.0, 500.0, 3)]
    # a neighbour slowed one window to 31 ms; the last window, cut short, holds 3 requests
    assert slowest_window_ms(shared) == 31.0
    assert recovery_threshold_ms(10.0, slowest_window_ms(shared)) == 31.0
    assert slowest_window_ms([]) is None and recovery_threshold_ms(None, None) == 1.0


def test_resource_trend_flags_growth_after_the_warm_up() -> None:
    plan = SoakPlan(min_warmup_s=10, warmup_fraction=0.0)
    samples = [
        Sample(
            at_s=float(second),
            rss_bytes=100 * 2**20 + second * 2**19,
            fds=20,
            threads=9,
            requests_done=second,
        )
        for second in range(60)
    ]  # 0.5 MiB a second: a leak
    trend = resource_trend(samples, plan, 60.0)
    assert trend["rss_growth"] > 0.05 and trend["fds_growth"] == 0
    steady = [Sample(float(s), 100 * 2**20, 20 + (s > 50), 9, s) for s in range(60)]
    trend = resource_trend(steady, plan, 60.0)
    assert trend["rss_growth"] == 0 and trend["fds_growth"] == 1 and trend["threads_growth"] == 0
