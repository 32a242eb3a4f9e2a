"""The models the bench runs on: built locally with a fixed seed, or the bundled one.

- ``random-base``: bert-base-chinese's shape (``BertConfig(vocab_size=21128)``: 12 layers, hidden
  768) with random weights and the real vocabulary; the same FLOPs as the real model. Built once
  into ``bench/.models/`` by ``bench.gpu_bench.build_model`` (seed 0).
- ``random-tiny``: a 2-layer, 64-wide random BERT with the same vocabulary, for ``--quick``.
- ``bundled``: ``src/tiankong/bundled/tiankong-mini-zh``, trained by ``tiankong train``; it is
  absent until training has written it, and the bench then says so and runs the rest.
- any other value is taken as a local model folder.

The build runs in a child process (``python -m bench.models KIND FOLDER``), so the driver that
times the servers never imports torch.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

BENCH_ROOT = Path(__file__).resolve().parent
REPO_ROOT = BENCH_ROOT.parent
DEFAULT_MODEL_CACHE = BENCH_ROOT / ".models"
BUNDLED_FOLDER = REPO_ROOT / "src" / "tiankong" / "bundled" / "tiankong-mini-zh"
RANDOM_MODELS = {"random-base": "random-bert-base", "random-tiny": "random-bert-tiny"}
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


@dataclass(frozen=True)
class BenchModel:
    """A model to bench: ``path`` is a local HF folder, or None with ``missing`` saying why."""

    key: str
    path: Path | None
    missing: str = ""

    @property
    def config(self) -> dict[str, int]:
        assert self.path is not None
        data = json.loads((self.path / "config.json").read_text())
        return {
            name: int(data[name])
            for name in ("hidden_size", "num_hidden_layers", "intermediate_size", "vocab_size")
        }


def has_weights(folder: Path) -> bool:
    return (folder / "config.json").is_file() and any(
        (folder / name).is_file() for name in WEIGHT_FILES
    )


def build_random(kind: str, folder: Path) -> None:
    """Build a random model into ``folder`` through a temporary folder renamed into place."""
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "bench.models", kind, str(partial)],
        cwd=REPO_ROOT,
        check=True,
    )
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)


def model_problem(key: str) -> str:
    """Why ``key`` names no model the bench knows, or "" when it does (a bundled model not yet
    trained is known: the bench says so and runs the rest). Checked before anything runs: an
    unknown name ran nothing and replaced the last report with an empty one."""
    if key in RANDOM_MODELS or key == "bundled" or has_weights(Path(key).expanduser()):
        return ""
    known = ", ".join([*RANDOM_MODELS, "bundled"])
    return f"'{key}' is not {known} or a model folder with config.json and weights"


def resolve(key: str, cache: Path = DEFAULT_MODEL_CACHE) -> BenchModel:
    """The folder for ``key``, building a random model on first use."""
    if key in RANDOM_MODELS:
        folder = cache / RANDOM_MODELS[key]
        if not has_weights(folder):
            print(f"bench: building {key} in {folder} (once)", flush=True)
            build_random(key, folder)
        return BenchModel(key, folder)
    if key == "bundled":
        if has_weights(BUNDLED_FOLDER):
            return BenchModel(key, BUNDLED_FOLDER)
        return BenchModel(
            key,
            None,
            f"the bundled model is not there yet ({BUNDLED_FOLDER.relative_to(REPO_ROOT)} has "
            "no config.json and weights; `tiankong train` writes it)",
        )
    folder = Path(key).expanduser()
    if has_weights(folder):
        return BenchModel(folder.name, folder.resolve())
    return BenchModel(key, None, f"'{key}' is not a model folder with config.json and weights")


def main(argv: list[str]) -> None:
    from bench.gpu_bench import build_model

    kind, folder = argv
    build_model(Path(folder), quick=kind == "random-tiny")


if __name__ == "__main__":
    main(sys.argv[1:])
