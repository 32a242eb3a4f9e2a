"""LRU caches for the server: tokenization by raw text, and whole results of repeated requests.

>>> cache = LRUCache[str, int]("demo", maxsize=2)
>>> cache.get_or_compute("a", lambda: 1), cache.get_or_compute("a", lambda: 2)
(1, 1)
>>> cache.hits, cache.misses
(1, 1)

Values are shared between the requests that hit them, so they must be immutable: ``PreparedText``
and ``FillResult`` are frozen dataclasses, and the lists inside them are never mutated after
they are made (nothing in tiankong does; keep it that way).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from tiankong.core.results import FillResult

KeyT = TypeVar("KeyT", bound=Hashable)
ValueT = TypeVar("ValueT")

CacheObserver = Callable[[str, bool], None]  # (cache name, hit)

# The caches count entries, so what one entry holds is bounded too: 4,096 texts of 10,000
# characters took a server from 400 to 964 MB, and 1,024 results of 16 masks at top-k 50 to
# 875 MB (a review). A longer text or a larger result is answered, not kept: a repeat of one
# is rare, and its answer costs far more than the lookup saves.
CACHED_TEXT_CHARS = 1_000
CACHED_CANDIDATES = 100  # the candidates, whole fills and options of one result


class LRUCache(Generic[KeyT, ValueT]):
    """A thread-safe least-recently-used map with hit and miss counts; ``maxsize=0`` is off
    (every lookup computes, nothing is stored or counted)."""

    def __init__(
        self,
        name: str,
        maxsize: int,
        observer: CacheObserver | None = None,
        admit: Callable[[KeyT, ValueT], bool] | None = None,
    ) -> None:
        if maxsize < 0:
            raise ValueError(f"cache size must be 0 (off) or more; got {maxsize}")
        self.name = name
        self.maxsize = maxsize
        self.admit = admit  # whether an entry is kept (``small_text``, ``small_result``)
        self.observer = observer
        self.entries: OrderedDict[KeyT, ValueT] = OrderedDict()
        self.lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def enabled(self) -> bool:
        return self.maxsize > 0

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, key: KeyT) -> ValueT | None:
        if not self.enabled:
            return None
        with self.lock:
            value = self.entries.get(key)
            if value is None:
                self.misses += 1
            else:
                self.entries.move_to_end(key)
                self.hits += 1
        if self.observer is not None:
            self.observer(self.name, value is not None)
        return value

    def put(self, key: KeyT, value: ValueT) -> None:
        if not self.enabled or (self.admit is not None and not self.admit(key, value)):
            return
        with self.lock:
            self.entries[key] = value
            self.entries.move_to_end(key)
            while len(self.entries) > self.maxsize:
                self.entries.popitem(last=False)

    def get_or_compute(self, key: KeyT, compute: Callable[[], ValueT]) -> ValueT:
        """The cached value, or ``compute()`` stored. An exception is raised, not cached.

        ``compute`` runs outside the lock: two threads missing the same key both compute it,
        which is cheaper than making every other lookup wait.
        """
        value = self.get(key)
        if value is None:
            value = compute()
            self.put(key, value)
        return value

    def stats(self) -> dict[str, int]:
        return {
            "size": self.maxsize,
            "entries": len(self.entries),
            "hits": self.hits,
            "misses": self.misses,
        }


@dataclass(frozen=True)
class PlainKey:
    """The options of a plain-mode request (``Predictor.run``): top-k and, for the Hugging Face
    route's ``targets``, the allowed token ids."""

    top_k: int
    allowed_ids: tuple[int, ...] | None = None
    use_index: bool = True  # the request's "index" (False: the model's own numbers)

    @classmethod
    def of(cls, top_k: int, allowed: np.ndarray | None, use_index: bool = True) -> PlainKey:
        ids = None if allowed is None else tuple(int(i) for i in np.flatnonzero(allowed))
        return cls(top_k, ids, use_index)


@dataclass(frozen=True)
class ResultKey:
    """Everything a result depends on: the model, the engine, the precision, the corpus index
    (which one the server uses; whether a request uses it is in its options), the text and
    every option (a ``PlainKey`` or a frozen ``PredictOptions``)."""

    model: str
    model_path: str
    engine: str
    precision: str
    text: str
    options: Hashable
    index: str = "none"


def small_text(text: str, _prepared: object) -> bool:
    """Whether the token cache keeps ``text``'s tokens (``CACHED_TEXT_CHARS``)."""
    return len(text) <= CACHED_TEXT_CHARS


def small_result(key: ResultKey, result: FillResult) -> bool:
    """Whether the result cache keeps ``result`` (``CACHED_TEXT_CHARS``, ``CACHED_CANDIDATES``)."""
    held = sum(map(len, result.masks)) + len(result.sequences) + len(result.candidates)
    return len(key.text) <= CACHED_TEXT_CHARS and held <= CACHED_CANDIDATES
