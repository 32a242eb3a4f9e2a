"""The torch engine: transformers' masked-LM model, head applied only at mask positions."""

from __future__ import annotations

import copy
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from tiankong.core.models import require_masked_lm_type, require_trained, unloadable_weights
from tiankong.engines.base import EncodedBatch, spinning_pays
from tiankong.errors import BadOptionError

TORCH_PRECISIONS = ("auto", "fp32", "fp16", "int8")


def mlm_head(model: Any) -> Any | None:
    """The MLM head module of a *ForMaskedLM model (BERT: ``cls``, RoBERTa-like: ``lm_head``)."""
    return getattr(model, "cls", None) or getattr(model, "lm_head", None)


def int8_linears(model: Any) -> set[Any]:
    """What dynamic INT8 quantizes: every Linear of the encoder. The MLM head stays FP32 (its
    decoder is tied to the embeddings; MobileBERT's head reads ``decoder.weight``, which a
    quantized Linear has not, and failed on the first request), as the ONNX recipe scores its
    best candidates with an FP32 head. Without a known head, every Linear, by type."""
    import torch

    head = mlm_head(model)
    if head is None:
        return {torch.nn.Linear}
    in_head = {id(module) for module in head.modules()}
    return {
        name
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and id(module) not in in_head
    }


def pick_device(requested: str) -> str:
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise BadOptionError("--device cuda was asked for, but no CUDA GPU is available.")
    if requested not in ("cpu", "cuda"):
        raise BadOptionError(f"Unknown device '{requested}'; use auto, cpu or cuda.")
    return requested


def quiet_openmp(threads: int) -> None:
    """Let torch's OpenMP threads sleep between runs when they take every core
    (``spinning_pays``). GNU OpenMP reads OMP_WAIT_POLICY once, when torch loads it, so this
    works only before torch's first import (``tiankong serve --engine torch``), and a value the
    user set wins."""
    if not spinning_pays(threads) and "torch" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


class TorchEngine:
    """Eager PyTorch; fp16 on CUDA (the MLM head in fp32), fp32 (or dynamic int8) on CPU."""

    name = "torch"

    def __init__(
        self,
        folder: Path,
        device: str = "auto",
        precision: str = "auto",
        threads: int | None = None,
    ) -> None:
        quiet_openmp(threads or 0)
        import torch
        from transformers import AutoModelForMaskedLM
        from transformers.utils import logging as hf_logging

        if threads:
            torch.set_num_threads(threads)
        if precision not in TORCH_PRECISIONS:
            raise BadOptionError(  # bf16 is a precision, but not this engine's ("Unknown")
                f"The torch engine doesn't run '{precision}'; use {', '.join(TORCH_PRECISIONS)}, "
                "or --engine openvino (or auto) for bf16."
            )
        self.device = pick_device(device)
        self.device_reason = (
            "torch sees no CUDA GPU" if device == "auto" and self.device == "cpu" else None
        )
        if precision == "auto":
            precision = "fp16" if self.device == "cuda" else "fp32"
        if precision == "fp16" and self.device != "cuda":
            raise BadOptionError("fp16 needs a CUDA GPU; on the CPU use fp32 or int8.")
        if precision == "int8" and self.device == "cuda":  # torch's dynamic INT8 is CPU-only
            raise BadOptionError("int8 runs on the CPU only; on a GPU use fp16 or fp32.")
        self.precision = precision
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        require_masked_lm_type(folder)  # GPT-2's type, not its weights, is the fault
        try:
            model, loading = AutoModelForMaskedLM.from_pretrained(
                folder, dtype=torch.float32, output_loading_info=True, trust_remote_code=False
            )
        except Exception as error:
            raise unloadable_weights(folder.name, error) from None
        require_trained(model, loading, folder.name)
        # In FP16 the encoder runs in half precision and the MLM head stays FP32, in a copy
        # of its own (its decoder is tied to the embeddings, which become FP16). It costs
        # masks x vocab, and FP16 logits would round near-tied candidates together: a logit
        # of 12 is stored in steps of 0.008.
        fp32_head = copy.deepcopy(mlm_head(model)) if precision == "fp16" else None
        if precision == "int8":
            with warnings.catch_warnings():
                # torch 2.13 deprecates its quantized tensors, in a UserWarning that reached
                # the CLI's output on every run (a review); the engine keeps working
                warnings.filterwarnings("ignore", message=r"torch\.quantize_per_tensor")
                model = torch.ao.quantization.quantize_dynamic(
                    model, int8_linears(model), torch.qint8
                )
        elif precision == "fp16":
            model = model.half()
        self.model = model.to(self.device).eval()
        self.head = mlm_head(self.model) if fp32_head is None else fp32_head.to(self.device).eval()
        self.torch = torch

    def mask_logits(self, batch: EncodedBatch) -> np.ndarray:
        torch = self.torch
        input_ids = torch.from_numpy(batch.input_ids).to(self.device)
        attention_mask = torch.from_numpy(batch.attention_mask).to(self.device)
        positions = torch.from_numpy(batch.mask_positions).to(self.device)
        with torch.inference_mode():
            if self.head is None:  # unfamiliar architecture: full logits, then gather
                logits = self.model(input_ids=input_ids, attention_mask=attention_mask).logits
                selected = logits.reshape(-1, logits.shape[-1])[positions]
            else:
                hidden = self.model.base_model(
                    input_ids=input_ids, attention_mask=attention_mask
                ).last_hidden_state
                at_masks = hidden.reshape(-1, hidden.shape[-1])[positions]
                selected = self.head(at_masks.float() if self.precision == "fp16" else at_masks)
        return selected.float().cpu().numpy()
