"""The background paths' rows as the store keeps them: a scheduled run is stored once, however
often it is retried; a goal that was cancelled or finished takes no more work; proactive
messages reach the person's transcript and frames only when sent; and what background jobs
spent is read back for the budget and the dashboard."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import apsw
import pytest

from chalie.errors import StoreConflict
from chalie.frames import Notification, Task
from chalie.store import background_ops, db, goal_rows, proactive_rows, schedule_rows, writes
from chalie.store.background_ops import (
    Applied,
    CancelGoal,
    DeliverDeferred,
    Op,
    Proactive,
    ScheduleRan,
    Spend,
)
from chalie.store.goal_rows import StepRow
from chalie.store.proactive_rows import ProactiveRow
from chalie.store.records import TurnRecord
from chalie.store.schedule_rows import ScheduleRow

NOW = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC
HOUR = 3600.0
DAY = 86_400.0


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[apsw.Connection]:
    """The writer connection of a fresh, migrated store."""
    writer = db.open_writer(tmp_path / "data", busy_timeout_ms=5000, synchronous="FULL")
    yield writer
    writer.close()


def rows(conn: apsw.Connection, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.execute(sql, params)]


def apply(conn: apsw.Connection, *ops: Op, now: float = NOW,
          turn_id: str | None = None) -> Applied:
    """Apply ops in one transaction, as the StoreWriter does."""
    with db.immediate(conn):
        return background_ops.apply(conn, ops, turn_id=turn_id, now=now)


# --- schedules ---------------------------------------------------------------------------------

def schedule(conn: apsw.Connection, schedule_id: str = "s1", *, cron: str | None = "0 9 * * *",
             at: float | None = None, next_run: float | None = NOW + HOUR,
             state: str = "active") -> None:
    with db.immediate(conn):
        schedule_rows.insert(conn, ScheduleRow(
            id=schedule_id, prompt="Summarise my inbox", timezone="UTC", at=at, cron=cron,
            next_run=next_run, last_run=None, state=state, source="person", turn_id=None,
            created_at=NOW - DAY))


def state_of(conn: apsw.Connection, schedule_id: str = "s1") -> tuple[Any, ...]:
    row = schedule_rows.get(conn, schedule_id)
    assert row is not None
    return row.state, row.next_run, row.last_run


def run_rows(conn: apsw.Connection) -> list[tuple[Any, ...]]:
    return rows(conn, "SELECT schedule_id, due_at, outcome, error FROM schedule_runs "
                      "ORDER BY schedule_id, due_at")


def test_a_run_moves_the_schedule_to_its_next_time(conn: apsw.Connection) -> None:
    """A recurring schedule's run is recorded once and the schedule stays active at its next
    time, with the run's due time as its last run."""
    schedule(conn)
    due = NOW + HOUR
    with db.immediate(conn):
        schedule_rows.ran(conn, "s1", due, outcome="done", next_run=due + DAY, turn_id=None,
                          now=due + 5, error=None)
    assert state_of(conn) == ("active", due + DAY, due)
    assert run_rows(conn) == [("s1", due, "done", None)]
    assert schedule_rows.has_run(conn, "s1", due) is True
    assert schedule_rows.has_run(conn, "s1", due + DAY) is False


def test_the_last_run_of_a_schedule_marks_it_done(conn: apsw.Connection) -> None:
    """A one-shot schedule that ran (even when the run failed) is done and leaves the active
    list; its run keeps the error."""
    schedule(conn, cron=None, at=NOW + HOUR)
    with db.immediate(conn):
        schedule_rows.ran(conn, "s1", NOW + HOUR, outcome="failed", next_run=None,
                          turn_id=None, now=NOW + HOUR, error="llm timeout")
    assert state_of(conn) == ("done", None, NOW + HOUR)
    assert run_rows(conn) == [("s1", NOW + HOUR, "failed", "llm timeout")]
    assert schedule_rows.active(conn) == []


def test_a_run_stored_twice_is_a_conflict_and_nothing_of_the_second_is_kept(
    conn: apsw.Connection,
) -> None:
    """Storing the run of the same due time again raises StoreConflict; the transaction that
    tried it (here with a notification) is rolled back, leaving the first run alone."""
    schedule(conn)
    due = NOW + HOUR
    apply(conn, ScheduleRan("s1", due, "done", next_run=due + DAY), now=due)
    message = ProactiveRow(path="scheduled", channel="main", content="Inbox: 3 new",
                           status="sent", capped=False, composed_at=due, ref="s1")
    with pytest.raises(StoreConflict, match=r"schedule s1 due at [\d.]+ is stored already"):
        apply(conn, Proactive(message, schedule_id="s1"),
              ScheduleRan("s1", due, "done", next_run=due + DAY), now=due + 1)
    assert run_rows(conn) == [("s1", due, "done", None)]
    assert rows(conn, "SELECT count(*) FROM proactive") == [(0,)]
    assert rows(conn, "SELECT count(*) FROM transcript") == [(0,)]
    assert state_of(conn) == ("active", due + DAY, due)


def test_missed_runs_are_recorded_once_and_the_schedule_moves_on(conn: apsw.Connection) -> None:
    """Due times passed while the server was down are recorded as missed (a due time already
    recorded is left as it was) and the schedule moves to its next time."""
    schedule(conn, next_run=NOW - 2 * DAY)
    with db.immediate(conn):
        schedule_rows.ran(conn, "s1", NOW - 2 * DAY, outcome="done", next_run=NOW - DAY,
                          turn_id=None, now=NOW - 2 * DAY, error=None)
    with db.immediate(conn):
        schedule_rows.missed(conn, "s1", (NOW - 2 * DAY, NOW - DAY), next_run=NOW + HOUR,
                             now=NOW)
    assert run_rows(conn) == [("s1", NOW - 2 * DAY, "done", None),
                              ("s1", NOW - DAY, "missed", None)]
    assert state_of(conn) == ("active", NOW + HOUR, NOW - 2 * DAY)
    assert [r["outcome"] for r in schedule_rows.runs(conn, "s1", 10)] == ["missed", "done"]


def test_a_missed_one_shot_is_marked_missed(conn: apsw.Connection) -> None:
    """A one-shot whose time passed while the server was down ends as missed."""
    schedule(conn, cron=None, at=NOW - HOUR, next_run=NOW - HOUR)
    with db.immediate(conn):
        schedule_rows.missed(conn, "s1", (NOW - HOUR,), next_run=None, now=NOW)
    assert state_of(conn) == ("missed", None, None)
    assert run_rows(conn) == [("s1", NOW - HOUR, "missed", None)]


def test_cancel_says_what_the_schedule_was_and_changes_only_active_ones(
    conn: apsw.Connection,
) -> None:
    """Cancelling gives the state before (None for no such schedule); an active schedule is
    cancelled and stops running; a done one stays done."""
    schedule(conn, "live")
    schedule(conn, "over", next_run=None, state="done")
    with db.immediate(conn):
        assert schedule_rows.cancel(conn, "live") == "active"
        assert schedule_rows.cancel(conn, "over") == "done"
        assert schedule_rows.cancel(conn, "ghost") is None
        assert schedule_rows.cancel(conn, "live") == "cancelled"
    assert state_of(conn, "live") == ("cancelled", None, None)
    assert state_of(conn, "over") == ("done", None, None)
    assert schedule_rows.active(conn) == []


def test_a_cancelled_schedule_is_not_revived_by_a_late_run(conn: apsw.Connection) -> None:
    """A run that finishes after its schedule was cancelled is recorded, but the schedule stays
    cancelled with no next run."""
    schedule(conn)
    with db.immediate(conn):
        schedule_rows.cancel(conn, "s1")
        schedule_rows.ran(conn, "s1", NOW + HOUR, outcome="done", next_run=NOW + DAY,
                          turn_id=None, now=NOW + HOUR, error=None)
    assert state_of(conn) == ("cancelled", None, None)


def test_active_schedules_are_listed_soonest_first(conn: apsw.Connection) -> None:
    """Only schedules that will run again are active, the soonest first."""
    schedule(conn, "later", next_run=NOW + 2 * HOUR)
    schedule(conn, "sooner", next_run=NOW + HOUR)
    schedule(conn, "finished", next_run=None, state="done")
    assert [r.id for r in schedule_rows.active(conn)] == ["sooner", "later"]
    assert [r.id for r in schedule_rows.listing(conn, state=None, limit=10, offset=0)] == [
        "sooner", "later", "finished"]


# --- goals -------------------------------------------------------------------------------------

def goal(conn: apsw.Connection, goal_id: str = "g1", text: str = "Find a plumber") -> None:
    with db.immediate(conn):
        goal_rows.insert(conn, goal_id, text, source="person", turn_id=None, now=NOW)


def planned(conn: apsw.Connection, goal_id: str = "g1") -> None:
    """The goal has a two-step plan and is running."""
    with db.immediate(conn):
        goal_rows.save_plan(conn, goal_id, (
            StepRow(step_id="a", position=0, description="Search for plumbers", depends_on=()),
            StepRow(step_id="b", position=1, description="Ask for quotes", depends_on=("a",)),
        ), confidence=0.8, now=NOW + 1)


def goal_state(conn: apsw.Connection, goal_id: str = "g1") -> str:
    row = goal_rows.get(conn, goal_id)
    assert row is not None
    return row.state


def test_a_finished_goal_cannot_change_state(conn: apsw.Connection) -> None:
    """Moving a completed goal again is a StoreConflict and it stays completed with its
    result."""
    goal(conn)
    with db.immediate(conn):
        goal_rows.set_state(conn, "g1", "completed", now=NOW + 5, result="Booked Bob")
    with pytest.raises(StoreConflict, match="goal g1 is no longer active"), \
            db.immediate(conn):
        goal_rows.set_state(conn, "g1", "failed", now=NOW + 6, error="late failure")
    row = goal_rows.get(conn, "g1")
    assert row is not None
    assert (row.state, row.result, row.error, row.finished_at) == (
        "completed", "Booked Bob", None, NOW + 5)


def test_a_step_is_finished_only_once(conn: apsw.Connection) -> None:
    """A step done once cannot be done (or failed) again: StoreConflict, and the coverage
    counts it once."""
    goal(conn)
    planned(conn)
    with db.immediate(conn):
        goal_rows.step_status(conn, "g1", "a", "running", now=NOW + 2, attempt=True)
        goal_rows.step_status(conn, "g1", "a", "done", now=NOW + 3, result="3 found")
    for status in ("done", "failed"):
        with pytest.raises(StoreConflict, match="step a of goal g1 is finished already"), \
                db.immediate(conn):
            goal_rows.step_status(conn, "g1", "a", status, now=NOW + 4, result="again")
    steps = goal_rows.steps(conn, "g1")
    assert [(s.step_id, s.status, s.result, s.attempts) for s in steps] == [
        ("a", "done", "3 found", 1), ("b", "pending", None, 0)]
    assert goal_rows.coverage(conn, "g1") == 0.5


def test_a_step_of_a_goal_that_is_not_running_is_refused(conn: apsw.Connection) -> None:
    """A step's status on a cancelled goal is a StoreConflict."""
    goal(conn)
    planned(conn)
    with db.immediate(conn):
        goal_rows.cancel(conn, "g1", NOW + 2)
    with pytest.raises(StoreConflict, match="goal g1 is not running"), db.immediate(conn):
        goal_rows.step_status(conn, "g1", "a", "done", now=NOW + 3)
    assert [s.status for s in goal_rows.steps(conn, "g1")] == ["pending", "pending"]


def test_spending_on_a_cancelled_goal_is_refused(conn: apsw.Connection) -> None:
    """What a loop used adds up on an active goal; on a cancelled one it is a StoreConflict
    and the totals stay."""
    goal(conn)
    with db.immediate(conn):
        goal_rows.spent(conn, "g1", iterations=2, elapsed_s=1.5, tokens=300, now=NOW + 1)
        goal_rows.spent(conn, "g1", iterations=1, elapsed_s=0.5, tokens=100, now=NOW + 2)
        goal_rows.cancel(conn, "g1", NOW + 3)
    with pytest.raises(StoreConflict, match="goal g1 is no longer active"), db.immediate(conn):
        goal_rows.spent(conn, "g1", iterations=1, elapsed_s=1.0, tokens=999, now=NOW + 4)
    row = goal_rows.get(conn, "g1")
    assert row is not None
    assert (row.state, row.iterations, row.elapsed_s, row.tokens) == ("cancelled", 3, 2.0, 400)


def test_cancelling_an_active_goal_tells_the_person(conn: apsw.Connection) -> None:
    """CancelGoal on a running goal gives the goal's state before and a `task` frame saying it
    is cancelled, with its id, title and coverage."""
    goal(conn)
    planned(conn)
    applied = apply(conn, CancelGoal("g1", channel="main"), now=NOW + 10)
    assert applied.values == ["running"]
    assert applied.frames == [("main", Task(goal_id="g1", status="cancelled", coverage=0.0,
                                            title="Find a plumber"))]
    assert applied.goals_stopped == ["g1"]
    assert goal_state(conn) == "cancelled"


def test_cancelling_a_finished_or_unknown_goal_says_nothing(conn: apsw.Connection) -> None:
    """CancelGoal on a completed goal or on none gives no frame and changes nothing."""
    goal(conn)
    with db.immediate(conn):
        goal_rows.set_state(conn, "g1", "completed", now=NOW + 1)
    applied = apply(conn, CancelGoal("g1", channel="main"), CancelGoal("ghost", channel="main"))
    assert applied.values == ["completed", None]
    assert applied.frames == []
    assert applied.goals_stopped == []
    assert goal_state(conn) == "completed"


# --- proactive messages ------------------------------------------------------------------------

def message(status: str, *, content: str = "Your parcel arrives today",
            composed_at: float = NOW, path: str = "dmn", capped: bool = True,
            ref: str | None = None, reason: str | None = None) -> ProactiveRow:
    return ProactiveRow(path=path, channel="main", content=content, status=status,
                        capped=capped, composed_at=composed_at, ref=ref, topic="delivery",
                        reason=reason)


def transcript(conn: apsw.Connection) -> list[tuple[Any, ...]]:
    return rows(conn, "SELECT channel, role, text, created_at FROM transcript ORDER BY id")


def proactive(conn: apsw.Connection) -> list[tuple[Any, ...]]:
    return rows(conn, "SELECT content, status, reason, delivered_at FROM proactive ORDER BY id")


def test_a_sent_message_is_a_notification_and_the_assistants_line(
    conn: apsw.Connection,
) -> None:
    """A proactive message sent now gives a `notification` frame on its channel and enters the
    channel's transcript as the assistant's line, delivered now."""
    applied = apply(conn, Proactive(message("sent")))
    assert applied.frames == [("main", Notification(
        content="Your parcel arrives today", topic="delivery", source="dmn"))]
    assert transcript(conn) == [("main", "assistant", "Your parcel arrives today", NOW)]
    assert proactive(conn) == [("Your parcel arrives today", "sent", None, NOW)]


def test_a_sent_message_from_a_background_turn_is_stored_with_the_turn(
    conn: apsw.Connection,
) -> None:
    """A scheduled run's turn stores its message and run together: the notification names the
    schedule and the transcript line names the turn."""
    schedule(conn)
    turn = TurnRecord(
        id="t-sched", channel="main", client_id=None, source="scheduled",
        user_text="Summarise my inbox", response_text="Inbox: 3 new", outcome="answered",
        error=None, iterations=1, llm_calls=1, tokens_total=120, response_time_s=2.0,
        started_at=NOW, finished_at=NOW + 2, path="scheduled")
    with db.immediate(conn):
        applied = writes.insert_turn(conn, turn, (
            ScheduleRan("s1", NOW, "done", next_run=NOW + DAY),
            Proactive(message("sent", content="Inbox: 3 new", path="scheduled", capped=False,
                              ref="s1"), schedule_id="s1")))
    assert applied.frames == [("main", Notification(
        content="Inbox: 3 new", topic="delivery", source="schedule", schedule_id="s1"))]
    assert rows(conn, "SELECT turn_id, role, text FROM transcript") == [
        ("t-sched", "assistant", "Inbox: 3 new")]
    assert rows(conn, "SELECT turn_id FROM schedule_runs") == [("t-sched",)]


@pytest.mark.parametrize(("status", "reason"), [("deferred", "quiet_hours"),
                                                ("suppressed", "cap")])
def test_a_message_held_back_gives_no_frame_and_no_line(conn: apsw.Connection, status: str,
                                                        reason: str) -> None:
    """A deferred or suppressed message is only recorded: no frame, nothing in the
    transcript, not delivered."""
    applied = apply(conn, Proactive(message(status, reason=reason)))
    assert applied.frames == []
    assert transcript(conn) == []
    assert proactive(conn) == [("Your parcel arrives today", status, reason, None)]


def test_deferred_messages_are_delivered_and_stale_ones_dropped(conn: apsw.Connection) -> None:
    """Delivering the deferred queue sends what is young enough, oldest first (frames,
    transcript lines, marked sent), drops what waited longer than the maximum age (reason
    too_old), and says how many of each."""
    apply(conn,
          Proactive(message("deferred", content="Stale thought", composed_at=NOW - 13 * HOUR,
                            reason="quiet_hours")),
          Proactive(message("deferred", content="Plumber found", path="goal", ref="g1",
                            composed_at=NOW - 2 * HOUR, reason="quiet_hours")),
          Proactive(message("deferred", content="Morning thought", composed_at=NOW - HOUR,
                            reason="quiet_hours")),
          Proactive(message("sent", content="Already sent", composed_at=NOW - 3 * HOUR)),
          now=NOW - 13 * HOUR)
    delivered = NOW + 60
    applied = apply(conn, DeliverDeferred("main", max_age_s=12 * HOUR), now=delivered)
    assert applied.values == [(2, 1)]
    assert applied.frames == [
        ("main", Notification(content="Plumber found", topic="delivery", source="goal",
                              goal_id="g1")),
        ("main", Notification(content="Morning thought", topic="delivery", source="dmn"))]
    assert applied.delivered == [("dmn", "dropped"), ("goal", "sent"), ("dmn", "sent")]
    assert proactive(conn) == [
        ("Stale thought", "dropped", "too_old", None),
        ("Plumber found", "sent", "quiet_hours", delivered),
        ("Morning thought", "sent", "quiet_hours", delivered),
        ("Already sent", "sent", None, NOW - 13 * HOUR)]
    assert [(role, text, at) for _, role, text, at in transcript(conn)] == [
        ("assistant", "Already sent", NOW - 13 * HOUR),
        ("assistant", "Plumber found", delivered),
        ("assistant", "Morning thought", delivered)]
    assert apply(conn, DeliverDeferred("main", max_age_s=12 * HOUR)).values == [(0, 0)]


def test_deferred_messages_wait_for_their_own_channel(conn: apsw.Connection) -> None:
    """Delivering one channel's queue leaves another channel's messages waiting."""
    other = ProactiveRow(path="dmn", channel="kitchen", content="Timer idea",
                         status="deferred", capped=True, composed_at=NOW)
    apply(conn, Proactive(other))
    assert apply(conn, DeliverDeferred("main", max_age_s=HOUR)).values == [(0, 0)]
    assert [d.content for d in proactive_rows.deferred(conn, "kitchen")] == ["Timer idea"]


def test_the_cap_counts_capped_messages_that_were_not_suppressed(
    conn: apsw.Connection,
) -> None:
    """capped_since gives the composition times of capped messages sent, deferred or dropped
    since the time asked, oldest first; suppressed, uncapped and older ones do not count."""
    apply(conn,
          Proactive(message("sent", composed_at=NOW - 2 * HOUR)),
          Proactive(message("deferred", composed_at=NOW - HOUR, reason="quiet_hours")),
          Proactive(message("suppressed", composed_at=NOW - 30, reason="cap")),
          Proactive(message("sent", composed_at=NOW - 20, capped=False, path="scheduled")),
          Proactive(message("sent", composed_at=NOW - 2 * DAY)))
    apply(conn, DeliverDeferred("main", max_age_s=60))  # the deferred one is dropped
    assert proactive_rows.capped_since(conn, NOW - DAY) == [NOW - 2 * HOUR, NOW - HOUR]


# --- spending ----------------------------------------------------------------------------------

def turn(turn_id: str, path: str, tokens: int, finished_at: float,
         llm_calls: int = 1) -> TurnRecord:
    return TurnRecord(
        id=turn_id, channel="main", client_id=None, source=path if path != "user" else "text",
        user_text="step", response_text="ok", outcome="answered", error=None, iterations=1,
        llm_calls=llm_calls, tokens_total=tokens, response_time_s=1.0,
        started_at=finished_at - 1, finished_at=finished_at, path=path)


def store_turns(conn: apsw.Connection, turns: Sequence[TurnRecord]) -> None:
    with db.immediate(conn):
        for t in turns:
            writes.insert_turn(conn, t)


def test_spending_read_back_combines_turns_and_jobs(conn: apsw.Connection) -> None:
    """spent_since gives (path, at, tokens) of the turns of every path (the person's too: the
    dashboard shows them) and of jobs that are not turns (encodings, plans) since the time
    asked; older rows and turns that used no tokens are left out."""
    store_turns(conn, [turn("t-goal", "goal", 500, NOW - HOUR),
                       turn("t-dmn", "dmn", 200, NOW - 2 * HOUR),
                       turn("t-old", "goal", 900, NOW - 2 * DAY),
                       turn("t-user", "user", 50, NOW - 60),
                       turn("t-none", "scheduled", 0, NOW - 60)])
    apply(conn, Spend("encoder", tokens=80, llm_calls=1), now=NOW - 30)
    apply(conn, Spend("goal", tokens=40, llm_calls=2, ref="g1"), now=NOW - 3 * HOUR)
    apply(conn, Spend("encoder", tokens=70, llm_calls=1), now=NOW - 2 * DAY)
    assert sorted(proactive_rows.spent_since(conn, NOW - DAY)) == [
        ("dmn", NOW - 2 * HOUR, 200), ("encoder", NOW - 30, 80),
        ("goal", NOW - 3 * HOUR, 40), ("goal", NOW - HOUR, 500), ("user", NOW - 60, 50)]


def test_spending_by_day_adds_turns_and_jobs_per_day_and_path(conn: apsw.Connection) -> None:
    """The dashboard's daily spending sums tokens and LLM calls per UTC day and path over turns
    (the person's too) and background jobs, oldest day first."""
    yesterday = NOW - DAY  # 2023-11-13 22:13 UTC
    store_turns(conn, [turn("t1", "goal", 500, NOW - HOUR, llm_calls=3),
                       turn("t2", "goal", 100, NOW - 2 * HOUR, llm_calls=1),
                       turn("t3", "dmn", 70, yesterday),
                       turn("t4", "user", 50, NOW - 60, llm_calls=2)])
    apply(conn, Spend("goal", tokens=40, llm_calls=1, ref="g1"), now=NOW - 30)
    apply(conn, Spend("encoder", tokens=9, llm_calls=1), now=yesterday)
    apply(conn, Spend("encoder", tokens=1000, llm_calls=1), now=NOW - 10 * DAY)
    assert proactive_rows.spending_by_day(conn, NOW - 7 * DAY) == [
        {"day": "2023-11-13", "path": "dmn", "tokens": 70, "llm_calls": 1},
        {"day": "2023-11-13", "path": "encoder", "tokens": 9, "llm_calls": 1},
        {"day": "2023-11-14", "path": "goal", "tokens": 640, "llm_calls": 5},
        {"day": "2023-11-14", "path": "user", "tokens": 50, "llm_calls": 2}]


# --- open loops --------------------------------------------------------------------------------

def test_a_loop_closes_once(conn: apsw.Connection) -> None:
    """An open loop is listed until closed; closing it again, or a loop that does not exist,
    changes nothing."""
    with db.immediate(conn):
        first = proactive_rows.open_loop(conn, "Ask about the interview", source="dmn",
                                         turn_id=None, now=NOW - 60)
        second = proactive_rows.open_loop(conn, "Boiler service", source="user",
                                          turn_id=None, now=NOW)
    with db.immediate(conn):
        assert proactive_rows.close_loop(conn, first, NOW) is True
        assert proactive_rows.close_loop(conn, first, NOW + 1) is False
        assert proactive_rows.close_loop(conn, 999, NOW) is False
    assert proactive_rows.open_loops(conn, 10) == [(second, "Boiler service", NOW)]
    assert (proactive_rows.is_open(conn, first), proactive_rows.is_open(conn, second)) == (
        False, True)
