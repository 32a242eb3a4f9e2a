"""The OpenVINO engine (the ``openvino`` extra, in the dev lock, so this always runs): equals ONNX
Runtime in FP32 on the same export, refuses bf16 where the CPU would quietly run FP32, and is a
measured candidate of --precision auto."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import openvino  # noqa: F401 - the dev extra installs it: missing, this fails; never skipped
import pytest

from tiankong import FillMasker, Settings
from tiankong.engines.base import pad_batch
from tiankong.engines.onnx_engine import OnnxEngine
from tiankong.engines.openvino_engine import OpenVinoEngine, openvino_version
from tiankong.errors import BadOptionError
from tiankong.export.export_cache import MANIFEST_FILE, ensure_export
from tiankong.export.int8_recipe import cpu_has_bf16
from tiankong.export.quality_guard import compare_engines
from tiankong.model_sources import resolve_model

pytestmark = pytest.mark.processes  # the export cache's worker measures the auto choice

TEXTS = ["春眠不觉晓，处处闻啼[MASK]。", "[MASK]龙点睛", "他[MASK]天[MASK]去公园散步。"]


def fp32_file(tiny_model_dir: Path, cache: Path) -> Path:
    settings = Settings(threads=1, onnx_cache_dir=str(cache))
    return ensure_export(resolve_model(str(tiny_model_dir)), "fp32", settings).onnx_file


def test_fp32_equals_onnx_runtime_on_the_same_export(
    tiny_model_dir: Path, tiny_onnx_cache: Path
) -> None:
    graph = fp32_file(tiny_model_dir, tiny_onnx_cache)
    masker = FillMasker.load(
        str(tiny_model_dir), Settings(engine="onnx", precision="fp32", threads=1,
                                      onnx_cache_dir=str(tiny_onnx_cache)),
    )  # fmt: skip
    prepared = [masker.encoder.prepare(text) for text in TEXTS]
    batch = pad_batch(
        [item.input_ids for item in prepared],
        [item.mask_indices for item in prepared],
        masker.encoder.pad_id,
    )
    ours = OpenVinoEngine(graph, "fp32", threads=1)
    expected = OnnxEngine(graph, "cpu", "fp32", 1).mask_logits(batch)
    got = ours.mask_logits(batch)
    assert got.shape == expected.shape == (4, len(masker.encoder.vocab))
    assert np.abs(got - expected).max() < 1e-4
    assert ours.mask_logits(batch) is not got  # a copy: the request's buffer is reused


def test_bf16_runs_where_the_cpu_has_bf16_units_and_is_refused_elsewhere(
    tiny_model_dir: Path, tiny_onnx_cache: Path
) -> None:
    graph = fp32_file(tiny_model_dir, tiny_onnx_cache)
    if not cpu_has_bf16():  # OpenVINO would run FP32 and call it bf16
        with pytest.raises(BadOptionError, match="bf16 needs AVX512-BF16 or AMX"):
            OpenVinoEngine(graph, "bf16", threads=1)
        return
    engine = OpenVinoEngine(graph, "bf16", threads=1)
    figures = compare_engines(OnnxEngine(graph, "cpu", "fp32", 1), engine, tiny_model_dir)
    assert engine.precision == "bf16" and figures["top1_agreement"] >= 0.9


def test_engine_openvino_serves_through_the_library(
    tiny_model_dir: Path, tiny_onnx_cache: Path
) -> None:
    settings = Settings(engine="openvino", threads=1, onnx_cache_dir=str(tiny_onnx_cache))
    masker = FillMasker.load(str(tiny_model_dir), settings)
    assert (masker.engine.name, masker.engine.precision) == ("openvino", "fp32")
    assert masker.predict(TEXTS[0]).masks[0][0].token
    with pytest.raises(BadOptionError, match="runs fp32 or bf16, not 'int8'"):
        FillMasker.load(str(tiny_model_dir), settings.with_overrides(precision="int8"))


def test_auto_measures_openvino_beside_onnx_runtime(
    tiny_model_dir: Path, tiny_onnx_cache: Path
) -> None:
    settings = Settings(engine="onnx", threads=1, onnx_cache_dir=str(tiny_onnx_cache))
    engine = FillMasker.load(str(tiny_model_dir), settings).engine
    manifests = [
        json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
        for folder in tiny_onnx_cache.glob("*-auto-*")
        if folder.is_dir()
    ]  # the session's cache: other tests' choices for other thread counts sit beside it
    (manifest,) = [found for found in manifests if found["recipe"]["auto"]["threads"] == 1]
    assert manifest["recipe"]["auto"]["openvino"] == openvino_version() is not None
    candidates = {c["engine"] + " " + c["precision"]: c for c in manifest["choice"]["candidates"]}
    ov = candidates["openvino fp32"]
    assert ov["missing"] == "" and ov["b1_ms"] > 0 and ov["batch_ms"] > 0
    assert ov["top1_agreement"] >= 0.98  # FP32 on another runtime ranks alike
    assert (candidates["openvino bf16"]["missing"] == "") == cpu_has_bf16()
    assert (engine.name, engine.precision) == (manifest["choice"]["engine"],
                                               manifest["choice"]["precision"])  # fmt: skip
