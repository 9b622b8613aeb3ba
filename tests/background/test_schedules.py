"""Scheduled prompts, the pure part: what a person is told when a schedule request is wrong,
when a schedule runs next (Debian cron's rules across Europe/London's DST changes), which runs
were missed while the server was down, and how run times are shown."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chalie.background.schedules import (
    MAX_PROMPT,
    ScheduleError,
    Spec,
    check,
    iso,
    next_after,
    occurrences,
    zone,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
HOUR = 3600.0
DAY = 86_400.0


def ts(text: str) -> float:
    """Epoch seconds of an ISO 8601 time with offset."""
    return datetime.fromisoformat(text).timestamp()


def refusal(**request: object) -> ScheduleError:
    """The error a request gets; the prompt defaults to a good one and `now` to NOW."""
    request.setdefault("prompt", "Summarise my inbox")
    with pytest.raises(ScheduleError) as caught:
        check(now=NOW, **request)  # type: ignore[arg-type]
    return caught.value


def cron_spec(expr: str, zone_name: str = "Europe/London") -> Spec:
    return check("Water the plants", cron=expr, timezone=zone_name, now=NOW)


# --- at --------------------------------------------------------------------------------------


def test_an_at_time_with_offset_runs_then_and_keeps_the_offset_given() -> None:
    """"17:00+01:00" is stored as that instant and shown back exactly as the person wrote it."""
    spec = check("  Call mum  ", at="2026-11-24T17:00:00+01:00", now=NOW)
    assert spec == Spec(prompt="Call mum", timezone="UTC+01:00", at=ts("2026-11-24T16:00:00Z"))
    assert spec.at is not None
    assert iso(spec.at, spec.timezone) == "2026-11-24T17:00:00+01:00"


@pytest.mark.parametrize("given", ["2026-11-24T17:00:00Z", "2026-11-24T17:00:00z",
                                   "2026-11-24T17:00:00+00:00", " 2026-11-24T17:00:00Z "])
def test_an_at_time_in_utc_is_kept_as_utc(given: str) -> None:
    """A trailing Z (either case) or +00:00 means UTC, and the schedule says so."""
    spec = check("Call mum", at=given, now=NOW)
    assert (spec.at, spec.timezone, spec.cron) == (ts("2026-11-24T17:00:00Z"), "UTC", None)


@pytest.mark.parametrize("given", ["2026-11-24T17:00:00", "2026-11-24"])
def test_a_time_without_offset_is_refused_naming_at(given: str) -> None:
    """A local time with no offset is ambiguous: the person is told to add one, with an example."""
    error = refusal(at=given)
    assert error.field == "at"
    assert str(error) == (f"{given!r} has no UTC offset; give one like "
                          "'2026-11-24T17:00:00+01:00' or end it with 'Z'")


@pytest.mark.parametrize("given", ["2025-12-31T23:00:00-01:00", "2025-06-01T09:00:00+02:00"])
def test_a_time_now_or_in_the_past_is_refused_naming_at(given: str) -> None:
    """A time not after now is refused, shown in UTC beside the server's own time."""
    error = refusal(at=given)
    assert error.field == "at"
    utc = datetime.fromisoformat(given).astimezone(UTC).isoformat()
    assert str(error) == (f"{utc} is in the past "
                          "(the server's time is 2026-01-01T00:00:00+00:00)")


@pytest.mark.parametrize(("given", "message"), [
    ("tomorrow at five", "'tomorrow at five' is not an ISO 8601 time; "
                         "give one like '2026-11-24T17:00:00+01:00'"),
    ("", "'' is not an ISO 8601 time; give one like '2026-11-24T17:00:00+01:00'"),
    ("2026-02-30T10:00:00Z", "'2026-02-30T10:00:00Z' is not an ISO 8601 time; "
                             "give one like '2026-11-24T17:00:00+01:00'"),
    ("9999-12-31T23:00:00-10:00", "'9999-12-31T23:00:00-10:00' is out of range"),
])
def test_text_that_is_no_usable_time_is_refused_naming_at(given: str, message: str) -> None:
    """Garbage, impossible dates and times past year 9999 in UTC are refused with the text."""
    error = refusal(at=given)
    assert (error.field, str(error)) == ("at", message)


def test_a_timezone_beside_at_is_refused_naming_timezone() -> None:
    """`at` carries its own offset, so a zone next to it is refused rather than silently ignored."""
    error = refusal(at="2026-11-24T17:00:00+01:00", timezone="Europe/Paris")
    assert error.field == "timezone"
    assert str(error) == "`at` carries its own UTC offset; give `timezone` only with `cron`"


def test_giving_both_at_and_cron_is_refused_naming_at() -> None:
    """A schedule is one or the other; the person is told so."""
    error = refusal(at="2026-11-24T17:00:00Z", cron="0 9 * * *")
    assert (error.field, str(error)) == ("at", "give either `at` or `cron`, not both")


def test_giving_neither_at_nor_cron_is_refused_naming_at() -> None:
    """With no time at all, the person is told both ways of giving one."""
    error = refusal(timezone="Europe/London")
    assert (error.field, str(error)) == (
        "at", "give `at` (an ISO 8601 time with offset) or `cron` (five fields)")


def test_next_after_an_at_schedule_is_its_time_until_it_has_passed() -> None:
    """A one-off runs at its time and never again."""
    spec = check("Call mum", at="2026-11-24T17:00:00Z", now=NOW)
    at = ts("2026-11-24T17:00:00Z")
    assert next_after(spec, NOW) == at
    assert next_after(spec, at - 0.5) == at
    assert next_after(spec, at) is None


# --- cron ------------------------------------------------------------------------------------


def test_a_cron_schedule_keeps_its_expression_tidied_and_its_zone() -> None:
    """Extra spaces and tabs between fields are tidied; the zone is stored by name."""
    spec = check("Stand-up notes", cron=" 0  9 *\t* MON-FRI ", timezone="Europe/London", now=NOW)
    assert spec == Spec(prompt="Stand-up notes", timezone="Europe/London", cron="0 9 * * MON-FRI")


def test_a_cron_schedule_without_timezone_uses_the_default_zone() -> None:
    """The caller's default zone applies when the person names none."""
    spec = check("Stand-up notes", cron="0 9 * * *", now=NOW, default_zone="America/New_York")
    assert spec.timezone == "America/New_York"
    assert next_after(spec, NOW) == ts("2026-01-01T09:00:00-05:00")


@pytest.mark.parametrize(("expr", "count"), [("0 0 9 * * *", 6), ("0 9 * *", 4), ("", 0)])
def test_a_cron_without_exactly_five_fields_is_refused_naming_cron(expr: str, count: int) -> None:
    """Six-field (seconds) cron is refused too: the person is told the five fields expected."""
    error = refusal(cron=expr)
    assert error.field == "cron"
    assert str(error) == ("needs five fields: minute hour day-of-month month day-of-week; "
                          f"{count} given")


@pytest.mark.parametrize(("expr", "message"), [
    ("0 24 * * *", "Bad hour"),
    ("61 * * * *", "Bad minute"),
    ("0 9 * * FUNDAY", "Bad day-of-week"),
    ("0 9 * 13 *", "Bad month"),
    # cronsim refuses a day no month in the expression has, before looking for a run.
    ("0 0 30 2 *", "Bad day-of-month"),
])
def test_a_bad_cron_field_is_refused_with_cronsims_message(expr: str, message: str) -> None:
    """Out-of-range fields are named the way cronsim names them."""
    error = refusal(cron=expr)
    assert (error.field, str(error)) == ("cron", message)


@pytest.mark.parametrize("expr", [
    "0 0 LW * */7",   # the last weekday of a month that is a Sunday: never (cronsim gives up)
    "0 0 * 2 MON#5",  # a fifth Monday in February: first in 2044, more than five years away
])
def test_a_cron_that_never_fires_is_refused_naming_cron(expr: str) -> None:
    """An expression with no run in the next five years is refused rather than kept forever."""
    error = refusal(cron=expr)
    assert (error.field, str(error)) == (
        "cron", f"{expr!r} never fires (no run in the next five years)")


def test_next_after_a_cron_that_never_fires_is_none() -> None:
    """A cron spec with no run left has no next run (cronsim stops after 50 years)."""
    spec = Spec(prompt="Water the plants", timezone="UTC", cron="0 0 LW * */7")
    assert next_after(spec, NOW) is None
    assert occurrences(spec, NOW - 30 * DAY, NOW, 5) == []


def test_next_after_a_cron_is_strictly_after() -> None:
    """A run exactly at `after` is the one just done; the next is a day later."""
    spec = cron_spec("0 9 * * *")
    nine = ts("2026-01-05T09:00:00Z")
    assert next_after(spec, nine - 0.5) == nine
    assert next_after(spec, nine) == nine + DAY


def test_a_daily_run_in_the_skipped_spring_hour_runs_when_the_clocks_jump() -> None:
    """On 29 March 2026 London skips 01:00-02:00: a 01:30 job runs at 02:00 BST, as Debian cron
    does, and at 01:30 BST again from the next day."""
    spec = cron_spec("30 1 * * *")
    jump = next_after(spec, ts("2026-03-28T12:00:00+00:00"))
    assert jump is not None
    assert iso(jump, "Europe/London") == "2026-03-29T02:00:00+01:00"
    after = next_after(spec, jump)
    assert after is not None
    assert iso(after, "Europe/London") == "2026-03-30T01:30:00+01:00"


def test_a_daily_run_in_the_repeated_autumn_hour_runs_once() -> None:
    """On 25 October 2026 London lives 01:00-02:00 twice: a 01:30 job runs the first time only,
    even when asked from inside the second pass."""
    spec = cron_spec("30 1 * * *")
    first = next_after(spec, ts("2026-10-24T12:00:00+01:00"))
    assert first == ts("2026-10-25T01:30:00+01:00")
    tomorrow = ts("2026-10-26T01:30:00+00:00")
    assert next_after(spec, first) == tomorrow
    assert next_after(spec, ts("2026-10-25T01:10:00+00:00")) == tomorrow  # second pass


def test_a_half_hourly_cron_runs_in_both_passes_of_the_repeated_hour() -> None:
    """A job that repeats within the hour ("*/30") follows the clock: four runs at 01:xx local."""
    spec = cron_spec("*/30 1 * * *")
    runs = occurrences(spec, ts("2026-10-25T00:00:00+01:00"), ts("2026-10-25T03:00:00+00:00"), 10)
    assert [iso(t, "Europe/London") for t in runs] == [
        "2026-10-25T01:00:00+01:00", "2026-10-25T01:30:00+01:00",
        "2026-10-25T01:00:00+00:00", "2026-10-25T01:30:00+00:00"]


# --- zones -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [
    "Mars/Olympus_Mons", "europe/london", "UTC+01:00", "", "../etc/passwd", "/etc/localtime",
    "Europe/../Europe/London", "Europe", "zone.tab", "Europe/London\x00",
])
def test_an_unknown_or_tricky_zone_is_refused_naming_timezone(name: str) -> None:
    """Unknown names, path tricks, folders and files of the zone database that are no zone are
    all an unknown zone, never a crash or a file read outside the database."""
    with pytest.raises(ScheduleError) as caught:
        zone(name)
    assert caught.value.field == "timezone"
    assert str(caught.value) == (f"unknown time zone {name!r}; "
                                 "give an IANA name like 'Europe/London'")
    assert refusal(cron="0 9 * * *", timezone=name).field == "timezone"


def test_a_known_zone_resolves() -> None:
    """An IANA name gives its zone, DST rules included."""
    london = zone("Europe/London")
    assert datetime(2026, 7, 1, tzinfo=london).isoformat() == "2026-07-01T00:00:00+01:00"


# --- prompt and types ------------------------------------------------------------------------


@pytest.mark.parametrize(("request_fields", "field"), [
    ({"prompt": 5, "cron": "0 9 * * *"}, "prompt"),
    ({"prompt": None, "cron": "0 9 * * *"}, "prompt"),
    ({"at": 1_795_539_600}, "at"),
    ({"cron": ["0", "9", "*", "*", "*"]}, "cron"),
    ({"cron": "0 9 * * *", "timezone": 1}, "timezone"),
])
def test_a_field_that_is_not_a_string_is_refused_naming_it(
    request_fields: dict[str, object], field: str,
) -> None:
    """Numbers, lists and nulls where text belongs are refused with the field and the type."""
    error = refusal(**request_fields)
    assert error.field == field
    value = request_fields[field]
    assert str(error) == f"must be a string, not {type(value).__name__}"


@pytest.mark.parametrize("prompt", ["", "   \n\t "])
def test_a_blank_prompt_is_refused_naming_prompt(prompt: str) -> None:
    """A schedule with nothing to ask is refused."""
    error = refusal(prompt=prompt, cron="0 9 * * *")
    assert (error.field, str(error)) == ("prompt", "must not be blank")


def test_a_prompt_over_the_limit_is_refused_and_one_at_the_limit_is_kept() -> None:
    """Up to MAX_PROMPT characters (surrounding spaces aside) are fine; one more is refused."""
    longest = "x" * MAX_PROMPT
    assert check(f"  {longest}\n", cron="0 9 * * *", now=NOW).prompt == longest
    error = refusal(prompt=longest + "y", cron="0 9 * * *")
    assert (error.field, str(error)) == (
        "prompt", f"is {MAX_PROMPT + 1} characters; at most {MAX_PROMPT} are allowed")


CRON_ATOMS = st.sampled_from(["*", "0", "5", "7", "12", "23", "31", "59", "60", "*/7", "1-5",
                              "5-1", "L", "LW", "MON", "SUN#5", "1L", "JAN", "a", "", "-", "/",
                              "#", ",", "*/0", "2#6", "FEB"])
CRON_FIELDS = st.lists(st.lists(CRON_ATOMS, min_size=1, max_size=3).map("".join),
                       min_size=5, max_size=5).map(" ".join)


@settings(derandomize=True, database=None, max_examples=200, deadline=None)
@given(expr=CRON_FIELDS)
def test_any_cron_text_is_either_a_schedule_that_fires_or_a_cron_refusal(expr: str) -> None:
    """Whatever five fields a person types, they get a schedule whose next run is within five
    years, or an error naming cron: never a crash."""
    try:
        first = next_after(cron_spec(expr), NOW)
    except ScheduleError as error:
        refused = error.field
    else:
        refused = None
        assert first is not None
        assert NOW < first <= NOW + 5 * 366 * DAY
    assert refused in (None, "cron")


# --- missed runs -----------------------------------------------------------------------------


def test_missed_runs_over_the_limit_keep_the_newest_oldest_first() -> None:
    """Ten hourly runs missed with room for three: the last three, in the order they were due."""
    spec = cron_spec("0 * * * *", "UTC")
    start = ts("2026-01-05T00:00:00Z")
    assert occurrences(spec, start, start + 9 * HOUR, 3) == [
        start + 7 * HOUR, start + 8 * HOUR, start + 9 * HOUR]
    assert occurrences(spec, start, start + 9 * HOUR, 100) == [start + h * HOUR for h in range(10)]


def test_missed_runs_include_both_ends_of_the_window() -> None:
    """Runs due exactly at the start and at the end of the window count; ones outside do not."""
    spec = cron_spec("0 9 * * *", "UTC")
    nine = ts("2026-01-05T09:00:00Z")
    assert occurrences(spec, nine, nine + 2 * DAY, 10) == [nine, nine + DAY, nine + 2 * DAY]
    assert occurrences(spec, nine + 1, nine + 2 * DAY - 1, 10) == [nine + DAY]
    assert occurrences(spec, nine, nine + DAY, 0) == []
    assert occurrences(spec, nine + DAY, nine, 10) == []


def test_missed_runs_of_an_at_schedule_are_its_time_when_inside_the_window() -> None:
    """A one-off was missed only if its time falls in the window."""
    spec = check("Call mum", at="2026-11-24T17:00:00Z", now=NOW)
    at = ts("2026-11-24T17:00:00Z")
    assert occurrences(spec, at, at, 5) == [at]
    assert occurrences(spec, at - DAY, at - 1, 5) == []
    assert occurrences(spec, at - DAY, at + DAY, 0) == []


def test_a_minutely_cron_over_thirty_days_lists_every_missed_minute() -> None:
    """Thirty days down with a minutely cron: all 43,201 minutes when the limit allows, else the
    newest few, in order."""
    spec = cron_spec("* * * * *")
    start = ts("2026-03-15T00:00:00+00:00")  # spans London's spring change
    end = start + 30 * DAY
    every = occurrences(spec, start, end, 50_000)
    assert len(every) == 30 * 24 * 60 + 1
    assert (every[0], every[-1]) == (start, end)
    assert {b - a for a, b in itertools.pairwise(every)} == {60.0}
    assert occurrences(spec, start, end, 10) == every[-10:]


# Each expression with the longest window to try it over: long enough for many runs, short
# enough that asking for every run one by one stays quick.
EXPRESSIONS = st.sampled_from([
    ("* * * * *", 2 * DAY), ("*/7 * * * *", 5 * DAY), ("30 1 * * *", 60 * DAY),
    ("0,30 1,2 * * *", 60 * DAY), ("15 */5 * * *", 60 * DAY), ("0 9 * * MON-FRI", 60 * DAY),
    ("0 0 L * *", 400 * DAY), ("0 12 1 */3 *", 800 * DAY),
])
# Windows that start around both of London's 2026 DST changes.
WINDOW_START = st.floats(ts("2026-03-20T00:00:00Z"), ts("2026-11-10T00:00:00Z"))


@settings(derandomize=True, database=None, max_examples=150, deadline=None)
@given(expression=EXPRESSIONS,
       zone_name=st.sampled_from(["Europe/London", "UTC", "Asia/Kolkata"]),
       start=WINDOW_START, fraction=st.floats(0, 1), limit=st.integers(1, 40))
def test_missed_runs_are_the_newest_of_the_runs_one_after_another(
    expression: tuple[str, float], zone_name: str, start: float, fraction: float, limit: int,
) -> None:
    """Missed runs are exactly the newest `limit` of the runs found by asking for the next run
    again and again from the start of the window."""
    expr, longest = expression
    spec = cron_spec(expr, zone_name)
    end = start + fraction * longest
    runs: list[float] = []
    t = next_after(spec, start - 1)
    while t is not None and t <= end:
        if t >= start:
            runs.append(t)
        t = next_after(spec, t)
    assert occurrences(spec, start, end, limit) == runs[-limit:]


# --- showing times ---------------------------------------------------------------------------


@pytest.mark.parametrize(("zone_name", "shown"), [
    ("Europe/London", "2026-07-01T13:00:00+01:00"),
    ("America/New_York", "2026-07-01T08:00:00-04:00"),
    ("Asia/Kolkata", "2026-07-01T17:30:00+05:30"),
    ("UTC", "2026-07-01T12:00:00+00:00"),
    ("UTC+01:00", "2026-07-01T13:00:00+01:00"),
    ("UTC-05:30", "2026-07-01T06:30:00-05:30"),
    ("UTC+01:00:30", "2026-07-01T13:00:30+01:00:30"),
])
def test_run_times_are_shown_in_the_schedules_zone_to_the_second(
    zone_name: str, shown: str,
) -> None:
    """A run time is shown in the schedule's zone or offset, without fractions of a second."""
    assert iso(ts("2026-07-01T12:00:00.75Z"), zone_name) == shown


def test_run_times_in_winter_show_londons_winter_offset() -> None:
    """The same zone shows GMT in winter and BST in summer."""
    assert iso(ts("2026-01-15T12:00:00Z"), "Europe/London") == "2026-01-15T12:00:00+00:00"
