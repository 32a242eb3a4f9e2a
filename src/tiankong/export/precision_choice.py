"""``--precision auto`` on the CPU: the fastest engine and precision that passes the guard here.

Measured once per model, CPU kind, thread count and libraries, when the export cache makes the
``auto`` entry (in the export worker, beside the INT8 export it needs), and kept in that entry's
manifest; the engine, /info and the startup line read it. The candidates:

- ``onnx fp32``: ONNX Runtime on the FP32 export: the reference, always eligible;
- ``onnx int8``: the INT8 export (``int8_recipe``'s chain), eligible when its guard passed;
- ``openvino fp32`` and ``openvino bf16``: OpenVINO's CPU plugin on the FP32 export
  (``engines/openvino_engine``), when the ``openvino`` extra is installed; bf16 only on a CPU
  with bfloat16 units (AVX512-BF16, AMX), where the plugin does not quietly run FP32 instead;
- ``openvino int8``: the FP32 export quantized by NNCF (``openvino_int8``), when the ``nncf``
  extra is installed too; its IR is kept in the ``auto`` entry only when it is the choice.

Every candidate but ONNX Runtime's FP32 is held to the INT8 guard's threshold (top-1 agreement
with it on the guard sentences). Each is timed at batch 1 (a lone request) and at a full batch
(``FULL_BATCH`` guard sentences: what the dynamic batcher sends under load), the candidates
taking turns; the winner has the best geometric mean of its two speed-ups over ONNX Runtime's
FP32, so neither a lone request nor a full batch is traded away for the other unseen.

Two engines, split by batch size, serve when one size's fastest candidate is another's slowest
by a margin: when the fastest at batch 1 and the fastest at a full batch differ and each is at
least ``SPLIT_GAIN`` times the other at its own size (an AMX CPU: ONNX Runtime INT8 at batch 1,
OpenVINO's INT8 or bf16 at 16). The two are timed again, in turns, at every batch size of
``SPLIT_SIZES``; batches smaller than the first size where the full-batch engine was the faster
go to the other one. The pair holds two copies of the weights: each candidate's resident memory
(what it added on loading and running one full batch) is measured with it, and the server weighs
the pair's second engine against the memory it may use when it starts (``engines.within_memory``;
docs/PERFORMANCE.md, "Engines per CPU kind", has what a split costs and what it buys).

>>> fp32 = Candidate("onnx", "fp32", b1_ms=2.0, batch_ms=27.0, top1_agreement=1.0)
>>> int8 = Candidate("onnx", "int8", b1_ms=1.9, batch_ms=18.0, top1_agreement=0.99)
>>> bf16 = Candidate("openvino", "bf16", b1_ms=2.5, batch_ms=9.4, top1_agreement=0.99)
>>> choose([fp32, int8, bf16], 0.98).chosen.key
'openvino bf16'
>>> [c.key for c in split_pair(choose([fp32, int8, bf16], 0.98)) or ()]
['onnx int8', 'openvino bf16']
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tiankong.engines.onnx_engine import OnnxEngine

FULL_BATCH = 16  # texts in the timed full batch (the guard sentences' batch)
ROUNDS = {1: 20, FULL_BATCH: 5}  # timed calls per batch size and engine
TURNS = 4  # the blocks each engine's timed calls come in, taking turns (time_in_turns)
# untimed calls at each block's start, at least SETTLE_CALLS and SETTLE_MS of them: the
# engine's own threads wake from the quiet pause before the block
SETTLE_CALLS = 2
SETTLE_MS = 10.0
# the pause before each block, in which the engine timed before goes quiet: ONNX Runtime's
# pool, as served, spins after its run for tens of ms (docs/PERFORMANCE.md, "The
# thirty-first session")
QUIET_MS = 50.0
SPLIT_GAIN = 1.2  # two engines serve only where each is this much faster at its own size
# in the cache key: bump it when split_pair, with_split, what is measured or what the choice
# records change (8: ONNX Runtime's own pick, for --engine onnx)
SPLIT_RULE = 8
# (5: ONNX Runtime's sessions keep no CPU arena; 6: time_in_turns times blocks, not lone calls;
# 7: ONNX Runtime timed as served, each block after a quiet pause)
SPLIT_SIZES = {1: 20, 2: 12, 4: 8, 8: 6, FULL_BATCH: 5}  # a pair's sizes, calls at each
# other programs' share of the CPUs while the engines were timed past which the choice's line
# says so (a review's run beside a process using one of two cores chose ONNX FP32, whose lone
# requests then ran 1.5x OpenVINO bf16's, the choice on the quiet machine)
BUSY_SHARE = 0.2
# The timed ONNX Runtime engines spin after each run, as served: stopped (as before the
# thirty-first session), a lone call woke the pool and was timed 1.1-1.4x its served time on
# amx, so a split that served lone requests faster was measured away. The pool left spinning
# would take a core from the engine timed next (1.7-2.2x slower, docs/PERFORMANCE.md,
# "Spinning"): time_in_turns pauses QUIET_MS before each block. In the cache key.
TIMED_SPIN_AFTER_RUN = True


def timed_onnx_engine(onnx_file: Path, precision: str, threads: int) -> OnnxEngine:
    """An ONNX Runtime engine on the CPU to time in turns with others (``time_in_turns``): the
    one place such an engine is built, spinning after its run as a served one does
    (``TIMED_SPIN_AFTER_RUN``)."""
    from tiankong.engines.onnx_engine import OnnxEngine

    return OnnxEngine(onnx_file, "cpu", precision, threads, spin_after_run=TIMED_SPIN_AFTER_RUN)


KEYS = ("onnx fp32", "onnx int8", "openvino fp32", "openvino bf16", "openvino int8")


@dataclass(frozen=True)
class Candidate:
    """One engine and precision, as measured here; ``missing`` says why it was not."""

    engine: str  # "onnx" | "openvino"
    precision: str  # "fp32" | "int8" | "bf16"
    b1_ms: float = 0.0
    batch_ms: float = 0.0
    top1_agreement: float = 0.0
    missing: str = ""
    # the resident memory it added on loading and running one full batch (None: not measured)
    memory_mb: float | None = None

    @property
    def key(self) -> str:
        return f"{self.engine} {self.precision}"

    @property
    def reference(self) -> bool:
        return (self.engine, self.precision) == ("onnx", "fp32")


@dataclass(frozen=True)
class Split:
    """A second engine for small batches: ``lone`` serves batches of fewer than ``rows`` texts,
    the choice's ``chosen`` the rest. ``ms``: the pair's medians at each of ``SPLIT_SIZES``.
    ``alone``: the key of the one of the two that serves where the pair can't (the server's
    memory limit, ``engines.within_memory``): the faster by ``PrecisionChoice.speedup``, ties
    to the earlier candidate, as ``choose`` picks."""

    lone: Candidate
    rows: int
    ms: dict[int, dict[str, float]]
    alone: str = ""


@dataclass(frozen=True)
class PrecisionChoice:
    chosen: Candidate  # with a split, the engine of the larger batches
    candidates: tuple[Candidate, ...]
    min_agreement: float
    cpu: str
    rejected: dict[str, str] = field(default_factory=dict)  # key -> why it can't serve
    split: Split | None = None
    # the share of the machine's CPUs other programs used while the engines were timed (None:
    # not known): a choice measured beside them may not be the quiet machine's
    other_load: float | None = None

    def speedup(self, candidate: Candidate) -> float:
        """The geometric mean of ``candidate``'s speed-ups at batch 1 and a full batch."""
        reference = next(c for c in self.candidates if c.reference)
        return math.sqrt(
            (reference.b1_ms / candidate.b1_ms) * (reference.batch_ms / candidate.batch_ms)
        )

    def within(self, engine: str) -> PrecisionChoice:
        """The choice among ``engine``'s own candidates, one engine (``--engine onnx`` keeps
        ONNX Runtime: its FP32 reference always passes)."""
        own = [c for c in self.candidates if c.engine == engine]
        return choose(own, self.min_agreement, self.cpu)

    def line(self) -> str:
        """``bf16 (openvino) on amx: 1.9x onnx int8 at batch 16, 0.43x at batch 1, agreement
        99.0%; ...``: what serves, against the runner-up, and why others don't."""
        chosen = self.chosen
        said = f"{chosen.precision} ({chosen.engine}) on {self.cpu}"
        eligible = [c for c in self.candidates if c.key not in self.rejected and c != chosen]
        if self.split is not None:
            lone, rows, ms = self.split.lone, self.split.rows, self.split.ms
            said = (
                f"{lone.precision} ({lone.engine}) for batches under {rows} texts, "
                f"{chosen.precision} ({chosen.engine}) from {rows}, on {self.cpu}: "
                f"{ms[1][chosen.key] / ms[1][lone.key]:.2f}x {chosen.key} at batch 1, "
                f"{ms[FULL_BATCH][lone.key] / ms[FULL_BATCH][chosen.key]:.2f}x {lone.key} at "
                f"batch {FULL_BATCH}, agreement {100 * lone.top1_agreement:.1f}% and "
                f"{100 * chosen.top1_agreement:.1f}%"
            )
        elif eligible:
            other = max(eligible, key=self.speedup)
            said += (
                f": {other.batch_ms / chosen.batch_ms:.2f}x {other.key} at batch {FULL_BATCH}, "
                f"{other.b1_ms / chosen.b1_ms:.2f}x at batch 1"
            )
        if self.split is None:
            said += f", agreement {100 * chosen.top1_agreement:.1f}%"
        if self.rejected:
            said += "; not served: " + "; ".join(f"{k}: {why}" for k, why in self.rejected.items())
        if self.other_load is not None and self.other_load >= BUSY_SHARE:
            said += (
                f"; measured while other programs used {100 * self.other_load:.0f}% of the CPUs, "
                "so it may not hold on a quiet machine (delete the model's -auto- entry in the "
                "ONNX cache to measure again)"
            )
        return said

    def describe(self, files: dict[str, str] | None = None) -> dict[str, Any]:
        """JSON-ready: the chosen engine and precision, the file in the ``auto`` entry that it
        serves (``files``: candidate key -> file; None when it serves another entry's graph),
        the split's engine for small batches when there is one, every candidate, and the
        line."""
        files = files or {}
        split = self.split
        return {
            "engine": self.chosen.engine,
            "precision": self.chosen.precision,
            "file": files.get(self.chosen.key),
            "split": None
            if split is None
            else {
                "engine": split.lone.engine,
                "precision": split.lone.precision,
                "file": files.get(split.lone.key),
                "below_rows": split.rows,
                "alone": split.alone,
                "ms": {
                    str(size): {key: round(ms, 3) for key, ms in figures.items()}
                    for size, figures in split.ms.items()
                },
            },
            "onnx_runtime": self.within("onnx").chosen.precision,  # what --engine onnx serves
            "cpu": self.cpu,
            "min_agreement": self.min_agreement,
            "full_batch": FULL_BATCH,
            "candidates": [asdict(candidate) for candidate in self.candidates],
            "rejected": dict(self.rejected),
            "other_load": None if self.other_load is None else round(self.other_load, 3),
            "line": self.line(),
        }


def choose(candidates: Sequence[Candidate], min_agreement: float, cpu: str = "") -> PrecisionChoice:
    """The fastest candidate (``PrecisionChoice.speedup``) that was measured and, unless it is
    the reference, reaches ``min_agreement``; ties go to the earlier candidate."""
    if not any(c.reference and not c.missing for c in candidates):
        raise ValueError("the candidates must include a measured onnx fp32 reference")
    rejected: dict[str, str] = {}
    for candidate in candidates:
        if candidate.missing:
            rejected[candidate.key] = candidate.missing
        elif not candidate.reference and candidate.top1_agreement < min_agreement:
            rejected[candidate.key] = (
                f"agreement {100 * candidate.top1_agreement:.1f}% < {100 * min_agreement:.0f}%"
            )
    choice = PrecisionChoice(candidates[0], tuple(candidates), min_agreement, cpu, rejected)
    eligible = [c for c in candidates if c.key not in rejected]
    best = max(eligible, key=lambda c: (choice.speedup(c), -eligible.index(c)))
    return PrecisionChoice(best, tuple(candidates), min_agreement, cpu, rejected)


def split_pair(choice: PrecisionChoice) -> tuple[Candidate, Candidate] | None:
    """The fastest eligible candidate at batch 1 and the fastest at a full batch, when they
    differ and each is at least ``SPLIT_GAIN`` times the other at its own size; else None."""
    eligible = [c for c in choice.candidates if c.key not in choice.rejected]
    lone = min(eligible, key=lambda c: c.b1_ms)
    batch = min(eligible, key=lambda c: c.batch_ms)
    if lone == batch or not margins_hold(lone.b1_ms, batch.b1_ms, lone.batch_ms, batch.batch_ms):
        return None
    return lone, batch


def margins_hold(
    lone_small: float, batch_small: float, lone_full: float, batch_full: float
) -> bool:
    """Whether each of a pair is ``SPLIT_GAIN`` times the other at its own end (milliseconds:
    the lone engine's and the batch engine's at batch 1, then at a full batch)."""
    return batch_small >= SPLIT_GAIN * lone_small and lone_full >= SPLIT_GAIN * batch_full


def with_split(
    choice: PrecisionChoice, lone: Candidate, batch: Candidate, ms: dict[int, dict[str, float]]
) -> PrecisionChoice:
    """``choice`` serving ``batch`` from the first size in ``ms`` (the pair's medians at
    ``SPLIT_SIZES``, timed in turns) where it was the faster, and ``lone`` below it. Unchanged
    (one engine) unless, timed again, each still beats the other by ``SPLIT_GAIN`` at its own
    end of the sizes and the lead changes hands once."""
    sizes = sorted(ms)
    small, full = ms[sizes[0]], ms[sizes[-1]]
    if not margins_hold(small[lone.key], small[batch.key], full[lone.key], full[batch.key]):
        return choice  # timed again, the pair does not keep its margins: one engine
    faster = [ms[size][batch.key] <= ms[size][lone.key] for size in sizes]
    first = faster.index(True)
    if not all(faster[first:]):  # the lead changes more than once: noise, not a crossover
        return choice
    pair = [c for c in choice.candidates if c in (lone, batch)]  # in the candidates' order
    alone = max(pair, key=lambda c: (choice.speedup(c), -pair.index(c))).key
    split = Split(lone, sizes[first], ms, alone)
    return replace(choice, chosen=batch, split=split)


def measure(
    folder: Path,
    fp32_file: Path,
    int8_file: Path,
    int8_quality: dict[str, Any],
    threads: int,
    min_agreement: float,
    cpu: str,
    entry: Path,
) -> tuple[PrecisionChoice, dict[str, str]]:
    """Build every candidate on this machine (noting the resident memory each adds), run the
    guard on each and time them; where two engines split by batch size pay (``split_pair``),
    time that pair at ``SPLIT_SIZES``.
    ``entry``: the ``auto`` entry being made, where OpenVINO's INT8 IR is written; it stays
    there only if it serves. Returns the choice and its files in ``entry`` (candidate key ->
    file name; empty when it serves other entries' graphs)."""
    from tiankong.engines.base import Engine, pad_prepared
    from tiankong.engines.openvino_engine import INSTALL_HINT, OpenVinoEngine, has_openvino
    from tiankong.export import openvino_int8
    from tiankong.export.int8_recipe import cpu_has_bf16
    from tiankong.export.quality_guard import (
        GuardReference,
        guard_sentences,
        model_encoder,
        prepare_to_fit,
    )
    from tiankong.host import cpu_snapshot, others_share, resident_mb

    encoder = model_encoder(folder)  # rows as long as the model reads, as the guard's
    prepared = prepare_to_fit(encoder, guard_sentences())[:FULL_BATCH]
    full_batch = pad_prepared(prepared, encoder.pad_id)
    engines: dict[str, Engine] = {}
    memory: dict[str, float] = {}  # none where this process's memory can't be read

    def load(key: str, build: Callable[[], Engine]) -> Engine:
        """``build()`` into ``engines``, with the resident memory that it and one full batch
        added to this process in ``memory`` (at least 0: memory freed before counts nothing).
        A runtime's own libraries count for the first of its engines built here (ONNX Runtime's
        for its FP32 engine, OpenVINO's for its FP32 one), not for the others."""
        gc.collect()
        before = resident_mb()
        engine = engines[key] = build()
        engine.mask_logits(full_batch)
        after = resident_mb()
        if before is not None and after is not None:
            memory[key] = round(max(0.0, after - before), 1)
        return engine

    reference = load("onnx fp32", partial(timed_onnx_engine, fp32_file, "fp32", threads))
    missing: dict[str, str] = {}
    if int8_quality.get("passed"):
        load("onnx int8", partial(timed_onnx_engine, int8_file, "int8", threads))
    else:
        agreement = 100 * float(int8_quality.get("top1_agreement", 0.0))
        missing["onnx int8"] = f"no INT8 recipe passed the guard (best {agreement:.1f}%)"
    for key in KEYS[2:]:  # OpenVINO's three
        precision = key.split()[1]
        if not has_openvino():
            missing[key] = f"openvino is not installed ({INSTALL_HINT})"
        elif precision == "bf16" and not cpu_has_bf16():
            missing[key] = "this CPU has no bf16 units (AVX512-BF16 or AMX)"
        elif precision == "int8" and not openvino_int8.has_nncf():
            missing[key] = f"nncf is not installed ({openvino_int8.INSTALL_HINT})"
        elif precision == "int8":  # NNCF may fail on a graph it can't take: listed, not fatal
            try:  # quantized first: NNCF's own memory is not the engine's
                graph = openvino_int8.quantize(fp32_file, folder, entry)
                load(key, partial(OpenVinoEngine, graph, "int8", threads))
            except Exception as error:  # any NNCF or compile failure: said in the line
                engines.pop(key, None)
                missing[key] = f"the NNCF INT8 model could not be made ({type(error).__name__})"
        else:
            load(key, partial(OpenVinoEngine, fp32_file, precision, threads))
    guard = GuardReference(reference, folder)
    # The reference agrees with itself, and INT8's figure is its export's guard's, on the same
    # sentences: only OpenVINO's are measured here.
    agreed = {"onnx fp32": 1.0, "onnx int8": float(int8_quality.get("top1_agreement", 0.0))}
    for key, openvino in engines.items():
        if key.startswith("openvino"):
            agreed[key] = float(guard.compare(openvino)["top1_agreement"])
    started = cpu_snapshot()
    speed = {
        size: time_in_turns(engines, pad_prepared(prepared[:size], encoder.pad_id), rounds)
        for size, rounds in ROUNDS.items()
    }
    other_load = others_share(started)
    candidates = []
    for key in KEYS:
        engine, precision = key.split()
        if key in missing:
            candidates.append(Candidate(engine, precision, missing=missing[key]))
            continue
        candidates.append(
            Candidate(
                engine,
                precision,
                round(speed[1][key], 3),
                round(speed[FULL_BATCH][key], 3),
                agreed[key],
                memory_mb=memory.get(key),
            )
        )
    choice = replace(choose(candidates, min_agreement, cpu), other_load=other_load)
    pair = split_pair(choice)
    if pair is not None:
        two = {candidate.key: engines[candidate.key] for candidate in pair}
        ms = {
            size: time_in_turns(two, pad_prepared(prepared[:size], encoder.pad_id), rounds)
            for size, rounds in SPLIT_SIZES.items()
        }
        choice = with_split(choice, *pair, ms)
    served = {choice.chosen.key, *([choice.split.lone.key] if choice.split else [])}
    if "openvino int8" in served:
        return choice, {"openvino int8": openvino_int8.IR_FILE}
    for path in entry.glob(f"{Path(openvino_int8.IR_FILE).stem}.*"):
        path.unlink()  # measured, not served: the cache keeps no graph it won't read
    return choice, {}


def time_in_turns(
    engines: dict[str, Any],
    batch: Any,
    rounds: int,
    turns: int = TURNS,
    settle: int = SETTLE_CALLS,
    quiet_ms: float = QUIET_MS,
) -> dict[str, float]:
    """Median milliseconds per ``mask_logits`` call, ``rounds`` timed calls an engine. The
    engines take turns in blocks (up to ``TURNS`` of them), so a change in the machine's load
    falls on all of them. Where several take turns, each block starts with a pause of
    ``quiet_ms``, in which the engine timed before goes quiet (ONNX Runtime's pool spins after
    its run, as served), then untimed calls, at least ``settle`` of them and SETTLE_MS
    together, in which the engine's own threads wake. One call each in turns timed every
    engine against the last one's still-busy threads: on amx ONNX Runtime FP32's lone call
    took 2.14 ms so against 1.15 alone, OpenVINO bf16's 2.11 against 1.40, which hid the
    batch-1 lead a split is made of (docs/PERFORMANCE.md, "The twenty-ninth session"). ONNX
    Runtime engines timed here are built by ``timed_onnx_engine``."""
    turns = min(turns, rounds)
    per_turn = math.ceil(rounds / turns)
    samples: dict[str, list[float]] = {key: [] for key in engines}
    for _ in range(turns):
        for key, engine in engines.items():
            if len(engines) > 1 and quiet_ms:
                time.sleep(quiet_ms / 1000)
            settled, calls = time.perf_counter() + SETTLE_MS / 1000, 0
            while calls < settle or time.perf_counter() < settled:
                engine.mask_logits(batch)
                calls += 1
            for _ in range(per_turn):
                started = time.perf_counter()
                engine.mask_logits(batch)
                samples[key].append(1000 * (time.perf_counter() - started))
    return {key: statistics.median(values) for key, values in samples.items()}
