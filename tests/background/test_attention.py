"""Attention as the person lives it: quiet hours read in their zone (across midnight and across
the clock changes), a zone that cannot be read keeps every hour quiet, and the daily cap on
proactive messages counts over a rolling day, survives a restart and never holds back a prompt
the person scheduled."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from chalie.background.attention import WINDOW_S, Attention, QuietHours, resolve_zone
from chalie.clock import ManualClock
from chalie.config import parse_span

HOUR = 3600.0
LONDON = ZoneInfo("Europe/London")
ZULU = ZoneInfo("UTC")
NEVER_QUIET = QuietHours(None, ZULU)
ALWAYS_QUIET = QuietHours(None, None)


def ts(text: str) -> float:
    """Epoch seconds of an ISO 8601 time with offset."""
    return datetime.fromisoformat(text).timestamp()


def utc(seconds: float | None) -> str | None:
    """`seconds` as an ISO 8601 UTC time, for readable comparisons."""
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC).isoformat()


def hours(span: str, zone: ZoneInfo | None = ZULU) -> QuietHours:
    return QuietHours(parse_span(span), zone)


def clock_at(text: str) -> ManualClock:
    """A ManualClock whose wall clock reads `text`."""
    return ManualClock(wall=ts(text))


# --- dmn.quiet_hours ---------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "span"), [
    ("23:00-08:00", (23 * 60, 8 * 60)),
    ("00:30-02:30", (30, 150)),
    (" 7:05 - 9:10 ", (7 * 60 + 5, 9 * 60 + 10)),
    ("00:00-23:59", (0, 23 * 60 + 59)),
    ("", None),
    ("   ", None),
])
def test_quiet_hours_are_read_as_minutes_after_midnight(text: str,
                                                         span: tuple[int, int] | None) -> None:
    """"23:00-08:00" is (1380, 480) minutes; an empty setting means no quiet hours."""
    assert parse_span(text) == span


@pytest.mark.parametrize("text", [
    "23:00", "24:00-08:00", "23:60-08:00", "11pm-7am", "23:00-08:00-09:00", "23.00-08.00",
    "-08:00",
])
def test_a_malformed_span_is_refused_naming_the_expected_form(text: str) -> None:
    """A setting that is not HH:MM-HH:MM is refused with the form to use and what was given."""
    with pytest.raises(ValueError, match="must be HH:MM-HH:MM") as caught:
        parse_span(text)
    assert repr(text) in str(caught.value)


# --- dmn.timezone ------------------------------------------------------------------------------

def test_an_iana_zone_resolves_and_says_so() -> None:
    """"Europe/London" gives that zone and a line naming it."""
    assert resolve_zone("Europe/London") == (LONDON, "time zone Europe/London")


@pytest.mark.parametrize("name", ["Mars/Olympus", "../etc/passwd", "", "Europe"])
def test_a_zone_that_cannot_be_resolved_gives_none_and_names_it(name: str) -> None:
    """An unknown zone, a path trick, an empty name or a folder of the zone database gives no
    zone and a reason quoting the name (start-up logs it and keeps every hour quiet); none of
    them stops start-up with an exception."""
    zone, reason = resolve_zone(name)
    assert zone is None
    assert f"time zone {name!r} cannot be resolved" in reason


def test_local_uses_the_zone_tz_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """With TZ naming a zone, "local" is that zone and the line says it came from TZ."""
    monkeypatch.setenv("TZ", ":Asia/Tokyo")
    assert resolve_zone("local") == (ZoneInfo("Asia/Tokyo"), "local time zone Asia/Tokyo (TZ)")


@pytest.mark.parametrize("tz", [None, "Nowhere/Land", "Europe"])
def test_local_without_a_usable_tz_still_resolves(monkeypatch: pytest.MonkeyPatch,
                                                  tz: str | None) -> None:
    """With TZ unset or naming nothing usable, "local" still gives a zone (the machine's, or
    UTC) and a line saying where it came from, never TZ."""
    if tz is None:
        monkeypatch.delenv("TZ", raising=False)
    else:
        monkeypatch.setenv("TZ", tz)
    zone, reason = resolve_zone("local")
    assert zone is not None
    assert reason.startswith("local time zone")
    assert "(TZ)" not in reason
    assert ("/etc/localtime" in reason) or ("using UTC" in reason)


# --- is_quiet ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("at", "expected"), [
    ("2026-01-10T22:59:00+00:00", False),
    ("2026-01-10T23:00:00+00:00", True),
    ("2026-01-11T00:00:00+00:00", True),
    ("2026-01-11T03:00:00+00:00", True),
    ("2026-01-11T07:59:59+00:00", True),
    ("2026-01-11T08:00:00+00:00", False),
    ("2026-01-11T12:00:00+00:00", False),
])
def test_a_span_across_midnight_is_quiet_from_its_start_to_its_end(at: str,
                                                                  expected: bool) -> None:
    """23:00-08:00 is quiet from 23:00 through the night, not from 08:00."""
    assert hours("23:00-08:00").is_quiet(ts(at)) is expected


@pytest.mark.parametrize(("at", "expected"), [
    ("2026-01-10T12:59:00+00:00", False),
    ("2026-01-10T13:00:00+00:00", True),
    ("2026-01-10T14:59:59+00:00", True),
    ("2026-01-10T15:00:00+00:00", False),
    ("2026-01-10T23:30:00+00:00", False),
])
def test_a_span_within_a_day_is_quiet_only_inside_it(at: str, expected: bool) -> None:
    """13:00-15:00 is quiet for those two hours and no other."""
    assert hours("13:00-15:00").is_quiet(ts(at)) is expected


def test_quiet_hours_are_read_in_the_zone() -> None:
    """23:00-08:00 in Europe/London in summer is 22:00-07:00 UTC."""
    night = hours("23:00-08:00", LONDON)
    assert night.is_quiet(ts("2026-07-01T22:30:00+00:00")) is True   # 23:30 BST
    assert night.is_quiet(ts("2026-07-01T21:30:00+00:00")) is False  # 22:30 BST
    assert night.is_quiet(ts("2026-07-02T06:59:00+00:00")) is True   # 07:59 BST
    assert night.is_quiet(ts("2026-07-02T07:00:00+00:00")) is False  # 08:00 BST


def test_a_span_that_starts_where_it_ends_is_never_quiet() -> None:
    """"08:00-08:00" is an empty span: no hour of the day is quiet."""
    same = hours("08:00-08:00")
    assert [same.is_quiet(ts(f"2026-01-10T{h:02d}:00:00+00:00")) for h in range(24)] == \
        [False] * 24
    assert same.ends_at(ts("2026-01-10T08:00:00+00:00")) is None


def test_no_span_is_never_quiet_and_no_zone_is_always_quiet() -> None:
    """Without quiet hours every hour is open; without a zone every hour is quiet, and that
    quiet never ends (messages wait for the person to connect)."""
    times = [ts(f"2026-01-10T{h:02d}:30:00+00:00") for h in range(24)]
    assert [NEVER_QUIET.is_quiet(t) for t in times] == [False] * 24
    assert [ALWAYS_QUIET.is_quiet(t) for t in times] == [True] * 24
    no_zone = QuietHours(parse_span("23:00-08:00"), None)
    assert [no_zone.is_quiet(t) for t in times] == [True] * 24
    assert no_zone.ends_at(times[0]) is None


# --- ends_at -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("at", "ends"), [
    ("2026-01-10T23:30:00+00:00", "2026-01-11T08:00:00+00:00"),
    ("2026-01-11T03:00:00+00:00", "2026-01-11T08:00:00+00:00"),
    ("2026-01-11T07:59:59+00:00", "2026-01-11T08:00:00+00:00"),
])
def test_quiet_hours_end_at_the_next_end_time(at: str, ends: str) -> None:
    """Before or after midnight, quiet hours end at the coming 08:00."""
    assert utc(hours("23:00-08:00").ends_at(ts(at))) == utc(ts(ends))


def test_a_time_outside_quiet_hours_has_no_end() -> None:
    """ends_at is None when it is not quiet now."""
    assert hours("23:00-08:00").ends_at(ts("2026-01-10T12:00:00+00:00")) is None
    assert NEVER_QUIET.ends_at(ts("2026-01-10T12:00:00+00:00")) is None


def test_quiet_hours_end_at_local_time_on_the_night_the_clocks_go_forward() -> None:
    """Europe/London, 29 March 2026, 01:00 GMT becomes 02:00 BST. Quiet 00:30-02:30 starts at
    00:30 GMT and ends at 02:30 BST (01:30 UTC): that night it lasts one real hour, and ends_at
    says so wherever in it the question is asked."""
    night = hours("00:30-02:30", LONDON)
    assert night.is_quiet(ts("2026-03-29T00:29:00+00:00")) is False
    for asked in ("2026-03-29T00:30:00+00:00", "2026-03-29T00:59:00+00:00",
                  "2026-03-29T01:00:00+00:00", "2026-03-29T01:29:00+00:00"):
        assert night.is_quiet(ts(asked)) is True
        assert utc(night.ends_at(ts(asked))) == "2026-03-29T01:30:00+00:00"
    assert night.is_quiet(ts("2026-03-29T01:30:00+00:00")) is False


def test_an_end_time_the_clocks_skip_is_reached_half_an_hour_late() -> None:
    """Quiet 00:30-01:30 on 29 March 2026: 01:30 never happens in London (01:00 GMT becomes
    02:00 BST), so quiet hours are over at the jump (01:00 UTC); ends_at reads the missing
    01:30 as GMT and says 01:30 UTC (02:30 BST). A message deferred then waits that extra half
    hour, unless the person connects first. Documented, not fixed: it is never early."""
    night = hours("00:30-01:30", LONDON)
    assert night.is_quiet(ts("2026-03-29T00:59:00+00:00")) is True
    assert night.is_quiet(ts("2026-03-29T01:00:00+00:00")) is False
    assert utc(night.ends_at(ts("2026-03-29T00:45:00+00:00"))) == "2026-03-29T01:30:00+00:00"


def test_an_end_time_the_clocks_repeat_ends_each_pass_of_the_hour() -> None:
    """Europe/London, 25 October 2026, 02:00 BST becomes 01:00 GMT, so 01:00-02:00 comes twice.
    Quiet 00:30-01:30 ends at 01:30 BST (00:30 UTC); it is quiet again from 01:00 GMT, and that
    second stretch ends at 01:30 GMT, half an hour later, not a day later."""
    night = hours("00:30-01:30", LONDON)
    assert utc(night.ends_at(ts("2026-10-24T23:45:00+00:00"))) == "2026-10-25T00:30:00+00:00"
    assert night.is_quiet(ts("2026-10-25T00:30:00+00:00")) is False
    for asked in ("2026-10-25T01:00:00+00:00", "2026-10-25T01:15:00+00:00"):
        assert night.is_quiet(ts(asked)) is True
        assert utc(night.ends_at(ts(asked))) == "2026-10-25T01:30:00+00:00"
    assert night.is_quiet(ts("2026-10-25T01:30:00+00:00")) is False


def test_a_night_across_a_clock_change_ends_at_local_morning() -> None:
    """23:00-08:00 on the night the clocks go forward ends at 08:00 BST (07:00 UTC); on the
    night they go back, at 08:00 GMT (08:00 UTC)."""
    night = hours("23:00-08:00", LONDON)
    assert utc(night.ends_at(ts("2026-03-28T23:30:00+00:00"))) == "2026-03-29T07:00:00+00:00"
    assert utc(night.ends_at(ts("2026-10-24T22:30:00+00:00"))) == "2026-10-25T08:00:00+00:00"


# --- decide: the cap ---------------------------------------------------------------------------

def test_messages_over_the_daily_cap_are_suppressed() -> None:
    """With a cap of 2, the first two capped messages are sent and the third is suppressed for
    the cap; a suppressed message takes no place."""
    attention = Attention(NEVER_QUIET, daily_cap=2, clock=ManualClock())
    assert [attention.decide(capped=True) for _ in range(4)] == [
        ("sent", None), ("sent", None), ("suppressed", "cap"), ("suppressed", "cap")]
    assert attention.used() == 2


def test_a_deferred_message_takes_its_place_under_the_cap_at_once() -> None:
    """A capped message deferred by quiet hours counts against the cap as it is deferred, so
    the cap bounds what the person will receive."""
    attention = Attention(ALWAYS_QUIET, daily_cap=1, clock=ManualClock())
    assert attention.decide(capped=True) == ("deferred", "quiet_hours")
    assert attention.used() == 1
    assert attention.decide(capped=True) == ("suppressed", "cap")


def test_the_cap_counts_over_a_rolling_day() -> None:
    """A place under the cap frees exactly 24 hours after the message that took it."""
    clock = ManualClock()
    attention = Attention(NEVER_QUIET, daily_cap=2, clock=clock)
    assert attention.decide(capped=True) == ("sent", None)
    clock.advance(6 * HOUR)
    assert attention.decide(capped=True) == ("sent", None)
    clock.advance(18 * HOUR - 1)
    assert attention.decide(capped=True) == ("suppressed", "cap")
    clock.advance(1)  # the first is a day old
    assert attention.used() == 1
    assert attention.decide(capped=True) == ("sent", None)
    assert attention.decide(capped=True) == ("suppressed", "cap")
    clock.advance(WINDOW_S)
    assert attention.used() == 0


def test_uncapped_messages_are_never_suppressed_and_take_no_place() -> None:
    """A prompt the person scheduled is sent even with the cap used up (or at 0), and does not
    use a place."""
    attention = Attention(NEVER_QUIET, daily_cap=0, clock=ManualClock())
    assert [attention.decide(capped=False) for _ in range(3)] == [("sent", None)] * 3
    assert attention.used() == 0
    assert attention.decide(capped=True) == ("suppressed", "cap")


def test_the_cap_is_checked_before_quiet_hours() -> None:
    """Over the cap in quiet hours, a message is suppressed (it would never be delivered), not
    deferred."""
    attention = Attention(ALWAYS_QUIET, daily_cap=0, clock=ManualClock())
    assert attention.decide(capped=True) == ("suppressed", "cap")


def test_places_taken_before_a_restart_still_count() -> None:
    """Composition times loaded at start (in any order) count until they are a day old; older
    ones are not counted."""
    clock = ManualClock()
    now = clock.time()
    attention = Attention(NEVER_QUIET, daily_cap=2, clock=clock,
                          counted=(now - HOUR, now - 25 * HOUR, now - 23 * HOUR))
    assert attention.used() == 2
    assert attention.decide(capped=True) == ("suppressed", "cap")
    clock.advance(HOUR)  # the one 23 hours old leaves
    assert attention.decide(capped=True) == ("sent", None)


def test_paths_deciding_together_cannot_both_take_the_last_place() -> None:
    """Twenty messages decided at once from many threads: exactly the cap's worth are sent."""
    attention = Attention(NEVER_QUIET, daily_cap=5, clock=ManualClock())
    results: list[tuple[str, str | None]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(20)

    def decide() -> None:
        barrier.wait()
        decision = attention.decide(capped=True)
        with lock:
            results.append(decision)

    threads = [threading.Thread(target=decide) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results, key=str) == sorted(
        [("sent", None)] * 5 + [("suppressed", "cap")] * 15, key=str)
    assert attention.used() == 5


# --- decide: quiet hours -----------------------------------------------------------------------

def test_in_quiet_hours_a_message_is_deferred() -> None:
    """At 02:00 in 23:00-08:00, a DMN message is deferred for quiet hours; at noon it is sent."""
    night = hours("23:00-08:00")
    clock = clock_at("2026-01-11T02:00:00+00:00")
    attention = Attention(night, daily_cap=10, clock=clock)
    assert attention.decide(capped=True) == ("deferred", "quiet_hours")
    assert attention.decide(capped=False) == ("deferred", "quiet_hours")
    clock.advance(10 * HOUR)
    assert attention.decide(capped=True) == ("sent", None)


def test_a_message_that_may_not_wait_is_sent_in_quiet_hours() -> None:
    """deferrable=False (a prompt the person scheduled for this time) is sent in quiet hours,
    and still takes a place when capped."""
    attention = Attention(hours("23:00-08:00"), daily_cap=1,
                          clock=clock_at("2026-01-11T02:00:00+00:00"))
    assert attention.decide(capped=False, deferrable=False) == ("sent", None)
    assert attention.decide(capped=True, deferrable=False) == ("sent", None)
    assert attention.decide(capped=True, deferrable=False) == ("suppressed", "cap")
