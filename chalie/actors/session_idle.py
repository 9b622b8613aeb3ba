"""When a Session has had nothing to do for server.session_idle_s, it offers to stop.

Idle means nothing running, being stored, queued or checked (Session._is_idle); the time
counts from when the Session last became idle, so a message that leaves it idle (a stale
reply, a retried client_id the store answers) does not put the stop off. One timer per Session
at most, armed when it goes idle and checked when it fires (no timer per message). When it
fires the Session checks itself (IdleCheck, in its mailbox) and, still idle, tells its
supervisor SessionIdle. The supervisor tells it StopIfIdle, holding the channel's messages until
its IdleAnswer, and on stop=True forgets and stops it; the channel's next message starts a new
Session from the store. That closes the race with a message on its way: only the supervisor
delivers to a Session, and anything it delivered before StopIfIdle is handled first, so the
Session answers stop=False when that made it busy (or just active).
"""

from __future__ import annotations

from collections.abc import Callable

from chalie.clock import Clock, Timer

EPSILON_S = 1e-6  # float slack between a timer's due time and the moment it fires


class IdleWatch:
    def __init__(self, clock: Clock, idle_s: float, *, check: Callable[[], None]) -> None:
        """`idle_s` 0 turns it off; `check` puts an IdleCheck in the Session's mailbox."""
        self._clock = clock
        self._idle_s = idle_s
        self._check = check
        self._idle_since: float | None = None
        self._timer: Timer | None = None

    def active(self, idle_now: bool) -> None:
        """A message was handled; `idle_now`: the Session has nothing to do after it."""
        if not idle_now:
            self._idle_since = None
            return
        if self._idle_since is None:
            self._idle_since = self._clock.monotonic()
        if self._timer is None and self._idle_s > 0:
            self._arm(self._idle_s)

    def fired(self, idle_now: bool) -> bool:
        """The timer's IdleCheck: True when the Session has been idle for idle_s (it tells
        the supervisor, and the timer is armed again in case the supervisor does not stop it).
        Busy, the timer waits to be armed when it is idle again."""
        self._timer = None
        if not idle_now or self._idle_since is None or self._idle_s <= 0:
            return False
        left = self._idle_since + self._idle_s - self._clock.monotonic()
        self._arm(left if left > EPSILON_S else self._idle_s)
        return left <= EPSILON_S

    def may_stop(self, idle_now: bool) -> bool:
        """The supervisor's StopIfIdle: True (and no timer any more) when the Session is still
        idle, as it has been since before it said so."""
        since = self._idle_since
        if not idle_now or since is None or \
                self._clock.monotonic() - since < self._idle_s - EPSILON_S:
            return False
        self.cancel()
        return True

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self, delay: float) -> None:
        self._timer = self._clock.call_later(delay, self._check)
