"""A token bucket per client: ``rate_limit_per_minute`` forward rows a minute, refilled smoothly.

A request is let in while its client's bucket holds a token (``retry_after`` takes that one);
once the route has priced it (``Predictor.check_cost``), ``debit`` takes the rest of its cost,
which may leave the bucket in debt: a costly search is never refused for its size (the cost cap
does that), but its client waits for the refill before its next request. A plain text costs 1.

Each client (an API key's index, or the client address when keys are off) has a bucket that
holds up to one minute's allowance and refills at ``per_minute / 60`` tokens a second, so a
client may burst up to its minute's allowance and then goes at the steady rate. The buckets
live on the event loop (no lock) and at most ``max_clients`` are kept: the least recently seen
is forgotten first, which only ever gives a forgotten client a full bucket back.

>>> limiter = RateLimiter(per_minute=2, clock=lambda: 0.0)
>>> [limiter.retry_after("a"), limiter.retry_after("a"), limiter.retry_after("a")]
[0.0, 0.0, 30.0]
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

MAX_CLIENTS = 10_000


@dataclass
class Bucket:
    tokens: float
    updated_at: float


class RateLimiter:
    def __init__(
        self,
        per_minute: int,
        clock: Callable[[], float] = time.monotonic,
        max_clients: int = MAX_CLIENTS,
    ) -> None:
        if per_minute < 1:
            raise ValueError("per_minute must be at least 1")
        self.capacity = float(per_minute)
        self.refill_per_s = per_minute / 60.0
        self.clock = clock
        self.max_clients = max_clients
        self.buckets: OrderedDict[str, Bucket] = OrderedDict()

    def retry_after(self, client: str) -> float:
        """Take one token for ``client``: 0.0 when allowed, else the seconds until one is due."""
        now = self.clock()
        bucket = self.buckets.pop(client, None) or Bucket(self.capacity, now)
        bucket.tokens = min(
            self.capacity, bucket.tokens + (now - bucket.updated_at) * self.refill_per_s
        )
        bucket.updated_at = now
        self.buckets[client] = bucket  # most recently seen last
        while len(self.buckets) > self.max_clients:
            self.buckets.popitem(last=False)
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / self.refill_per_s

    def credit(self, client: str, amount: float) -> None:
        """Give back ``amount`` tokens ``debit`` took (a request refused before any work: its
        forward rows never ran), up to the bucket's capacity."""
        bucket = self.buckets.get(client)
        if bucket is not None and amount > 0:
            bucket.tokens = min(self.capacity, bucket.tokens + amount)

    def debit(self, client: str, amount: float) -> None:
        """Take ``amount`` more tokens from ``client``'s bucket, into debt if need be."""
        bucket = self.buckets.get(client)
        if bucket is not None and amount > 0:
            bucket.tokens -= amount
