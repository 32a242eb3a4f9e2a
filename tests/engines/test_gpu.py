"""The GPU path: which engine and device get picked, and CUDA results that agree with the CPU.

The selection logic is tested everywhere by standing in for the parts that differ between
machines (the onnxruntime build, the driver, torch's CUDA check). The tests that need a real
CUDA GPU are marked ``needs_cuda`` and skip without one; ``bash bench/gpu.sh`` covers the
bert-base-shaped model on a GPU machine.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
import torch

from tiankong import FillMasker, Settings
from tiankong.engines import gpu_needs_torch
from tiankong.engines.onnx_engine import CPU_PROVIDER, CUDA_PROVIDER
from tiankong.errors import BadOptionError, ModelUnavailableError

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

SENTENCES = [
    "春眠不觉晓，处处闻啼[MASK]。",
    "[MASK]龙点睛",
    "手机没电了，赶紧去[MASK][MASK]。",
    "他[MASK]天[MASK]去公园散步，WiFi信号[MASK]。",
]


def fake_machine(
    monkeypatch: pytest.MonkeyPatch, *, driver: bool, cuda_torch: bool, ort_cuda: bool
) -> None:
    """Stand in for the machine: NVIDIA driver files, torch's build, onnxruntime's providers."""
    import tiankong.engines as engines

    monkeypatch.setattr(engines, "has_nvidia_driver", lambda: driver)
    monkeypatch.setattr(engines, "has_cuda_torch", lambda: cuda_torch)
    providers = [CUDA_PROVIDER, CPU_PROVIDER] if ort_cuda else [CPU_PROVIDER]
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: providers)


@pytest.mark.parametrize(
    ("device", "driver", "cuda_torch", "ort_cuda", "expected"),
    [
        ("auto", True, True, False, True),  # the GPU only torch can use: torch, FP16
        ("auto", True, True, True, False),  # onnxruntime-gpu: ONNX Runtime's CUDA provider
        ("auto", False, True, False, False),  # no driver: a CPU machine stays on ONNX Runtime
        ("auto", True, False, False, False),  # a CPU-only torch can't use the GPU either
        ("cuda", False, True, False, True),  # asked for by name: torch says if CUDA works
        ("cpu", True, True, False, False),
    ],
)
def test_auto_engine_choice(
    monkeypatch: pytest.MonkeyPatch,
    device: str,
    driver: bool,
    cuda_torch: bool,
    ort_cuda: bool,
    expected: bool,
) -> None:
    fake_machine(monkeypatch, driver=driver, cuda_torch=cuda_torch, ort_cuda=ort_cuda)
    assert gpu_needs_torch(device) is expected


def test_auto_engine_hands_cuda_to_torch(
    monkeypatch: pytest.MonkeyPatch, tiny_model_dir: Path, tiny_onnx_cache: Path
) -> None:
    """--device cuda with a CPU-only onnxruntime goes to torch, not to an onnxruntime error."""
    fake_machine(monkeypatch, driver=True, cuda_torch=True, ort_cuda=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    settings = Settings(threads=1, device="cuda", onnx_cache_dir=str(tiny_onnx_cache))
    with pytest.raises(BadOptionError, match="no CUDA GPU is available"):  # torch's own check
        FillMasker.load(str(tiny_model_dir), settings)


def test_auto_engine_on_a_cpu_machine_stays_on_onnxruntime(
    monkeypatch: pytest.MonkeyPatch, tiny_model_dir: Path, tiny_onnx_cache: Path
) -> None:
    fake_machine(monkeypatch, driver=False, cuda_torch=True, ort_cuda=False)
    settings = Settings(threads=1, onnx_cache_dir=str(tiny_onnx_cache))
    engine = FillMasker.load(str(tiny_model_dir), settings).engine
    assert (engine.name, engine.device) == ("onnx", "cpu")


def cuda_provider_that_fails_to_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """onnxruntime-gpu on a machine without a GPU or CUDA libraries: the provider is listed,
    but a session silently comes up on the CPU alone."""
    real_session = onnxruntime.InferenceSession

    def session_without_cuda(path: str, sess_options: object = None, providers: object = None):
        return real_session(path, sess_options=sess_options, providers=[CPU_PROVIDER])

    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: [CUDA_PROVIDER])
    monkeypatch.setattr(onnxruntime, "InferenceSession", session_without_cuda)


def test_onnx_device_auto_falls_back_to_the_cpu(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    tiny_model_dir: Path,
    tiny_onnx_cache: Path,
) -> None:
    cuda_provider_that_fails_to_load(monkeypatch)
    settings = Settings(engine="onnx", threads=1, onnx_cache_dir=str(tiny_onnx_cache))
    with caplog.at_level(logging.WARNING, logger="tiankong"):
        masker = FillMasker.load(str(tiny_model_dir), settings)
    assert (masker.engine.device, masker.engine.precision) == ("cpu", "fp32")
    assert "CUDA provider did not load" in caplog.text
    assert masker.predict(SENTENCES[0]).masks[0]


def test_onnx_device_cuda_does_not_fall_back(
    monkeypatch: pytest.MonkeyPatch, tiny_model_dir: Path, tiny_onnx_cache: Path
) -> None:
    cuda_provider_that_fails_to_load(monkeypatch)
    settings = Settings(engine="onnx", device="cuda", threads=1)
    with pytest.raises(ModelUnavailableError, match="CUDA provider of ONNX Runtime failed"):
        FillMasker.load(
            str(tiny_model_dir), settings.with_overrides(onnx_cache_dir=str(tiny_onnx_cache))
        )


@pytest.mark.parametrize(
    ("precision", "message"),
    [("bf16", "The torch engine doesn't run 'bf16'"), ("int8", "int8 runs on the CPU only")],
)
def test_torch_precision_checks(
    monkeypatch: pytest.MonkeyPatch, tiny_model_dir: Path, precision: str, message: str
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # checked before any CUDA work
    settings = Settings(engine="torch", device="cuda", precision=precision, threads=1)
    with pytest.raises(BadOptionError, match=message):
        FillMasker.load(str(tiny_model_dir), settings)


def assert_agrees(got: FillMasker, reference: FillMasker, score_tolerance: float) -> None:
    expected = reference.predict_batch(SENTENCES, top_k=5)
    for ours, theirs in zip(got.predict_batch(SENTENCES, top_k=5), expected, strict=True):
        for our_mask, their_mask in zip(ours.masks, theirs.masks, strict=True):
            assert [c.token_id for c in our_mask] == [c.token_id for c in their_mask]
            scores = np.array([c.score for c in our_mask]) - [c.score for c in their_mask]
            assert np.abs(scores).max() < score_tolerance


@needs_cuda
def test_torch_auto_is_fp16_on_cuda(tiny_model_dir: Path, tiny_masker: FillMasker) -> None:
    masker = FillMasker.load(str(tiny_model_dir), Settings(engine="torch", threads=1))
    assert (masker.engine.device, masker.engine.precision) == ("cuda", "fp16")
    head = getattr(masker.engine, "head", None)
    assert head is not None and {p.dtype for p in head.parameters()} == {torch.float32}
    assert_agrees(masker, tiny_masker, score_tolerance=1e-2)


@needs_cuda
def test_auto_engine_picks_cuda(
    tiny_model_dir: Path, tiny_onnx_cache: Path, tiny_masker: FillMasker
) -> None:
    """On a GPU machine the default settings serve on the GPU, through whichever engine can."""
    settings = Settings(threads=1, onnx_cache_dir=str(tiny_onnx_cache))
    masker = FillMasker.load(str(tiny_model_dir), settings)
    assert masker.engine.device == "cuda"
    if masker.engine.name == "onnx":
        assert getattr(masker.engine, "providers", None) == [CUDA_PROVIDER, CPU_PROVIDER]
    assert_agrees(masker, tiny_masker, score_tolerance=1e-2)


@needs_cuda
def test_onnx_uses_the_cuda_provider_when_installed(
    tiny_model_dir: Path, tiny_onnx_cache: Path, tiny_masker: FillMasker
) -> None:
    settings = Settings(engine="onnx", threads=1, onnx_cache_dir=str(tiny_onnx_cache))
    masker = FillMasker.load(str(tiny_model_dir), settings)
    if CUDA_PROVIDER not in onnxruntime.get_available_providers():  # the CPU onnxruntime
        assert (masker.engine.device, masker.engine.precision) == ("cpu", "int8")
        return
    assert (masker.engine.device, masker.engine.precision) == ("cuda", "fp32")
    assert_agrees(masker, tiny_masker, score_tolerance=1e-3)
