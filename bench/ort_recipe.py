"""The hand-written ORT recipe's export (``bench/contenders/ort_recipe_app.py``), made once per
model in a child process and kept in ``bench/.models/ort-recipe/`` (or under ``--model-cache``),
keyed like optimum's exports by the model files' names, sizes and modification times."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from bench.models import REPO_ROOT
from bench.optimum_env import model_key

MODULE = "bench.contenders.ort_recipe_app"


def ensure_export(model: Path, cache: Path, log_path: Path) -> tuple[Path | None, str]:
    """The export folder of ``model`` (FP32 and INT8 graphs, tokenizer), or None and why."""
    out = cache / "ort-recipe" / model_key(model)
    if (out / "model-int8.onnx").is_file():
        return out, ""
    print(f"bench: exporting {model.name} with the hand-written ORT recipe (once)", flush=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with log_path.open("w") as log:
        done = subprocess.run(
            [sys.executable, "-m", MODULE, "export", str(model), str(out)],
            cwd=REPO_ROOT,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    if done.returncode != 0:
        tail = log_path.read_text(errors="replace").splitlines()[-3:]
        return None, f"ORT recipe export failed (exit {done.returncode}): " + " / ".join(tail)
    print(f"  exported in {time.perf_counter() - started:.0f} s", flush=True)
    return out, ""
