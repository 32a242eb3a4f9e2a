"""The bench's load generator: aiohttp in the bench process by default, or ``--client wrk``,
said in the report's header; without wrk installed, one sentence before anything is built."""

from __future__ import annotations

import pytest

from bench import report, suite, wrk_load


def test_the_client_is_a_plan_setting_and_the_report_names_it() -> None:
    assert suite.make_plan(suite.parse_args([])).client == "aiohttp"
    plan = suite.make_plan(suite.parse_args(["--client", "wrk", "--duration", "10"]))
    assert plan.client == "wrk"
    bench = {"client": "wrk", "c20_duration_s": 10.0, "c1_requests": 200, "c1_max_s": 30.0}
    assert report.client_text(bench).startswith("wrk (a C load generator")
    assert report.c1_text(bench) == "c=1 for 10 s"  # wrk runs for a time, not a count
    older = {"c20_duration_s": 10.0, "c1_requests": 200, "c1_max_s": 30.0}  # runs before it
    assert report.client_text(older).startswith("a closed-loop aiohttp client")
    assert report.c1_text(older) == "c=1 over 200 requests (at most 30 s)"


def test_wrk_missing_is_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wrk_load.shutil, "which", lambda name: None)
    with pytest.raises(SystemExit, match=r"^bench: wrk is not installed \(Debian: apt-get"):
        suite.main(["--client", "wrk", "--out-dir", "/nonexistent"])
