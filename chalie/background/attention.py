"""Attention is sacred: quiet hours, the daily cap, and what becomes of a proactive message.

A proactive message (a DMN thought, a goal's result, a reminder Chalie set itself) is sent at
once, deferred, or suppressed:
- over the cap (`dmn.daily_cap` messages per rolling 24 hours, counting every message composed
  in that time that was not suppressed: sent, waiting, or dropped after waiting too long) it
  is suppressed;
- in quiet hours (`dmn.quiet_hours` in `dmn.timezone`) it waits in the durable deferred queue,
  delivered when quiet hours end or when the person next connects, whichever is first;
- otherwise it is sent.
Scheduled prompts the person asked for are neither capped nor deferred: they are sent on time.
A zone that cannot be resolved makes every hour quiet (start-up logs why): nothing interrupts
the person at a time that may be the middle of their night; messages wait for them to connect.

Thread-safe: the DMN and every Goal actor decide through one Attention.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from pathlib import Path
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from chalie.clock import Clock

WINDOW_S = 86_400.0
_ZONEINFO_DIRS = ("/usr/share/zoneinfo/", "/usr/lib/zoneinfo/", "/usr/share/lib/zoneinfo/")

Status = Literal["sent", "deferred", "suppressed"]


def resolve_zone(name: str) -> tuple[ZoneInfo | None, str]:
    """The zone `name` names ("local": the machine's own), and a line saying what was used or
    why nothing could be."""
    if name == "local":
        return _local_zone()
    try:
        return ZoneInfo(name), f"time zone {name}"
    except (ZoneInfoNotFoundError, ValueError, OSError) as e:  # OSError: a folder ("Europe")
        return None, f"time zone {name!r} cannot be resolved ({type(e).__name__}: {e})"


def _local_zone() -> tuple[ZoneInfo | None, str]:
    """The machine's zone: TZ when it names one, else where /etc/localtime points, else the
    file itself; UTC on a machine with none of those."""
    tz = os.environ.get("TZ", "").lstrip(":")
    if tz:
        try:
            return ZoneInfo(tz), f"local time zone {tz} (TZ)"
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass
    localtime = Path("/etc/localtime")
    try:
        target = str(localtime.resolve())
        for prefix in _ZONEINFO_DIRS:
            if target.startswith(prefix):
                key = target[len(prefix):]
                return ZoneInfo(key), f"local time zone {key} (/etc/localtime)"
        with localtime.open("rb") as f:
            return ZoneInfo.from_file(f, key="localtime"), "local time zone (/etc/localtime)"
    except (OSError, ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC"), "local time zone unknown (no TZ, no /etc/localtime): using UTC"


@dataclass(frozen=True)
class QuietHours:
    """Quiet from `start` to `end` (minutes after midnight, local time in `zone`; the span may
    cross midnight). No span: never quiet. No zone: always quiet."""

    span: tuple[int, int] | None
    zone: ZoneInfo | None

    def is_quiet(self, ts: float) -> bool:
        if self.zone is None:
            return True
        if self.span is None or self.span[0] == self.span[1]:
            return False
        start, end = self.span
        local = datetime.fromtimestamp(ts, self.zone)
        minute = local.hour * 60 + local.minute
        return start <= minute < end if start < end else minute >= start or minute < end

    def ends_at(self, ts: float) -> float | None:
        """When the quiet period `ts` is in ends (wall-clock seconds); None when `ts` is not in
        quiet hours, or they never end (no zone)."""
        if self.zone is None or not self.is_quiet(ts):
            return None
        assert self.span is not None
        end = self.span[1]
        local = datetime.fromtimestamp(ts, self.zone)
        for days in range(3):
            day = (local + timedelta(days=days)).date()
            # An end time the autumn change repeats comes twice (fold 0, then 1): in the
            # repeated hour the first has passed and the second is the end.
            for fold in (0, 1):
                end_time = time(end // 60, end % 60, fold=fold)
                at = datetime.combine(day, end_time, tzinfo=self.zone).timestamp()
                if at > ts:
                    return at
        return None  # not reached: an end time comes round within a day


class Attention:
    """Decides, for each proactive message, sent, deferred or suppressed; keeps the cap's
    rolling count (loaded from the store at start)."""

    def __init__(self, quiet: QuietHours, *, daily_cap: int, clock: Clock,
                 counted: Iterable[float] = ()) -> None:
        """`counted`: composition times of the messages of the last day that count against
        the cap."""
        self.quiet = quiet
        self.daily_cap = daily_cap
        self._clock = clock
        self._lock = threading.Lock()
        self._counted: deque[float] = deque(sorted(counted))

    def decide(self, *, capped: bool, deferrable: bool = True) -> tuple[Status, str | None]:
        """(status, reason) for a message composed now. A sent or deferred message that is
        `capped` takes a place under the cap at once, so two paths deciding together cannot
        both take the last one."""
        now = self._clock.time()
        with self._lock:
            self._expire(now)
            if capped and len(self._counted) >= self.daily_cap:
                return "suppressed", "cap"
            if capped:
                self._counted.append(now)
        if deferrable and self.quiet.is_quiet(now):
            return "deferred", "quiet_hours"
        return "sent", None

    def retune(self, span: tuple[int, int] | None, *, daily_cap: int) -> None:
        """New quiet hours (in the same zone) and cap (a config reload), for the next
        decision. The Dmn's wake-up for the end of a quiet period already under way stays."""
        with self._lock:
            self.quiet = QuietHours(span, self.quiet.zone)
            self.daily_cap = daily_cap

    def used(self) -> int:
        with self._lock:
            self._expire(self._clock.time())
            return len(self._counted)

    def _expire(self, now: float) -> None:
        while self._counted and self._counted[0] <= now - WINDOW_S:
            self._counted.popleft()
