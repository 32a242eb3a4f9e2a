"""The INT8 recipe: chosen by CPU kind (flags injected), the fallback chain, and the real guard on
the tiny model picking, storing and serving a recipe."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnx
import pytest

from tiankong import FillMasker, Settings
from tiankong.engines.onnx_engine import OnnxEngine
from tiankong.export import export_cache
from tiankong.export.export_cache import MANIFEST_FILE, ensure_export
from tiankong.export.int8_recipe import (
    FFN_OUTPUT,
    Int8Recipe,
    choose_recipe,
    cpu_flags,
    cpu_kind,
    recipe_chain,
)
from tiankong.model_sources import resolve_model

# Flag sets as /proc/cpuinfo spells them, trimmed to what matters.
CPUS = {
    "amx": (["avx2", "avx512f", "avx512bw", "avx512_vnni", "amx_tile", "amx_int8"], "x86_64"),
    "vnni": (["avx2", "avx512f", "avx512bw", "avx512_vnni"], "x86_64"),
    "vnni-avx": (["avx2", "avx_vnni"], "x86_64"),  # Alder Lake: AVX-VNNI without AVX-512
    "avx512": (["avx2", "avx512f", "avx512bw"], "x86_64"),  # Skylake-SP
    "avx2": (["sse4_2", "avx", "avx2", "fma"], "x86_64"),  # the AMD EPYC
    "x86": (["sse4_2"], "x86_64"),
    "arm64": ([], "aarch64"),
}


@pytest.mark.parametrize(
    ("cpu", "kind", "weights"),
    [
        ("amx", "amx", "s8"),
        ("vnni", "vnni", "s8"),
        ("vnni-avx", "vnni", "s8"),
        ("avx512", "avx512", "u8"),
        ("avx2", "avx2", "u8"),
        ("x86", "x86", "u8"),
        ("arm64", "arm64", "s8"),
    ],
)
def test_each_cpu_kind_gets_its_documented_recipe(cpu: str, kind: str, weights: str) -> None:
    flags, machine = CPUS[cpu]
    assert cpu_kind(flags, machine) == kind
    chain = recipe_chain(kind)
    assert [step.weights for step in chain] == [weights] * 3  # U8U8 where U8S8 can saturate
    assert all(step.per_channel and not step.reduce_range for step in chain)
    assert chain[0].op_types == ("MatMul", "Attention") and chain[0].fp32_parts == ()
    assert chain[1].fp32_parts == (FFN_OUTPUT,)  # the measured first fallback
    assert chain[2].op_types == ("MatMul",) and chain[2].fp32_parts == ()
    assert len({step.name for step in chain}) == 3


def test_this_machine_reads_its_flags() -> None:
    flags = cpu_flags()
    if Path("/proc/cpuinfo").is_file() and cpu_kind(machine="x86_64") != "x86":
        assert "avx2" in flags  # every kind above plain x86 implies AVX2
    assert cpu_kind() == cpu_kind(flags)


def fake_guard(agreements: dict[str, float]) -> tuple[list[str], Any]:
    measured: list[str] = []

    def measure(step: Int8Recipe) -> dict[str, Any]:
        measured.append(step.name)
        return {"top1_agreement": agreements[step.name], "top5_overlap": 1.0, "masks": 10}

    return measured, measure


def test_the_chain_stops_at_the_first_recipe_that_passes() -> None:
    chain = recipe_chain("vnni")
    names = [step.name for step in chain]
    measured, measure = fake_guard(dict(zip(names, [0.958, 1.0, 0.99], strict=True)))
    choice = choose_recipe(chain, measure, 0.98)
    assert choice.passed and choice.recipe == chain[1] and measured == names[:2]
    assert choice.figures["top1_agreement"] == 1.0
    assert [attempt["recipe"] for attempt in choice.attempts] == names[:2]

    measured, measure = fake_guard(dict(zip(names, [0.981, 0.5, 0.5], strict=True)))
    choice = choose_recipe(chain, measure, 0.98)
    assert choice.passed and choice.recipe == chain[0] and measured == names[:1]

    measured, measure = fake_guard(dict(zip(names, [0.9, 0.95, 0.98], strict=True)))
    choice = choose_recipe(chain, measure, 0.98)  # the threshold itself passes
    assert choice.passed and choice.recipe == chain[2] and measured == names


def test_when_nothing_passes_the_fastest_is_kept_and_marked_failed() -> None:
    chain = recipe_chain("avx2")
    names = [step.name for step in chain]
    measured, measure = fake_guard(dict(zip(names, [0.9, 0.97, 0.95], strict=True)))
    choice = choose_recipe(chain, measure, 0.98)
    assert not choice.passed and choice.recipe == chain[0] and measured == names
    assert choice.figures["top1_agreement"] == 0.9 and len(choice.attempts) == 3


def int8_manifest(export_folder: Path) -> dict[str, Any]:
    data = json.loads((export_folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


@pytest.mark.processes  # export workers
def test_the_real_guard_falls_back_through_the_chain(
    tiny_model_dir: Path, onnx_cache_copy: Callable[[Path], Path], tmp_path: Path
) -> None:
    """A threshold no recipe reaches: all three are measured on the tiny model, the first is
    kept, marked failed, served by name only."""
    cache = onnx_cache_copy(tmp_path / "cache")
    settings = Settings(engine="onnx", threads=1, onnx_cache_dir=str(cache))
    strict = settings.with_overrides(int8_min_agreement=1.01)
    export = ensure_export(resolve_model(str(tiny_model_dir)), "int8", strict)
    quality = int8_manifest(export.folder)["quality"]
    chain = recipe_chain(cpu_kind())
    assert [attempt["recipe"] for attempt in quality["attempts"]] == [s.name for s in chain]
    assert quality["passed"] is False and quality["recipe"]["name"] == chain[0].name
    assert quality["top1_agreement"] == quality["attempts"][0]["top1_agreement"]
    assert {path.name for path in export.folder.iterdir()} == {MANIFEST_FILE, "model.onnx"}
    engine = FillMasker.load(str(tiny_model_dir), strict).engine
    assert isinstance(engine, OnnxEngine) and engine.precision == "fp32"
    rejected = engine.quality["choice"]["rejected"]  # --precision auto leaves INT8 out
    assert rejected["onnx int8"].startswith("no INT8 recipe passed the guard (best ")
    forced = FillMasker.load(str(tiny_model_dir), strict.with_overrides(precision="int8")).engine
    assert isinstance(forced, OnnxEngine) and forced.precision == "int8"


@pytest.mark.processes  # export workers
def test_a_cpu_without_vnni_gets_a_u8u8_export(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CPU kind is injected: the export is built, guarded and stored for an AVX2 CPU."""
    monkeypatch.setattr(export_cache, "cpu_kind", lambda: "avx2")
    settings = Settings(engine="onnx", threads=1, onnx_cache_dir=str(tmp_path / "cache"))
    export = ensure_export(resolve_model(str(tiny_model_dir)), "int8", settings)
    manifest = int8_manifest(export.folder)
    assert manifest["recipe"]["int8"]["cpu"] == "avx2"
    quality = manifest["quality"]
    assert quality["cpu"]["kind"] == "avx2" and quality["passed"] is True
    assert quality["recipe"] == recipe_chain("avx2")[0].describe()
    graph = onnx.load(str(export.onnx_file)).graph
    weights = {tensor.name: tensor.data_type for tensor in graph.initializer}
    quantized = [name for name in weights if name.endswith("_quantized")]
    assert quantized and all(weights[name] == onnx.TensorProto.UINT8 for name in quantized)
