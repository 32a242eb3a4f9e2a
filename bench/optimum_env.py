"""optimum-onnx's own virtual environment and its exports.

optimum-onnx 0.1.0 pins ``transformers < 4.58`` while tiankong runs transformers 5, so the bench
makes ``bench/.venv-optimum`` (gitignored): ``torch==2.13.0`` first, so pip takes the CPU wheel
and never an unpinned (CUDA) torch, then ``optimum-onnx[onnxruntime]``, FastAPI and uvicorn.
Exports are made in that venv from the local model folder (it has no hub access) and kept in
``bench/.models/optimum/`` (or under ``--model-cache``), keyed by the model files' names, sizes
and modification times.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from bench.models import REPO_ROOT

VENV = REPO_ROOT / "bench" / ".venv-optimum"
PACKAGES = (("torch==2.13.0",), ("optimum-onnx[onnxruntime]==0.1.0", "fastapi", "uvicorn"))
IMPORT_CHECK = (
    "import fastapi, uvicorn, onnxruntime; from optimum.onnxruntime import ORTModelForMaskedLM"
)
READY_MARKER = "bench-ready"


def venv_python() -> Path:
    return VENV / "bin" / "python"


def usable() -> bool:
    python = venv_python()
    if not python.exists():
        return False
    if (VENV / READY_MARKER).is_file():
        return True
    check = subprocess.run([str(python), "-c", IMPORT_CHECK], capture_output=True)
    if check.returncode == 0:
        (VENV / READY_MARKER).write_text("imports checked\n")
    return check.returncode == 0


def ensure_venv(create: bool, log_path: Path) -> tuple[Path | None, str]:
    """The venv's python, or None and the reason it can't be had."""
    if usable():
        return venv_python(), ""
    if not create:
        return None, (
            "skipped in --quick: bench/.venv-optimum does not exist yet (a full run creates it)"
        )
    log_path.parent.mkdir(parents=True, exist_ok=True)
    print(f"bench: creating {VENV} for optimum-onnx (once)", flush=True)
    steps = [[sys.executable, "-m", "venv", "--clear", str(VENV)]] + [
        [str(venv_python()), "-m", "pip", "install", "--quiet", *group] for group in PACKAGES
    ]
    with log_path.open("w") as log:
        for step in steps:
            log.write(f"$ {' '.join(step)}\n")
            log.flush()
            done = subprocess.run(step, stdout=log, stderr=subprocess.STDOUT)
            if done.returncode != 0:
                tail = log_path.read_text(errors="replace").splitlines()[-5:]
                return None, (
                    f"could not install optimum-onnx: `{' '.join(step[-3:])}` failed "
                    f"(exit {done.returncode}): " + " / ".join(line.strip() for line in tail)
                )
    if not usable():
        return None, f"optimum-onnx installed but does not import; see {log_path}"
    return venv_python(), ""


def model_key(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.iterdir()):
        if path.is_file():
            stat = path.stat()
            digest.update(f"{path.name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return f"{folder.name}-{digest.hexdigest()[:12]}"


def ensure_export(
    python: Path, model: Path, cache: Path, log_path: Path
) -> tuple[Path | None, str]:
    """The optimum export folder of ``model`` (FP32 and INT8 files), made on first use."""
    out = cache / "optimum" / model_key(model)
    if (out / "model_quantized.onnx").is_file():
        return out, ""
    print(f"bench: exporting {model.name} with optimum-onnx (once)", flush=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with log_path.open("w") as log:
        done = subprocess.run(
            [
                str(python),
                "-m",
                "bench.contenders.optimum_export",
                "--model",
                str(model),
                "--out",
                str(out),
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    if done.returncode != 0:
        tail = log_path.read_text(errors="replace").splitlines()[-3:]
        return None, f"optimum export failed (exit {done.returncode}): " + " / ".join(tail)
    return out, ""
