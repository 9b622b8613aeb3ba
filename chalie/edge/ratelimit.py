"""A token bucket per REST credential (server.rest_rate_per_min).

Each key (a login cookie's hash, an interface token's hash, or a client address) has a bucket
that holds up to `rate_per_min` requests and refills at `rate_per_min` a minute, so a client
may burst a minute's worth and then keeps to the rate. The rate is passed on every call, so a
reloaded config takes effect at once. At most `max_keys` buckets are kept, dropping the least
recently used: a flood of new keys costs bounded memory and only forgets old buckets (full
ones, for any key idle a minute). Used from the IOLoop only: no lock.

A credential is counted before it is checked, so a client could make up a new one for every
request; requests whose credential turns out wrong (401) are therefore also counted against
their address (`spend`), and an address out of those is refused before anything is read
(`wait`): guessing is slowed, and a good credential from another address is untouched.
"""

from __future__ import annotations

from chalie.clock import Clock

MAX_KEYS = 10_000


class RestRateLimit:
    def __init__(self, clock: Clock, *, max_keys: int = MAX_KEYS) -> None:
        self._clock = clock
        self._max_keys = max_keys
        self._buckets: dict[str, tuple[float, float]] = {}  # key: (tokens, monotonic at)

    def take(self, key: str, rate_per_min: int) -> float | None:
        """Spend one request of `key`'s: None when it may go now, else the seconds until it
        may (nothing is spent then). A rate of 0 or less means no limit."""
        if rate_per_min <= 0:
            return None
        now = self._clock.monotonic()
        capacity = float(rate_per_min)
        tokens, at = self._buckets.pop(key, (capacity, now))
        tokens = min(capacity, tokens + max(0.0, now - at) * capacity / 60.0)
        wait: float | None = None
        if tokens >= 1.0:
            tokens -= 1.0
        else:
            wait = (1.0 - tokens) * 60.0 / capacity
        self._buckets[key] = (tokens, now)  # most recently used last
        while len(self._buckets) > self._max_keys:
            del self._buckets[next(iter(self._buckets))]
        return wait

    def wait(self, key: str, rate_per_min: int) -> float | None:
        """The seconds until `key` may send again, or None when it may now; spends nothing."""
        if rate_per_min <= 0 or key not in self._buckets:
            return None
        tokens, at = self._buckets[key]
        tokens = min(float(rate_per_min),
                     tokens + max(0.0, self._clock.monotonic() - at) * rate_per_min / 60.0)
        return None if tokens >= 1.0 else (1.0 - tokens) * 60.0 / rate_per_min

    def spend(self, key: str, rate_per_min: int) -> None:
        """Count one request against `key`, whether or not its bucket had room."""
        if self.take(key, rate_per_min) is not None:
            tokens, at = self._buckets[key]
            self._buckets[key] = (max(tokens - 1.0, -float(rate_per_min)), at)

    def __len__(self) -> int:
        return len(self._buckets)
