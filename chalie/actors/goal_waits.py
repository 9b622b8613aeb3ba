"""A Goal's waits (chalie/actors/goal.py), on the injected Clock: until it goes on (a retry's
backoff, or its path's budget freeing room: Resume) and, while it is paused, until it expires
(`goals.expire_days` after its pause began: ExpiryDue). Each is a message in the Goal's mailbox.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from chalie.clock import Clock, Timer
from chalie.store import goal_rows
from chalie.store.goal_rows import GoalRow

DAY_S = 86_400.0
NEVER = float("inf")


class Resume(msgspec.Struct, frozen=True, tag=True):
    """A retry's wait, or a budget pause, is over."""


class ExpiryDue(msgspec.Struct, frozen=True, tag=True):
    """The goal has been paused for `goals.expire_days`."""


class Waits:
    def __init__(self, clock: Clock, tell: Callable[[Any], None], *,
                 expire_days: float) -> None:
        self._clock = clock
        self._tell = tell
        self._expire_s = expire_days * DAY_S
        self._waiting = False  # for a Resume (none comes, for a wait until NEVER)
        self._resume: Timer | None = None
        self._expiry: tuple[float, Timer] | None = None

    @property
    def waiting(self) -> bool:
        """The goal waits for a Resume (that never comes, for a wait until NEVER)."""
        return self._waiting

    def resume_at(self, when: float) -> None:
        """Resume once the wall clock reaches `when` (never, for NEVER)."""
        self._stop_resume()
        self._waiting = True
        if when != NEVER:
            self._resume = self._clock.call_at(when, lambda: self._tell(Resume()))

    def resumed(self) -> None:
        """The Resume came."""
        self._waiting = False
        self._resume = None

    def expires_at(self, row: GoalRow | None) -> float:
        """When the goal, paused, expires; NEVER when it is not paused (or is over)."""
        if row is None or row.paused_at is None or row.state not in goal_rows.ACTIVE:
            return NEVER
        return row.paused_at + self._expire_s

    def expired(self, row: GoalRow | None) -> bool:
        return self.expires_at(row) <= self._clock.time()

    def watch_expiry(self, row: GoalRow | None) -> None:
        """ExpiryDue when the goal as `row` says it is expires (none, when it is not paused)."""
        at = self.expires_at(row)
        if self._expiry is not None and self._expiry[0] == at:
            return
        self._stop_expiry()
        if at != NEVER:
            self._expiry = (at, self._clock.call_at(at, lambda: self._tell(ExpiryDue())))

    def expiry_came(self) -> None:
        """The ExpiryDue came."""
        self._expiry = None

    def cancel(self) -> None:
        self._stop_resume()
        self._stop_expiry()

    def _stop_resume(self) -> None:
        if self._resume is not None:
            self._resume.cancel()
        self._waiting = False
        self._resume = None

    def _stop_expiry(self) -> None:
        if self._expiry is not None:
            self._expiry[1].cancel()
            self._expiry = None
