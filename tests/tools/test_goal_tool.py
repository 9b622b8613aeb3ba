"""The goal tool as the model uses it: starting a goal is an effect the turn stores, list and
status read the stored goals and their steps, and a goal that is over cannot be cancelled."""

from __future__ import annotations

from typing import Any

import apsw
import pytest

from chalie.store import db, goal_rows
from chalie.store.effects import CancelGoal, StartGoal
from chalie.store.goal_rows import StepRow
from chalie.tools.base import ToolContext, ToolOutcome
from chalie.tools.goal import MAX_GOAL, RESULT_CHARS, GoalTool

NOW = 1_700_000_000.0


def run(ctx: ToolContext, **args: Any) -> ToolOutcome:
    return GoalTool().run(args, ctx)


def stored(writer: apsw.Connection, goal_id: str, text: str, *, at: float = NOW,
           state: str | None = None, result: str | None = None,
           error: str | None = None) -> None:
    """A goal in the store, moved to `state` when given."""
    with db.immediate(writer):
        goal_rows.insert(writer, goal_id, text, source="person", turn_id=None, now=at)
        if state is not None:
            goal_rows.set_state(writer, goal_id, state, now=at + 1, result=result, error=error)


def plan(writer: apsw.Connection, goal_id: str) -> None:
    """A running two-step plan whose first step is done."""
    with db.immediate(writer):
        goal_rows.save_plan(writer, goal_id, (
            StepRow(step_id="a", position=0, description="Search for plumbers", depends_on=()),
            StepRow(step_id="b", position=1, description="Ask for quotes", depends_on=("a",)),
        ), confidence=0.8, now=NOW + 2)
        goal_rows.step_status(writer, goal_id, "a", "done", now=NOW + 3,
                              result="Found   Bob's Plumbing\nand Ace Pipes")


# --- start -------------------------------------------------------------------------------------

def test_start_gives_a_goal_for_the_turn_to_store(context: Any, writer: apsw.Connection) -> None:
    """Starting gives a StartGoal effect with a fresh id and the goal single-spaced, and tells
    the model the result will reach the person; nothing is stored yet."""
    outcome = run(context(), action="start", goal="  Find a   plumber\nfor Tuesday ")
    assert outcome.is_error is False
    (effect,) = outcome.effects
    assert isinstance(effect, StartGoal)
    assert len(effect.id) == 12
    assert effect == StartGoal(id=effect.id, goal="Find a plumber for Tuesday", source="tool")
    assert outcome.text.startswith(f"started goal {effect.id}: ")
    assert "notification" in outcome.text
    assert writer.execute("SELECT count(*) FROM goals").fetchall() == [(0,)]
    second = run(context(), action="start", goal="Find a plumber for Tuesday")
    assert second.effects[0] != effect  # a new id each time


def test_a_goal_the_dmn_starts_is_marked_as_its_own(context: Any) -> None:
    """On the DMN's path the StartGoal's source is "dmn"."""
    (effect,) = run(context(path="dmn"), action="start", goal="Draft the trip plan").effects
    assert isinstance(effect, StartGoal)
    assert effect.source == "dmn"


@pytest.mark.parametrize(("args", "complaint"), [
    ({"action": "start"}, "error: start needs `goal`"),
    ({"action": "start", "goal": "   "}, "error: start needs `goal`"),
    ({"action": "start", "goal": 42}, "error: start needs `goal`"),
    ({"action": "start", "goal": "x" * (MAX_GOAL + 1)}, "error: `goal` is limited to 2000"),
    ({"action": "pursue"}, "error: action must be start, list, status or cancel, got 'pursue'"),
    ({}, "error: action must be start, list, status or cancel, got None"),
    ({"action": "status"}, "error: status needs `goal_id`"),
    ({"action": "cancel", "goal_id": " "}, "error: cancel needs `goal_id`"),
], ids=["no-goal", "blank-goal", "number-goal", "long-goal", "bad-action", "no-action",
        "status-no-id", "cancel-blank-id"])
def test_a_wrong_request_is_an_error(context: Any, args: dict[str, Any], complaint: str) -> None:
    """Arguments the tool cannot use give an error result and no effect."""
    outcome = GoalTool().run(args, context())
    assert (outcome.is_error, outcome.effects) == (True, ())
    assert outcome.text.startswith(complaint), outcome.text


# --- list and status ---------------------------------------------------------------------------

def test_list_shows_this_turns_goals_and_the_stored_ones(context: Any,
                                                         writer: apsw.Connection) -> None:
    """List shows goals started this turn, then stored goals newest first with their state and
    how much of their plan is done."""
    stored(writer, "g-old", "Renew the passport", at=NOW - 100, state="completed")
    stored(writer, "g-new", "Find a plumber", at=NOW - 10)
    plan(writer, "g-new")
    ctx = context(StartGoal(id="fresh", goal="Book a dentist"))
    assert run(ctx, action="list").text.splitlines() == [
        "- fresh (started just now): Book a dentist",
        "- g-new (running, 50% of steps done): Find a plumber",
        "- g-old (completed, 0% of steps done): Renew the passport",
    ]


def test_list_shows_what_this_turn_cancelled(context: Any, writer: apsw.Connection) -> None:
    """A goal cancelled in this turn is listed as cancelled, and one started and cancelled in
    this turn is not listed as started."""
    stored(writer, "g1", "Find a plumber")
    ctx = context(StartGoal(id="fresh", goal="Book a dentist"), CancelGoal("fresh"),
                  CancelGoal("g1"))
    assert run(ctx, action="list").text == \
        "- g1 (cancelled just now, 0% of steps done): Find a plumber"


def test_list_with_no_goals_says_so(context: Any) -> None:
    """No goals at all gets a plain answer, not an error."""
    assert run(context(), action="list") == ToolOutcome(text="no goals")


def test_status_shows_the_goal_its_steps_and_its_result(context: Any,
                                                        writer: apsw.Connection) -> None:
    """Status shows the goal's state, each step with its result (single-spaced), and the
    goal's result, cut to a readable length."""
    stored(writer, "g1", "Find a plumber")
    plan(writer, "g1")
    with db.immediate(writer):
        goal_rows.set_state(writer, "g1", "completed", now=NOW + 9, result="R" * 400)
    assert run(context(), action="status", goal_id=" g1 ").text.splitlines() == [
        "goal g1 (completed): Find a plumber",
        "- step a (done): Search for plumbers -> Found Bob's Plumbing and Ace Pipes",
        "- step b (pending): Ask for quotes",
        f"result: {'R' * RESULT_CHARS}…",
    ]


def test_status_shows_why_a_goal_failed(context: Any, writer: apsw.Connection) -> None:
    """A failed goal's status ends with its error."""
    stored(writer, "g1", "Find a plumber", state="failed", error="no plan after two tries")
    assert run(context(), action="status", goal_id="g1").text.splitlines() == [
        "goal g1 (failed): Find a plumber", "error: no plan after two tries"]


def test_status_says_a_goal_ran_without_a_plan_and_why_it_ended(
    context: Any, writer: apsw.Connection,
) -> None:
    """A goal whose plans failed the checks says it ran without a plan and why; once over, its
    status names why it ended."""
    stored(writer, "g1", "Find a plumber")
    with db.immediate(writer):
        goal_rows.save_plan(writer, "g1", (
            StepRow(step_id="goal", position=0, description="Find a plumber", depends_on=()),),
            confidence=None, now=NOW + 1, mode="plain",
            problems=("Step \"a\" depends on itself.", "The plan's confidence is 0.2."))
        goal_rows.set_state(writer, "g1", "expired", now=NOW + 2, end_reason="expired")
    assert run(context(), action="status", goal_id="g1").text.splitlines() == [
        "goal g1 (expired): Find a plumber",
        "runs without a plan, as its plans failed the checks: Step \"a\" depends on itself. "
        "The plan's confidence is 0.2.",
        "- step goal (pending): Find a plumber",
        "ended: expired",
    ]


def test_status_of_an_unknown_goal_is_an_error(context: Any) -> None:
    """Asking after a goal that does not exist is an error naming it."""
    outcome = run(context(), action="status", goal_id="ghost")
    assert (outcome.is_error, outcome.text) == (True, "error: no goal 'ghost'")


# --- cancel ------------------------------------------------------------------------------------

def test_cancel_of_an_active_or_new_goal_is_an_effect(context: Any,
                                                      writer: apsw.Connection) -> None:
    """Cancelling a stored active goal, or one started this turn, gives a CancelGoal effect."""
    stored(writer, "g1", "Find a plumber", state="running")
    assert run(context(), action="cancel", goal_id="g1") == ToolOutcome(
        text="cancelled goal g1", effects=(CancelGoal("g1"),))
    ctx = context(StartGoal(id="fresh", goal="Book a dentist"))
    assert run(ctx, action="cancel", goal_id="fresh") == ToolOutcome(
        text="cancelled goal fresh", effects=(CancelGoal("fresh"),))


@pytest.mark.parametrize("state", ["completed", "failed", "cancelled", "expired"])
def test_cancel_of_a_goal_that_is_over_says_so(context: Any, writer: apsw.Connection,
                                               state: str) -> None:
    """A goal that completed, failed, was cancelled or expired cannot be cancelled: the error
    says what it is."""
    stored(writer, "g1", "Find a plumber", state=state)
    outcome = run(context(), action="cancel", goal_id="g1")
    assert outcome == ToolOutcome(
        text=f"error: goal 'g1' cannot be cancelled: it is {state}", is_error=True)


def test_cancel_of_an_unknown_goal_says_so(context: Any) -> None:
    """Cancelling a goal that does not exist is an error saying there is no such goal."""
    outcome = run(context(), action="cancel", goal_id="ghost")
    assert outcome == ToolOutcome(
        text="error: goal 'ghost' cannot be cancelled: no such goal", is_error=True)
