"""A plain `pip install` of the wheel (no extra) gave tracebacks: `tiankong serve` a
ModuleNotFoundError for fastapi, `--engine onnx` one for onnxruntime, `tiankong train` one for
torch, and the torch engine's refusal named scripts only a clone has (a review). Each names
the extra that brings what is missing, in one sentence, exit 3."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from tiankong.config import Settings
from tiankong.errors import MissingPackageError, mapping_for

HIDDEN = {"torch", "transformers", "onnxruntime", "openvino", "fastapi"}


@pytest.fixture
def bare(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as a plain install of the wheel sees it: none of the extras' packages."""
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name.split(".")[0] in HIDDEN else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


@pytest.mark.usefixtures("bare")
@pytest.mark.parametrize(
    ("engine", "said"),
    [
        ("auto", "Filling with a model needs onnxruntime, which this install lacks: pip install "
         "'tiankong[serving]'"),
        ("onnx", "The onnx engine needs onnxruntime, which this install lacks: pip install "
         "'tiankong[serving]'"),
        ("openvino", "The openvino engine needs openvino, which this install lacks: pip "
         "install 'tiankong[openvino]'"),
        ("torch", "The torch engine needs torch and transformers, which this install lacks: "
         "pip install 'tiankong[torch]'"),
    ],
)  # fmt: skip
def test_an_engine_whose_package_is_missing_names_its_extra(
    tiny_model_dir: Path, engine: str, said: str
) -> None:
    from tiankong.engines import create_engine
    from tiankong.model_sources import resolve_model

    settings = Settings(engine=engine, model=str(tiny_model_dir), precision="fp32")
    with pytest.raises(MissingPackageError) as refused:
        create_engine(resolve_model(str(tiny_model_dir)), settings, 21128, None)  # type: ignore[arg-type]
    assert refused.value.message.startswith(said)
    assert mapping_for(refused.value).exit_code == 3


@pytest.mark.usefixtures("bare")
def test_serve_and_train_without_their_packages_are_one_sentence(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tiankong.cli import app, register_commands

    register_commands()
    served = CliRunner().invoke(app, ["serve"])
    assert isinstance(served.exception, MissingPackageError), served.exception
    assert served.exception.message.startswith(
        "tiankong serve needs fastapi, which this install lacks: pip install 'tiankong[serving]'"
    )
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("春眠不觉晓，处处闻啼鸟。\n", encoding="utf-8")
    trained = CliRunner().invoke(
        app, ["train", "--out", str(tmp_path / "run"), "--config", "tiny", "--data", str(corpus)]
    )
    assert isinstance(trained.exception, MissingPackageError), trained.exception
    assert "Training needs torch and transformers" in trained.exception.message
