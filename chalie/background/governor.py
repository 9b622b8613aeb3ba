"""The spending governor: a daily token budget per background path, over a rolling 24 hours.

Every LLM call is charged to its path as it returns (`charge`). A governed path (dmn,
scheduled, goal, encoder) whose last 24 hours of tokens reached its budget has no room until
the oldest of those calls is 24 hours old and frees enough; `frees_at` says when. The user path
is counted, for metrics and the dashboard, but never governed. A budget of 0 turns a path off.
Calls are kept a minute at a time (a day is at most 1,440 entries a path, however busy), so
room frees up to a minute late, never early.

What was spent is read back from the store at start (turns and the spending rows of background
jobs that are not turns), so a restart does not reset a budget. Thread-safe: workers charge,
actors ask for room.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Literal

import structlog

from chalie.clock import Clock
from chalie.metrics import Metrics

log = structlog.get_logger("chalie.governor")

Path = Literal["user", "dmn", "scheduled", "goal", "encoder"]
GOVERNED: tuple[Path, ...] = ("dmn", "scheduled", "goal", "encoder")
PATHS: tuple[Path, ...] = ("user", *GOVERNED)
WINDOW_S = 86_400.0
BUCKET_S = 60.0  # calls within one minute are kept as one entry (at the latest's time)
STORE_RETRY_S = 5.0  # a path paused because the store cannot take writes tries again then


class Governor:
    def __init__(self, budgets: Mapping[str, int], clock: Clock, metrics: Metrics,
                 spent: Iterable[tuple[str, float, int]] = (),
                 store_writable: Callable[[], bool] | None = None) -> None:
        """`budgets`: tokens per rolling day of each governed path; `spent`: (path, at, tokens)
        of calls already made (wall-clock `at`), as stored; `store_writable`: whether the store
        takes writes (chalie/store/health.py): while it does not, no governed path has room,
        so none spends tokens on work it could not store, and each tries again STORE_RETRY_S
        later."""
        self._store_writable = store_writable
        self._store_paused: set[str] = set()
        self._budgets: dict[str, int] = {p: int(budgets[p]) for p in GOVERNED}
        self._clock = clock
        self._metrics = metrics
        self._lock = threading.Lock()
        # Per path, oldest first: [time of the latest call, tokens] of each minute with calls:
        # a day is at most 1,440 entries however busy the path is.
        self._calls: dict[str, deque[list[float]]] = {p: deque() for p in PATHS}
        self._used: dict[str, int] = dict.fromkeys(PATHS, 0)
        horizon = clock.time() - WINDOW_S
        for path, at, tokens in sorted(spent, key=lambda s: s[1]):
            if path in self._calls and at > horizon and tokens > 0:
                self._add(path, at, tokens)
        # A budget of 0 turns the path off: paused from the start, never "exhausted".
        self._paused: set[str] = {p for p in GOVERNED if self._budgets[p] == 0}
        for path in GOVERNED:
            metrics.budget_tokens.labels(path=path).set(self._budgets[path])
            metrics.budget_used.labels(path=path).set(self._used[path])
            metrics.budget_paused.labels(path=path).set(int(path in self._paused))
            metrics.budget_pauses.labels(path=path)  # at 0 from the start, not from a pause

    def set_budgets(self, budgets: Mapping[str, int]) -> None:
        """New tokens per rolling day (a config reload); what was spent still counts. A path
        set to 0 is paused at once; one given room is resumed by its next `has_room`."""
        with self._lock:
            self._budgets = {p: int(budgets[p]) for p in GOVERNED}
            off = {p for p in GOVERNED if self._budgets[p] == 0}
            self._paused |= off
        for path in GOVERNED:
            self._metrics.budget_tokens.labels(path=path).set(self._budgets[path])
            if path in off:
                self._metrics.budget_paused.labels(path=path).set(1)

    def budget(self, path: str) -> int | None:
        """The path's tokens per day; None for a path that is not governed (the user's)."""
        return self._budgets.get(path)

    def charge(self, path: str, tokens: int) -> None:
        """One call of `path` used `tokens` (prompt and completion)."""
        if tokens <= 0 or path not in self._calls:
            return
        now = self._clock.time()
        with self._lock:
            self._add(path, now, tokens)
            used = self._expire(path, now)
        if path in self._budgets:
            self._metrics.budget_used.labels(path=path).set(used)

    def has_room(self, path: str) -> bool:
        """False while a governed path's last 24 hours used its budget. The first refusal of a
        run of them is logged and counted as a pause."""
        budget = self._budgets.get(path)
        if budget is None:
            return True
        if not self._store_room(path):
            return False
        now = self._clock.time()
        with self._lock:
            used = self._expire(path, now)
            room = used < budget
            newly_paused = not room and path not in self._paused
            resumed = room and path in self._paused
            if newly_paused:
                self._paused.add(path)
            elif resumed:
                self._paused.discard(path)
            frees = self._frees_at(path, now) if newly_paused else None
        self._metrics.budget_used.labels(path=path).set(used)
        if newly_paused:
            self._metrics.budget_paused.labels(path=path).set(1)
            self._metrics.budget_pauses.labels(path=path).inc()
            log.warning("budget_exhausted", path=path, used=used, budget=budget,
                        frees_in_s=None if frees is None else round(frees - now, 1))
        elif resumed:
            self._metrics.budget_paused.labels(path=path).set(0)
            log.info("budget_room_again", path=path, used=used, budget=budget)
        return room

    def _store_room(self, path: str) -> bool:
        """False while the store cannot take writes; the first refusal of a run is logged."""
        writable = self._store_writable is None or self._store_writable()
        with self._lock:
            changed = (path in self._store_paused) == writable
            (self._store_paused.discard if writable else self._store_paused.add)(path)
        if changed:
            (log.info if writable else log.warning)(
                "background_resumed" if writable else "background_paused", path=path,
                reason="the store takes writes again" if writable
                else "the store cannot take writes")
        return writable

    def frees_at(self, path: str) -> float:
        """Wall-clock time at which a paused path has room again (now if it has room; infinity
        for a budget of 0; STORE_RETRY_S from now while the store cannot take writes)."""
        now = self._clock.time()
        if path in self._store_paused:
            return now + STORE_RETRY_S
        with self._lock:
            self._expire(path, now)
            return self._frees_at(path, now)

    def used(self, path: str) -> int:
        now = self._clock.time()
        with self._lock:
            return self._expire(path, now)

    def report(self) -> dict[str, dict[str, object]]:
        """Each path's tokens in the last 24 hours, its budget and, when paused, when it frees."""
        out: dict[str, dict[str, object]] = {}
        for path in PATHS:
            budget = self._budgets.get(path)
            used = self.used(path)
            paused = budget is not None and used >= budget
            out[path] = {"tokens_24h": used, "tokens_per_day": budget, "paused": paused,
                         "frees_at": self.frees_at(path) if paused else None}
        return out

    # -- under the lock --

    def _add(self, path: str, at: float, tokens: int) -> None:
        calls = self._calls[path]
        if calls and at // BUCKET_S == calls[-1][0] // BUCKET_S:
            calls[-1][0] = max(at, calls[-1][0])
            calls[-1][1] += tokens
        else:
            calls.append([at, tokens])
        self._used[path] += tokens

    def _expire(self, path: str, now: float) -> int:
        calls = self._calls[path]
        horizon = now - WINDOW_S
        while calls and calls[0][0] <= horizon:
            self._used[path] -= int(calls.popleft()[1])
        return self._used[path]

    def _frees_at(self, path: str, now: float) -> float:
        budget = self._budgets.get(path)
        if budget is None or self._used[path] < budget:
            return now
        if budget == 0:
            return float("inf")
        used = self._used[path]
        for at, tokens in self._calls[path]:
            used -= int(tokens)
            if used < budget:
                return at + WINDOW_S
        return now  # not reached: the calls add up to `used`
