"""The schedule tool as the model uses it: a new schedule comes back as an effect the turn
stores (marked as the DMN's when the DMN set it), a wrong request is an error naming the field
to fix, and list and cancel see both the stored schedules and this turn's own."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import apsw
import pytest

from chalie.store import db, schedule_rows
from chalie.store.effects import CancelSchedule, CreateSchedule
from chalie.store.schedule_rows import ScheduleRow
from chalie.tools.base import ToolContext, ToolOutcome
from chalie.tools.schedule import ScheduleTool

NOW = 1_700_000_000.0  # the ManualClock's wall time: 2023-11-14 22:13:20 UTC
HOUR = 3600.0


def ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def run(ctx: ToolContext, zone: str = "UTC", **args: Any) -> ToolOutcome:
    return ScheduleTool(zone).run(args, ctx)


def stored(writer: apsw.Connection, schedule_id: str, prompt: str, *,
           next_run: float | None, cron: str | None = "0 9 * * *",
           state: str = "active") -> None:
    with db.immediate(writer):
        schedule_rows.insert(writer, ScheduleRow(
            id=schedule_id, prompt=prompt, timezone="Europe/London", at=None, cron=cron,
            next_run=next_run, last_run=None, state=state, source="person", turn_id=None,
            created_at=NOW - HOUR))


def created(outcome: ToolOutcome) -> CreateSchedule:
    assert outcome.is_error is False, outcome.text
    (effect,) = outcome.effects
    assert isinstance(effect, CreateSchedule)
    return effect


# --- create ------------------------------------------------------------------------------------

def test_a_time_in_the_future_becomes_a_schedule_for_the_turn_to_store(
    context: Any, writer: apsw.Connection,
) -> None:
    """`at` with an offset gives a CreateSchedule effect due then, set by a tool, and the model
    is told its id and the time in the offset it gave; nothing is stored yet."""
    outcome = run(context(), action="create", prompt="  Call mum ",
                  at="2023-11-15T09:00:00+01:00")
    effect = created(outcome)
    assert len(effect.id) == 12
    assert effect == CreateSchedule(id=effect.id, prompt="Call mum", timezone="UTC+01:00",
                                    next_run=ts("2023-11-15T08:00:00Z"),
                                    at=ts("2023-11-15T08:00:00Z"), cron=None, source="tool")
    assert outcome.text == (f"scheduled {effect.id} once: next run "
                            "2023-11-15T09:00:00+01:00")
    assert writer.execute("SELECT count(*) FROM schedules").fetchall() == [(0,)]


def test_a_schedule_the_dmn_sets_is_marked_as_its_own(context: Any) -> None:
    """On the DMN's path the effect's source is "dmn" (it counts as a proactive message when
    it runs)."""
    effect = created(run(context(path="dmn"), action="create", prompt="Ask about the trip",
                         at="2023-11-15T09:00:00Z"))
    assert effect.source == "dmn"
    for path in ("user", "scheduled", "goal"):
        assert created(run(context(path=path), prompt="Water the plants",
                           at="2023-11-15T09:00:00Z")).source == "tool"


def test_a_cron_schedule_runs_next_in_its_zone(context: Any) -> None:
    """A cron expression without a zone is read in the tool's default zone and the model is
    told the next run in that zone."""
    outcome = run(context(), zone="Europe/London", action="create", prompt="Weekly review",
                  cron="0 9 * * 1")
    effect = created(outcome)
    assert (effect.cron, effect.timezone, effect.at) == ("0 9 * * 1", "Europe/London", None)
    assert effect.next_run == ts("2023-11-20T09:00:00+00:00")  # the next Monday, GMT
    assert outcome.text == (f"scheduled {effect.id} on '0 9 * * 1' (Europe/London): next run "
                            "2023-11-20T09:00:00+00:00")
    tokyo = created(run(context(), zone="Europe/London", prompt="Standup", cron="0 9 * * *",
                        timezone="Asia/Tokyo"))
    assert tokyo.next_run == ts("2023-11-15T09:00:00+09:00")


@pytest.mark.parametrize(("args", "complaint"), [
    ({"prompt": "Review", "cron": "0 9 * *"}, "error: cron: needs five fields"),
    ({"prompt": "Review", "cron": "61 9 * * *"}, "error: cron: "),
    ({"prompt": "Review", "cron": "0 9 * * *", "timezone": "Mars/Olympus"},
     "error: timezone: unknown time zone 'Mars/Olympus'"),
    ({"prompt": "Review", "at": "2023-11-14T20:00:00Z"}, "error: at: 2023-11-14T20:00:00+00:00 "
                                                         "is in the past"),
    ({"prompt": "Review", "at": "tomorrow at nine"}, "error: at: 'tomorrow at nine' is not an"),
    ({"prompt": "Review", "at": "2023-11-15T09:00:00"}, "error: at: '2023-11-15T09:00:00' has "
                                                        "no UTC offset"),
    ({"prompt": "Review"}, "error: at: give `at`"),
    ({"prompt": "   ", "at": "2023-11-15T09:00:00Z"}, "error: prompt: must not be blank"),
    ({"at": "2023-11-15T09:00:00Z"}, "error: prompt: must be a string"),
    ({"action": "snooze"}, "error: action must be create, list or cancel, got 'snooze'"),
], ids=["cron-fields", "cron-range", "zone", "at-past", "at-words", "at-no-offset", "no-time",
        "blank-prompt", "no-prompt", "bad-action"])
def test_a_wrong_request_is_an_error_naming_the_field(context: Any, args: dict[str, Any],
                                                      complaint: str) -> None:
    """A request the tool cannot use is an error result that starts with the field to fix, and
    no schedule is made."""
    outcome = ScheduleTool("UTC").run(args, context())
    assert outcome.is_error is True
    assert outcome.text.startswith(complaint), outcome.text
    assert outcome.effects == ()


# --- list --------------------------------------------------------------------------------------

def test_list_shows_stored_active_schedules_and_this_turns_new_ones(
    context: Any, writer: apsw.Connection,
) -> None:
    """List shows what this turn set (first) and the stored active schedules, soonest first,
    each with its id and next run in its zone; finished ones are not shown."""
    stored(writer, "s-late", "Weekly review", next_run=ts("2023-11-20T09:00:00Z"),
           cron="0 9 * * 1")
    stored(writer, "s-soon", "Water the plants", next_run=ts("2023-11-15T09:00:00Z"))
    stored(writer, "s-over", "Old reminder", next_run=None, state="done")
    pending = CreateSchedule(id="new1", prompt="Call mum", timezone="UTC+01:00",
                             next_run=ts("2023-11-15T08:00:00Z"), at=ts("2023-11-15T08:00:00Z"))
    assert run(context(pending), action="list").text.splitlines() == [
        "- new1 (set just now): 'Call mum' next 2023-11-15T09:00:00+01:00",
        "- s-soon (cron '0 9 * * *'): 'Water the plants' next 2023-11-15T09:00:00+00:00",
        "- s-late (cron '0 9 * * 1'): 'Weekly review' next 2023-11-20T09:00:00+00:00",
    ]


def test_list_leaves_out_what_this_turn_cancelled(context: Any, writer: apsw.Connection) -> None:
    """A stored schedule, or one set just now, that this turn cancelled is not listed."""
    stored(writer, "s1", "Water the plants", next_run=NOW + HOUR)
    stored(writer, "s2", "Weekly review", next_run=NOW + 2 * HOUR)
    made = CreateSchedule(id="new1", prompt="Call mum", timezone="UTC", next_run=NOW + HOUR,
                          at=NOW + HOUR)
    ctx = context(made, CancelSchedule("new1"), CancelSchedule("s1"))
    assert run(ctx, action="list").text == \
        "- s2 (cron '0 9 * * *'): 'Weekly review' next 2023-11-15T00:13:20+00:00"


def test_list_with_nothing_scheduled_says_so(context: Any) -> None:
    """No schedules at all gets a plain answer, not an error."""
    assert run(context(), action="list") == ToolOutcome(text="no scheduled prompts")


# --- cancel ------------------------------------------------------------------------------------

def test_cancel_of_a_stored_or_new_schedule_is_an_effect(
    context: Any, writer: apsw.Connection,
) -> None:
    """Cancelling an active stored schedule, or one this turn just set, gives a CancelSchedule
    effect for the turn to store."""
    stored(writer, "s1", "Water the plants", next_run=NOW + HOUR)
    assert run(context(), action="cancel", schedule_id=" s1 ") == ToolOutcome(
        text="cancelled s1", effects=(CancelSchedule("s1"),))
    made = CreateSchedule(id="new1", prompt="Call mum", timezone="UTC", next_run=NOW + HOUR,
                          at=NOW + HOUR)
    assert run(context(made), action="cancel", schedule_id="new1") == ToolOutcome(
        text="cancelled new1", effects=(CancelSchedule("new1"),))


@pytest.mark.parametrize(("args", "complaint"), [
    ({"schedule_id": "ghost"}, "error: no active schedule 'ghost'"),
    ({"schedule_id": "s-over"}, "error: no active schedule 's-over'"),
    ({}, "error: cancel needs `schedule_id`"),
    ({"schedule_id": "  "}, "error: cancel needs `schedule_id`"),
], ids=["unknown", "finished", "missing", "blank"])
def test_cancel_of_nothing_active_is_an_error(context: Any, writer: apsw.Connection,
                                              args: dict[str, Any], complaint: str) -> None:
    """Cancelling an unknown or finished schedule, or naming none, is an error, no effect."""
    stored(writer, "s-over", "Old reminder", next_run=None, state="done")
    outcome = run(context(), action="cancel", **args)
    assert (outcome.is_error, outcome.effects) == (True, ())
    assert outcome.text.startswith(complaint), outcome.text
