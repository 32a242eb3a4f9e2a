"""One export build, run in a child process of its own: ``python -m tiankong.export.export_worker``.

``export_cache`` runs every build here, so torch, transformers and the checkpoint's weights never
enter the process that serves: its memory and its threads stay ONNX Runtime's alone, even on the
first start. The request arrives as JSON on stdin. A failure is reported as one JSON line on
stdout, ``{"error": <TiankongError class name>, "message": <one sentence>}``, and exit code 1.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

from tiankong import errors
from tiankong.core.output_folder import folder_mode, os_reason
from tiankong.errors import EngineError, TiankongError
from tiankong.export import export, quantize
from tiankong.export.cache_format import (
    CACHE_FORMAT,
    CACHE_REMEDY,
    MANIFEST_FILE,
    ONNX_FILE,
    file_sha256,
)


@dataclass(frozen=True)
class BuildRequest:
    """Everything a build needs, as plain JSON-able values."""

    model_name: str
    model_path: str
    fp32_file: str | None  # None: export FP32; else quantize this FP32 export to INT8
    threads: int
    entry: str  # the cache folder to create
    key: str
    fingerprint: str
    versions: dict[str, str | None]
    cpu: str  # the CPU kind the key was made for: it picks the INT8 recipe chain
    min_agreement: float  # the INT8 guard's threshold: the first recipe reaching it is kept
    int8_file: str | None = None  # set: measure --precision auto's choice (no graph of its own)


def build_in_worker(request: BuildRequest) -> None:
    """Run ``build_export(request)`` in a fresh interpreter; re-raise its typed error here."""
    # The child must import this same tiankong, wherever it was imported from here.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path for path in sys.path if path)}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tiankong.export.export_worker"],
            input=json.dumps(asdict(request)),
            stdout=subprocess.PIPE,  # stderr passes through: the child's warnings stay visible
            text=True,
            env=env,
            check=False,
        )
    except OSError as error:  # no process to start (memory, process limits): not the cache's
        raise EngineError(
            f"The export worker for '{request.model_name}' could not be started "
            f"({os_reason(error)})."
        ) from None
    if done.returncode == 0:
        return
    try:
        report = json.loads(done.stdout.strip().splitlines()[-1])
        error_class = getattr(errors, report["error"])
        message = str(report["message"])
    except (IndexError, ValueError, KeyError, AttributeError, TypeError):
        error_class, message = (
            EngineError,
            (f"Exporting '{request.model_name}' to ONNX stopped (exit code {done.returncode})."),
        )
    if not (isinstance(error_class, type) and issubclass(error_class, TiankongError)):
        error_class = EngineError
    raise error_class(message)


def build_export(request: BuildRequest) -> None:
    """Export into a temporary sibling of ``entry``, write the manifest last, then rename."""
    entry = Path(request.entry)
    model_path = Path(request.model_path)
    precision = "fp32" if request.fp32_file is None else "int8"
    if request.int8_file is not None:
        precision = "auto"
    started = time.perf_counter()
    temp = Path(tempfile.mkdtemp(prefix=f".tmp-{entry.name}-", dir=entry.parent))
    try:
        if request.fp32_file is None:
            details = export.export_fp32(model_path, temp / ONNX_FILE, request.threads)
        elif request.int8_file is not None:
            details = measure_choice(request, temp)
        else:
            details = quantize.export_int8(
                model_path,
                Path(request.fp32_file),
                temp / ONNX_FILE,
                request.threads,
                request.cpu,
                request.min_agreement,
            )
        files = {}
        for path in sorted(temp.iterdir()):
            sync_file(path)
            files[path.name] = {"bytes": path.stat().st_size, "sha256": file_sha256(path)}
        manifest = {
            "cache_format": CACHE_FORMAT,
            "key": request.key,
            "model": {"name": request.model_name, "fingerprint": request.fingerprint},
            "precision": precision,
            "recipe": export.recipe(precision, request.cpu, request.min_agreement, request.threads),
            "libraries": request.versions,
            "files": files,
            **details,
            "export_seconds": round(time.perf_counter() - started, 2),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        manifest_file = temp / MANIFEST_FILE
        manifest_file.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
        sync_file(manifest_file)
        # mkdtemp's 0700 kept the cache from a server run as another user (an image run with
        # a random uid, OpenShift's way); an entry gets the mode mkdir would give it
        os.chmod(temp, folder_mode())
        os.rename(temp, entry)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise


def measure_choice(request: BuildRequest, entry: Path) -> dict[str, object]:
    """``--precision auto``'s choice among the engines and precisions this machine can serve,
    measured here (``precision_choice``), beside the FP32 and INT8 exports it reads; a graph of
    its own (OpenVINO's INT8 IR), when that serves, is written into ``entry``."""
    from tiankong.export import precision_choice

    assert request.fp32_file is not None and request.int8_file is not None
    int8_file = Path(request.int8_file)
    int8_manifest = json.loads((int8_file.parent / MANIFEST_FILE).read_text(encoding="utf-8"))
    choice, files = precision_choice.measure(
        Path(request.model_path),
        Path(request.fp32_file),
        int8_file,
        dict(int8_manifest.get("quality") or {}),
        request.threads,
        request.min_agreement,
        request.cpu,
        entry,
    )
    return {"choice": choice.describe(files)}


def sync_file(path: Path) -> None:
    with path.open("rb") as stream:
        os.fsync(stream.fileno())


# errno of a cache folder that can't take the export: full, over quota, read-only, not ours
UNWRITABLE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM})


def main() -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    request = BuildRequest(**json.loads(sys.stdin.read()))
    try:
        build_export(request)
    except TiankongError as error:
        print(json.dumps({"error": type(error).__name__, "message": error.message}))
        return 1
    except Exception as error:  # a bug or a library failure: details to a file, one line out
        if isinstance(error, OSError) and error.errno in UNWRITABLE:
            # the cache's fault (a full disk, a read-only mount), not the model's: no log to
            # write either (it failed too, with a traceback on the user's screen)
            folder = Path(request.entry).parent
            message = (
                f"The ONNX export can't be written in '{folder}' ({os_reason(error)}); "
                f"{CACHE_REMEDY}."
            )
            print(json.dumps({"error": "ModelUnavailableError", "message": message}))
            return 1
        message = f"Exporting '{request.model_name}' to ONNX failed ({type(error).__name__})"
        log_file = Path(request.entry).with_name(Path(request.entry).name + ".failed.log")
        try:  # the traceback (28-68 lines on the user's screen before) kept for a report
            log_file.write_text(traceback.format_exc(), encoding="utf-8")
            message += f"; the details are in {log_file}"
        except OSError:
            traceback.print_exc()
        if request.fp32_file is None:  # the ONNX graph itself failed; torch runs the model
            message += "; the torch engine (--engine torch) can run it."
        else:  # quantizing (or --precision auto's measurement) failed; the FP32 graph is made
            message += "; --precision fp32 runs this model without INT8."
        print(json.dumps({"error": "EngineUnavailableError", "message": message}))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
