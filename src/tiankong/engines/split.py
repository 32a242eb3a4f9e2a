"""Two engines of one model, chosen by batch size: ``--precision auto``'s split, where the
fastest engine for a lone request is not the fastest for a full batch (``precision_choice``).

>>> from tiankong.engines.fake import FakeEngine
>>> engine = SplitEngine(FakeEngine(8), FakeEngine(8), rows=4)
>>> engine.name, engine.precision, engine.warm_up_rows
('fake', 'fp32', (1, 4))
>>> engine.served()
'fp32 (fake) for batches under 4 texts, fp32 (fake) from 4'
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tiankong.engines.base import EncodedBatch, Engine


class SplitEngine:
    """``lone`` serves batches of fewer than ``rows`` texts, ``batch`` the rest. One batch at a
    time, as for every engine: the two never run at once, so each keeps every core."""

    device = "cpu"
    device_reason: str | None = None

    def __init__(
        self, lone: Engine, batch: Engine, rows: int, quality: dict[str, Any] | None = None
    ) -> None:
        if rows < 2:
            raise ValueError(f"the split's rows must be 2 or more, not {rows}")
        self.lone, self.batch, self.rows = lone, batch, rows
        self.warm_up_rows = (1, rows)  # one batch for each engine (the server's warm-up)
        self.name = join(lone.name, batch.name)
        self.precision = join(lone.precision, batch.precision)
        self.quality: dict[str, Any] = quality or {}

    def mask_logits(self, batch: EncodedBatch) -> np.ndarray:
        engine = self.lone if batch.input_ids.shape[0] < self.rows else self.batch
        return engine.mask_logits(batch)

    def served(self) -> str:
        """Which engine serves which batches, as the startup lines say it."""
        return (
            f"{self.lone.precision} ({self.lone.name}) for batches under {self.rows} texts, "
            f"{self.batch.precision} ({self.batch.name}) from {self.rows}"
        )


def served_text(engine: Engine) -> str:
    """What an engine serves, for the INT8 guard's startup line: its precision, or a split's
    engines and the batches each serves (the guard's figures are one of the two's)."""
    return engine.served() if isinstance(engine, SplitEngine) else engine.precision


def join(lone: str, batch: str) -> str:
    """One name for both: ``int8`` when they agree, else ``int8+bf16`` (lone first)."""
    return lone if lone == batch else f"{lone}+{batch}"


def served_by(choice: dict[str, Any]) -> tuple[str, str]:
    """The engine name and precision that a measured choice (``PrecisionChoice.describe``)
    serves under: its own, or its split's and its own joined."""
    lone = choice.get("split") or choice
    return join(lone["engine"], choice["engine"]), join(lone["precision"], choice["precision"])
