"""Background jobs that keep failing wait before they try again: per job and channel,
exponentially, on the injected Clock.

A job such as episode encoding is tried at every chance it gets, and for the encoder that is the
person's next turn. A light model that cannot write the episode JSON would then cost two calls a
turn for good, on the CPU the person's model may share. So after the n-th failure in a row the
job waits `initial_s * 2 ** (n - 1)` seconds, at most `max_s` (governor.failure_backoff_s and
governor.failure_backoff_max_s); meanwhile its attempts are skipped (and counted), and its first
success ends the wait. The log says so once when a job starts backing off (a warning, with the
error) and once when it recovers; the failures in between are debug lines. `describe` lists the
jobs backing off for GET /health and the dashboard.

The owner of a job (an actor) reports its failures and successes; /health reads from the edge's
thread, so the state is behind a lock.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import structlog

from chalie.clock import Clock
from chalie.metrics import Metrics

log = structlog.get_logger("chalie.backoff")

MAX_DOUBLINGS = 40  # 2 ** 40 times any initial wait is past any sensible max_s


@dataclass(frozen=True)
class Failing:
    """A job of a channel that is backing off. Times are the Clock's `time()` (epoch seconds)."""

    job: str
    channel: str
    failures: int  # in a row
    retry_at: float
    error: str  # for a person: "the light model cannot write the episode JSON: ..."
    since: float

    def as_json(self) -> dict[str, Any]:
        return {"job": self.job, "channel": self.channel, "state": "backing_off",
                "failures": self.failures, "retry_at": round(self.retry_at, 3),
                "since": round(self.since, 3), "error": self.error}


def delay_after(failures: int, initial_s: float, max_s: float) -> float:
    """Seconds to wait after `failures` failures in a row (1, 2, ...)."""
    return min(max_s, initial_s * 2.0 ** min(max(failures - 1, 0), MAX_DOUBLINGS))


class Backoff:
    def __init__(self, clock: Clock, *, initial_s: float, max_s: float,
                 metrics: Metrics | None = None) -> None:
        self._clock = clock
        self.initial_s = initial_s
        self.max_s = max_s
        self._metrics = metrics
        self._lock = threading.Lock()
        self._failing: dict[tuple[str, str], Failing] = {}

    def allows(self, job: str, channel: str) -> bool:
        """Whether `job` may try now for `channel`; a refusal is counted as a skipped attempt."""
        with self._lock:
            failing = self._failing.get((job, channel))
        if failing is None or self._clock.time() >= failing.retry_at:
            return True
        if self._metrics is not None:
            self._metrics.background_skipped.labels(job=job).inc()
        log.debug("background_attempt_skipped", job=job, channel=channel,
                  retry_in_s=round(failing.retry_at - self._clock.time(), 3))
        return False

    def failing(self, job: str, channel: str) -> Failing | None:
        with self._lock:
            return self._failing.get((job, channel))

    def failed(self, job: str, channel: str, error: str) -> Failing:
        """One more failure in a row: the job waits longer. Returns when it may try again."""
        now = self._clock.time()
        with self._lock:
            before = self._failing.get((job, channel))
            failures = 1 if before is None else before.failures + 1
            delay = delay_after(failures, self.initial_s, self.max_s)
            failing = Failing(job, channel, failures, now + delay, error,
                              now if before is None else before.since)
            self._failing[(job, channel)] = failing
            self._gauge(job)
        if before is None:
            log.warning("background_backoff", job=job, channel=channel, error=error,
                        retry_in_s=delay)
        else:
            log.debug("background_backoff_longer", job=job, channel=channel, error=error,
                      failures=failures, retry_in_s=delay)
        return failing

    def succeeded(self, job: str, channel: str) -> None:
        """The job worked: no more waiting, and the log says it recovered (once)."""
        with self._lock:
            before = self._failing.pop((job, channel), None)
            if before is not None:
                self._gauge(job)
        if before is not None:
            log.info("background_recovered", job=job, channel=channel,
                     failures=before.failures,
                     after_s=round(self._clock.time() - before.since, 3))

    def describe(self) -> list[dict[str, Any]]:
        """The jobs backing off, for /health: oldest first."""
        with self._lock:
            failing = sorted(self._failing.values(), key=lambda f: (f.since, f.job, f.channel))
        return [f.as_json() for f in failing]

    def _gauge(self, job: str) -> None:
        """Under the lock: how many channels of `job` back off, in the metric."""
        if self._metrics is not None:
            count = sum(1 for (j, _) in self._failing if j == job)
            self._metrics.background_backoff.labels(job=job).set(count)
