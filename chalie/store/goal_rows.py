"""Goals in the store: the goal, its plan's steps, what its loops used, and how it ended.

A goal runs in `mode` plan (the steps of a checked plan) or plain (one step, the goal itself,
after two plans failed the checks: `plan_problems` keeps why). While its path is out of budget
it is paused: `paused_until` when it goes on, `paused_at` since when it waits (the first pause
of a run of them; cleared once a step runs). `progress_at` is when the person last heard of its
progress. A goal that is over has an `end_reason`, one of END_REASONS.

Writes run on the StoreWriter's connection inside its transactions; reads on any reader. A
write that finds its goal no longer running (cancelled meanwhile) raises StoreConflict, so the
transaction that holds it (a step's turn) is rolled back rather than recording work on a goal
the person called off.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw
import msgspec

from chalie.errors import StoreConflict

ACTIVE = ("pending", "planning", "running")
STATES = ("pending", "planning", "running", "completed", "failed", "cancelled", "expired")
FINISHED = ("completed", "failed", "cancelled", "expired")
# Why a goal ended: its last step answered; a step failed; it used goals.max_iterations or
# goals.timeout_s; the LLM call for its plan failed; its actor kept crashing; the person (or a
# turn) cancelled it; it was paused longer than goals.expire_days.
END_REASONS = ("completed", "step_failed", "out_of_iterations", "out_of_time", "planning_error",
               "crashed", "cancelled", "expired")
_decode_ids = msgspec.json.Decoder(tuple[str, ...]).decode


class GoalRow(msgspec.Struct, frozen=True):
    id: str
    goal: str
    state: str
    source: str
    turn_id: str | None
    confidence: float | None
    result: str | None
    error: str | None
    iterations: int
    elapsed_s: float
    tokens: int
    paused_until: float | None
    created_at: float
    updated_at: float
    finished_at: float | None
    mode: str | None = None  # plan | plain; None until planned
    plan_problems: tuple[str, ...] | None = None  # why it runs plain
    paused_at: float | None = None
    progress_at: float | None = None
    end_reason: str | None = None


class StepRow(msgspec.Struct, frozen=True):
    step_id: str
    position: int
    description: str
    depends_on: tuple[str, ...]
    status: str = "pending"
    result: str | None = None
    turn_id: str | None = None
    attempts: int = 0
    finished_at: float | None = None


_GOAL = ", ".join(GoalRow.__struct_fields__)
_STEP = ", ".join(StepRow.__struct_fields__)


def _goal(r: Sequence[Any]) -> GoalRow:
    values = list(r)
    problems = GoalRow.__struct_fields__.index("plan_problems")
    if values[problems] is not None:
        values[problems] = _decode_ids(values[problems])
    return GoalRow(*values)


def _step(r: Sequence[Any]) -> StepRow:
    values = list(r)
    values[3] = _decode_ids(values[3])
    return StepRow(*values)


# --- writes ---------------------------------------------------------------------------------

def insert(conn: apsw.Connection, goal_id: str, goal: str, *, source: str,
           turn_id: str | None, now: float) -> None:
    conn.execute(
        "INSERT INTO goals (id, goal, state, source, turn_id, created_at, updated_at) "
        "VALUES (?, ?, 'pending', ?, ?, ?, ?)", (goal_id, goal, source, turn_id, now, now))


def cancel(conn: apsw.Connection, goal_id: str, now: float) -> str | None:
    """Cancel a goal; its state before (None: no such goal). Only an active goal changes."""
    row = conn.execute("SELECT state FROM goals WHERE id = ?", (goal_id,)).fetchone()
    if row is None:
        return None
    conn.execute(
        "UPDATE goals SET state = 'cancelled', end_reason = 'cancelled', updated_at = ?, "
        "finished_at = ?, paused_until = NULL "
        "WHERE id = ? AND state IN ('pending', 'planning', 'running')",
        (now, now, goal_id))
    conn.execute("UPDATE goal_steps SET status = 'pending' WHERE goal_id = ? AND "
                 "status = 'running'", (goal_id,))
    return str(row[0])


def set_state(conn: apsw.Connection, goal_id: str, state: str, *, now: float,
              error: str | None = None, result: str | None = None,
              end_reason: str | None = None) -> None:
    """Move an active goal to `state` (one that is over: with `end_reason`); StoreConflict
    when it is no longer active."""
    finished = now if state in FINISHED else None
    conn.execute(
        "UPDATE goals SET state = ?, error = coalesce(?, error), result = coalesce(?, result), "
        "end_reason = coalesce(?, end_reason), paused_until = NULL, updated_at = ?, "
        "finished_at = ? WHERE id = ? AND state IN ('pending', 'planning', 'running')",
        (state, error, result, end_reason, now, finished, goal_id))
    if conn.changes() == 0:
        raise StoreConflict(f"goal {goal_id} is no longer active")


def save_plan(conn: apsw.Connection, goal_id: str, steps: Sequence[StepRow], *,
              confidence: float | None, now: float, mode: str = "plan",
              problems: Sequence[str] | None = None) -> None:
    """The goal's plan: its steps, and the goal is running in `mode` (plain: the one step is
    the goal itself, and `problems` say why no plan could be used)."""
    set_state(conn, goal_id, "running", now=now)
    conn.execute(
        "UPDATE goals SET confidence = ?, mode = ?, plan_problems = ? WHERE id = ?",
        (confidence, mode,
         None if problems is None else msgspec.json.encode(list(problems)).decode(), goal_id))
    conn.execute("DELETE FROM goal_steps WHERE goal_id = ?", (goal_id,))
    conn.executemany(
        "INSERT INTO goal_steps (goal_id, step_id, position, description, depends_on, status) "
        "VALUES (?, ?, ?, ?, ?, 'pending')",
        [(goal_id, s.step_id, s.position, s.description,
          msgspec.json.encode(list(s.depends_on)).decode()) for s in steps])


def step_status(conn: apsw.Connection, goal_id: str, step_id: str, status: str, *,
                now: float, result: str | None = None, turn_id: str | None = None,
                attempt: bool = False) -> None:
    """A step is running, done or failed (done and failed are final: a step done once is
    never done again). StoreConflict when the goal is not running or the step is finished."""
    if conn.execute("SELECT 1 FROM goals WHERE id = ? AND state = 'running'",
                    (goal_id,)).fetchone() is None:
        raise StoreConflict(f"goal {goal_id} is not running")
    finished = now if status in ("done", "failed") else None
    conn.execute(
        "UPDATE goal_steps SET status = ?, result = coalesce(?, result), "
        "turn_id = coalesce(?, turn_id), finished_at = ?, attempts = attempts + ? "
        "WHERE goal_id = ? AND step_id = ? AND status NOT IN ('done', 'failed')",
        (status, result, turn_id, finished, int(attempt), goal_id, step_id))
    if conn.changes() == 0:
        raise StoreConflict(f"step {step_id} of goal {goal_id} is finished already")
    # A step that runs means the goal is not paused (any more).
    conn.execute("UPDATE goals SET updated_at = ?, "
                 "paused_until = CASE WHEN ? = 'running' THEN NULL ELSE paused_until END, "
                 "paused_at = CASE WHEN ? = 'running' THEN NULL ELSE paused_at END "
                 "WHERE id = ?", (now, status, status, goal_id))


def spent(conn: apsw.Connection, goal_id: str, *, iterations: int, elapsed_s: float,
          tokens: int, now: float) -> None:
    """What one of the goal's loops used; StoreConflict when the goal is not active."""
    conn.execute(
        "UPDATE goals SET iterations = iterations + ?, elapsed_s = elapsed_s + ?, "
        "tokens = tokens + ?, updated_at = ? "
        "WHERE id = ? AND state IN ('pending', 'planning', 'running')",
        (iterations, elapsed_s, tokens, now, goal_id))
    if conn.changes() == 0:
        raise StoreConflict(f"goal {goal_id} is no longer active")


def pause(conn: apsw.Connection, goal_id: str, until: float | None, now: float) -> None:
    """The goal waits for budget until `until` (None: no time is known); `paused_at` keeps
    when the first of a run of pauses began."""
    conn.execute("UPDATE goals SET paused_until = ?, paused_at = coalesce(paused_at, ?), "
                 "updated_at = ? WHERE id = ? AND state IN ('pending', 'planning', 'running')",
                 (until, now, now, goal_id))


def progress_told(conn: apsw.Connection, goal_id: str, now: float) -> None:
    """The person was just told of the goal's progress."""
    conn.execute("UPDATE goals SET progress_at = ? WHERE id = ?", (now, goal_id))


# --- reads ----------------------------------------------------------------------------------

def get(conn: apsw.Connection, goal_id: str) -> GoalRow | None:
    r = conn.execute(f"SELECT {_GOAL} FROM goals WHERE id = ?", (goal_id,)).fetchone()
    return None if r is None else _goal(r)


def steps(conn: apsw.Connection, goal_id: str) -> list[StepRow]:
    return [_step(r) for r in conn.execute(
        f"SELECT {_STEP} FROM goal_steps WHERE goal_id = ? ORDER BY position", (goal_id,))]


def active_ids(conn: apsw.Connection) -> list[str]:
    """Goals to pursue: pending, planning or running, oldest first."""
    return [str(r[0]) for r in conn.execute(
        "SELECT id FROM goals WHERE state IN ('pending', 'planning', 'running') "
        "ORDER BY created_at, id")]


def listing(conn: apsw.Connection, *, state: str | None, limit: int,
            offset: int) -> list[GoalRow]:
    """Goals, newest first."""
    where, params = ("WHERE state = ?", [state]) if state else ("", [])
    return [_goal(r) for r in conn.execute(
        f"SELECT {_GOAL} FROM goals {where} ORDER BY created_at DESC, id LIMIT ? OFFSET ?",
        (*params, limit, offset))]


def counts(conn: apsw.Connection) -> dict[str, int]:
    """Goals by state (every state, zero when none)."""
    found = dict.fromkeys(STATES, 0)
    for state, n in conn.execute("SELECT state, count(*) FROM goals GROUP BY state"):
        found[str(state)] = int(n)
    return found


def coverage(conn: apsw.Connection, goal_id: str) -> float:
    """The share of the goal's steps done, 0 with no plan yet."""
    row = conn.execute(
        "SELECT count(*), coalesce(sum(status = 'done'), 0) FROM goal_steps WHERE goal_id = ?",
        (goal_id,)).fetchone()
    total, done = (int(row[0]), int(row[1])) if row else (0, 0)
    return round(done / total, 2) if total else 0.0


def fingerprint(conn: apsw.Connection) -> tuple[list[tuple[str, str]], tuple[int, float]]:
    """What the DMN compares to see whether a goal's state changed: (id, state) of every
    active goal, and how many goals finished and when the last one did."""
    active = [(str(i), str(s)) for i, s in conn.execute(
        "SELECT id, state FROM goals WHERE state IN ('pending', 'planning', 'running') "
        "ORDER BY id")]
    row = conn.execute("SELECT count(*), coalesce(max(finished_at), 0) FROM goals "
                       "WHERE state NOT IN ('pending', 'planning', 'running')").fetchone()
    finished = (int(row[0]), float(row[1])) if row else (0, 0.0)
    return active, finished
