"""A deterministic engine for tests: logits depend only on the context, no model needed."""

from __future__ import annotations

import numpy as np

from tiankong.engines.base import EncodedBatch

CALLS_KEPT = 10_000


class FakeEngine:
    """Scores favour token ``(sum of the row's ids + mask index) % vocab``; can be told to fail.

    ``fail_token_id``: a batch holding that token raises (an engine fault). ``nan_token_id``:
    the masks of a row holding that token score NaN (a model broken on some texts).
    """

    name = "fake"
    device = "cpu"
    precision = "fp32"
    device_reason: str | None = None

    def __init__(
        self, vocab_size: int, fail_token_id: int | None = None, nan_token_id: int | None = None
    ) -> None:
        self.vocab_size = vocab_size
        self.fail_token_id = fail_token_id
        self.nan_token_id = nan_token_id
        self.calls: list[int] = []  # batch sizes seen (the latest CALLS_KEPT), for tests

    def mask_logits(self, batch: EncodedBatch) -> np.ndarray:
        self.calls.append(int(batch.input_ids.shape[0]))
        if len(self.calls) > 2 * CALLS_KEPT:  # a long-running fake server must not grow
            del self.calls[:-CALLS_KEPT]
        if self.fail_token_id is not None and (batch.input_ids == self.fail_token_id).any():
            raise RuntimeError("fake engine failure")
        seq_len = batch.input_ids.shape[1]
        logits = np.zeros((len(batch.mask_positions), self.vocab_size), dtype=np.float32)
        for index, flat in enumerate(batch.mask_positions):
            row = batch.input_ids[flat // seq_len]
            favourite = (int(row.sum()) + int(flat % seq_len)) % self.vocab_size
            logits[index, favourite] = 8.0
            logits[index, (favourite + 1) % self.vocab_size] = 6.0
            logits[index, (favourite + 2) % self.vocab_size] = 4.0
            if self.nan_token_id is not None and (row == self.nan_token_id).any():
                logits[index, favourite] = np.nan
        return logits
