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
    warmup: bool = True
    # dynamic batching (server)
    batch_window_ms: float = 2.0  # how long a batch may wait for company once work is queued
    max_batch_size: int = 32
    max_batch_tokens: int = 4096  # padded tokens per engine call
    max_queue: int = 256  # queued requests before 503 + Retry-After
    request_timeout_s: float = 30.0
    drain_timeout_s: float = 10.0  # graceful shutdown budget for in-flight requests
    client_timeout_s: float = 10.0  # a client's time to send a request's head, and its body
    # caches
    result_cache_size: int = 1024
    token_cache_size: int = 4096
    # ONNX export
    onnx_cache_dir: str | None = None  # default: the user cache dir
    int8_min_agreement: float = 0.98  # the INT8 guard: least top-1 agreement with FP32
    # security
    api_keys: tuple[str, ...] = ()
    api_keys_file: str | None = None
    cors_origins: tuple[str, ...] = ()
    rate_limit_per_minute: int = 0  # per API key (or client address); 0 = off

    def with_overrides(self, **changes: Any) -> Settings:
        """A copy with the non-None values of ``changes`` applied."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})
