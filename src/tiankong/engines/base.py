"""The narrow engine interface: a padded batch in, logits at the mask positions out.

Engines know nothing about HTTP, queues or JSON. ``pad_batch`` is the only place that builds
the arrays they consume.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from tiankong.host import usable_cpus

if TYPE_CHECKING:
    from tiankong.core.text import PreparedText


@dataclass(frozen=True)
class EncodedBatch:
    """Token ids padded to the longest row, and the flat indices of the masks.

    ``mask_positions`` index into the flattened ``[batch * seq_len]`` hidden states, in row order
    and left to right within a row, so the engine's output rows line up with the masks.
    """

    input_ids: np.ndarray  # int64 [batch, seq_len]
    attention_mask: np.ndarray  # int64 [batch, seq_len]
    mask_positions: np.ndarray  # int64 [masks]

    @property
    def token_count(self) -> int:
        return int(self.input_ids.size)

    def feed(self, names: Sequence[str]) -> dict[str, np.ndarray]:
        """The arrays a graph takes, by its input ``names`` (a graph may leave one out)."""
        arrays = {
            "input_ids": self.input_ids,
            "attention_mask": self.attention_mask,
            "mask_positions": self.mask_positions,
        }
        return {name: arrays[name] for name in names}


def pad_batch(rows: list[list[int]], mask_indices: list[list[int]], pad_id: int) -> EncodedBatch:
    """Pad per batch (to the longest row, not to a fixed length)."""
    seq_len = max(len(row) for row in rows)
    input_ids = np.full((len(rows), seq_len), pad_id, dtype=np.int64)
    attention_mask = np.zeros((len(rows), seq_len), dtype=np.int64)
    positions: list[int] = []
    for row_index, (row, masks) in enumerate(zip(rows, mask_indices, strict=True)):
        input_ids[row_index, : len(row)] = row
        attention_mask[row_index, : len(row)] = 1
        positions.extend(row_index * seq_len + mask for mask in masks)
    return EncodedBatch(input_ids, attention_mask, np.asarray(positions, dtype=np.int64))


def engine_calls(
    rows: Sequence[Sequence[int]],
    asked: Sequence[Sequence[int]],
    max_rows: int,
    max_tokens: int,
    max_outputs: int,
    same_length: bool = False,
) -> list[tuple[int, int]]:
    """``rows`` cut, in order, into ``(start, end)`` slices, one engine call each: at most
    ``max_rows`` rows, ``max_tokens`` padded tokens (rows x the longest) and ``max_outputs``
    output rows (the asked positions, one logits row of the vocabulary each). A row over a
    limit on its own is a call alone. So one call's memory is bounded by the limits whatever
    asked for it: a proofreading window asks for every character's distribution.
    ``same_length``: rows of one call are all one length, never padded (a model whose mixing
    of tokens reads the padding: ``reads_padding``).

    >>> engine_calls([[1, 2, 3]] * 5, [[1, 2]] * 5, max_rows=4, max_tokens=9, max_outputs=5)
    [(0, 2), (2, 4), (4, 5)]
    """
    calls: list[tuple[int, int]] = []
    start, longest, outputs = 0, 0, 0
    for end, (row, wanted) in enumerate(zip(rows, asked, strict=True)):
        grown = max(longest, len(row))
        if end > start and (
            (same_length and len(row) != len(rows[start]))
            or end - start >= max_rows
            or (end - start + 1) * grown > max_tokens
            or outputs + len(wanted) > max_outputs
        ):
            calls.append((start, end))
            start, grown, outputs = end, len(row), 0
        longest, outputs = grown, outputs + len(wanted)
    if start < len(rows):
        calls.append((start, len(rows)))
    return calls


def pad_prepared(items: Sequence[PreparedText], pad_id: int) -> EncodedBatch:
    """``pad_batch`` of prepared texts: their token ids and mask indices."""
    return pad_batch([item.input_ids for item in items], [item.mask_indices for item in items],
                     pad_id)  # fmt: skip


class Engine(Protocol):
    """What every engine provides. ``mask_logits`` returns float32 ``[masks, vocab]``, a new
    array the caller owns (``FillMasker.score_rows`` takes the softmax in it)."""

    name: str  # "torch", "onnx", "fake"
    device: str  # "cpu", "cuda"
    precision: str  # "fp32", "int8", "fp16"
    device_reason: str | None  # why ``--device auto`` serves on the CPU; None when it wasn't asked

    def mask_logits(self, batch: EncodedBatch) -> np.ndarray: ...


def spinning_pays(threads: int) -> bool:
    """Whether the torch engine's OpenMP threads may spin-wait for work after each run, as GNU
    OpenMP does by default.

    Spinning saves a thread wake-up per run, but the spinning threads hold their cores. When
    the pool takes every core the process may use (``threads`` 0 means the library's pick:
    every core), they take them from the event loop that parses requests and fills the next
    batch, and from each other. On 2 busy cores, turning it off took the torch engine from
    0.68 s to 18 ms at c=1 (docs/PERFORMANCE.md, "The request path"). The rule is torch's
    only: ONNX Runtime keeps its default spinning (``build_session``; "Spinning" there).
    """
    return 0 < threads < usable_cpus()  # the affinity, within a container's CPU quota
