"""Intra-op threads and the cores: OpenMP (torch) spin-waits only while the pool leaves a core
free (engines/base.py); ONNX Runtime spins within a run and after it, as by default."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tiankong.engines import base
from tiankong.engines.torch_engine import quiet_openmp


@pytest.fixture
def four_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)


def test_spinning_pays_only_with_a_core_to_spare(four_cores: None) -> None:
    assert base.spinning_pays(1) and base.spinning_pays(3)
    assert not base.spinning_pays(4) and not base.spinning_pays(8)
    assert not base.spinning_pays(0)  # the library's pick: every core


def test_openmp_sleeps_only_before_torch_loads(
    four_cores: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    quiet_openmp(2)
    assert "OMP_WAIT_POLICY" not in os.environ  # two of four cores: spinning is fine
    quiet_openmp(4)
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    quiet_openmp(4)
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"  # the user's value wins


@pytest.mark.parametrize("spin_after_run", [True, False])
def test_onnx_session_spins_within_a_run_and_after_it_unless_asked_to_stop(
    four_cores: None, tiny_onnx_cache: Path, spin_after_run: bool
) -> None:
    from tiankong.engines.onnx_engine import build_session

    onnx_file = next(tiny_onnx_cache.rglob("*.onnx"))
    for threads in (0, 2, 4):
        session = build_session(onnx_file, "cpu", threads, spin_after_run=spin_after_run)
        options = session.get_session_options()
        assert options.get_session_config_entry("session.intra_op.allow_spinning") == "1"
        if spin_after_run:  # served: ORT's default
            with pytest.raises(RuntimeError, match="does not have configuration"):
                options.get_session_config_entry("session.force_spinning_stop")
        else:  # spin_after_run=False: the pool stops at the end of each run
            assert options.get_session_config_entry("session.force_spinning_stop") == "1"
