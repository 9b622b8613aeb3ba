"""Time as a seam: everything that times out, backs off or stamps reads a Clock.

SystemClock is the real one. Tests use ManualClock and move time by hand, so nothing in a test
sleeps on the wall clock to see a timer fire.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

PURGE_AT_LEAST = 64  # cancelled heap entries before a purge is worth it


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

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        """Run `callback` once the wall clock (`time()`) reaches `when` (at once if it has)."""
        ...


class _Timer:
    __slots__ = ("_on_cancel", "cancelled")

    def __init__(self, on_cancel: Callable[[], None] | None = None) -> None:
        self.cancelled = False
        self._on_cancel = on_cancel

    def cancel(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            if self._on_cancel is not None:
                self._on_cancel()


class SystemClock:
    """The real clock. Its timers share one daemon thread (a heap of due times), so a thousand
    turns in flight cost a thousand heap entries, not a thousand threads. Callbacks run on that
    thread and must be quick: they tell an actor and return.

    Most timers are cancelled long before they are due (a turn's deadline, the DMN's idle
    timer, a channel's silence gap), and a cancelled entry would stay in the heap, holding its
    callback and what that refers to, until its due time, an hour away for some: once cancelled
    entries are more than half the heap, it is rebuilt without them, as asyncio does."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, _Timer, Callable[[], None]]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._cancelled = 0  # cancelled entries still in the heap

    def pending(self) -> int:
        """Entries in the heap, cancelled ones included (they are dropped in bulk)."""
        with self._wake:
            return len(self._due)

    def _one_cancelled(self) -> None:
        with self._wake:
            self._cancelled += 1
            if self._cancelled >= PURGE_AT_LEAST and self._cancelled * 2 > len(self._due):
                self._due = [entry for entry in self._due if not entry[2].cancelled]
                heapq.heapify(self._due)
                self._cancelled = 0

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        timer = _Timer(self._one_cancelled)
        entry = (time.monotonic() + max(0.0, delay), next(self._order), timer, callback)
        with self._wake:
            heapq.heappush(self._due, entry)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="chalie-timers",
                                                daemon=True)
                self._thread.start()
            if self._due[0] is entry:  # due before everything else: the thread must wake sooner
                self._wake.notify()
        return timer

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        return self.call_later(when - time.time(), callback)

    def _run(self) -> None:
        while True:
            with self._wake:
                while True:
                    while self._due and self._due[0][2].cancelled:
                        heapq.heappop(self._due)
                        self._cancelled -= 1
                    if self._due and self._due[0][0] <= time.monotonic():
                        _, _, timer, callback = heapq.heappop(self._due)
                        timer._on_cancel = None  # out of the heap: a late cancel counts nothing
                        break
                    self._wake.wait(self._due[0][0] - time.monotonic() if self._due else None)
            if not timer.cancelled:
                try:
                    callback()
                except Exception:  # a failing callback must not stop every other timer
                    logging.getLogger("chalie.clock").exception("timer_callback_failed")


class ManualClock:
    """A clock that moves only when `advance` is called; due callbacks run inside `advance`."""

    def __init__(self, start: float = 1_000.0, wall: float = 1_700_000_000.0) -> None:
        self._now = start
        self._wall_offset = wall - start
        self._lock = threading.Lock()
        self._due: list[tuple[float, int, _Timer, Callable[[], None]]] = []
        self._order = itertools.count()

    def monotonic(self) -> float:
        with self._lock:
            return self._now

    def time(self) -> float:
        with self._lock:
            return self._now + self._wall_offset

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        timer = _Timer()
        with self._lock:
            heapq.heappush(self._due, (self._now + delay, next(self._order), timer, callback))
        return timer

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        """Due when time() reaches `when`: no race with a concurrent advance()."""
        timer = _Timer()
        with self._lock:
            due = max(self._now, when - self._wall_offset)
            heapq.heappush(self._due, (due, next(self._order), timer, callback))
        return timer

    def pending(self) -> int:
        with self._lock:
            return sum(1 for _, _, t, _ in self._due if not t.cancelled)

    def next_due(self) -> float | None:
        """The monotonic time of the earliest timer not cancelled, or None."""
        with self._lock:
            return min((when for when, _, t, _ in self._due if not t.cancelled), default=None)

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
