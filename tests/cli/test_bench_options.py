"""The bench's options are checked before anything is built or measured: a count or a time of
0 is refused (it ran the default instead), as is a negative one (it ran "c=1 over -3
requests"); an unknown model or offline target stops the bench with exit 2 (the CLI's code for
bad input; it was 1) and leaves the last report in place (an unknown model ran nothing and
replaced it with an empty one, exit 0)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import run_cli

from bench import models, suite

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--duration", "0"], "--duration must be more than 0 seconds; got 0.0"),
        (["--duration", "-2"], "--duration must be more than 0 seconds; got -2.0"),
        (["--c1-requests", "0"], "--c1-requests must be 1 or more; got 0"),
        (["--c1-requests", "-3"], "--c1-requests must be 1 or more; got -3"),
        (["--offline-sentences", "0"], "--offline-sentences must be 1 or more; got 0"),
    ],
)
def test_a_count_or_time_below_one_is_refused(flags: list[str], message: str) -> None:
    with pytest.raises(SystemExit, match=f"^bench: {message}"):
        suite.make_plan(suite.parse_args(flags))


def test_counts_given_are_kept_and_defaults_fill_the_rest() -> None:
    plan = suite.make_plan(suite.parse_args(["--c1-requests", "7", "--duration", "0.5"]))
    assert (plan.c1_requests, plan.c20_duration_s, plan.offline_sentences) == (7, 0.5, 2000)


@pytest.fixture
def nothing_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bench's first measurement fails the test: a refusal must come before it."""

    def measured(quick: bool) -> dict[str, object]:
        raise AssertionError("the bench started measuring")

    monkeypatch.setattr(suite, "measure_peaks", measured)


@pytest.mark.usefixtures("nothing_measured")
def test_an_unknown_model_stops_the_bench_and_keeps_the_report(tmp_path: Path) -> None:
    out = tmp_path / "results"
    out.mkdir()
    (out / "latest.md").write_text("the last run\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"^bench: 'nosuch' is not random-base, random-tiny"):
        suite.main(["--quick", "--models", "nosuch", "--out-dir", str(out)])
    assert (out / "latest.md").read_text(encoding="utf-8") == "the last run\n"
    assert not (out / "latest.json").exists()


@pytest.mark.usefixtures("nothing_measured")
def test_a_misspelled_offline_target_stops_the_bench_before_it_runs(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    args = ["--quick", "--models", str(tiny_model_dir), "--out-dir", str(tmp_path)]
    with pytest.raises(SystemExit, match=r"^bench: unknown offline target\(s\) tiankong-onx-int8"):
        suite.main([*args, "--offline", "tiankong-onx-int8,pipeline"])


@pytest.mark.usefixtures("nothing_measured")
def test_no_model_to_bench_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the bundled model, before training wrote it: nothing to run, no empty report."""
    monkeypatch.setattr(models, "BUNDLED_FOLDER", models.REPO_ROOT / "no-such-bundled-model")
    with pytest.raises(SystemExit, match=r"^bench: no model to bench: the bundled model is not"):
        suite.main(["--models", "bundled", "--out-dir", str(tmp_path)])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.processes
@pytest.mark.parametrize("how", ["python -m bench", "tiankong bench"])
def test_a_refusal_is_one_sentence_and_exit_2(how: str) -> None:
    flags = ["--duration", "0", "--models", "nosuch"]
    if how == "tiankong bench":
        done = run_cli("bench", *flags, cwd=REPO)
    else:
        command = [sys.executable, "-m", "bench", *flags]
        done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "bench: --duration must be more than 0 seconds; got 0.0.\n"
