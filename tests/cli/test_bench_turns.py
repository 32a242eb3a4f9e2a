"""Issue 23's goals taken in turns (``bench.paired``): a goal's ratio is the median of its
rounds' ratios, each round comparing two runs seconds apart, and the report judges the goal on
those rounds with the sequential rows' ratio beside it."""

from __future__ import annotations

from typing import Any

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
        assert report.limit_in_turns(pair.goal, "bundled")[1] is (pair.concurrency == 1)
    plan = suite.make_plan(suite.parse_args([]))
    assert (plan.paired_rounds, plan.paired_seconds) == (3, 6.0)
    assert suite.make_plan(suite.parse_args(["--paired-rounds", "0"])).paired_rounds == 0
