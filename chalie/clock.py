"""Time as a seam: everything that times out, backs off or stamps reads a Clock.

SystemClock is the real one. Tests use ManualClock and move time by hand, so nothing in a test
sleeps on the wall clock to see a timer fire.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes back; for durations and deadlines."""
        ...

    def time(self) -> float:
        """Seconds since the epoch; for timestamps that are stored."""
        ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        """Run `callback` on some thread after `delay` seconds, unless cancelled first."""
        ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        timer = threading.Timer(max(0.0, delay), callback)
        timer.daemon = True
        timer.start()
        return timer


class _ManualTimer:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock that moves only when `advance` is called; due callbacks run inside `advance`."""

    def __init__(self, start: float = 1_000.0, wall: float = 1_700_000_000.0) -> None:
        self._now = start
        self._wall_offset = wall - start
        self._lock = threading.Lock()
        self._due: list[tuple[float, int, _ManualTimer, Callable[[], None]]] = []
        self._order = itertools.count()

    def monotonic(self) -> float:
        with self._lock:
            return self._now

    def time(self) -> float:
        with self._lock:
            return self._now + self._wall_offset

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        timer = _ManualTimer()
        with self._lock:
            heapq.heappush(self._due, (self._now + delay, next(self._order), timer, callback))
        return timer

    def pending(self) -> int:
        with self._lock:
            return sum(1 for _, _, t, _ in self._due if not t.cancelled)

    def advance(self, seconds: float) -> None:
        with self._lock:
            target = self._now + seconds
        while True:
            with self._lock:
                if not self._due or self._due[0][0] > target:
                    self._now = target
                    return
                when, _, timer, callback = heapq.heappop(self._due)
                self._now = max(self._now, when)
            if not timer.cancelled:
                callback()
