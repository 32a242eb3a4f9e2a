"""The ONNX export cache: one immutable folder per model files, precision, recipe and libraries.

>>> from tiankong import Settings
>>> from tiankong.model_sources import resolve_model
>>> export = ensure_export(resolve_model(None), "int8", Settings())  # doctest: +SKIP
>>> export.onnx_file.name, export.quality["top1_agreement"]  # doctest: +SKIP
('model.onnx', 1.0)

Finding a cached export hashes the model files and checks the export's manifest (sha256 of its
.onnx); it never imports torch or transformers. Building one takes a file lock and runs
``export_worker`` in a child process, which writes into a temporary folder and renames it into
place: a reader sees a whole export or none, two processes starting at once export once, and a
corrupt or half-written export is rebuilt.

A model folder may ship its FP32 export (``SHIPPED_GRAPH``, xz, with ``SHIPPED_MANIFEST``: the
bundled model does, written by ``python -m tiankong.export.ship_graph``). When its manifest names
the folder's model files, the FP32 entry is unpacked from it instead of exported, so the bundled
model's first start needs no torch: INT8 is then quantized from it with ONNX Runtime's own tools,
guard included, in the worker as before. tests/export/test_shipped_graph.py re-exports with torch
and checks the shipped graph is byte for byte what the exporter makes.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import lzma
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tiankong.config import Settings, cache_folder
from tiankong.core.models import MODEL_FILE_PATTERNS, ResolvedModel
from tiankong.core.output_folder import (
    cache_written,
    check_not_working_folder,
    check_output_folder,
    folder_mode,
    holds_only,
    made_here,
    replace_folder,
    replaced_path,
)
from tiankong.errors import BadOptionError, EngineError, ModelUnavailableError
from tiankong.export import export
from tiankong.export.cache_format import (
    CACHE_FORMAT,
    CACHE_REMEDY,
    MANIFEST_FILE,
    ONNX_FILE,
    file_sha256,
)
from tiankong.export.int8_recipe import cpu_kind

log = logging.getLogger(__name__)

EXPORT_PRECISIONS = ("fp32", "int8")
AUTO = "auto"  # an entry with no graph: --precision auto's measured choice (precision_choice)
EXPORT_LIBRARIES = ("torch", "transformers", "onnx", "onnxruntime")
LOCK_TIMEOUT_S = 3600.0
SHIPPED_GRAPH = "model-fp32.onnx.xz"
SHIPPED_MANIFEST = "model-fp32.json"


@dataclass(frozen=True)
class OnnxExport:
    """A checked export folder: ``model.onnx`` and its manifest (the export's metadata)."""

    folder: Path
    manifest: dict[str, Any]

    @property
    def onnx_file(self) -> Path:
        return self.folder / ONNX_FILE

    @property
    def precision(self) -> str:
        return str(self.manifest["precision"])

    @property
    def quality(self) -> dict[str, Any]:
        return dict(self.manifest.get("quality") or {})

    @property
    def choice(self) -> dict[str, Any]:
        """An ``auto`` entry's measured choice (``PrecisionChoice.describe``); else empty."""
        return dict(self.manifest.get("choice") or {})


def cache_root(settings: Settings) -> Path:
    return cache_folder("onnx", settings.onnx_cache_dir)


def model_fingerprint(folder: Path) -> str:
    """sha256 over the names and contents of the config, weight and tokenizer files.

    Hashed once per process for files as they stand (name, size, modification time): an
    ``auto`` export asks for it three times and a checkpoint once more (``resume.model_weights``),
    about 0.7 s each on bert-base's files; a file written since is hashed again."""
    files = sorted({path for pattern in MODEL_FILE_PATTERNS for path in folder.glob(pattern)})
    stats = tuple((str(path), path.stat().st_size, path.stat().st_mtime_ns) for path in files)
    return _fingerprint_of(stats)


@functools.lru_cache(maxsize=16)
def _fingerprint_of(stats: tuple[tuple[str, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for name, _, _ in stats:
        path = Path(name)
        digest.update(f"{path.name}\0{file_sha256(path)}\n".encode())
    return digest.hexdigest()


def library_versions() -> dict[str, str | None]:
    """Installed versions, read from package metadata: nothing gets imported."""
    versions: dict[str, str | None] = {}
    for name in EXPORT_LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def export_key(
    fingerprint: str,
    precision: str,
    versions: dict[str, str | None],
    recipe: dict[str, Any] | None = None,
) -> str:
    """``recipe``: ``export.recipe(...)``'s description (default: this CPU, default threshold)."""
    data = {
        "cache_format": CACHE_FORMAT,
        "model": fingerprint,
        "precision": precision,
        "recipe": export.recipe(precision) if recipe is None else recipe,
        "libraries": versions,
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def entry_name(model: ResolvedModel, precision: str, key: str) -> str:
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", model.name).strip("._")[:40] or "model"
    return f"{readable}-{precision}-{key[:16]}"


def ensure_export(model: ResolvedModel, precision: str, settings: Settings) -> OnnxExport:
    """The cached export of ``model`` at ``precision``, built on first use; ``auto``: the entry
    holding ``--precision auto``'s choice, measured on first use from the FP32 and INT8 ones."""
    if precision not in (*EXPORT_PRECISIONS, AUTO):
        raise BadOptionError(f"ONNX exports are fp32 or int8, not '{precision}'.")
    root = cache_root(settings)
    fingerprint = model_fingerprint(model.path)
    versions = library_versions()
    cpu = cpu_kind()  # the INT8 recipe chain depends on it, so it is part of the key
    described = export.recipe(precision, cpu, settings.int8_min_agreement, settings.threads)
    key = export_key(fingerprint, precision, versions, described)
    entry = root / entry_name(model, precision, key)
    found = open_export(entry, key)
    if found is not None:
        return found
    shipped = shipped_manifest(model, fingerprint)
    if precision != AUTO and not can_export(shipped is not None):
        return find_compatible(root, fingerprint, precision, versions, model, described)
    # INT8 is quantized from, and checked against, the FP32 export; auto measures both.
    fp32 = ensure_export(model, "fp32", settings) if precision != "fp32" else None
    int8 = ensure_export(model, "int8", settings) if precision == AUTO else None
    from filelock import FileLock, Timeout

    from tiankong.export.export_worker import BuildRequest, build_in_worker

    try:
        with cache_written(root, "The ONNX export", CACHE_REMEDY, ModelUnavailableError):
            root.mkdir(parents=True, exist_ok=True)
            with FileLock(str(root / f"{entry.name}.lock"), timeout=LOCK_TIMEOUT_S):
                found = open_export(entry, key)  # another process may have built it meanwhile
                if found is not None:
                    return found
                discard_leftovers(entry)
                if precision == "fp32" and shipped is not None:
                    unpack_shipped(model, shipped, entry, key)
                    return checked(entry, key, model)
                # said on stderr, as the bundled index's first build: a log line at info was
                # hidden while `tiankong serve` loaded, a silent first start of 15-50 s (a review)
                if precision == AUTO:
                    doing = f"measuring the engines for {model.name} on this CPU"
                else:
                    doing = f"exporting {model.name} to ONNX ({precision})"
                print(f"tiankong: {doing}, once (later runs reuse it)", file=sys.stderr)
                build_in_worker(
                    BuildRequest(
                        model_name=model.name,
                        model_path=str(model.path),
                        fp32_file=None if fp32 is None else str(fp32.onnx_file),
                        threads=settings.threads,
                        entry=str(entry),
                        key=key,
                        fingerprint=fingerprint,
                        versions=versions,
                        cpu=cpu,
                        min_agreement=settings.int8_min_agreement,
                        int8_file=None if int8 is None else str(int8.onnx_file),
                    )
                )
    except Timeout:
        raise EngineError(
            f"Waited {LOCK_TIMEOUT_S:.0f} s for another process exporting '{model.name}'."
        ) from None
    found = checked(entry, key, model)
    log.info("Exported %s (%s) in %.1f s.", model.name, precision, found.manifest["export_seconds"])
    return found


def checked(entry: Path, key: str, model: ResolvedModel) -> OnnxExport:
    found = open_export(entry, key)
    if found is None:
        raise EngineError(f"The ONNX export of '{model.name}' failed its own check.")
    return found


def can_export(fp32_shipped: bool = False) -> bool:
    """Whether this install can make the exports: INT8 from an FP32 graph needs onnx (ONNX
    Runtime's quantizer) and filelock; an FP32 graph the model folder doesn't ship needs torch
    and transformers too."""
    needed: tuple[str, ...] = ("onnx", "onnxruntime", "filelock")
    if not fp32_shipped:
        needed += ("torch", "transformers")
    return all(importlib.util.find_spec(name) is not None for name in needed)


STALE_WARNED: set[tuple[Path, str]] = set()  # the shipped graphs said to be stale, this process


def shipped_manifest(model: ResolvedModel, fingerprint: str) -> dict[str, Any] | None:
    """The manifest of the FP32 export the model folder ships, when it is for these model files
    and this cache format; else None (then the FP32 graph is exported, which needs torch)."""
    path = model.path / SHIPPED_MANIFEST
    if not (path.is_file() and (model.path / SHIPPED_GRAPH).is_file()):
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        usable = (
            manifest["cache_format"] == CACHE_FORMAT
            and manifest["model"]["fingerprint"] == fingerprint
            and manifest["precision"] == "fp32"
            and isinstance(manifest["files"][ONNX_FILE]["sha256"], str)
        )
    except (OSError, ValueError, TypeError, KeyError):
        usable = False
    if not usable:
        if (model.path, fingerprint) not in STALE_WARNED:  # once: a load asks more than once
            STALE_WARNED.add((model.path, fingerprint))
            log.warning(
                "The FP32 graph shipped in '%s' is not for these model files or this tiankong; "
                "exporting instead (python -m tiankong.export.ship_graph rewrites it).",
                model.path.name,
            )
        return None
    return dict(manifest)


def unpack_shipped(model: ResolvedModel, shipped: dict[str, Any], entry: Path, key: str) -> None:
    """Under the lock: the shipped FP32 graph into a cache entry, checked against the sha256 its
    manifest records, keyed as an export made here would be (its manifest keeps the libraries
    that made it and says it was shipped)."""
    started = time.perf_counter()
    temp = Path(tempfile.mkdtemp(prefix=f".tmp-{entry.name}-", dir=entry.parent))
    try:
        out = temp / ONNX_FILE
        with lzma.open(model.path / SHIPPED_GRAPH) as packed, out.open("wb") as unpacked:
            shutil.copyfileobj(packed, unpacked, 1 << 20)
        expected = shipped["files"][ONNX_FILE]
        if out.stat().st_size != expected["bytes"] or file_sha256(out) != expected["sha256"]:
            raise EngineError(
                f"The FP32 graph shipped with '{model.name}' does not match its checksum; "
                "reinstall tiankong."
            )
        seconds = round(time.perf_counter() - started, 2)
        manifest = {**shipped, "key": key, "shipped": True, "export_seconds": seconds}
        (temp / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, ensure_ascii=False))
        os.chmod(temp, folder_mode())  # as build_export's entries: not mkdtemp's 0700
        os.rename(temp, entry)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    log.info("Unpacked the FP32 graph shipped with %s in %.1f s.", model.name, seconds)


def open_export(folder: Path, key: str | None) -> OnnxExport | None:
    """The export in ``folder`` if its manifest is readable, matches ``key`` (when given) and
    every file it lists has the recorded size and sha256; otherwise None."""
    manifest_file = folder / MANIFEST_FILE
    if not os.path.isdir(folder):  # False for a name the system refuses, where pathlib raises
        return None
    try:
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
        problem = manifest_problem(folder, manifest, key)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        problem = "its manifest is missing or unreadable"
    if problem:
        log.warning("The cached ONNX export %s is unusable: %s.", folder, problem)
        return None
    return OnnxExport(folder, manifest)


def manifest_problem(folder: Path, manifest: dict[str, Any], key: str | None) -> str:
    if manifest.get("cache_format") != CACHE_FORMAT:
        return "it was made by another version of tiankong"
    if key is not None and manifest.get("key") != key:
        return "its key does not match"
    files = manifest["files"]
    if ONNX_FILE not in files and manifest.get("precision") != AUTO:
        return f"its manifest lists no {ONNX_FILE}"
    for name, expected in files.items():
        path = folder / name
        if not path.is_file() or path.stat().st_size != expected["bytes"]:
            return f"{name} is missing or has the wrong size"
        if file_sha256(path) != expected["sha256"]:
            return f"{name} does not match its checksum"
    return ""


def find_compatible(
    root: Path,
    fingerprint: str,
    precision: str,
    versions: dict[str, str | None],
    model: ResolvedModel,
    described: dict[str, Any],
) -> OnnxExport:
    """Without torch (a serving-only install), take an export of the same model, precision and
    recipe made for the installed onnxruntime, whatever torch and transformers made it.

    An INT8 export made on another kind of CPU (a Docker image built elsewhere) is taken when
    none was made on this kind, with a warning: its recipe was chosen, and its guard figures
    measured, for that CPU.
    """
    wanted = {
        "model": fingerprint,
        "precision": precision,
        "recipe": recipe_without_cpu(described),
        "onnxruntime": versions["onnxruntime"],
    }
    elsewhere: list[tuple[Path, str]] = []
    for folder in sorted(root.glob(f"*-{precision}-*")):
        try:
            manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
            found_recipe = manifest["recipe"]
            made = {
                "model": manifest["model"]["fingerprint"],
                "precision": manifest["precision"],
                "recipe": recipe_without_cpu(found_recipe),
                "onnxruntime": manifest["libraries"]["onnxruntime"],
            }
            key = str(manifest["key"])
        except (OSError, ValueError, TypeError, KeyError):
            continue
        if made != wanted:
            continue
        if found_recipe != described:
            elsewhere.append((folder, key))
            continue
        found = open_export(folder, key)
        if found is not None:
            return found
    for folder, key in elsewhere:
        found = open_export(folder, key)
        if found is not None:
            log.warning(
                "Using the INT8 export of '%s' made on a '%s' CPU; this one is '%s', for which "
                "tiankong would pick its recipe differently. Export it on this machine to fix.",
                model.name,
                found.manifest["recipe"]["int8"]["cpu"],
                described["int8"]["cpu"],
            )
            return found
    raise ModelUnavailableError(
        f"No {precision} ONNX export of '{model.name}' is cached for onnxruntime "
        f"{versions['onnxruntime']}, and exporting it needs torch, transformers and onnx, which "
        "this install lacks (scripts/serve.sh installs the serving set only): run "
        "`bash scripts/setup.sh --full` once, or pip install torch==2.13.0 'tiankong[export]' "
        "with torch from https://download.pytorch.org/whl/cpu."
    )


def recipe_without_cpu(described: dict[str, Any]) -> dict[str, Any]:
    """The recipe description minus the CPU kind and its chain (what two CPUs can share)."""
    int8 = described.get("int8")
    if not isinstance(int8, dict):
        return described
    return {**described, "int8": {k: v for k, v in int8.items() if k not in ("cpu", "chain")}}


def discard_leftovers(entry: Path) -> None:
    """Under the lock: remove a corrupt export and the temp folders of crashed builds."""
    for leftover in entry.parent.glob(f".tmp-{entry.name}-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    if entry.exists():
        discard(entry)


def discard(folder: Path) -> None:
    """Rename first, so nobody sees a half-deleted folder under the real name, then delete."""
    trash = folder.with_name(f".trash-{folder.name}-{uuid.uuid4().hex[:8]}")
    os.rename(folder, trash)
    shutil.rmtree(trash, ignore_errors=True)


def check_replaceable(out: Path) -> None:
    """Refuse an ``--out`` that holds anything but an earlier export's own files: the export
    replaces the folder whole, and a folder with a ``tiankong-export.json`` among a model's
    own files (an export copied beside its weights) lost the weights and the tokenizer."""
    if not out.is_dir() or not any(out.iterdir()):
        return
    try:
        manifest = json.loads((out / MANIFEST_FILE).read_text(encoding="utf-8"))
        own = {MANIFEST_FILE, *manifest["files"]}
    except (OSError, ValueError, KeyError, TypeError):
        own = set()
    if not own or not holds_only(out, own):
        raise BadOptionError(
            f"--out '{out}' holds files that are not a tiankong export's own, and the export "
            "replaces the folder whole; give a new or empty folder."
        )


def export_to_folder(
    model: ResolvedModel, precision: str, settings: Settings, out: Path
) -> OnnxExport:
    """Copy the (cached, built if need be) export into ``out``: an empty or new folder, or one
    that holds an earlier tiankong export, which is replaced whole."""
    if precision not in EXPORT_PRECISIONS:
        raise BadOptionError(f"--precision must be fp32 or int8 for an export; got '{precision}'.")
    given, out = out, replaced_path(out)
    check_output_folder(out, "--out", replaced=True)
    check_not_working_folder(given, "--out", BadOptionError)
    check_replaceable(out)
    export = ensure_export(model, precision, settings)
    with made_here(out, "--out"):
        out.parent.mkdir(parents=True, exist_ok=True)
        temp = Path(tempfile.mkdtemp(prefix=f".tmp-{out.name}-", dir=out.parent))
    try:
        with made_here(out, "--out"):  # a full disk was a traceback, exit 1 (a review)
            for name in export.manifest["files"]:
                shutil.copy2(export.folder / name, temp / name)
            shutil.copy2(export.folder / MANIFEST_FILE, temp / MANIFEST_FILE)
            os.chmod(temp, folder_mode())  # not mkdtemp's 0700
            replace_folder(temp, out)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    copied = open_export(out, export.manifest["key"])
    if copied is None:
        raise EngineError(f"The export copied to '{out.name}' failed its check.")
    return copied
