"""The bundled model's shipped FP32 ONNX graph: byte for byte what the exporter makes, used in
place of an export, and enough for a first start without torch (INT8 from ONNX Runtime's own
quantizer, guard included)."""

from __future__ import annotations

import json
import lzma
import subprocess
import sys
from pathlib import Path

import pytest

from tiankong.engines import within_split
from tiankong.engines.split import served_by
from tiankong.export.export import MAX_EXPORT_DIFF
from tiankong.export.export_cache import (
    MANIFEST_FILE,
    ONNX_FILE,
    SHIPPED_GRAPH,
    SHIPPED_MANIFEST,
    file_sha256,
    model_fingerprint,
)
from tiankong.export.ship_graph import export_fp32
from tiankong.model_sources import resolve_model

pytestmark = pytest.mark.processes  # an export worker, a subprocess without torch

BUNDLED = resolve_model(None).path


def shipped() -> dict:
    return json.loads((BUNDLED / SHIPPED_MANIFEST).read_text(encoding="utf-8"))


def test_shipped_graph_is_what_the_exporter_makes(tmp_path: Path) -> None:
    """Re-exported with torch, the graph has the shipped sha256, and so does the unpacked xz.
    A retrained bundled model fails here until `python -m tiankong.export.ship_graph` runs."""
    manifest = shipped()
    assert manifest["model"]["fingerprint"] == model_fingerprint(BUNDLED)
    made = export_fp32(BUNDLED, tmp_path / "entry")
    assert made["files"][ONNX_FILE] == manifest["files"][ONNX_FILE]
    # the same graph; its measured distance from torch depends on the CPU's kernels (AVX2 and
    # AVX-512 round apart), so it is held to the export's limit, not to the shipping machine's
    made_diff = made["graph"].pop("max_abs_diff_vs_torch")
    shipped_diff = manifest["graph"].pop("max_abs_diff_vs_torch")
    assert made["graph"] == manifest["graph"]
    assert made_diff <= MAX_EXPORT_DIFF and shipped_diff <= MAX_EXPORT_DIFF
    assert made["libraries"] == manifest["libraries"]  # the locked versions made it
    unpacked = tmp_path / "unpacked.onnx"
    unpacked.write_bytes(lzma.decompress((BUNDLED / SHIPPED_GRAPH).read_bytes()))
    assert file_sha256(unpacked) == manifest["files"][ONNX_FILE]["sha256"]


NO_TORCH = """
import json, sys
for name in ("torch", "transformers"):
    sys.modules[name] = None  # importlib.util.find_spec now says they are not installed
from tiankong import FillMasker, Settings
from tiankong.errors import ModelUnavailableError
settings = Settings(engine="auto", threads=1, onnx_cache_dir=sys.argv[1])
masker = FillMasker.load(settings=settings, index="none")
result = masker.predict("春眠不觉晓，处处闻啼[MASK]。")
try:
    FillMasker.load(sys.argv[2], settings)
    own = "loaded"
except ModelUnavailableError as error:
    own = str(error)
print(json.dumps({"engine": masker.engine.name, "precision": masker.engine.precision,
                  "token": result.masks[0][0].token, "own": own}))
"""


def test_bundled_first_start_without_torch(tmp_path: Path, tiny_model_dir: Path) -> None:
    """torch and transformers unimportable: the shipped FP32 graph is unpacked, quantized to
    INT8 and guarded, the bundled model serves what ``--precision auto`` measured fastest of
    them (INT8 or FP32: on an AVX2-only CPU the two are close, and a loaded machine's timing
    picks either), and a model of one's own gets one clear sentence."""
    cache = tmp_path / "onnx"
    done = subprocess.run(
        [sys.executable, "-c", NO_TORCH, str(cache), str(tiny_model_dir)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["token"]
    assert "bash scripts/setup.sh --full" in report["own"] and "torch" in report["own"]
    entries = {path.name.split("-")[-2]: path for path in cache.iterdir() if path.is_dir()}
    assert sorted(entries) == ["auto", "fp32", "int8"]  # auto: the measured choice, no graph
    fp32 = json.loads((entries["fp32"] / MANIFEST_FILE).read_text(encoding="utf-8"))
    assert fp32["shipped"] is True
    assert fp32["files"][ONNX_FILE]["sha256"] == shipped()["files"][ONNX_FILE]["sha256"]
    int8 = json.loads((entries["int8"] / MANIFEST_FILE).read_text(encoding="utf-8"))
    guard = int8["quality"]  # the guard ran, as on any export
    assert guard["attempts"] and guard["passed"] is any(
        attempt["top1_agreement"] >= guard["min_agreement"] for attempt in guard["attempts"]
    )
    choice = json.loads((entries["auto"] / MANIFEST_FILE).read_text(encoding="utf-8"))["choice"]
    # one engine, or a split's lone one unless --split-engines asks for two: a loaded
    # machine's timing recorded a split here, and its full-batch engine served alone
    served = within_split(choice, allowed=False)
    assert (report["engine"], report["precision"]) == served_by(served)
    measured = {(c["engine"], c["precision"]) for c in choice["candidates"] if not c["missing"]}
    assert ("onnx", "fp32") in measured
    # INT8 is timed as guarded, or named with the guard's verdict (the GPU-trained model fails
    # it on AMX, and in U8U8, the recipe of CPUs without VNNI: docs/TRAINING.md, "On a lent
    # GPU"), and never served then
    assert (("onnx", "int8") in measured) is guard["passed"]
    if not guard["passed"]:
        assert choice["rejected"]["onnx int8"].startswith("no INT8 recipe passed the guard")
