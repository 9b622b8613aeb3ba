"""A goal's mode, pauses, progress and ending as the store keeps them: a plain goal keeps why it
has no plan, a run of pauses keeps when the first began until a step runs, and a goal that is
over keeps why it ended."""

from __future__ import annotations

import apsw
import pytest

from chalie.frames import Task
from chalie.store import background_ops, db, goal_rows
from chalie.store.background_ops import GoalState, PauseGoal, ProgressTold, SavePlan
from chalie.store.goal_rows import GoalRow, StepRow

NOW = 1_700_000_000.0
PROBLEMS = ("Steps \"a\", \"b\" depend on each other in a cycle.", "The plan's confidence is 0.3.")


def goal(writer: apsw.Connection, text: str = "Find a plumber") -> None:
    with db.immediate(writer):
        goal_rows.insert(writer, "g1", text, source="person", turn_id=None, now=NOW)


def apply(writer: apsw.Connection, *ops: background_ops.Op,
          now: float = NOW) -> background_ops.Applied:
    with db.immediate(writer):
        return background_ops.apply(writer, ops, turn_id=None, now=now)


def row(writer: apsw.Connection) -> GoalRow:
    found = goal_rows.get(writer, "g1")
    assert found is not None
    return found


def test_a_plain_goal_keeps_why_it_runs_without_a_plan(writer: apsw.Connection) -> None:
    """Saved plain, the goal's one step is the goal itself, with no confidence and the plans'
    problems kept in order; a goal with a plan has mode plan and no problems."""
    goal(writer)
    step = StepRow(step_id="goal", position=0, description="Find a plumber", depends_on=())
    applied = apply(writer, SavePlan("g1", (step,), None, "main", mode="plain",
                                     problems=PROBLEMS))
    assert applied.frames == [("main", Task(goal_id="g1", status="running", coverage=0.0,
                                            title="Find a plumber"))]
    found = row(writer)
    assert (found.state, found.mode, found.plan_problems, found.confidence) == (
        "running", "plain", PROBLEMS, None)
    with db.immediate(writer):
        goal_rows.insert(writer, "g2", "Book a dentist", source="tool", turn_id=None, now=NOW)
    apply(writer, SavePlan("g2", (step,), 0.8, "main"))
    planned = goal_rows.get(writer, "g2")
    assert planned is not None
    assert (planned.mode, planned.plan_problems, planned.confidence) == ("plan", None, 0.8)


def test_a_run_of_pauses_keeps_when_the_first_began_until_a_step_runs(
    writer: apsw.Connection,
) -> None:
    """Paused again and again, the goal keeps the first pause's time; once a step runs it is
    no longer paused at all."""
    goal(writer)
    apply(writer, SavePlan("g1", (StepRow("a", 0, "Search for plumbers", ()),), 0.9, "main"))
    apply(writer, PauseGoal("g1", NOW + 100, "main"), now=NOW + 10)
    apply(writer, PauseGoal("g1", None, "main"), now=NOW + 200)
    assert (row(writer).paused_at, row(writer).paused_until) == (NOW + 10, None)
    with db.immediate(writer):
        goal_rows.step_status(writer, "g1", "a", "running", now=NOW + 300, attempt=True)
    assert (row(writer).paused_at, row(writer).paused_until) == (None, None)
    apply(writer, PauseGoal("g1", NOW + 500, "main"), now=NOW + 400)
    assert row(writer).paused_at == NOW + 400


def test_progress_told_is_kept(writer: apsw.Connection) -> None:
    """ProgressTold records when the person last heard of the goal."""
    goal(writer)
    apply(writer, ProgressTold("g1"), now=NOW + 1800)
    assert row(writer).progress_at == NOW + 1800


@pytest.mark.parametrize(("state", "reason"), [
    ("completed", "completed"), ("failed", "step_failed"), ("failed", "crashed"),
    ("expired", "expired")])
def test_a_goal_that_is_over_keeps_why_it_ended(writer: apsw.Connection, state: str,
                                                reason: str) -> None:
    """GoalState with a reason ends the goal with it: finished, not paused, a `task` frame with
    the new state, and counted under it."""
    goal(writer)
    apply(writer, PauseGoal("g1", NOW + 100, "main"), now=NOW + 10)
    applied = apply(writer, GoalState("g1", state, "main", end_reason=reason), now=NOW + 20)
    assert applied.frames == [("main", Task(goal_id="g1", status=state, coverage=0.0,
                                            title="Find a plumber"))]
    found = row(writer)
    assert (found.state, found.end_reason, found.finished_at, found.paused_until) == (
        state, reason, NOW + 20, None)
    assert goal_rows.counts(writer)[state] == 1


def test_a_cancelled_goal_ended_because_it_was_cancelled(writer: apsw.Connection) -> None:
    """Cancelling an active goal gives it the reason cancelled; an expired one is not
    cancelled and keeps its reason."""
    goal(writer)
    with db.immediate(writer):
        assert goal_rows.cancel(writer, "g1", NOW + 1) == "pending"
        goal_rows.insert(writer, "g2", "Book a dentist", source="tool", turn_id=None, now=NOW)
        goal_rows.set_state(writer, "g2", "expired", now=NOW + 2, end_reason="expired")
        assert goal_rows.cancel(writer, "g2", NOW + 3) == "expired"
    assert (row(writer).state, row(writer).end_reason) == ("cancelled", "cancelled")
    expired = goal_rows.get(writer, "g2")
    assert expired is not None
    assert (expired.state, expired.end_reason) == ("expired", "expired")
    assert goal_rows.active_ids(writer) == []
