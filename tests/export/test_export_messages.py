"""What `tiankong export` and the export worker tell the user: an INT8 export that failed its
quality guard says so, a model of the wrong type is named as such (not as bad weights), and a
failed INT8 build points to a precision the command has, not to an option it lacks."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tiankong import Settings
from tiankong.errors import ModelUnavailableError
from tiankong.export import export_worker, quantize
from tiankong.export.export_cache import MANIFEST_FILE, ensure_export
from tiankong.model_sources import resolve_model

pytestmark = pytest.mark.processes  # starts processes: the CLI, a server, Ray or export workers


def test_an_int8_export_that_failed_its_guard_says_so(
    tiny_model_dir: Path, onnx_cache_copy: Callable[[Path], Path], tmp_path: Path
) -> None:
    """It printed the agreement (96.8%) and exit 0, and nothing said it was under the 98% the
    guard needs; the export is kept, as `serve --precision int8` serves it, with a warning."""
    from cli_helpers import run_cli

    cache = onnx_cache_copy(tmp_path / "cache")
    [manifest_file] = [
        entry / MANIFEST_FILE
        for entry in cache.glob(f"{tiny_model_dir.name}-int8-*")
        if (entry / MANIFEST_FILE).is_file()
    ]
    manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    # the manifest's figures are what the command reads; they are not part of the checksum
    manifest["quality"].update(top1_agreement=0.9684, min_agreement=0.98, passed=False)
    manifest_file.write_text(json.dumps(manifest), encoding="utf-8")
    out = tmp_path / "out"
    done = run_cli(
        "export", "-m", str(tiny_model_dir), "-o", str(out), "--precision", "int8",
        env={"TIANKONG_ONNX_CACHE_DIR": str(cache)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "top-1 agreement 96.8%" in done.stdout
    assert (
        "warning: this INT8 export failed its quality guard (top-1 agreement 96.8%, under the "
        "98% it needs)" in done.stderr
    )
    assert (out / MANIFEST_FILE).is_file()  # kept, as asked


def test_a_passing_int8_export_has_no_warning(
    tiny_model_dir: Path, onnx_cache_copy: Callable[[Path], Path], tmp_path: Path
) -> None:
    from cli_helpers import run_cli

    cache = onnx_cache_copy(tmp_path / "cache")
    [manifest_file] = list(cache.glob(f"{tiny_model_dir.name}-int8-*/{MANIFEST_FILE}"))
    manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    manifest["quality"].update(top1_agreement=0.99, passed=True)
    manifest_file.write_text(json.dumps(manifest), encoding="utf-8")
    done = run_cli(
        "export", "-m", str(tiny_model_dir), "-o", str(tmp_path / "out"), "--precision", "int8",
        env={"TIANKONG_ONNX_CACHE_DIR": str(cache)},
    )  # fmt: skip
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr


def test_a_model_type_without_a_masked_lm_head_is_named_not_its_weights(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """A GPT-2 config (no ``architectures``) was blamed on 'missing, truncated or corrupt'
    weights, which load fine; the type is the fault."""
    folder = Path(shutil.copytree(tiny_model_dir, tmp_path / "gpt2ish"))
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config.pop("architectures", None)
    config["model_type"] = "gpt2"
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    settings = Settings(threads=1, onnx_cache_dir=str(tmp_path / "cache"))
    with pytest.raises(ModelUnavailableError) as caught:
        ensure_export(resolve_model(str(folder)), "fp32", settings)
    message = str(caught.value)
    assert "is of type 'gpt2', which has no masked language model head" in message
    assert "corrupt" not in message


def test_a_failed_int8_build_points_to_fp32_not_to_an_engine_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tiankong export` has no --engine; an INT8 build that fails has an FP32 graph behind it."""

    def broken(*_: object) -> dict[str, object]:
        raise RuntimeError("quantizer bug")

    monkeypatch.setattr(quantize, "export_int8", broken)
    request = export_worker.BuildRequest(
        model_name="m1",
        model_path=str(tmp_path),
        fp32_file=str(tmp_path / "fp32" / "model.onnx"),
        threads=1,
        entry=str(tmp_path / "m1-int8-0123"),
        key="0123",
        fingerprint="f",
        versions={},
        cpu="avx2",
        min_agreement=0.98,
    )
    monkeypatch.setattr(export_worker.sys, "stdin", io.StringIO(json.dumps(request.__dict__)))
    assert export_worker.main() == 1
    printed = capsys.readouterr()
    assert "Traceback" not in printed.err  # passed through to the user's terminal
    report = json.loads(printed.out.strip().splitlines()[-1])
    assert report["error"] == "EngineUnavailableError"
    assert report["message"].startswith("Exporting 'm1' to ONNX failed (RuntimeError)")
    assert report["message"].endswith("; --precision fp32 runs this model without INT8.")
    assert "--engine" not in report["message"]


def test_a_stale_shipped_graph_is_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A model folder whose weights no longer match its shipped graph printed the note twice
    before the load's own error: a load asks for the shipped graph more than once."""
    import logging

    from tiankong.core.models import ResolvedModel
    from tiankong.export.export_cache import SHIPPED_GRAPH, SHIPPED_MANIFEST, shipped_manifest

    (tmp_path / SHIPPED_GRAPH).write_bytes(b"graph")
    (tmp_path / SHIPPED_MANIFEST).write_text('{"cache_format": 0}', encoding="utf-8")
    model = ResolvedModel("mine", tmp_path, "local")
    with caplog.at_level(logging.WARNING):
        assert shipped_manifest(model, "abc") is None
        assert shipped_manifest(model, "abc") is None
    notes = [r for r in caplog.records if "is not for these model files" in r.getMessage()]
    assert len(notes) == 1


def test_a_cache_folder_that_cant_be_written_is_one_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only or full cache mount (TIANKONG_ONNX_CACHE_DIR on a volume) was a 118-line
    traceback and exit 1, where a cache folder that can't be created was one sentence."""
    import errno
    import os

    from tiankong.core.models import DEFAULT_MODEL
    from tiankong.export import export_cache

    def read_only(*_: object, **__: object) -> str:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(export_cache.tempfile, "mkdtemp", read_only)
    settings = Settings(threads=1, onnx_cache_dir=str(tmp_path / "cache"))
    with pytest.raises(ModelUnavailableError) as caught:
        ensure_export(resolve_model(DEFAULT_MODEL), "fp32", settings)
    message = str(caught.value)
    assert f"can't be written in '{tmp_path / 'cache'}' (Read-only file system)" in message
    assert "TIANKONG_ONNX_CACHE_DIR" in message


def test_the_export_worker_names_a_full_disk_as_the_machines_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An OSError in the worker (a full disk) was reported as an engine failure to look up in a
    log file; it is the cache folder's, with what to change."""
    import errno
    import os

    def full(*_: object, **__: object) -> str:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(export_worker.tempfile, "mkdtemp", full)
    request = export_worker.BuildRequest(
        model_name="m", model_path=str(tmp_path), fp32_file=None, threads=1,
        entry=str(tmp_path / "cache" / "m-fp32-0"), key="k", fingerprint="f", versions={},
        cpu="avx2", min_agreement=0.98,
    )  # fmt: skip
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(export_worker.asdict(request))))
    assert export_worker.main() == 1
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["error"] == "ModelUnavailableError"
    assert "(No space left on device)" in report["message"]
    assert "TIANKONG_ONNX_CACHE_DIR" in report["message"]


def test_a_worker_that_cannot_start_is_not_blamed_on_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed fork (ENOMEM) was reported as a cache folder that can't be written (a code
    review), whose remedy changes nothing."""
    import errno
    import os

    from tiankong.errors import EngineError

    def no_memory(*_: object, **__: object) -> None:
        raise OSError(errno.ENOMEM, os.strerror(errno.ENOMEM))

    monkeypatch.setattr(export_worker.subprocess, "run", no_memory)
    request = export_worker.BuildRequest(
        model_name="m", model_path=str(tmp_path), fp32_file=None, threads=1,
        entry=str(tmp_path / "m-fp32-0"), key="k", fingerprint="f", versions={},
        cpu="avx2", min_agreement=0.98,
    )  # fmt: skip
    with pytest.raises(EngineError, match="could not be started \\(Cannot allocate memory\\)"):
        export_worker.build_in_worker(request)
