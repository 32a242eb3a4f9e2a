"""The OpenVINO engine (the ``openvino`` and ``nncf`` extras, in the dev lock, so this always
runs): equals ONNX Runtime in FP32 on the same export, refuses bf16 where the CPU would quietly
run FP32, and is a measured candidate of --precision auto, in FP32, bf16 and NNCF's INT8."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nncf  # the dev extra installs both: missing, this fails; never skipped
import numpy as np
import openvino
import pytest

from tiankong import FillMasker, Settings, engines
from tiankong.core.models import ResolvedModel
from tiankong.core.text import TextEncoder, TextLimits
from tiankong.engines import measured_engine, within_split
from tiankong.engines.base import pad_batch, pad_prepared
from tiankong.engines.onnx_engine import FindExport, OnnxEngine
from tiankong.engines.openvino_engine import OpenVinoEngine, openvino_version
from tiankong.engines.split import SplitEngine, served_by
from tiankong.errors import BadOptionError, ModelUnavailableError
from tiankong.export import openvino_int8, precision_choice
from tiankong.export.export_cache import MANIFEST_FILE, OnnxExport, ensure_export
from tiankong.export.int8_recipe import cpu_has_bf16, cpu_kind
from tiankong.export.quality_guard import compare_engines, guard_sentences
from tiankong.host import MemoryLimit
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


def test_one_masker_on_openvino_serves_several_threads(
    tiny_model_dir: Path, tiny_onnx_cache: Path
) -> None:
    """One infer request called from six threads at once: "Infer Request is busy" on 289 of
    300 calls; the answers are those of the calls made one at a time."""
    from concurrent.futures import ThreadPoolExecutor

    settings = Settings(engine="openvino", threads=1, onnx_cache_dir=str(tiny_onnx_cache))
    masker = FillMasker.load(str(tiny_model_dir), settings)
    texts = TEXTS * 20
    alone = [masker.predict(text).to_dict()["masks"] for text in TEXTS]
    with ThreadPoolExecutor(6) as pool:
        together = list(pool.map(lambda text: masker.predict(text).to_dict()["masks"], texts))
    assert together == alone * 20


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
    for candidate in candidates.values():  # each measured engine's memory, in MB (psutil)
        measured = candidate["memory_mb"]
        assert (measured is None) == bool(candidate["missing"])
        assert measured is None or 0 <= measured < 4096
    served = [
        manifest["choice"],
        *([manifest["choice"]["split"]] if manifest["choice"]["split"] else []),
    ]
    # one engine, or a split's lone one unless --split-engines asks for two
    assert (engine.name, engine.precision) == served_by(within_split(manifest["choice"], False))
    int8 = candidates["openvino int8"]  # NNCF quantized it in the export worker
    assert int8["missing"] == "" and int8["b1_ms"] > 0 and int8["batch_ms"] > 0
    assert manifest["recipe"]["auto"]["openvino_int8"]["nncf"] == nncf.__version__
    serves_ir = openvino_int8.IR_FILE in [part["file"] for part in served]
    assert serves_ir == any((p["engine"], p["precision"]) == ("openvino", "int8") for p in served)
    # the IR is kept, checksummed, only where it serves; measured and not served, it is deleted
    ir_files = {openvino_int8.IR_FILE, "openvino-int8.bin"}
    assert set(manifest["files"]) == (ir_files if serves_ir else set())


def test_nncf_quantizes_the_fp32_export_to_an_int8_ir(
    tiny_model_dir: Path, tiny_onnx_cache: Path, tmp_path: Path
) -> None:
    graph = fp32_file(tiny_model_dir, tiny_onnx_cache)
    ir = openvino_int8.quantize(graph, tiny_model_dir, tmp_path)
    assert ir == tmp_path / openvino_int8.IR_FILE and ir.with_suffix(".bin").is_file()
    ops = {op.get_type_name() for op in openvino.Core().read_model(str(ir)).get_ops()}
    assert "FakeQuantize" in ops  # the MatMuls' inputs really are quantized
    engine = OpenVinoEngine(ir, "int8", threads=1)
    figures = compare_engines(OnnxEngine(graph, "cpu", "fp32", 1), engine, tiny_model_dir)
    assert engine.precision == "int8" and figures["masks"] == 95
    assert figures["top1_agreement"] >= 0.9  # quantized, not broken (the guard decides serving)


def test_the_calibration_text_is_not_what_the_guard_judges() -> None:
    texts = openvino_int8.calibration_texts()
    assert len(texts) == 126 and all("[MASK]" in text for text in texts)
    assert not set(texts) & set(guard_sentences())


def measured_here(
    model_dir: Path, cache: Path, entry: Path
) -> tuple[precision_choice.PrecisionChoice, dict[str, str], precision_choice.Candidate]:
    """``precision_choice.measure`` in this process (so a test can patch it), one thread, its
    IR into ``entry``; with the ``openvino int8`` candidate picked out."""
    model = resolve_model(str(model_dir))
    settings = Settings(threads=1, onnx_cache_dir=str(cache))
    fp32, int8 = (ensure_export(model, p, settings) for p in ("fp32", "int8"))
    choice, files = precision_choice.measure(
        model_dir, fp32.onnx_file, int8.onnx_file, int8.quality, 1, 0.98, cpu_kind(), entry
    )
    (candidate,) = [c for c in choice.candidates if c.key == "openvino int8"]
    return choice, files, candidate


def test_without_nncf_the_int8_candidate_says_why_and_leaves_no_file(
    tiny_model_dir: Path, tiny_onnx_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(openvino_int8, "has_nncf", lambda: False)
    choice, files, candidate = measured_here(tiny_model_dir, tiny_onnx_cache, tmp_path)
    assert candidate.missing == "nncf is not installed (pip install 'tiankong[nncf]')"
    assert "openvino int8: nncf is not installed" in choice.line()
    assert files == {} and list(tmp_path.iterdir()) == []


def test_a_quantization_that_fails_is_listed_not_fatal(
    tiny_model_dir: Path, tiny_onnx_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def half_written(fp32_file: Path, model_folder: Path, out_folder: Path) -> Path:
        (out_folder / openvino_int8.IR_FILE).write_text("<net>")  # then NNCF gives up
        raise RuntimeError("unsupported graph")

    monkeypatch.setattr(openvino_int8, "quantize", half_written)
    choice, files, candidate = measured_here(tiny_model_dir, tiny_onnx_cache, tmp_path)
    assert candidate.missing == "the NNCF INT8 model could not be made (RuntimeError)"
    assert choice.chosen.key != "openvino int8" and choice.rejected["openvino int8"]
    assert files == {} and list(tmp_path.iterdir()) == []  # the half-written IR is gone


def test_a_choice_of_openvino_int8_serves_the_ir_in_the_auto_entry(
    tiny_model_dir: Path, tiny_onnx_cache: Path, tmp_path: Path
) -> None:
    """The engine reads the IR that the measurement kept, and no other export."""
    graph = fp32_file(tiny_model_dir, tiny_onnx_cache)
    ir = openvino_int8.quantize(graph, tiny_model_dir, tmp_path)
    choice = {"engine": "openvino", "precision": "int8", "file": ir.name, "line": "int8 (openvino)"}

    def find_export(model: ResolvedModel, precision: str, settings: Settings) -> OnnxExport:
        assert precision == "auto", "the choice's own file serves: no other export is read"
        return OnnxExport(tmp_path, {"precision": "auto", "choice": choice})

    settings = Settings(threads=1, onnx_cache_dir=str(tiny_onnx_cache))
    engine = measured_engine(resolve_model(str(tiny_model_dir)), settings, find_export)
    assert isinstance(engine, OpenVinoEngine)
    assert (engine.model_file, engine.precision, engine.quality) == (ir, "int8", {"choice": choice})


def test_engine_onnx_keeps_onnx_runtime_where_the_measurement_serves_openvino(
    tiny_model_dir: Path, tiny_onnx_cache: Path, tmp_path: Path
) -> None:
    """The measurement is made once for every engine; under --engine onnx it served OpenVINO
    (a review: `eval --compare onnx` compared OpenVINO with itself). Now the fastest of ONNX
    Runtime's own candidates that passes the guard serves, and the line says why."""
    candidates: list[dict[str, Any]] = [
        {"engine": "onnx", "precision": "fp32", "b1_ms": 3.0, "batch_ms": 40.0,
         "top1_agreement": 1.0},
        {"engine": "onnx", "precision": "int8", "b1_ms": 1.0, "batch_ms": 10.0,
         "top1_agreement": 0.99},
        {"engine": "openvino", "precision": "fp32", "b1_ms": 0.5, "batch_ms": 5.0,
         "top1_agreement": 1.0},
    ]  # fmt: skip
    own = [precision_choice.Candidate(**c) for c in candidates]
    measured = precision_choice.choose(own, 0.98, "amx")
    choice = measured.describe()
    assert (choice["engine"], choice["onnx_runtime"]) == ("openvino", "int8")

    def find_export(model: ResolvedModel, precision: str, asked: Settings) -> OnnxExport:
        if precision == "auto":
            return OnnxExport(tmp_path, {"precision": "auto", "choice": choice})
        return ensure_export(model, precision, asked)

    model = resolve_model(str(tiny_model_dir))
    cache = str(tiny_onnx_cache)
    served = {}
    for name in ("auto", "onnx"):
        settings = Settings(engine=name, threads=1, onnx_cache_dir=cache)
        served[name] = measured_engine(model, settings, find_export)
    assert isinstance(served["auto"], OpenVinoEngine)
    assert isinstance(served["onnx"], OnnxEngine) and served["onnx"].precision == "int8"
    assert served["onnx"].quality["choice"]["line"] == (
        f"{measured.line()}; --engine onnx keeps ONNX Runtime, so int8 (onnx) serves"
    )


LINE = "int8 (onnx) for batches under 3 texts, int8 (openvino) from 3"
# the pair's candidates as the choice lists them: ONNX Runtime INT8 is the faster by the
# geometric mean (1 x 10 against 2 x 6 ms), so the split names it to serve alone
PAIR = [
    {"engine": "onnx", "precision": "int8", "b1_ms": 1.0, "batch_ms": 10.0, "memory_mb": 40.0},
    {"engine": "openvino", "precision": "int8", "b1_ms": 2.0, "batch_ms": 6.0, "memory_mb": 50.0},
]


def split_entry(entry: Path, batch_file: str) -> tuple[dict[str, Any], FindExport]:
    """A split choice in an ``auto`` entry at ``entry`` (ONNX Runtime INT8 under 3 texts,
    OpenVINO's INT8 IR ``batch_file`` from 3), and an export cache that finds it there and
    makes the other precisions as the real one does."""
    lone: dict[str, Any] = {"engine": "onnx", "precision": "int8", "file": None,
                            "below_rows": 3, "ms": {}, "alone": "onnx int8"}  # fmt: skip
    choice = {"engine": "openvino", "precision": "int8", "file": batch_file, "split": lone,
              "candidates": PAIR, "line": LINE}  # fmt: skip

    def find_export(model: ResolvedModel, precision: str, asked: Settings) -> OnnxExport:
        if precision == "auto":
            return OnnxExport(entry, {"precision": "auto", "choice": choice})
        return ensure_export(model, precision, asked)

    return choice, find_export


def test_a_split_choice_serves_its_lone_engine_below_its_rows_and_the_other_from_them(
    tiny_model_dir: Path, tiny_onnx_cache: Path, tmp_path: Path
) -> None:
    """ONNX Runtime INT8 for small batches, OpenVINO's INT8 IR (in the auto entry) for larger."""
    graph = fp32_file(tiny_model_dir, tiny_onnx_cache)
    ir = openvino_int8.quantize(graph, tiny_model_dir, tmp_path)
    choice, find_export = split_entry(tmp_path, ir.name)
    settings = Settings(threads=1, onnx_cache_dir=str(tiny_onnx_cache), split_engines=True)

    engine = measured_engine(resolve_model(str(tiny_model_dir)), settings, find_export)
    assert isinstance(engine, SplitEngine) and engine.rows == 3
    assert isinstance(engine.lone, OnnxEngine) and isinstance(engine.batch, OpenVinoEngine)
    assert (engine.name, engine.precision, engine.batch.model_file) == ("onnx+openvino", "int8", ir)
    served = engine.quality["choice"]  # the choice, and what the pair holds of this machine
    assert served == {**choice, "line": served["line"]} and "top1_agreement" in engine.quality
    assert served["line"].startswith(LINE + "; the second engine, int8 (openvino), holds 50 MB, ")
    encoder = TextEncoder.from_folder(tiny_model_dir, TextLimits())
    calls: list[str] = []
    for part, name in ((engine.lone, "lone"), (engine.batch, "batch")):
        run = part.mask_logits
        part.mask_logits = lambda batch, run=run, name=name: calls.append(name) or run(batch)  # type: ignore[method-assign]
    for size in (1, 2, 3, 4):
        prepared = [encoder.prepare(text) for text in (TEXTS * 2)[:size]]
        logits = engine.mask_logits(pad_prepared(prepared, encoder.pad_id))
        assert logits.shape[0] == sum(len(p.mask_indices) for p in prepared)
    assert calls == ["lone", "lone", "batch", "batch"]


def test_a_split_serves_only_where_asked_for_else_the_engine_it_names_to_serve_alone(
    tiny_model_dir: Path, tiny_onnx_cache: Path, tmp_path: Path
) -> None:
    """By default one engine serves: with a split, a text's scores depended on the engine its
    batch went to, so on the load (a check fixed 口传心受 in a busy server's batch and not
    alone: a review). OpenVINO's IR (not there) is never loaded."""
    _, find_export = split_entry(tmp_path, "missing.xml")
    settings = Settings(threads=1, onnx_cache_dir=str(tiny_onnx_cache))
    engine = measured_engine(resolve_model(str(tiny_model_dir)), settings, find_export)
    assert isinstance(engine, OnnxEngine) and engine.precision == "int8"
    served = engine.quality["choice"]
    assert (served["engine"], served["precision"], served["split"]) == ("onnx", "int8", None)
    assert served["line"] == (
        f"{LINE}; one engine serves unless --split-engines asks for two (a text's scores would "
        "depend on its batch), so int8 (onnx) serves alone"
    )


def test_a_split_whose_batch_engine_could_never_run_serves_its_lone_engine_alone(
    tiny_model_dir: Path, tiny_onnx_cache: Path, tmp_path: Path
) -> None:
    """With --max-batch-size under the split's rows, OpenVINO's engine is never loaded."""
    _, find_export = split_entry(tmp_path, "missing.xml")

    model = resolve_model(str(tiny_model_dir))
    for cap, split in ((2, False), (3, True)):
        settings = Settings(
            threads=1, onnx_cache_dir=str(tiny_onnx_cache), max_batch_size=cap, split_engines=True
        )
        if split:  # its batch engine's IR is not there: loading it is what fails
            with pytest.raises(ModelUnavailableError, match=r"could not compile .*Error: .+; use"):
                measured_engine(model, settings, find_export)
            continue
        engine = measured_engine(model, settings, find_export)
        assert isinstance(engine, OnnxEngine) and engine.precision == "int8"
        served = engine.quality["choice"]
        assert (served["engine"], served["precision"], served["split"]) == ("onnx", "int8", None)
        assert served["line"].endswith(
            "; --max-batch-size 2 keeps every batch under 3 texts, so int8 (onnx) serves alone"
        )


def test_a_split_over_its_share_of_the_memory_limit_serves_the_faster_engine_alone(
    tiny_model_dir: Path, tiny_onnx_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a 400 MB cgroup the second engine's 50 MB is over a tenth: ONNX Runtime INT8 serves
    alone and OpenVINO's IR (not there) is never loaded."""
    _, find_export = split_entry(tmp_path, "missing.xml")

    limit = MemoryLimit(400 * 2**20, "the cgroup's limit")
    monkeypatch.setattr(engines, "memory_limit", lambda: limit)
    settings = Settings(threads=1, onnx_cache_dir=str(tiny_onnx_cache), split_engines=True)
    engine = measured_engine(resolve_model(str(tiny_model_dir)), settings, find_export)
    assert isinstance(engine, OnnxEngine) and engine.precision == "int8"
    served = engine.quality["choice"]
    assert (served["engine"], served["precision"], served["split"]) == ("onnx", "int8", None)
    assert served["line"] == (
        f"{LINE}; the second engine, int8 (openvino), holds 50 MB, 12.5% of 400 MB (the "
        "cgroup's limit), over the 10% a split may take, so int8 (onnx) serves alone"
    )


def test_the_timed_onnx_runtime_engines_spin_after_each_run_as_served(
    tiny_model_dir: Path, tiny_onnx_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped after each run, a lone call woke the pool and was timed 1.1-1.4x its served time
    on amx: every ONNX Runtime engine the choice times spins after its run as a served one does
    (time_in_turns pauses before each block so that the next engine is not slowed by it)."""
    timed: list[OnnxEngine] = []
    time_in_turns = precision_choice.time_in_turns

    def recording(engines: dict[str, Any], batch: Any, rounds: int) -> dict[str, float]:
        timed.extend(engine for engine in engines.values() if isinstance(engine, OnnxEngine))
        return time_in_turns(engines, batch, rounds)

    monkeypatch.setattr(precision_choice, "time_in_turns", recording)
    measured_here(tiny_model_dir, tiny_onnx_cache, tmp_path)
    assert {engine.precision for engine in timed} == {"fp32", "int8"}
    for engine in timed:
        options = engine.session.get_session_options()
        with pytest.raises(RuntimeError, match="does not have configuration"):
            options.get_session_config_entry("session.force_spinning_stop")
