"""Issue 23's goals taken in turns (``bench.paired``): a goal's ratio is the median of its
rounds' ratios, each round comparing two runs seconds apart, and the report judges the goal on
those rounds with the sequential rows' ratio beside it."""

from __future__ import annotations

from typing import Any

import pytest

from bench import paired, report, suite


def run(p50_ms: float, requests_per_s: float = 100.0, errors: int = 0) -> dict[str, Any]:
    return {"p50_ms": p50_ms, "requests_per_s": requests_per_s, "errors": errors}


def test_a_goal_is_the_median_of_its_rounds_ratios_not_the_ratio_of_medians() -> None:
    c1 = next(pair for pair in paired.PAIRS if pair.goal == "defaults, c=1 p50")
    # The VM slows down in round 2 for both sides, and in round 3 for the peer only.
    runs = [
        {"ours": run(10.0), "theirs": run(10.0)},
        {"ours": run(20.0), "theirs": run(10.0)},
        {"ours": run(30.0), "theirs": run(40.0)},
    ]
    summary = paired.summarise(c1, runs)
    assert summary["round_ratios"] == [1.0, 2.0, 0.75]
    assert summary["ratio"] == 1.0  # the ratio of the medians would be 20 / 10 = 2.0
    assert (summary["ours_median"], summary["theirs_median"]) == (20.0, 10.0)
    c20 = next(pair for pair in paired.PAIRS if pair.goal == "defaults, c=20 requests/s")
    rates = [{"ours": run(1.0, 300.0), "theirs": run(1.0, 200.0, errors=2)}]
    assert paired.summarise(c20, rates)["ratio"] == 1.5  # a rate: ours over theirs
    assert paired.summarise(c20, rates)["errors"] == 2


def sequential_row(goal: str, ratio: float, passed: bool) -> dict[str, Any]:
    return report.goal("bundled", goal, "target", "rows' text", ratio, passed)


def taken(goal: str, ratio: float, errors: int = 0, concurrency: int = 1) -> dict[str, Any]:
    pair = {
        "goal": goal,
        "ours": "tiankong-auto",
        "theirs": "ort-recipe-int8",
        "concurrency": concurrency,
        "runs": [{}, {}, {}],
        "ratio": ratio,
        "round_ratios": [ratio, ratio, ratio],
        "ours_median": 2.0,
        "theirs_median": 3.0,
        "errors": errors,
    }
    return {"rounds": 3, "seconds": 6.0, "pairs": [pair], "skipped": []}


def test_the_report_judges_a_goal_on_its_rounds_and_keeps_the_rows_ratio() -> None:
    row = sequential_row("defaults, c=1 p50", 1.43, False)
    judged = report.judged_in_turns(row, taken("defaults, c=1 p50", 0.7), 0)
    assert (judged["ratio"], judged["pass"], judged["sequential_ratio"]) == (0.7, True, 1.43)
    assert judged["measured"].startswith("taking turns, 3 rounds of 6 s: tiankong-auto 2.00 ms")
    assert judged["measured"].endswith("; sequential rows 1.43x")
    # the other way too: a phase that flattered the rows doesn't pass the goal
    flattered = report.judged_in_turns(
        sequential_row("defaults, c=1 p50", 0.6, True), taken("defaults, c=1 p50", 1.0), 0
    )
    assert flattered["pass"] is False
    # a goal whose pair wasn't taken stays as the rows judged it
    assert report.judged_in_turns(row, taken("index on, c=1 p50", 1.0), 0) == row


def test_a_latency_goal_taken_in_turns_needs_answers_in_every_round() -> None:
    goal = "defaults, c=1 p50"
    row = sequential_row(goal, 1.43, False)
    assert report.judged_in_turns(row, taken(goal, 0.7, errors=1), 0)["pass"] is False
    assert report.judged_in_turns(row, taken(goal, float("nan")), 0)["pass"] is False
    c1 = next(pair for pair in paired.PAIRS if pair.goal == goal)
    silent = {"ours": run(2.0), "theirs": run(float("nan"), 0.0)}  # the peer answered nothing
    runs = [{"ours": run(2.0), "theirs": run(3.0)}, silent, {"ours": run(2.0), "theirs": run(3.0)}]
    assert str(paired.summarise(c1, runs)["ratio"]) == "nan"  # not the median of the others


def test_a_rate_goal_taken_in_turns_needs_no_errors_there_or_in_its_row() -> None:
    goal = "defaults, c=20 requests/s"
    row = sequential_row(goal, 1.2, False)
    assert report.judged_in_turns(row, taken(goal, 1.6, concurrency=20), 0)["pass"] is True
    assert report.judged_in_turns(row, taken(goal, 1.6, 1, 20), 0)["pass"] is False
    assert report.judged_in_turns(row, taken(goal, 1.6, concurrency=20), 3)["pass"] is False
    # the bundled model's goal is 1.5x, another model's 1.3x
    assert report.judged_in_turns(row, taken(goal, 1.4, concurrency=20), 0)["pass"] is False
    other = {**row, "model": "random-base"}
    assert report.judged_in_turns(other, taken(goal, 1.4, concurrency=20), 0)["pass"] is True


def test_the_pairs_are_issue_23s_rate_and_latency_goals_and_the_plan_takes_them() -> None:
    names = [row["goal"] for row in report.issue23_goals({"key": "bundled", "contenders": []})]
    assert [pair.goal for pair in paired.PAIRS] == [
        name for name in names if name != "defaults, agreement"
    ]
    for pair in paired.PAIRS:  # the rate goals at c=20, the latency goals at c=1
        assert (pair.concurrency > 1) == pair.goal.endswith("requests/s")
        assert report.issue23_limit(pair.goal, "bundled")[1] is (pair.concurrency == 1)
    plan = suite.make_plan(suite.parse_args([]))
    assert (plan.paired_rounds, plan.paired_seconds) == (paired.ROUNDS, paired.SECONDS)
    assert paired.ROUNDS % 2 == 0  # each side goes first as often as the other
    assert suite.make_plan(suite.parse_args(["--paired-rounds", "0"])).paired_rounds == 0
    for bad in (["--paired-rounds", "-1"], ["--paired-seconds", "0"]):
        with pytest.raises(SystemExit, match=r"^bench: --paired-"):
            suite.make_plan(suite.parse_args(bad))


class FakeServer:
    def __init__(self, side: tuple[str, int | None]) -> None:
        self.base_url = f"http://{side[0]}-{side[1]}"
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True


def bench_rows() -> list[dict[str, Any]]:
    """A model's rows as the bench leaves them: one peer whose best c=1 and c=20 thread
    settings differ, tiankong's defaults with and without the index, the overhead pair."""

    def row(key: str, role: str, **more: Any) -> dict[str, Any]:
        figures = {"c1": {"p50_ms": 5.0, "errors": 0}, "c20": {"requests_per_s": 9.0, "errors": 0}}
        return {"key": key, "role": role, **figures, **more}

    return [
        row("ort-recipe-int8", "peer", c1_threads=1, c20_threads=2),
        row("tiankong-auto", "tiankong"),
        row("tiankong-auto-index", "tiankong"),
        row("floor", "reference"),
        row("tiankong-fake", "reference"),
        {"key": "optimum-int8", "role": "peer", "skipped": "no venv"},
    ]


def fake_load(calls: list[tuple[str, int, int]], requests: int = 50) -> Any:
    from bench.load import LoadResult

    def load(client: str, url: str, concurrency: int, first: int, seconds: float) -> LoadResult:
        calls.append((url, concurrency, first))
        return LoadResult(concurrency, requests, 0, seconds, requests / seconds, 2.0, 3, 4, 2, 5)

    return load


def run_turns(
    monkeypatch: Any, load: Any, rounds: int = 2, distinct: int = 174_999
) -> tuple[dict[str, Any], dict]:
    from bench.contenders.registry import CONTENDERS

    started: dict[tuple[str, int | None], FakeServer] = {}

    def start(contender: Any, threads: int | None) -> FakeServer:
        started[(contender.key, threads)] = server = FakeServer((contender.key, threads))
        return server

    monkeypatch.setattr(paired, "run_client", load)
    monkeypatch.setattr(paired, "run_load", lambda *args, **kwargs: load("aiohttp", *args[:3], 1))
    by_key = {contender.key: contender for contender in CONTENDERS}
    try:
        return paired.measure(bench_rows(), by_key, start, "wrk", rounds, 1, distinct), started
    except Exception as error:
        error.started = started  # type: ignore[attr-defined]
        raise


def test_turns_start_each_side_once_alternate_and_never_repeat_a_sentence(monkeypatch) -> None:
    calls: list[tuple[str, int, int]] = []
    result, started = run_turns(monkeypatch, fake_load(calls))
    assert set(started) == {
        ("ort-recipe-int8", 1),  # the peer at the setting its row kept for c=1 ...
        ("ort-recipe-int8", 2),  # ... and for c=20
        ("tiankong-auto", None),
        ("tiankong-auto-index", None),
        ("floor", None),
        ("tiankong-fake", None),
    }
    assert all(server.stopped for server in started.values())
    assert [pair["goal"] for pair in result["pairs"]] == [pair.goal for pair in paired.PAIRS]
    assert [pair["theirs_threads"] for pair in result["pairs"][:2]] == [1, 2]
    urls = [url for url, _, first in calls if first >= paired.WARMUP_REQUESTS]
    auto, peer = "http://tiankong-auto-None/predict", "http://ort-recipe-int8-1/predict"
    first, second = (index for index, url in enumerate(urls) if url == peer)  # the c=1 pair
    assert urls[first - 1] == auto  # round 1: ours first
    assert urls[second + 1] == auto  # round 2: theirs first
    for url in {url for url, _, _ in calls}:  # each server's sentences only count up
        firsts = [first for other, _, first in calls if other == url]
        assert firsts == sorted(set(firsts)) and firsts[0] == 0


def test_a_failed_turn_stops_every_server_started(monkeypatch) -> None:
    calls: list[tuple[str, int, int]] = []
    working = fake_load(calls)

    def failing(client: str, url: str, concurrency: int, first: int, seconds: float) -> Any:
        if len(calls) > 8:
            raise RuntimeError("wrk died")
        return working(client, url, concurrency, first, seconds)

    with pytest.raises(RuntimeError, match="wrk died") as raised:
        run_turns(monkeypatch, failing)
    started = raised.value.started  # type: ignore[attr-defined]
    assert len(started) == 6 and all(server.stopped for server in started.values())


def test_turns_refuse_to_send_a_tiankong_server_a_sentence_twice(monkeypatch) -> None:
    # the floor (no result cache) serves the most requests and may wrap around; tiankong not
    calls: list[tuple[str, int, int]] = []
    slow, fast = fake_load(calls, requests=10), fake_load(calls, requests=4_000)

    def floor_fast(client: str, url: str, concurrency: int, first: int, seconds: float) -> Any:
        return (fast if "floor" in url else slow)(client, url, concurrency, first, seconds)

    run_turns(monkeypatch, floor_fast, rounds=2, distinct=1_000)
    assert max(first for url, _, first in calls if "floor" in url) > 1_000
    with pytest.raises(ValueError, match="tiankong-auto was sent more than the 500 distinct"):
        run_turns(monkeypatch, fake_load([], requests=400), rounds=2, distinct=500)
