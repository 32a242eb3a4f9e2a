"""The export cache: reuse without re-export, keys, corruption, crashed builds, two processes."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tiankong import Settings
from tiankong.core.models import ResolvedModel
from tiankong.errors import BadOptionError, EngineError, ModelUnavailableError
from tiankong.export import export_cache, export_worker
from tiankong.export.export_cache import (
    MANIFEST_FILE,
    ONNX_FILE,
    ensure_export,
    export_to_folder,
)
from tiankong.model_sources import resolve_model

pytestmark = pytest.mark.processes  # starts processes: the CLI, a server, Ray or export workers


@pytest.fixture
def cache(onnx_cache_copy: Callable[[Path], Path], tmp_path: Path) -> Path:
    """A private copy of the session's cache, free to break."""
    return onnx_cache_copy(tmp_path / "cache")


@pytest.fixture
def model(tiny_model_dir: Path) -> ResolvedModel:
    return resolve_model(str(tiny_model_dir))


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records every export build (by precision) while still running it."""
    seen: list[str] = []
    real_build = export_worker.build_in_worker

    def counting_build(request: export_worker.BuildRequest) -> None:
        seen.append("fp32" if request.fp32_file is None else "int8")
        real_build(request)

    monkeypatch.setattr(export_worker, "build_in_worker", counting_build)
    return seen


def settings_for(cache: Path) -> Settings:
    return Settings(threads=1, onnx_cache_dir=str(cache))


def test_second_creation_reuses_the_export(
    model: ResolvedModel, cache: Path, builds: list[str]
) -> None:
    first = ensure_export(model, "int8", settings_for(cache))
    mtime = first.onnx_file.stat().st_mtime_ns
    second = ensure_export(model, "int8", settings_for(cache))
    assert builds == [] and second.folder == first.folder
    assert second.onnx_file.stat().st_mtime_ns == mtime


def test_an_entry_gets_the_mode_mkdir_gives(model: ResolvedModel, tmp_path: Path) -> None:
    """Not mkdtemp's 0700: an image run under a random uid (OpenShift's way) could not read
    the export baked in as uid 10001 (a review)."""
    before = os.umask(0o022)  # the export worker inherits it
    try:
        made = ensure_export(model, "fp32", settings_for(tmp_path / "fresh"))
    finally:
        os.umask(before)
    assert made.folder.stat().st_mode & 0o777 == 0o755


def test_key_follows_model_files_and_precision(
    model: ResolvedModel, cache: Path, tmp_path: Path
) -> None:
    fingerprint = export_cache.model_fingerprint(model.path)
    versions = export_cache.library_versions()
    key = export_cache.export_key(fingerprint, "fp32", versions)
    assert key != export_cache.export_key(fingerprint, "int8", versions)
    assert key != export_cache.export_key(fingerprint, "fp32", {**versions, "torch": "0.0"})
    changed = Path(shutil.copytree(model.path, tmp_path / "changed"))
    config = json.loads((changed / "config.json").read_text())
    (changed / "config.json").write_text(json.dumps({**config, "layer_norm_eps": 1e-6}))
    assert export_cache.model_fingerprint(changed) != fingerprint
    assert export_cache.model_fingerprint(Path(shutil.copytree(model.path, tmp_path / "b"))) == (
        fingerprint
    )  # the folder's name and place don't matter, its contents do


def test_truncated_onnx_is_detected_and_rebuilt(
    model: ResolvedModel, cache: Path, builds: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    export = ensure_export(model, "int8", settings_for(cache))
    data = export.onnx_file.read_bytes()
    export.onnx_file.write_bytes(data[: len(data) // 2])
    with caplog.at_level(logging.WARNING, logger="tiankong"):
        rebuilt = ensure_export(model, "int8", settings_for(cache))
    assert builds == ["int8"] and "does not match its checksum" not in caplog.text
    assert "wrong size" in caplog.text
    assert rebuilt.onnx_file.read_bytes() != data[: len(data) // 2]
    assert export_cache.open_export(rebuilt.folder, rebuilt.manifest["key"]) is not None


def test_same_size_corruption_is_caught_by_the_checksum(
    model: ResolvedModel, cache: Path, builds: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    export = ensure_export(model, "int8", settings_for(cache))
    data = bytearray(export.onnx_file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    export.onnx_file.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="tiankong"):
        ensure_export(model, "int8", settings_for(cache))
    assert builds == ["int8"] and "does not match its checksum" in caplog.text


@pytest.mark.parametrize("garble", ["{not json", "", '{"cache_format": 1}', "[]"])
def test_garbled_manifest_is_rebuilt(
    model: ResolvedModel, cache: Path, builds: list[str], garble: str
) -> None:
    export = ensure_export(model, "int8", settings_for(cache))
    (export.folder / MANIFEST_FILE).write_text(garble)
    rebuilt = ensure_export(model, "int8", settings_for(cache))
    assert builds == ["int8"]
    assert rebuilt.quality["top1_agreement"] >= 0.97
    leftovers = [path.name for path in cache.iterdir() if path.name.startswith(".")]
    assert leftovers == []  # the broken export went to the trash and the trash was emptied


def test_missing_manifest_and_crashed_build_leftovers(
    model: ResolvedModel, cache: Path, builds: list[str]
) -> None:
    export = ensure_export(model, "int8", settings_for(cache))
    crashed = cache / f".tmp-{export.folder.name}-dead"  # a build killed halfway
    crashed.mkdir()
    (crashed / ONNX_FILE).write_bytes(b"half")
    (export.folder / MANIFEST_FILE).unlink()  # e.g. a copy that stopped before the manifest
    ensure_export(model, "int8", settings_for(cache))
    assert builds == ["int8"] and not crashed.exists()


def test_failed_build_leaves_nothing_and_raises_one_sentence(
    model: ResolvedModel, tmp_path: Path
) -> None:
    broken = Path(shutil.copytree(model.path, tmp_path / "broken"))
    (broken / "model.safetensors").write_bytes(b"not safetensors at all")
    cache = tmp_path / "cache"
    with pytest.raises(ModelUnavailableError, match="could not be loaded for export"):
        ensure_export(resolve_model(str(broken)), "fp32", settings_for(cache))
    assert [path for path in cache.iterdir() if path.is_dir()] == []


def test_worker_crash_becomes_an_engine_error(
    model: ResolvedModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(export_worker.sys, "executable", shutil.which("false") or "/bin/false")
    with pytest.raises(EngineError, match="stopped"):
        ensure_export(model, "fp32", settings_for(tmp_path))


def test_torchless_host_uses_an_export_made_elsewhere(
    model: ResolvedModel, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made_with = ensure_export(model, "int8", settings_for(cache))
    monkeypatch.setattr(export_cache, "can_export", lambda *_: False)
    serving_versions = {**export_cache.library_versions(), "torch": None, "transformers": None}
    monkeypatch.setattr(export_cache, "library_versions", lambda: serving_versions)
    found = ensure_export(model, "int8", settings_for(cache))
    assert found.folder == made_with.folder
    shutil.rmtree(made_with.folder)
    with pytest.raises(ModelUnavailableError, match=r"setup.sh --full"):
        ensure_export(model, "int8", settings_for(cache))


def test_export_to_folder_rules(model: ResolvedModel, cache: Path, tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    with pytest.raises(BadOptionError, match="holds files that are not a tiankong export's own"):
        export_to_folder(model, "fp32", settings_for(cache), target)
    with pytest.raises(BadOptionError, match="is a file"):
        export_to_folder(model, "fp32", settings_for(cache), target / "notes.txt")
    with pytest.raises(BadOptionError, match=r"notes\.txt' is a file, not a folder"):
        export_to_folder(model, "fp32", settings_for(cache), target / "notes.txt" / "sub")
    fresh = export_to_folder(model, "fp32", settings_for(cache), tmp_path / "new" / "fp32")
    assert sorted(path.name for path in fresh.folder.iterdir()) == sorted(
        [MANIFEST_FILE, ONNX_FILE]
    )


def test_export_to_a_full_disk_is_one_sentence(
    model: ResolvedModel, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Copying the export into --out on a full disk was an OSError's traceback, exit 1 (a
    review's find, on a 300 kB tmpfs); the half-copied folder goes."""
    from tiankong.export import export_cache

    export_to_folder(model, "fp32", settings_for(cache), tmp_path / "warm")  # the cache made

    def full(*_: object, **__: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export_cache.shutil, "copy2", full)
    out = tmp_path / "full" / "fp32"
    with pytest.raises(BadOptionError) as refused:
        export_to_folder(model, "fp32", settings_for(cache), out)
    assert refused.value.message == f"--out '{out}' can't be written (No space left on device)."
    assert not out.exists() and list(out.parent.iterdir()) == []


CREATE_ENGINE = """
import logging, sys
logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
from tiankong import FillMasker, Settings
settings = Settings(engine="onnx", precision="int8", threads=1, onnx_cache_dir=sys.argv[2])
masker = FillMasker.load(sys.argv[1], settings)
print("filled", masker.engine.precision, masker.predict("画龙点[MASK]").masks[0][0].token)
"""


def test_two_processes_starting_at_once(tiny_model_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "shared-cache"
    command = [sys.executable, "-c", CREATE_ENGINE, str(tiny_model_dir), str(cache)]
    processes = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [process.communicate(timeout=300) for process in processes]
    for process, (stdout, stderr) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, stderr
        assert stdout.startswith("filled int8")
    logs = "".join(stderr for _, stderr in outputs)
    assert logs.count("tiankong: exporting tiny-bert") == 2  # fp32 and int8 once, not per process
    assert logs.count("Exported tiny-bert") == 2
    assert len([path for path in cache.iterdir() if path.is_dir()]) == 2


def test_torchless_host_on_another_cpu_kind_uses_the_export_with_a_warning(
    model: ResolvedModel,
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A Docker image exported on one CPU kind and run on another: the INT8 export is served,
    and the log says its recipe was chosen for the other CPU."""
    made_with = ensure_export(model, "int8", settings_for(cache))
    made_on = made_with.manifest["recipe"]["int8"]["cpu"]
    other = "avx2" if made_on != "avx2" else "vnni"
    monkeypatch.setattr(export_cache, "can_export", lambda *_: False)
    monkeypatch.setattr(export_cache, "cpu_kind", lambda: other)
    with caplog.at_level(logging.WARNING, logger="tiankong"):
        found = ensure_export(model, "int8", settings_for(cache))
    assert found.folder == made_with.folder
    assert f"made on a '{made_on}' CPU; this one is '{other}'" in caplog.text
    fp32 = ensure_export(model, "fp32", settings_for(cache))  # FP32 doesn't depend on the CPU
    assert "fp32" in fp32.folder.name
