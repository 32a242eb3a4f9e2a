"""One frozen Settings object. Defaults live here; every CLI flag has a TIANKONG_* env twin.

The CLI reads flags and their env twins (typer ``envvar=``) and builds ``Settings`` once; the
library and the server only ever receive a ``Settings`` instance, never read the environment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any

ENV_PREFIX = "TIANKONG_"


def physical_cores() -> int:
    """Intra-op threads default to physical cores: hyper-threads only add contention."""
    try:
        import psutil

        return psutil.cpu_count(logical=False) or os.cpu_count() or 1
    except ImportError:  # psutil is optional for the bare library
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Settings:
    # model and engine
    model: str | None = None  # None = the bundled default model
    engine: str = "auto"  # auto | torch | onnx | fake
    precision: str = "auto"  # auto | fp32 | int8 | fp16
    device: str = "auto"  # auto | cpu | cuda
    threads: int = field(default_factory=physical_cores)
    # input limits
    max_masks: int = 16
    max_length: int = 128  # tokens in the window, [CLS] and [SEP] included
    max_text_chars: int = 10_000
    default_top_k: int = 5
    max_top_k: int = 50
    # server
    host: str = "127.0.0.1"
    port: int = 8000
    max_batch_texts: int = 64
    max_body_bytes: int = 1_000_000
    log_level: str = "info"

    def with_overrides(self, **changes: Any) -> Settings:
        """A copy with the non-None values of ``changes`` applied."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})
