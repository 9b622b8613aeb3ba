"""Scheduled prompts' pure core: checking a request, the next run, the runs that were missed.

A schedule runs a prompt once, `at` an ISO 8601 time that carries its own UTC offset, or on a
five-field `cron` expression ("minute hour day-of-month month day-of-week") read in an IANA zone.
Cron times follow Debian cron across DST changes (cronsim does this for us): a job at a fixed time
that falls in the hour skipped in spring runs when the clocks jump (01:30 becomes 02:00 BST in
Europe/London), and one that falls in the hour repeated in autumn runs once, the first time.

Time is always passed in as epoch seconds; nothing here reads the wall clock.
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, tzinfo
from datetime import timezone as FixedOffset  # `timezone` is a request field here

import msgspec
from cronsim import CronSim, CronSimError

MAX_PROMPT = 4000
# A cron expression with no run this far ahead is refused as one that never fires.
_HORIZON_S = 5 * 366 * 86_400.0
# Five-field cron runs at most once a minute, so `limit` minutes hold at most `limit` + 1 runs.
_MINUTE_S = 60.0
_AT_EXAMPLE = "2026-11-24T17:00:00+01:00"
# What datetime.tzname() gives for a fixed offset: "UTC+01:00", "UTC-05:30", "UTC+01:00:30".
_OFFSET_NAME = re.compile(r"UTC([+-])(\d\d):(\d\d)(?::(\d\d)(?:\.(\d{6}))?)?")


class ScheduleError(ValueError):
    """A request field that is wrong; `field` names it (prompt, at, cron, timezone), str(e) is the
    message without the field prefix (callers format "field: message")."""

    field: str

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class Spec(msgspec.Struct, frozen=True):
    """A checked schedule: exactly one of `at` (epoch seconds) and `cron` is set. `timezone` is an
    IANA zone name for cron; for `at` it is the offset the person gave, as datetime's tzname()
    gives it (e.g. "UTC+01:00", or "UTC" for Z / +00:00)."""

    prompt: str
    timezone: str
    at: float | None = None
    cron: str | None = None


def zone(name: str) -> zoneinfo.ZoneInfo:
    """The IANA zone `name`; ScheduleError("timezone", ...) when it cannot be resolved (also for
    names with path tricks, empty names, and keys zoneinfo rejects with ValueError)."""
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        # Not found, a key that is no normalized relative path ("../etc/passwd", ""), a file of
        # the database that is no zone ("zone.tab": ValueError) or a folder ("Europe": OSError).
        raise ScheduleError(
            "timezone", f"unknown time zone {name!r}; give an IANA name like 'Europe/London'"
        ) from None


def check(prompt: object, *, at: object = None, cron: object = None, timezone: object = None,
          now: float, default_zone: str = "UTC") -> Spec:
    """Validate a request: a prompt of at most MAX_PROMPT characters (stored stripped), and either
    `at`, an ISO 8601 time with offset after `now`, or `cron`, five fields that fire within five
    years, read in `timezone` (`default_zone` when None). Raises ScheduleError naming the first
    field that is wrong."""
    text = _prompt(prompt)
    if at is not None and cron is not None:
        raise ScheduleError("at", "give either `at` or `cron`, not both")
    if at is not None:
        if timezone is not None:
            raise ScheduleError(
                "timezone", "`at` carries its own UTC offset; give `timezone` only with `cron`"
            )
        when, offset = _at(at, now)
        return Spec(prompt=text, timezone=offset, at=when)
    if cron is not None:
        name = default_zone if timezone is None else _string("timezone", timezone)
        return _cron(text, cron, zone(name.strip()).key, now)
    raise ScheduleError(
        "at", "give `at` (an ISO 8601 time with offset) or `cron` (five fields)"
    )


def next_after(spec: Spec, after: float) -> float | None:
    """The first run strictly after `after` (epoch seconds), or None when there is none: `at`
    when it is later, else the cron expression's next time in the spec's zone."""
    if spec.at is not None:
        return spec.at if spec.at > after else None
    return next(_cron_runs(spec, after), None)


def occurrences(spec: Spec, start: float, end: float, limit: int) -> list[float]:
    """Run times t with start <= t <= end, oldest first: the newest `limit` of them when there
    are more (missed runs are caught up newest first)."""
    if limit <= 0 or end < start:
        return []
    if spec.at is not None:
        return [spec.at] if start <= spec.at <= end else []
    # Walk forward through a window that ends at `end` and widens until it holds `limit` runs,
    # so a minutely cron over a month costs about `limit` steps, not one per minute.
    span = _MINUTE_S * limit
    while True:
        low = max(start, end - span)
        found: list[float] = []
        for t in _cron_runs(spec, low - 1):
            if t > end:
                break
            if t >= low:
                found.append(t)
        if len(found) >= limit or low == start:
            return found[-limit:]
        span *= 4


def iso(ts: float, zone_name: str) -> str:
    """`ts` as ISO 8601 in the zone (an IANA name, or an offset name like "UTC+01:00" / "UTC" as
    Spec.timezone holds for `at` schedules), seconds precision, e.g. "2026-11-24T17:00:00+01:00"."""
    return datetime.fromtimestamp(ts, _tzinfo(zone_name)).isoformat(timespec="seconds")


def _prompt(prompt: object) -> str:
    text = _string("prompt", prompt).strip()
    if not text:
        raise ScheduleError("prompt", "must not be blank")
    if len(text) > MAX_PROMPT:
        raise ScheduleError(
            "prompt", f"is {len(text)} characters; at most {MAX_PROMPT} are allowed"
        )
    return text


def _string(field: str, value: object) -> str:
    if not isinstance(value, str):
        raise ScheduleError(field, f"must be a string, not {type(value).__name__}")
    return value


def _at(value: object, now: float) -> tuple[float, str]:
    """(epoch seconds, offset name) of an ISO 8601 time with offset that is after `now`."""
    text = _string("at", value).strip()
    try:
        # Python 3.11 reads "Z" but not "z"; both mean UTC.
        when = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("z", "Z")) else text)
    except ValueError:
        raise ScheduleError(
            "at", f"{text!r} is not an ISO 8601 time; give one like {_AT_EXAMPLE!r}"
        ) from None
    if when.tzinfo is None:
        raise ScheduleError(
            "at", f"{text!r} has no UTC offset; give one like {_AT_EXAMPLE!r} or end it with 'Z'"
        )
    try:
        utc = when.astimezone(UTC)
    except OverflowError:
        raise ScheduleError("at", f"{text!r} is out of range") from None
    ts = utc.timestamp()
    if ts <= now:
        raise ScheduleError(
            "at",
            f"{utc.isoformat(timespec='seconds')} is in the past "
            f"(the server's time is {iso(now, 'UTC')})",
        )
    offset = when.tzname()
    assert offset is not None  # fromisoformat gives a fixed-offset timezone, which has a name
    return ts, offset


def _cron(prompt: str, value: object, zone_name: str, now: float) -> Spec:
    fields = _string("cron", value).split()
    if len(fields) != 5:
        raise ScheduleError(
            "cron",
            f"needs five fields: minute hour day-of-month month day-of-week; "
            f"{len(fields)} given",
        )
    expr = " ".join(fields)
    spec = Spec(prompt=prompt, timezone=zone_name, cron=expr)
    try:
        first = next_after(spec, now)
    except CronSimError as e:
        raise ScheduleError("cron", str(e)) from None
    if first is None or first > now + _HORIZON_S:
        raise ScheduleError("cron", f"{expr!r} never fires (no run in the next five years)")
    return spec


def _cron_runs(spec: Spec, after: float) -> Iterator[float]:
    """The cron spec's runs strictly after `after`, oldest first, until cronsim gives up."""
    assert spec.cron is not None
    runs = CronSim(spec.cron, datetime.fromtimestamp(after, zone(spec.timezone)))
    last = after
    while True:
        try:
            t = next(runs).timestamp()
        except StopIteration:  # no run in cronsim's 50-year search
            return
        # With Debian's DST rules cronsim works in local wall time, so starting inside the
        # repeated autumn hour can give that hour's first pass, which is already behind us.
        if t > last:
            last = t
            yield t


def _tzinfo(zone_name: str) -> tzinfo:
    if zone_name == "UTC":
        return UTC
    offset = _OFFSET_NAME.fullmatch(zone_name)
    if offset is None:
        return zone(zone_name)
    sign, hours, minutes, seconds, micros = offset.groups()
    delta = timedelta(hours=int(hours), minutes=int(minutes), seconds=int(seconds or 0),
                      microseconds=int(micros or 0))
    return FixedOffset(-delta if sign == "-" else delta)
