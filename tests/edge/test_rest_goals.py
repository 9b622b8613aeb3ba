"""The goal documents GET /api/goals and GET /api/goals/<id> answer with, read from a real store:
how a goal runs (with a plan, or plain and why) and, once over, why it ended."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import msgspec
import pytest

from chalie.edge import rest_goals
from chalie.store import db, goal_rows
from chalie.store.goal_rows import StepRow

NOW = 1_700_000_000.0
PROBLEMS = ("The plan's confidence is 0.3; it must be above 0.5.",)


def document(tmp_path: Path, *, reason: str | None = None) -> dict[str, object]:
    """The detail document of a plain goal, ended with `reason` when given, as JSON."""
    conn = db.open_writer(tmp_path / "data", busy_timeout_ms=5000, synchronous="FULL")
    try:
        with db.immediate(conn):
            goal_rows.insert(conn, "g1", "Find a plumber", source="person", turn_id=None,
                             now=NOW)
            goal_rows.save_plan(conn, "g1", (StepRow("goal", 0, "Find a plumber", ()),),
                                confidence=None, now=NOW + 1, mode="plain", problems=PROBLEMS)
            if reason is not None:
                state = {"completed": "completed", "cancelled": "cancelled",
                         "expired": "expired"}.get(reason, "failed")
                goal_rows.set_state(conn, "g1", state, now=NOW + 2, end_reason=reason)
        row = goal_rows.get(conn, "g1")
        assert row is not None
        decoded: dict[str, object] = msgspec.json.decode(
            msgspec.json.encode(rest_goals.goal_detail(conn, row)))
        return decoded
    finally:
        conn.close()


def test_a_plain_goal_says_it_runs_without_a_plan_and_why(tmp_path: Path) -> None:
    """An active plain goal: mode plain, the checks its plans failed, its one step (the goal)
    as its plan with no confidence, and no end reason yet."""
    found = document(tmp_path)
    assert (found["state"], found["mode"], found["plan_problems"], found["end_reason"]) == (
        "running", "plain", list(PROBLEMS), None)
    assert found["plan"] == {"confidence": None, "steps": [{
        "id": "goal", "description": "Find a plumber", "depends_on": [], "status": "pending",
        "result": None, "turn_id": None, "attempts": 0, "finished_at": None}]}


@pytest.mark.parametrize("reason", goal_rows.END_REASONS)
def test_every_end_reason_the_store_keeps_is_one_the_api_documents(tmp_path: Path,
                                                                   reason: str) -> None:
    """Each reason a goal can end with comes out of the API as that stable code."""
    assert document(tmp_path, reason=reason)["end_reason"] == reason
    assert set(get_args(rest_goals.EndReason)) == set(goal_rows.END_REASONS)
    assert set(get_args(rest_goals.GoalState)) == set(goal_rows.STATES)
