"""The bundled model: it is the default, loads offline and answers. Quality figures live in its
model card and the benchmark, not here."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tiankong import FillMasker, Settings
from tiankong.core.models import BUNDLED_ROOT, DEFAULT_MODEL, resolve_model


def test_bundled_model_is_the_default_and_loads() -> None:
    resolved = resolve_model(None)
    assert resolved.name == DEFAULT_MODEL and resolved.kind == "bundled"
    assert (resolved.path / "MODEL_CARD.md").is_file()
    size = sum(p.stat().st_size for p in resolved.path.iterdir())
    assert size <= 40 * 1024 * 1024


def test_bundled_model_answers_the_poem() -> None:
    masker = FillMasker.load(settings=Settings(engine="torch", threads=1))
    result = masker.predict("春眠不觉晓，处处闻啼[MASK]。", top_k=5)
    assert result.model == DEFAULT_MODEL
    assert len(result.masks) == 1 and len(result.masks[0]) == 5
    assert result.sequence.startswith("春眠不觉晓，处处闻啼") and "[MASK]" not in result.sequence


def test_bundled_model_loads_with_transformers() -> None:
    from transformers import AutoModelForMaskedLM

    model = AutoModelForMaskedLM.from_pretrained(BUNDLED_ROOT / DEFAULT_MODEL)
    assert model.config.vocab_size == 21128


@pytest.mark.processes
def test_cli_default_model_offline() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tiankong",
            "predict",
            "春眠不觉晓，处处闻啼[MASK]。",
            "--json",
            "--engine",
            "torch",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["model"] == DEFAULT_MODEL


@pytest.mark.processes
def test_models_command_shows_the_card() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tiankong", "models"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "demo-quality" in done.stdout
