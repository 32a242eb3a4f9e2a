"""Which INT8 recipes an export tries, in which order, on which CPU; the first that passes the
quality guard is the one served.

>>> kind = cpu_kind(["avx2", "avx512f", "avx512_vnni"], "x86_64")
>>> kind, [recipe.name for recipe in recipe_chain(kind)]
('vnni', ['u8s8 per-channel', 'u8s8 per-channel, FFN output FP32', 'u8s8 per-channel, MatMul only'])

Why the CPU matters (ONNX Runtime's quantization docs, "When and why do I need to try U8U8?"):
x86 CPUs with AVX2 or AVX-512 but without VNNI multiply U8S8 pairs with ``VPMADDUBSW``, which
sums two products into a signed 16-bit lane and saturates: 2 x 255 x 127 = 64,770 does not fit.
VNNI (``VPDPBUSD``), AMX and ARM accumulate in 32 bits and never saturate, so they get U8S8.
The docs name two ways out: 7-bit weights (``reduce_range``: 2 x 255 x 64 = 32,640 fits) or
U8U8. Both compute exactly, so their guard figures can be measured on any CPU; on the bundled
model (``python -m bench.int8_variants``, docs/PERFORMANCE.md) 7-bit weights lose agreement
(95.8% whole, 97.9% with the FFN output in FP32) where U8U8 keeps it (96.8%, 99.0%), so CPUs
without VNNI get U8U8. Weights are per-channel everywhere: one scale per output column costs
nothing at run time and is what keeps 8-bit weights close to FP32.

Why the model matters: the guard decides how far down the chain a model goes. A sharp model has
close runners-up that INT8 noise can flip; the measured culprit is the FFN output projection,
whose inputs are post-GELU activations with outliers, so the first fallback keeps those MatMuls
in FP32, and the second quantizes the MatMuls only and leaves the fused attention in FP32.

The head (the vocabulary projection at the mask rows) is INT8 in every recipe, and its best
``RESCORED`` columns per mask are scored again in FP32 (``export/export.py``
``rescore_head_in_fp32``). At one sentence the head is one row times a ``[hidden, vocab]``
matrix, so its time is the time to read that matrix: in FP32 that is 21.6 MB for the bundled
model and 65 MB for bert-base, 39% and 17% of a whole INT8 forward pass's kernel time (ORT's
profiler, docs/PERFORMANCE.md); in INT8 a quarter of that. But 8-bit activations flip close
runners-up on a sharp model (the bundled model: 96.8% top-1 agreement with an INT8 head, 99.0%
with an FP32 one, the rest of the recipe alike). Rescoring the INT8 head's best 64 in FP32 makes
them, and so the answer's order and its top scores, those of an FP32 head; only the softmax's
sum over the rest of the vocabulary keeps INT8 error. The price is a second copy of the tied
matrix, in int8: +5.4 MB bundled, +16 MB bert-base. ``HEAD`` in ``fp32_parts`` keeps the head in
FP32 instead (``python -m bench.int8_variants`` measures it against the chain).
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

CPUINFO = Path("/proc/cpuinfo")
# CPU kinds, most capable first; the recipe table below is keyed by them.
SATURATION_FREE_KINDS = ("amx", "vnni", "arm64")  # U8S8 accumulates in 32 bits here
SATURATING_KINDS = ("avx512", "avx2", "x86")  # VPMADDUBSW (or unknown): U8U8
ALL_OP_TYPES = ("MatMul", "Attention")
FFN_OUTPUT = "ffn_output"  # each layer's output/dense MatMul (intermediate -> hidden)
HEAD = "head"  # the vocabulary projection (hidden -> vocab) at the mask rows
RESCORED = 64  # the INT8 head's best columns per mask that are scored again in FP32


def cpu_flags() -> frozenset[str]:
    """This CPU's feature flags from /proc/cpuinfo (Linux); empty where there is none."""
    try:
        text = CPUINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):  # x86 | ARM
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def cpu_kind(flags: Iterable[str] | None = None, machine: str | None = None) -> str:
    """``amx``, ``vnni``, ``avx512``, ``avx2`` or ``x86`` (older, or flags unknown) on x86;
    ``arm64`` on 64-bit ARM; else the machine name. Pass ``flags`` and ``machine`` to ask about
    another CPU (tests do)."""
    arch = (machine if machine is not None else platform.machine()).lower()
    if arch in ("aarch64", "arm64"):
        return "arm64"
    if arch not in ("x86_64", "amd64", "i686", "i386", "x86"):
        return arch or "unknown"
    found = set(cpu_flags() if flags is None else flags)
    if "amx_int8" in found:
        return "amx"
    if found & {"avx512_vnni", "avx_vnni"}:
        return "vnni"
    if "avx512bw" in found or "avx512f" in found:
        return "avx512"
    if "avx2" in found:
        return "avx2"
    return "x86"  # SSE-only, or a system without /proc/cpuinfo: assume the worst case


def cpu_has_bf16(flags: Iterable[str] | None = None) -> bool:
    """Whether this CPU has bfloat16 matrix units (AVX512-BF16 or AMX-BF16)."""
    found = set(cpu_flags() if flags is None else flags)
    return bool(found & {"avx512_bf16", "amx_bf16"})


@dataclass(frozen=True)
class Int8Recipe:
    """One way to quantize an export (``onnxruntime.quantization.quantize_dynamic`` settings)."""

    weights: str  # "s8" (U8S8: uint8 activations, int8 weights) or "u8" (U8U8)
    reduce_range: bool  # 7-bit weights
    per_channel: bool
    op_types: tuple[str, ...]
    fp32_parts: tuple[str, ...] = ()  # graph parts left in FP32, e.g. FFN_OUTPUT
    head_rescored: int = RESCORED  # an INT8 head's best columns per mask scored again in FP32

    @property
    def name(self) -> str:
        described = f"u8{self.weights}{' reduce-range' if self.reduce_range else ''}"
        described += " per-channel" if self.per_channel else " per-tensor"
        if FFN_OUTPUT in self.fp32_parts:
            described += ", FFN output FP32"
        if tuple(self.op_types) == ("MatMul",):
            described += ", MatMul only"
        if HEAD in self.fp32_parts:
            described += ", head FP32"
        elif not self.head_rescored:
            described += ", head INT8 not rescored"
        return described

    def describe(self) -> dict[str, Any]:
        """JSON-ready (lists, not tuples), so it equals itself read back from a manifest."""
        fields = {key: list(v) if isinstance(v, tuple) else v for key, v in asdict(self).items()}
        return {"name": self.name, **fields}


def recipe_chain(kind: str) -> list[Int8Recipe]:
    """The recipes an export on a ``kind`` CPU tries, fastest first."""
    weights = "s8" if kind in SATURATION_FREE_KINDS else "u8"
    return [
        Int8Recipe(weights, reduce_range=False, per_channel=True, op_types=ALL_OP_TYPES),
        Int8Recipe(weights, False, True, ALL_OP_TYPES, fp32_parts=(FFN_OUTPUT,)),
        Int8Recipe(weights, False, True, ("MatMul",)),
    ]


@dataclass(frozen=True)
class Int8Choice:
    recipe: Int8Recipe
    figures: dict[str, Any]  # the guard's figures for ``recipe``
    passed: bool
    attempts: list[dict[str, Any]]  # every recipe tried, in order, with its figures


def choose_recipe(
    chain: Sequence[Int8Recipe],
    measure: Callable[[Int8Recipe], dict[str, Any]],
    min_agreement: float,
) -> Int8Choice:
    """Measure the recipes in order and stop at the first whose top-1 agreement reaches
    ``min_agreement``. If none does, the first (fastest) one is kept, marked as failed: it is
    served only when INT8 is asked for by name."""
    attempts: list[dict[str, Any]] = []
    measured: list[dict[str, Any]] = []
    for recipe in chain:
        figures = measure(recipe)
        measured.append(figures)
        attempts.append({"recipe": recipe.name, **figures})
        if float(figures["top1_agreement"]) >= min_agreement:
            return Int8Choice(recipe, figures, True, attempts)
    return Int8Choice(chain[0], measured[0], False, attempts)
