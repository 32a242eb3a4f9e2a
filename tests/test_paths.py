"""A sentence typed where a path may go (over 255 bytes: a name the system refuses) reads as
a missing path everywhere one is looked up, so the user gets the caller's sentence, not an
``OSError`` traceback: the lookups use ``os.path``, which answers False where pathlib raises."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiankong.errors import IndexInputError, IndexUnavailableError, ModelUnavailableError
from tiankong.export.export_cache import open_export
from tiankong.index.sources import check_input
from tiankong.index.store import read_manifest
from tiankong.model_sources import resolve_model

SENTENCE = "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。" * 4  # 96 characters, 288 bytes


def test_every_lookup_of_a_typed_path_says_it_is_missing(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailableError):
        resolve_model(SENTENCE)
    with pytest.raises(IndexInputError, match="does not exist"):
        check_input(Path(SENTENCE), None)
    with pytest.raises(IndexUnavailableError, match="no index"):
        read_manifest(Path(SENTENCE))
    assert open_export(tmp_path / SENTENCE, None) is None


def test_a_model_given_as_dot_is_named_by_its_folder(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--model .`` from inside the model's folder named it "" in every answer and in /info
    (a review's find): a path's own name, where "." has none."""
    monkeypatch.chdir(tiny_model_dir)
    for given in (".", "./", str(tiny_model_dir)):
        assert resolve_model(given).name == tiny_model_dir.name


def test_a_stopped_training_run_as_a_model_names_its_checkpoint(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """A `tiankong train --out` folder whose run stopped before it saved the model holds only
    checkpoint/: it was "has no config.json; ... Hugging Face layout", with no word of the
    checkpoint beside it (a review)."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(tiny_model_dir, run / "checkpoint")
    with pytest.raises(ModelUnavailableError) as stopped:
        resolve_model(str(run))
    assert f"its last checkpoint is '{run / 'checkpoint'}'" in stopped.value.message
    assert "--resume" in stopped.value.message
    assert resolve_model(str(run / "checkpoint")).path == run / "checkpoint"
