"""Shared fixtures: a tiny random BERT with the real bert-base-chinese vocabulary, its masker and
ONNX exports, and the anyio backend. The tests mirror the package: tests/core, tests/engines,
tests/serving, tests/server, tests/offline, tests/export, tests/training, tests/cli; helpers
shared by several folders (server_helpers.py, reliability_helpers.py) sit here, on the import path.

No test touches the network: HF_HUB_OFFLINE is forced on for the whole session.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tiny_bert import build_tiny_bert

if TYPE_CHECKING:
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from tiankong import FillMasker, Settings


@pytest.fixture
def anyio_backend() -> str:
    """``@pytest.mark.anyio`` tests run on asyncio, the loop uvicorn and Ray Serve use."""
    return "asyncio"


def built_once(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]
) -> Path:
    """A folder that ``build`` fills once per test run, for session fixtures that cost seconds
    (a model, its ONNX exports). Under pytest-xdist the workers share it: the first to ask
    builds it under a file lock in the run's temporary folder, the others wait and reuse it.
    Tests must not change it (copy it first)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        folder = tmp_path_factory.mktemp(name)
        build(folder)
        return folder
    from filelock import FileLock

    run_root = tmp_path_factory.getbasetemp().parent  # pytest-N/, above each popen-gwK/
    folder, done = run_root / name, run_root / f"{name}.done"
    with FileLock(str(run_root / f"{name}.lock")):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a build that failed half-way
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_once(tmp_path_factory, "tiny-bert", build_tiny_bert)


@pytest.fixture(scope="session")
def tiny_masker(tiny_model_dir: Path):
    from tiankong import FillMasker, Settings

    return FillMasker.load(str(tiny_model_dir), Settings(engine="torch", threads=1))


@pytest.fixture(scope="session", autouse=True)
def private_user_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """ONNX exports made by any test (engine auto picks onnx) never land in the real user cache;
    platformdirs reads XDG_CACHE_HOME, and CLI subprocesses inherit it. Under pytest-xdist the
    workers share one for the run, so the bundled model's INT8 export and corpus index are made
    once, not once per worker (the export cache and the index build lock across processes)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
        return
    shared = tmp_path_factory.getbasetemp().parent / "xdg-cache"  # pytest-N/, above popen-gwK/
    shared.mkdir(exist_ok=True)
    os.environ["XDG_CACHE_HOME"] = str(shared)


@pytest.fixture(scope="session")
def tiny_onnx_cache(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An ONNX cache holding the tiny model's FP32 and INT8 exports, built once per run. Tests
    that change a cache copy it first (``shutil.copytree``)."""
    from tiankong import Settings
    from tiankong.core.models import resolve_model
    from tiankong.export.export_cache import ensure_export

    def export(root: Path) -> None:
        settings = Settings(threads=1, onnx_cache_dir=str(root))
        ensure_export(resolve_model(str(tiny_model_dir)), "int8", settings)

    return built_once(tmp_path_factory, "onnx-cache", export)


@pytest.fixture(scope="session")
def settings(tiny_model_dir: Path) -> Settings:
    """The tiny model on the torch engine, one thread: what most server and offline tests use."""
    from tiankong import Settings

    return Settings(engine="torch", threads=1, model=str(tiny_model_dir))


@pytest.fixture(scope="module")
def app(settings: Settings, tiny_masker: FillMasker) -> FastAPI:
    from tiankong.server import create_app

    return create_app(settings, tiny_masker)


@pytest.fixture(scope="module")
def client(app: FastAPI) -> Iterator[TestClient]:
    """The app in-process (lifespan run), one per test module."""
    from fastapi.testclient import TestClient

    with TestClient(app) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def base_url(app: FastAPI) -> Iterator[str]:
    """The app on a free loopback port (uvicorn in a thread), for real HTTP clients."""
    from server_helpers import serve_in_thread

    with serve_in_thread(app) as url:
        yield url
