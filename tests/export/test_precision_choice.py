"""--precision auto's choice, on made-up timings: the fastest candidate (batch 1 and a full batch
together) among those measured that pass the guard, and every reason for the others."""

from __future__ import annotations

import pytest

from tiankong.export.precision_choice import Candidate, choose, split_pair, with_split

# The AMX figures (bundled model, ms): bf16 wins a full batch, INT8 a lone request.
FP32 = Candidate("onnx", "fp32", b1_ms=2.07, batch_ms=27.4, top1_agreement=1.0)
INT8 = Candidate("onnx", "int8", b1_ms=1.96, batch_ms=17.8, top1_agreement=0.99)
OV_FP32 = Candidate("openvino", "fp32", b1_ms=3.0, batch_ms=25.0, top1_agreement=1.0)
BF16 = Candidate("openvino", "bf16", b1_ms=4.50, batch_ms=9.4, top1_agreement=0.99)


def test_a_full_batch_win_that_costs_more_at_batch_1_is_weighed_against_it() -> None:
    # bf16: 2.9x FP32 at batch 16 but 0.46x at batch 1, geometric mean 1.16; INT8: 1.27
    assert choose([FP32, INT8, OV_FP32, BF16], 0.98, "amx").chosen == INT8
    faster = Candidate("openvino", "bf16", b1_ms=2.5, batch_ms=9.4, top1_agreement=0.99)
    choice = choose([FP32, INT8, OV_FP32, faster], 0.98, "amx")
    assert choice.chosen == faster
    assert choice.line().startswith(
        "bf16 (openvino) on amx: 1.89x onnx int8 at batch 16, 0.78x at batch 1, agreement 99.0%"
    )


def test_the_guard_threshold_holds_for_every_precision_but_the_reference() -> None:
    sloppy = Candidate("openvino", "bf16", b1_ms=0.5, batch_ms=5.0, top1_agreement=0.975)
    choice = choose([FP32, INT8, sloppy], 0.98, "amx")
    assert choice.chosen == INT8
    assert choice.rejected == {"openvino bf16": "agreement 97.5% < 98%"}
    assert "not served: openvino bf16: agreement 97.5% < 98%" in choice.line()


def test_without_openvino_the_line_says_so_and_onnx_runtime_serves() -> None:
    why = "openvino is not installed (pip install 'tiankong[openvino]')"
    missing = [Candidate("openvino", p, missing=why) for p in ("fp32", "bf16")]
    choice = choose([FP32, INT8, *missing], 0.98, "vnni")
    assert choice.chosen == INT8 and choice.chosen.engine == "onnx"
    assert f"openvino fp32: {why}; openvino bf16: {why}" in choice.line()
    described = choice.describe()
    assert described["engine"] == "onnx" and described["precision"] == "int8"
    assert len(described["candidates"]) == 4 and described["line"] == choice.line()


def test_the_reference_serves_when_nothing_beats_it_or_passes() -> None:
    failed = Candidate("onnx", "int8", missing="no INT8 recipe passed the guard (best 94.7%)")
    slower = Candidate("openvino", "fp32", b1_ms=4.0, batch_ms=40.0, top1_agreement=1.0)
    choice = choose([FP32, failed, slower], 0.98, "amx")
    assert choice.chosen == FP32
    assert "0.52x openvino fp32" not in choice.line()  # the ratio is the runner-up's to ours
    assert choice.line().startswith("fp32 (onnx) on amx: 1.46x openvino fp32 at batch 16")


def test_ties_go_to_the_earlier_candidate_and_a_reference_is_required() -> None:
    same = Candidate("openvino", "fp32", b1_ms=2.07, batch_ms=27.4, top1_agreement=1.0)
    assert choose([FP32, same], 0.98).chosen == FP32
    with pytest.raises(ValueError, match="reference"):
        choose([INT8, BF16], 0.98)


def test_two_engines_split_by_batch_size_when_each_wins_its_own_size_by_a_margin() -> None:
    # the AMX figures: INT8 wins batch 1 by 2.3x, bf16 batch 16 by 1.9x
    choice = choose([FP32, INT8, OV_FP32, BF16], 0.98, "amx")
    assert split_pair(choice) == (INT8, BF16)
    close = Candidate("openvino", "bf16", b1_ms=2.3, batch_ms=9.4, top1_agreement=0.99)
    assert split_pair(choose([FP32, INT8, close], 0.98)) is None  # 1.17x at batch 1: one engine
    both = Candidate("openvino", "bf16", b1_ms=1.5, batch_ms=9.4, top1_agreement=0.99)
    assert split_pair(choose([FP32, INT8, both], 0.98)) is None  # one wins both sizes
    sloppy = Candidate("openvino", "bf16", b1_ms=4.5, batch_ms=9.4, top1_agreement=0.9)
    assert split_pair(choose([FP32, INT8, sloppy], 0.98)) is None  # the guard holds for pairs


def timings(lone: list[float], batch: list[float]) -> dict[int, dict[str, float]]:
    sizes = (1, 2, 4, 8, 16)
    return {
        s: {"onnx int8": a, "openvino bf16": b} for s, a, b in zip(sizes, lone, batch, strict=True)
    }


def test_the_split_serves_the_full_batch_engine_from_the_first_size_it_was_faster() -> None:
    choice = choose([FP32, INT8, OV_FP32, BF16], 0.98, "amx")
    split = with_split(
        choice, INT8, BF16, timings([2.0, 3.1, 5.0, 9.0, 17.8], [4.5, 4.9, 5.6, 7.0, 9.4])
    )
    assert split.chosen == BF16 and split.split is not None
    assert (split.split.lone, split.split.rows) == (INT8, 8)
    assert split.line() == (
        "int8 (onnx) for batches under 8 texts, bf16 (openvino) from 8, on amx: 2.25x openvino "
        "bf16 at batch 1, 1.89x onnx int8 at batch 16, agreement 99.0% and 99.0%"
    )
    described = split.describe({"openvino bf16": "x.xml"})
    assert (described["engine"], described["precision"], described["file"]) == (
        "openvino",
        "bf16",
        "x.xml",
    )
    assert described["split"]["engine"] == "onnx" and described["split"]["below_rows"] == 8
    assert (
        described["split"]["file"] is None and described["split"]["ms"]["16"]["onnx int8"] == 17.8
    )
    assert choice.describe()["split"] is None


def test_the_split_names_the_one_of_its_two_that_serves_alone_as_choose_would() -> None:
    """``alone``: the faster of the pair by the geometric mean of both sizes, ties to the
    earlier candidate, whatever a third candidate measured (only the pair is loaded)."""
    ms = timings([2.0, 3.1, 5.0, 9.0, 17.8], [4.5, 4.9, 5.6, 7.0, 9.4])
    split = with_split(choose([FP32, INT8, OV_FP32, BF16], 0.98), INT8, BF16, ms).split
    assert split is not None and split.alone == "onnx int8"  # 1.96 x 17.8 < 4.5 x 9.4
    slow = Candidate("onnx", "int8", b1_ms=2.0, batch_ms=30.0, top1_agreement=0.99)  # 60
    split = with_split(choose([FP32, slow, OV_FP32, BF16], 0.98), slow, BF16, ms).split
    assert split is not None and split.alone == "openvino bf16"
    even = Candidate("onnx", "int8", b1_ms=4.5, batch_ms=9.4, top1_agreement=0.99)  # a tie
    split = with_split(choose([FP32, even, BF16], 0.98), even, BF16, ms).split
    assert split is not None and split.alone == "onnx int8"  # the earlier candidate
    third = Candidate("openvino", "int8", b1_ms=2.5, batch_ms=9.5, top1_agreement=0.99)
    picked = choose([FP32, slow, BF16, third], 0.98)
    assert picked.chosen == third  # the one-engine choice is a third candidate...
    split = with_split(picked, slow, BF16, ms).split
    assert split is not None and split.alone == "openvino bf16"  # ...not loaded: one of the two
    described = with_split(choose([FP32, INT8, BF16], 0.98), INT8, BF16, ms).describe()
    assert described["split"]["alone"] == "onnx int8"


def test_a_pair_whose_lead_does_not_cross_once_keeps_one_engine() -> None:
    choice = choose([FP32, INT8, OV_FP32, BF16], 0.98, "amx")
    flips = timings([2.0, 5.0, 5.0, 9.0, 17.8], [4.5, 4.9, 5.6, 7.0, 9.4])  # 2 and 8 but not 4
    never = timings([2.0, 3.0, 4.0, 5.0, 6.0], [4.5, 4.9, 5.6, 7.0, 9.4])  # re-timed: INT8 wins
    always = timings([5.0, 5.5, 6.0, 9.0, 17.8], [4.5, 4.9, 5.6, 7.0, 9.4])  # bf16 wins batch 1
    # the bundled model on an AMX CPU, timed again: bf16 1.05x at batch 16, not worth its copy
    short = timings([1.69, 2.00, 2.45, 3.35, 6.53], [3.01, 3.11, 3.14, 3.62, 6.22])
    for ms in (flips, never, always, short):
        assert with_split(choice, INT8, BF16, ms) == choice


def test_a_choice_measured_beside_other_programs_says_so() -> None:
    """A review's first start, beside a process using one of two cores, chose ONNX FP32, whose
    lone requests then ran 1.5x slower than OpenVINO bf16's, the quiet machine's choice; the
    choice was kept with the export and nothing said the machine was busy."""
    from dataclasses import replace

    choice = choose([FP32, INT8, OV_FP32, BF16], 0.98, "amx")
    assert "other programs" not in choice.line()
    busy = replace(choice, other_load=0.45)
    assert "measured while other programs used 45% of the CPUs" in busy.line()
    assert "-auto- entry" in busy.line() and busy.describe()["other_load"] == 0.45
    assert "other programs" not in replace(choice, other_load=0.05).line()


def test_other_programs_share_of_the_cpus_is_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    """``others_share``: the busy time of the CPUs this process may use less its own, over
    their wall time (made-up clocks: 2 s on 2 allowed CPUs of 3, 3 CPU-seconds busy on them,
    1.2 of them ours; a code review found a program on a CPU the process can't use counted)."""
    from collections import namedtuple

    import psutil

    from tiankong import host

    Times = namedtuple("Times", "user nice system idle irq softirq")
    clock = iter([10.0, 12.0])
    idle = Times(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    busy_cpu = Times(50.0, 0.0, 50.0, 0.0, 0.0, 0.0)  # a CPU this process may not use
    start = Times(50.0, 0.0, 10.0, 25.0, 0.0, 0.0)
    after = [Times(51.0, 0.5, 10.0, 25.5, 0.0, 0.0), Times(51.0, 0.0, 10.5, 25.5, 0.0, 0.0)]
    busy = iter([[start, start, idle], [*after, busy_cpu]])
    mine = iter([(5.0, 1.0, 0.0, 0.0, 0.0), (6.0, 1.2, 0.0, 0.0, 0.0)])
    monkeypatch.setattr(host.time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(psutil, "cpu_times", lambda percpu=False: next(busy))
    monkeypatch.setattr(host.os, "times", lambda: next(mine))
    monkeypatch.setattr(host, "allowed_cpus", lambda: {0, 1})
    before = host.cpu_snapshot()
    # CPUs 0 and 1 did 3 CPU-seconds in 2 s, 1.2 of them ours; CPU 2's program doesn't count
    assert host.others_share(before) == pytest.approx((3.0 - 1.2) / 4.0)
    assert host.others_share(None) is None


class CountingEngine:
    """Counts its calls; a call takes ``ms`` of the clock that ``time_in_turns`` reads."""

    def __init__(self, clock: list[float], ms: float, log: list[str], name: str) -> None:
        self.clock, self.ms, self.log, self.name = clock, ms, log, name

    def mask_logits(self, batch: object) -> None:
        self.clock[0] += self.ms / 1000
        self.log.append(self.name)


def test_engines_timed_in_turns_pause_then_settle_before_each_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each block starts with a quiet pause (the engine before, ONNX Runtime spinning after its
    run as served, goes quiet), then untimed calls for at least SETTLE_CALLS and SETTLE_MS, then
    the timed ones; a lone engine has no one to wait for."""
    from tiankong.export import precision_choice

    clock, log = [0.0], list[str]()

    def sleep(seconds: float) -> None:
        clock[0] += seconds
        log.append(f"pause {seconds * 1000:g}")

    monkeypatch.setattr(precision_choice.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(precision_choice.time, "sleep", sleep)
    engines = {
        "a": CountingEngine(clock, 3.0, log, "a"),
        "b": CountingEngine(clock, 40.0, log, "b"),
    }
    ms = precision_choice.time_in_turns(engines, None, rounds=4, turns=2)  # type: ignore[arg-type]
    assert ms == pytest.approx({"a": 3.0, "b": 40.0})
    assert (precision_choice.SETTLE_CALLS, precision_choice.SETTLE_MS) == (2, 10.0)
    quiet = f"pause {precision_choice.QUIET_MS:g}"
    # a: 3 ms calls until 10 ms have passed (4), then 2 timed; b: SETTLE_CALLS, then 2 timed
    block = [quiet, *["a"] * (4 + 2), quiet, *["b"] * (2 + 2)]
    assert log == block * 2
    log.clear()
    precision_choice.time_in_turns({"a": engines["a"]}, None, rounds=2, turns=1)  # type: ignore[arg-type]
    assert log == ["a"] * (4 + 2)
