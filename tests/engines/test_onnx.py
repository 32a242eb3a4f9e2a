"""The ONNX engine: equals torch in FP32, dynamic axes, fused graph, INT8 guard, no torch."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
import onnx
import pytest
from cli_helpers import besides_first_run_notes
from server_helpers import START_TIMEOUT_S, free_port, wait_until_ready

from tiankong import FillMasker, Settings
from tiankong.core.models import VOCAB_FILE
from tiankong.engines import within_split
from tiankong.engines.base import EncodedBatch, pad_batch
from tiankong.engines.onnx_engine import OnnxEngine
from tiankong.engines.split import served_by
from tiankong.errors import BadOptionError
from tiankong.export import export, quantize
from tiankong.export.export_cache import MANIFEST_FILE, ensure_export
from tiankong.export.int8_recipe import ALL_OP_TYPES, HEAD, RESCORED, Int8Recipe, cpu_kind
from tiankong.model_sources import resolve_model

pytestmark = pytest.mark.processes  # starts processes: the CLI, a server, Ray or export workers

SENTENCES = [
    "春眠不觉晓，处处闻啼[MASK]。",
    "[MASK]龙点睛",
    "手机没电了，赶紧去[MASK][MASK]。",
    "他[MASK]天[MASK]去公园散步，WiFi信号[MASK]。",
]


def onnx_settings(cache: Path, **changes: object) -> Settings:
    return Settings(engine="onnx", threads=1, onnx_cache_dir=str(cache)).with_overrides(**changes)


@pytest.fixture(scope="module")
def onnx_masker(tiny_model_dir: Path, tiny_onnx_cache: Path) -> FillMasker:
    return FillMasker.load(str(tiny_model_dir), onnx_settings(tiny_onnx_cache, precision="fp32"))


def graph_of(cache: Path, precision: str) -> onnx.GraphProto:
    (folder,) = [path for path in cache.glob(f"*-{precision}-*") if path.is_dir()]
    return onnx.load(str(folder / "model.onnx")).graph


def test_fp32_equals_torch(tiny_masker: FillMasker, onnx_masker: FillMasker) -> None:
    assert (onnx_masker.engine.name, onnx_masker.engine.precision) == ("onnx", "fp32")
    expected = tiny_masker.predict_batch(SENTENCES, top_k=10)
    got = onnx_masker.predict_batch(SENTENCES, top_k=10)
    for ours, theirs in zip(got, expected, strict=True):
        assert ours.sequence == theirs.sequence
        for our_mask, their_mask in zip(ours.masks, theirs.masks, strict=True):
            assert [c.token_id for c in our_mask] == [c.token_id for c in their_mask]
            scores = np.array([c.score for c in our_mask]) - [c.score for c in their_mask]
            assert np.abs(scores).max() < 1e-4


@pytest.mark.parametrize(
    ("batch", "seq_len", "masks_per_row"),
    [(1, 3, 1), (2, 9, 2), (5, 40, 3), (3, 130, 4)],
)
def test_dynamic_axes(
    tiny_masker: FillMasker,
    onnx_masker: FillMasker,
    batch: int,
    seq_len: int,
    masks_per_row: int,
) -> None:
    rng = np.random.default_rng(batch * seq_len)
    # Ragged rows, so every batch of more than one row is padded.
    rows = [rng.integers(670, 7000, size=max(2, seq_len - row)).tolist() for row in range(batch)]
    masks = [
        sorted(rng.choice(len(row), min(masks_per_row, len(row)), replace=False).tolist())
        for row in rows
    ]
    encoded = pad_batch(rows, masks, pad_id=0)
    logits = onnx_masker.engine.mask_logits(encoded)
    assert logits.shape == (sum(map(len, masks)), 21128) and logits.dtype == np.float32
    expected = tiny_masker.engine.mask_logits(encoded)
    assert np.abs(logits - expected).max() < 1e-4


def test_tied_weight_stored_once(tiny_onnx_cache: Path) -> None:
    """One FP32 ``[vocab, hidden]`` matrix feeds both the embedding and an FP32 head; an INT8
    head adds its own 8-bit copy, and nothing else does."""
    (folder,) = [path for path in tiny_onnx_cache.glob("*-int8-*") if path.is_dir()]
    manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    head_in_int8 = "head" not in manifest["quality"]["recipe"]["fp32_parts"]
    for precision in ("fp32", "int8"):
        vocab_sized = [  # either orientation counts
            tensor.data_type
            for tensor in graph_of(tiny_onnx_cache, precision).initializer
            if sorted(tensor.dims) == [32, 21128]
        ]
        assert vocab_sized.count(onnx.TensorProto.FLOAT) == 1, precision
        eight_bit = len(vocab_sized) - 1
        assert eight_bit == (1 if precision == "int8" and head_in_int8 else 0), precision


def test_int8_head_rescores_its_best_columns_in_fp32(tiny_onnx_cache: Path, tmp_path: Path) -> None:
    """The same recipe with the head kept in FP32 and with the head in INT8 and rescored: the
    encoder is quantized alike, so the rescored columns equal the FP32 head's scores there, and
    the columns outside each mask's best RESCORED keep 8-bit scores that differ."""
    (folder,) = [path for path in tiny_onnx_cache.glob("*-fp32-*") if path.is_dir()]
    rescored = Int8Recipe("s8", False, True, ALL_OP_TYPES)
    kept = Int8Recipe("s8", False, True, ALL_OP_TYPES, fp32_parts=(HEAD,))
    engines = {}
    for name, step in (("rescored", rescored), ("kept", kept)):
        out = tmp_path / f"{name}.onnx"
        report = quantize.quantize_int8(folder / "model.onnx", out, 21128, 32, step)
        assert report["vocab_matrices"] == 1
        assert report["vocab_matrices_int8"] == (1 if name == "rescored" else 0)
        engines[name] = OnnxEngine(out, "cpu", "int8", 1)
    rows = [[101, 5 + row, 103, 300 + 7 * row, 103, 102] for row in range(3)]
    batch = pad_batch(rows, [[2, 4]] * 3, pad_id=0)
    exact = engines["kept"].mask_logits(batch)
    got = engines["rescored"].mask_logits(batch)
    assert got.shape == exact.shape == (6, 21128)
    for mask in range(6):
        best = np.argsort(-got[mask], kind="stable")[:RESCORED]
        assert np.abs(got[mask, best] - exact[mask, best]).max() < 1e-4
        assert set(best[:5].tolist()) == set(np.argsort(-exact[mask])[:5].tolist())
        others = np.setdiff1d(np.arange(21128), best)
        assert np.abs(got[mask, others] - exact[mask, others]).max() > 1e-4  # 8-bit there


def test_fused_ops_present(tiny_onnx_cache: Path) -> None:
    """The first of the two layers fuses whole; the last runs at the mask rows only, written
    out (its attention's one Softmax). The tiny model passes the chain's first recipe, so every
    weight matrix is quantized: the first layer's three outside its attention, and the last
    layer's key and value (every row) and query, attention output, FFN in and out, the head's
    transform and the vocabulary projection (the mask rows)."""
    fp32 = Counter(node.op_type for node in graph_of(tiny_onnx_cache, "fp32").node)
    assert fp32["Attention"] == 1 and fp32["EmbedLayerNormalization"] == 1
    assert fp32["SkipLayerNormalization"] == 2 and fp32["BiasGelu"] == 1
    assert fp32["Softmax"] == 1 and fp32["Erf"] == 0
    int8 = Counter(node.op_type for node in graph_of(tiny_onnx_cache, "int8").node)
    assert int8["QAttention"] == 1 and int8["MatMulInteger"] == 3 + 2 + 6
    (folder,) = [path for path in tiny_onnx_cache.glob("*-fp32-*") if path.is_dir()]
    manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    assert manifest["graph"]["last_layer"] == "at_masks"


def test_a_decoder_layer_is_not_cut_at_the_masks(tiny_model_dir: Path) -> None:
    model = export.load_masked_lm(tiny_model_dir)
    assert export.masks_only_last_layer(model) is not None  # BERT's own layer
    model = export.load_masked_lm(tiny_model_dir)
    model.config.is_decoder = True
    assert export.masks_only_last_layer(model) is None


def test_a_last_layer_graph_that_differs_falls_back_to_the_whole_graph(
    tiny_model_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """If the graph with the last layer at the masks ever disagrees with the model, the export
    says so and writes the whole-sequence graph, which must agree."""
    import torch

    class Doubled(torch.nn.Module):
        def __init__(self, model: object) -> None:
            super().__init__()
            self.inner = export.mask_gather_module(model)

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return self.inner(*inputs) * 2.0

    monkeypatch.setattr(export, "masks_only_last_layer", Doubled)
    with caplog.at_level(logging.WARNING, logger="tiankong.export.export"):
        report = export.export_fp32(tiny_model_dir, tmp_path / "model.onnx", 1)["graph"]
    assert "exporting the whole-sequence graph instead" in caplog.text
    assert report["last_layer"] == "every_row" and report["max_abs_diff_vs_torch"] < 1e-4
    assert report["fused_ops"]["Attention"] == 2


def test_int8_records_agreement(tiny_model_dir: Path, tiny_onnx_cache: Path) -> None:
    settings = onnx_settings(tiny_onnx_cache, precision="int8")
    engine = FillMasker.load(str(tiny_model_dir), settings).engine
    assert isinstance(engine, OnnxEngine)
    assert engine.precision == "int8"
    quality = engine.quality
    assert quality["int8_accepted"] is True and quality["min_agreement"] == 0.98
    assert quality["sentences"] >= 50 and quality["masks"] > quality["sentences"]
    assert 0.98 <= quality["top1_agreement"] <= 1.0 and 0.9 <= quality["top5_overlap"] <= 1.0
    assert quality["cpu"]["kind"] == cpu_kind() and quality["recipe"]["name"]
    (folder,) = [path for path in tiny_onnx_cache.glob("*-int8-*") if path.is_dir()]
    manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    # The engine reads the figures the export stored; nothing is measured again.
    assert {**manifest["quality"], "int8_accepted": True} == quality
    assert manifest["graph"]["vocab_matrices"] == 1  # the tied FP32 matrix, stored once
    head_in_int8 = "head" not in quality["recipe"]["fp32_parts"]
    assert manifest["graph"]["vocab_matrices_int8"] == int(head_in_int8)


def test_auto_serves_the_measured_choice(tiny_model_dir: Path, tiny_onnx_cache: Path) -> None:
    """--precision auto on the CPU serves the choice measured once and kept in the cache's auto
    entry; loading again reads it, and measures nothing."""
    settings = onnx_settings(tiny_onnx_cache)
    engine = FillMasker.load(str(tiny_model_dir), settings).engine
    (folder,) = [path for path in tiny_onnx_cache.glob("*-auto-*") if path.is_dir()]
    manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    choice = manifest["choice"]
    # one engine, or a split's lone one unless --split-engines asks for two
    expected = within_split(choice, allowed=False)
    assert (engine.name, engine.precision) == served_by(expected)
    served = getattr(engine, "quality", {})["choice"]  # a split's line adds what it holds
    assert served == {**expected, "line": served["line"]}
    assert served["line"].startswith(choice["line"])
    # no graph of its own, unless OpenVINO's INT8 IR serves (tests/engines/test_openvino.py)
    assert (manifest["files"] == {}) == (choice["file"] is None)
    measured = {c["engine"] + " " + c["precision"]: c for c in choice["candidates"]}
    assert measured["onnx fp32"]["b1_ms"] > 0 and measured["onnx int8"]["batch_ms"] > 0
    assert measured["onnx int8"]["top1_agreement"] >= 0.98  # the export's guard figures
    assert FillMasker.load(str(tiny_model_dir), settings).engine.precision == engine.precision
    assert [p for p in tiny_onnx_cache.glob("*-auto-*") if p.is_dir()] == [folder]


def test_auto_where_the_cache_is_read_only_says_the_guard_alone_decided(
    tiny_model_dir: Path, tiny_onnx_cache: Path
) -> None:
    """A read-only export cache (docker run --read-only) can't keep the measured choice: the
    guard alone decides, as before, and the line says why; nothing fails."""
    import errno

    from tiankong.engines import create_engine

    settings = onnx_settings(tiny_onnx_cache)

    def read_only(model: object, precision: str, given: Settings) -> object:
        if precision == "auto":
            raise OSError(errno.EROFS, "Read-only file system")
        return ensure_export(resolve_model(str(tiny_model_dir)), precision, given)

    engine = create_engine(resolve_model(str(tiny_model_dir)), settings, 0, read_only)
    assert isinstance(engine, OnnxEngine) and engine.precision == "int8"  # the guard passed
    assert engine.quality["int8_accepted"] is True
    assert engine.quality["choice"]["line"] == (
        "int8 (onnx) by the INT8 guard alone; the engines were not measured, as the export "
        "cache could not keep the choice (Read-only file system)"
    )


def test_auto_on_a_model_that_cannot_export_fails_after_one_build(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model whose export fails (corrupt weights, no torch) is not built a second time by
    the guard-only path, which is for a cache that can't keep the choice: the one sentence
    comes after one build, not two (a truncated checkpoint took 17.5 s to report, 11 s now)."""
    from tiankong.engines import create_engine
    from tiankong.errors import ModelUnavailableError
    from tiankong.export import export_worker

    builds: list[str] = []

    def failing_build(request: export_worker.BuildRequest) -> None:
        builds.append(request.model_name)
        raise ModelUnavailableError("The model weights could not be loaded for export.")

    monkeypatch.setattr(export_worker, "build_in_worker", failing_build)
    settings = onnx_settings(tmp_path / "cache", precision="auto")
    model = resolve_model(str(tiny_model_dir))
    with pytest.raises(ModelUnavailableError, match="could not be loaded for export"):
        create_engine(model, settings, 0, ensure_export)
    assert len(builds) == 1


def test_auto_falls_back_to_fp32_below_threshold(
    tiny_model_dir: Path,
    onnx_cache_copy: Callable[[Path], Path],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    cache = onnx_cache_copy(tmp_path / "cache")
    settings = onnx_settings(cache, int8_min_agreement=1.01)
    with caplog.at_level(logging.INFO, logger="tiankong"):
        engine = FillMasker.load(str(tiny_model_dir), settings).engine
    assert isinstance(engine, OnnxEngine)
    assert engine.precision == "fp32" and engine.quality["choice"]["engine"] == "onnx"
    (line,) = [r for r in caplog.records if r.getMessage().startswith("--precision auto")]
    assert line.levelno == logging.INFO  # the server's log shows it; a CLI call stays quiet
    assert "fp32 (onnx) on" in line.getMessage()
    assert "onnx int8: no INT8 recipe passed the guard" in line.getMessage()
    explicit = FillMasker.load(str(tiny_model_dir), settings.with_overrides(precision="int8"))
    assert explicit.engine.precision == "int8"  # asked for by name: served, figures attached
    assert getattr(explicit.engine, "quality", {})["int8_accepted"] is False


def test_session_is_built_as_configured(tiny_onnx_cache: Path) -> None:
    (folder,) = [path for path in tiny_onnx_cache.glob("*-fp32-*") if path.is_dir()]
    engine = OnnxEngine(folder / "model.onnx", "cpu", "fp32", threads=2)
    options = engine.session.get_session_options()
    assert options.intra_op_num_threads == 2 and options.inter_op_num_threads == 1
    assert str(options.execution_mode).endswith("ORT_SEQUENTIAL")
    assert engine.providers == ["CPUExecutionProvider"] and engine.device == "cpu"
    assert engine.input_names == ["input_ids", "attention_mask", "mask_positions"]
    assert engine.device_reason is None  # the CPU was asked for


def test_device_auto_on_the_cpu_says_why(tiny_onnx_cache: Path) -> None:
    """--device auto that ends on the CPU says why (shown in /info): no CUDA provider in this
    onnxruntime, or one that did not load (the GPU image on a machine without a GPU)."""
    (folder,) = [path for path in tiny_onnx_cache.glob("*-fp32-*") if path.is_dir()]
    plain = OnnxEngine(folder / "model.onnx", "cpu", "fp32", 1, cpu_fallback=True)
    assert plain.device == "cpu" and plain.device_reason == "this onnxruntime has no CUDA provider"
    unloaded = OnnxEngine(folder / "model.onnx", "cuda", "fp32", 1, cpu_fallback=True)
    assert unloaded.device == "cpu" and "CUDA provider did not load" in str(unloaded.device_reason)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"precision": "fp16"}, "for fp16 on a GPU use --engine torch"),
        ({"device": "tpu"}, "--device: unknown value 'tpu'; use one of auto, cpu, cuda"),
        ({"threads": -1}, "--threads must be from 0 to 1024"),  # the settings rule, at load
    ],
)
def test_bad_options(
    tiny_model_dir: Path, tiny_onnx_cache: Path, changes: dict[str, object], message: str
) -> None:
    with pytest.raises(BadOptionError, match=message):
        FillMasker.load(str(tiny_model_dir), onnx_settings(tiny_onnx_cache, **changes))


def test_fp16_with_the_engine_left_to_choose_names_no_engine_the_user_did_not_ask_for(
    tiny_model_dir: Path,
) -> None:
    """``--precision fp16`` alone said "The onnx engine runs auto, fp32 or int8", an engine the
    user never chose; fp16 goes to the engine that runs it, which names what it needs."""
    from tiankong import Settings

    with pytest.raises(BadOptionError, match="fp16 needs a CUDA GPU"):
        FillMasker.load(str(tiny_model_dir), Settings(precision="fp16", device="cpu", threads=1))


def test_cuda_without_the_provider_is_refused(
    monkeypatch: pytest.MonkeyPatch, tiny_model_dir: Path, tiny_onnx_cache: Path
) -> None:
    import onnxruntime

    # The CPU build's providers, also where onnxruntime-gpu is installed.
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CPUExecutionProvider"])
    with pytest.raises(BadOptionError, match="no CUDA provider"):
        FillMasker.load(str(tiny_model_dir), onnx_settings(tiny_onnx_cache, device="cuda"))


def test_serving_a_cached_export_does_not_import_torch(
    tiny_model_dir: Path, tiny_onnx_cache: Path
) -> None:
    script = f"""
import sys
from tiankong import FillMasker, Settings
settings = Settings(
    engine="onnx", precision="int8", threads=1, onnx_cache_dir={str(tiny_onnx_cache)!r}
)
masker = FillMasker.load({str(tiny_model_dir)!r}, settings)
result = masker.predict("春眠不觉晓，处处闻啼[MASK]。")
assert masker.engine.precision == "int8", masker.engine.precision
heavy = sorted(
    name for name in ("torch", "transformers", "onnx", "openvino") if name in sys.modules
)
print("heavy:", heavy, result.masks[0][0].token)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "heavy: []" in done.stdout


def run_cli(*args: str, cache: Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tiankong", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TIANKONG_ONNX_CACHE_DIR": str(cache)},
    )


def test_export_cli(tiny_model_dir: Path, tiny_onnx_cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "export"
    done = run_cli(
        "export", "--model", str(tiny_model_dir), "--out", str(out), "--precision", "int8",
        cache=tiny_onnx_cache,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "top-1 agreement" in done.stdout and "matrices stored: 1" in done.stdout
    manifest = json.loads((out / MANIFEST_FILE).read_text(encoding="utf-8"))
    assert manifest["precision"] == "int8" and set(manifest["files"]) == {"model.onnx"}
    (cached,) = [path for path in tiny_onnx_cache.glob("*-int8-*") if path.is_dir()]
    assert cached.name.endswith(manifest["key"][:16])  # TIANKONG_ONNX_CACHE_DIR was used
    again = run_cli("export", "-m", str(tiny_model_dir), "-o", str(out), cache=tiny_onnx_cache)
    assert again.returncode == 0, again.stderr  # an earlier export is replaced whole
    assert json.loads((out / MANIFEST_FILE).read_text(encoding="utf-8"))["precision"] == "fp32"
    assert "max |ONNX - torch|" in again.stdout


def test_a_distilbert_exports_to_int8(tmp_path: Path) -> None:
    """DistilBERT names its width "dim": the INT8 export stopped with a KeyError traceback."""
    import torch
    from transformers import BertTokenizer, DistilBertConfig, DistilBertForMaskedLM

    torch.manual_seed(0)
    folder = tmp_path / "distilbert"
    config = DistilBertConfig(
        vocab_size=21128, dim=32, n_layers=1, n_heads=2, hidden_dim=64,
        tokenizer_class="BertTokenizer",
    )  # fmt: skip
    DistilBertForMaskedLM(config).save_pretrained(folder)
    BertTokenizer(str(VOCAB_FILE)).save_pretrained(folder)
    done = run_cli(
        "predict", "春眠不觉晓，处处闻啼[MASK]。", "--model", str(folder), "--index", "none",
        "--engine", "onnx", "--precision", "int8", cache=tmp_path / "cache",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


def test_export_cli_of_the_bundled_models_shipped_graph(tmp_path: Path) -> None:
    """The default export of the bundled model unpacks its shipped FP32 graph, whose manifest
    has no build date (a KeyError traceback before). The folder gets the mode the umask
    gives a new folder (it was 0755 whatever the umask), and so does its cache entry (it
    was mkdtemp's 0700)."""
    before = os.umask(0o027)  # the command inherits it
    try:
        done = run_cli("export", "-o", str(tmp_path / "out"), cache=tmp_path / "cache")
    finally:
        os.umask(before)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out").stat().st_mode & 0o777 == 0o750
    entries = [found.parent for found in (tmp_path / "cache").rglob(MANIFEST_FILE)]
    assert entries and all(entry.stat().st_mode & 0o777 == 0o750 for entry in entries)
    assert "unpacked from the graph shipped with the model" in done.stdout
    assert json.loads((tmp_path / "out" / MANIFEST_FILE).read_text(encoding="utf-8"))["shipped"]


@pytest.mark.parametrize(
    ("args", "exit_code", "message"),
    [
        (["--precision", "fp16"], 2, "--precision must be fp32 or int8"),
        (["--out", "{model}"], 2, "' holds files that are not a tiankong export's own"),
        (["--out", "/"], 2, "--out '/' is the working folder or one above it"),
        (["--out", ""], 2, "--out is empty; name the folder"),  # it was told as '.'
        (["--model", "{missing}"], 3, "does not exist"),
        (["--model", "{model}/config.json"], 3, "does not exist or is not a directory"),
    ],
)
def test_export_cli_bad_input(
    tiny_model_dir: Path, tmp_path: Path, args: list[str], exit_code: int, message: str
) -> None:
    values = {"model": str(tiny_model_dir), "missing": str(tmp_path / "missing")}
    options = {"--model": str(tiny_model_dir), "--out": str(tmp_path / "out")}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        options[flag] = value.format(**values)
    done = run_cli("export", *[part for pair in options.items() for part in pair], cache=tmp_path)
    assert done.returncode == exit_code
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len(besides_first_run_notes(done.stderr)) == 1


def test_export_cli_keeps_what_is_not_an_exports_own(
    tiny_model_dir: Path, tiny_onnx_cache: Path, tmp_path: Path
) -> None:
    """An export replaces its --out whole: a folder holding an earlier export's manifest
    among other files (the model's own, copied beside its export) lost them all (a review),
    and -o . inside an export folder replaced the folder the shell sat in."""
    out = tmp_path / "ship"
    done = run_cli("export", "-m", str(tiny_model_dir), "-o", str(out), cache=tiny_onnx_cache)
    assert done.returncode == 0, done.stderr
    again = run_cli("export", "-m", str(tiny_model_dir), "-o", str(out), cache=tiny_onnx_cache)
    assert again.returncode == 0, again.stderr  # an earlier export alone is replaced
    for name in ("config.json", "tokenizer.json"):
        shutil.copy2(tiny_model_dir / name, out / name)
    refused = run_cli("export", "-m", str(tiny_model_dir), "-o", str(out), cache=tiny_onnx_cache)
    assert refused.returncode == 2
    assert "holds files that are not a tiankong export's own" in refused.stderr
    assert (out / "config.json").is_file() and (out / "tokenizer.json").is_file()
    (out / "config.json").unlink()
    (out / "tokenizer.json").unlink()
    here = run_cli("export", "-m", str(tiny_model_dir), "-o", ".", cache=tiny_onnx_cache, cwd=out)
    assert here.returncode == 2 and "is the working folder or one above it" in here.stderr
    assert (out / MANIFEST_FILE).is_file()


def test_guard_figures_for_identical_engines(tiny_model_dir: Path, tiny_onnx_cache: Path) -> None:
    from tiankong.export.quality_guard import compare_engines, guard_sentences

    assert 50 <= len(guard_sentences()) <= 100
    assert all("[MASK]" in sentence for sentence in guard_sentences())
    export = ensure_export(
        resolve_model(str(tiny_model_dir)), "fp32", onnx_settings(tiny_onnx_cache)
    )
    engine = OnnxEngine(export.onnx_file)
    figures = compare_engines(engine, engine, tiny_model_dir)
    assert figures["top1_agreement"] == 1.0 and figures["top5_overlap"] == 1.0


def test_encoded_batch_inputs_only(onnx_masker: FillMasker) -> None:
    batch = EncodedBatch(
        np.array([[101, 103, 102]], dtype=np.int64),
        np.ones((1, 3), dtype=np.int64),
        np.array([1], dtype=np.int64),
    )
    assert onnx_masker.engine.mask_logits(batch).shape == (1, 21128)


def test_the_server_says_the_guard_once_and_a_cli_call_says_nothing(
    tiny_model_dir: Path, tiny_onnx_cache: Path
) -> None:
    model = str(tiny_model_dir)
    # INT8 asked for: under auto the tiny model may be measured faster in FP32 (no guard line)
    quiet = run_cli(
        "predict", "[MASK]龙点睛", "--model", model, "--precision", "int8", cache=tiny_onnx_cache
    )
    assert quiet.returncode == 0 and besides_first_run_notes(quiet.stderr) == []
    port = free_port()
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TIANKONG_ONNX_CACHE_DIR": str(tiny_onnx_cache),
        "TIANKONG_LOG_LEVEL": "warning",
    }
    command = [sys.executable, "-m", "tiankong", "serve", "--model", model, "--precision", "int8"]
    server = subprocess.Popen(
        [*command, "--port", str(port), "--threads", "1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_ready(url, START_TIMEOUT_S, lambda: server.poll() is None)
        info = httpx.get(f"{url}/info", timeout=30).json()
    finally:
        server.terminate()
        output, _ = server.communicate(timeout=30)
    (line,) = [text for text in output.splitlines() if "INT8 guard" in text]
    assert f"top-1 agreement with FP32 {100 * info['quality']['top1_agreement']:.1f}%" in line
    assert line.endswith("serving int8.") and info["precision"] == "int8"
    assert info["quality"]["recipe"]["name"] in line


def test_sessions_keep_no_memory_arena(tiny_onnx_cache: Path) -> None:
    """ORT's CPU arena would keep the blocks it took for the most memory any run ever needed (a
    long proofreading request's) for the process's life; without it, memory is freed to the
    allocator after each run."""
    from tiankong.engines.onnx_engine import build_session

    onnx_file = next(tiny_onnx_cache.rglob("*.onnx"))
    for spin_after_run in (True, False):  # served, and timed in turns at export
        session = build_session(onnx_file, "cpu", 1, spin_after_run=spin_after_run)
        assert session.get_session_options().enable_cpu_mem_arena is False
