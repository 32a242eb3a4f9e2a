"""`tiankong` CLI with the fake engine slowed down: `python tests/slow_serve.py serve ...`.

The real `tiankong serve` code path (flags, runner, drain, signals), with every FakeEngine call
sleeping ``TIANKONG_TEST_ENGINE_DELAY_S`` seconds, so a test can hold a request in flight.
"""

from __future__ import annotations

import os
import time

import numpy as np

from tiankong.cli import main
from tiankong.engines.base import EncodedBatch
from tiankong.engines.fake import FakeEngine

DELAY_S = float(os.environ.get("TIANKONG_TEST_ENGINE_DELAY_S", "0"))
fast_mask_logits = FakeEngine.mask_logits


def slow_mask_logits(self: FakeEngine, batch: EncodedBatch) -> np.ndarray:
    time.sleep(DELAY_S)
    return fast_mask_logits(self, batch)


if __name__ == "__main__":
    FakeEngine.mask_logits = slow_mask_logits  # type: ignore[method-assign]
    main()
