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


# The files that run longest, longest first, handed to the pytest-xdist workers before the rest.
# A worker runs a whole file (--dist loadfile); scripts/test.sh passes --no-loadscope-reorder,
# without which xdist sorts files by their number of tests, so the one-test bench smoke (about
# 200 s) started last and ran on alone while the other workers sat idle.
SLOW_FILES_FIRST = (
    "tests/cli/test_bench_smoke.py",
    "tests/export/test_export_cache.py",
    "tests/server/test_faults.py",
    "tests/training/test_train.py",
    "tests/engines/test_onnx.py",
    "tests/offline/test_fill.py",
    "tests/server/test_ray_serve.py",
    "tests/server/test_reliability.py",
    "tests/export/test_int8_recipe.py",
    "tests/test_readme.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing = [name for name in SLOW_FILES_FIRST if not (config.rootpath / name).is_file()]
    if missing:  # a renamed file would silently lose its place
        raise pytest.UsageError(f"conftest.SLOW_FILES_FIRST names missing files: {missing}")
    rank = {name: place for place, name in enumerate(SLOW_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


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
    once, not once per worker (the export cache and the index build lock across processes), or
    copied in from the real user cache (``seed_bundled``)."""
    from platformdirs import user_cache_dir

    real = Path(user_cache_dir("tiankong"))  # read before XDG_CACHE_HOME points elsewhere
    cache = built_once(
        tmp_path_factory, "xdg-cache", lambda folder: seed_bundled(real, folder / "tiankong")
    )
    os.environ["XDG_CACHE_HOME"] = str(cache)


def seed_bundled(real: Path, private: Path) -> None:
    """Copy the bundled model's ONNX exports and corpus index from the real user cache, where
    scripts/setup.sh made and checked them just before the suite (scripts/test.sh), into the
    run's cache: made again they kept one worker busy for over a minute on 2 cores. Copies, so
    no test can change the real ones, and only whole entries (those with their manifest); the
    key in an entry's name decides, as always, whether this code can use it. Without them (a
    bare ``pytest``) the first test that needs them makes them, as before; the code that builds
    them is tested on small inputs (tests/index/test_index_bundled.py, tests/export)."""
    from tiankong.core.models import DEFAULT_MODEL
    from tiankong.export.export_cache import MANIFEST_FILE
    from tiankong.index.bundled import bundled_index_dir
    from tiankong.index.store import MANIFEST

    index = bundled_index_dir(real / "index")
    if (index / MANIFEST).is_file():
        shutil.copytree(index, bundled_index_dir(private / "index"))
    for export in sorted((real / "onnx").glob(f"{DEFAULT_MODEL}-*")):
        if (export / MANIFEST_FILE).is_file():
            shutil.copytree(export, private / "onnx" / export.name)


@pytest.fixture(scope="session")
def tiny_onnx_cache(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An ONNX cache holding the tiny model's FP32 and INT8 exports, built once per run. Tests
    that change a cache copy it first (``shutil.copytree``)."""
    from tiankong import Settings
    from tiankong.export.export_cache import ensure_export
    from tiankong.model_sources import resolve_model

    def export(root: Path) -> None:
        settings = Settings(threads=1, onnx_cache_dir=str(root))
        ensure_export(resolve_model(str(tiny_model_dir)), "int8", settings)

    return built_once(tmp_path_factory, "onnx-cache", export)


def finished_copy(cache: Path, destination: Path) -> Path:
    """A copy of an ONNX cache's finished entries. The session's cache is shared by the workers,
    and a test on one may be building an entry in it (the ``auto`` measurement, for its thread
    count) while another copies it: that build's ``.tmp-`` folder is not part of the cache."""
    return Path(shutil.copytree(cache, destination, ignore=shutil.ignore_patterns(".tmp-*")))


@pytest.fixture
def onnx_cache_copy(tiny_onnx_cache: Path) -> Callable[[Path], Path]:
    """Makes a private copy of the session's exports at the given path, free to change."""
    return lambda destination: finished_copy(tiny_onnx_cache, destination)


@pytest.fixture(scope="session")
def tiny_onnx_env(
    tiny_onnx_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """Environment for CLI processes that run the tiny model with ``--engine onnx``: the
    session's exports (a copy per worker, so no process changes them). Such a process imports
    neither torch nor transformers and exports nothing: about 1.5 s of CPU on the 2-core test
    machine, where one on ``--engine torch`` takes 9 s. Tests whose subject is not the engine
    run the CLI this way."""
    copy = finished_copy(tiny_onnx_cache, tmp_path_factory.mktemp("onnx-cli") / "onnx")
    return {"TIANKONG_ONNX_CACHE_DIR": str(copy)}


@pytest.fixture
def onnx_exports(tiny_onnx_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """``tiny_onnx_env`` set for the test, so the CLI processes it starts inherit it."""
    for name, value in tiny_onnx_env.items():
        monkeypatch.setenv(name, value)


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
    from server_helpers import local_client

    with local_client(app) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def base_url(app: FastAPI) -> Iterator[str]:
    """The app on a free loopback port (uvicorn in a thread), for real HTTP clients."""
    from server_helpers import serve_in_thread

    with serve_in_thread(app) as url:
        yield url
