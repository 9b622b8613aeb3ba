"""/api/goals: goals Chalie pursues in the background.

POST {goal} -> 201 {id, goal, state}; the goal is stored first, then its actor plans it.
GET lists goals, newest first (?state=, limit, offset), each with its progress (`coverage`,
the share of its plan's steps done), whether it runs a plan or, its plans having failed the
checks, plain without one (`mode`, `plan_problems`), and for one that is over why
(`end_reason`, a stable code, beside the human `error`); GET /api/goals/<id> adds its plan with
every step's status and result (a plain goal's one step is the goal). DELETE cancels a goal
that is still active (a step it is running stops at once and is not stored); 409 for one that
is over already.
"""

from __future__ import annotations

import uuid
from typing import Literal

import apsw
import msgspec

from chalie.edge.api_spec import COOKIE_AUTH, OFFSET, Operation, limit_param, one_of, path_id
from chalie.edge.rest_base import ApiError, AuthedHandler, shown
from chalie.edge.rest_schedules import apply
from chalie.store import goal_rows
from chalie.store.background_ops import CancelGoal, InsertGoal
from chalie.store.goal_rows import GoalRow

MAX_GOAL = 2000
MAX_LIMIT = 1000
DEFAULT_LIMIT = 100


GoalState = Literal["pending", "planning", "running", "completed", "failed", "cancelled",
                    "expired"]
# Why a goal ended: goal_rows.END_REASONS, as stable codes.
EndReason = Literal["completed", "step_failed", "out_of_iterations", "out_of_time",
                    "planning_error", "crashed", "cancelled", "expired"]


class GoalBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    goal: str  # 1 to MAX_GOAL characters, not blank


class GoalCreated(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    goal: str
    state: Literal["pending"] = "pending"


class Goal(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A goal and its progress: `coverage` is the share of its plan's steps done. `mode` plan,
    or plain (no plan: both plans failed the checks, `plan_problems` says how); null until
    planned. `end_reason` says why a goal that is over ended (null while it is active)."""

    id: str
    goal: str
    state: GoalState
    source: Literal["person", "tool", "dmn"]
    coverage: float
    mode: Literal["plan", "plain"] | None
    plan_problems: list[str] | None
    result: str | None
    error: str | None
    end_reason: EndReason | None
    iterations: int
    elapsed_s: float
    tokens: int
    paused_until: float | None
    created_at: float
    updated_at: float
    finished_at: float | None


class GoalStep(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    description: str
    depends_on: list[str]  # step ids
    status: Literal["pending", "running", "done", "failed"]
    result: str | None
    turn_id: str | None
    attempts: int
    finished_at: float | None


class Plan(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    confidence: float | None
    steps: list[GoalStep]


class GoalDetail(Goal, frozen=True, forbid_unknown_fields=True):
    plan: Plan | None  # null until the goal is planned


class GoalList(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    items: list[Goal]


def goal_document(conn: apsw.Connection, row: GoalRow) -> Goal:
    return msgspec.convert({
        "id": row.id, "goal": row.goal, "state": row.state, "source": row.source,
        "coverage": goal_rows.coverage(conn, row.id), "mode": row.mode,
        "plan_problems": None if row.plan_problems is None else list(row.plan_problems),
        "result": row.result, "error": row.error, "end_reason": row.end_reason,
        "iterations": row.iterations, "elapsed_s": round(row.elapsed_s, 3),
        "tokens": row.tokens, "paused_until": row.paused_until, "created_at": row.created_at,
        "updated_at": row.updated_at, "finished_at": row.finished_at,
    }, Goal)


def goal_detail(conn: apsw.Connection, row: GoalRow) -> GoalDetail:
    steps = goal_rows.steps(conn, row.id)
    plan = None if not steps else Plan(row.confidence, [msgspec.convert({
        "id": s.step_id, "description": s.description, "depends_on": list(s.depends_on),
        "status": s.status, "result": s.result, "turn_id": s.turn_id, "attempts": s.attempts,
        "finished_at": s.finished_at}, GoalStep) for s in steps])
    return GoalDetail(**msgspec.structs.asdict(goal_document(conn, row)), plan=plan)


_ID = (path_id("goal_id", "the goal's id"),)


class GoalsHandler(AuthedHandler):
    api = {
        "get": Operation("Goals, newest first, each with its progress", {200: GoalList},
                         auth=(COOKIE_AUTH,), query=(
                             one_of("state", goal_rows.STATES, "only goals in it"),
                             limit_param(DEFAULT_LIMIT, MAX_LIMIT), OFFSET)),
        "post": Operation("A goal for Chalie to pursue in the background: stored, then planned",
                          {201: GoalCreated}, auth=(COOKIE_AUTH,), body=GoalBody,
                          example={"goal": "Find three quiet cafes near the office"}),
    }

    async def get(self) -> None:
        params = self.query_params("state", "limit", "offset")
        state = params.text("state", max_chars=20)
        if state is not None and state not in goal_rows.STATES:
            raise ApiError(400, f"state: one of {', '.join(goal_rows.STATES)}, got "
                                f"{shown(state)}")
        limit = params.whole("limit", default=DEFAULT_LIMIT, lo=1, hi=MAX_LIMIT)
        offset = params.whole("offset", default=0, lo=0)

        def read() -> list[Goal]:
            conn = self.ctx.read()
            return [goal_document(conn, r) for r in goal_rows.listing(
                conn, state=state, limit=limit, offset=offset)]

        self.write_json(GoalList(await self.off_loop(read)))

    async def post(self) -> None:
        self.query_params()
        body = self.decode_body(GoalBody)
        goal = " ".join(body.goal.split())
        if not goal:
            raise ApiError(400, "goal: must not be blank")
        if len(goal) > MAX_GOAL:
            raise ApiError(400, f"goal: at most {MAX_GOAL} characters, got {len(goal)}")
        goal_id = uuid.uuid4().hex[:12]
        await apply(self, InsertGoal(goal_id, goal, "person"))
        self.set_status(201)
        self.write_json(GoalCreated(goal_id, goal))


class GoalHandler(AuthedHandler):
    api = {
        "get": Operation("A goal with its plan: every step's status and result",
                         {200: GoalDetail}, auth=(COOKIE_AUTH,), path=_ID, errors=(404,)),
        "delete": Operation(
            "Cancel a goal that is still active (a step it is running stops at once)",
            {200: GoalDetail}, auth=(COOKIE_AUTH,), path=_ID, errors=(404, 409)),
    }

    async def get(self, goal_id: str) -> None:
        self.query_params()
        found = await self.off_loop(lambda: _document(self.ctx.read(), goal_id))
        if found is None:
            raise ApiError(404, f"no goal {shown(goal_id)}")
        self.write_json(found)

    async def delete(self, goal_id: str) -> None:
        self.query_params()
        (before,) = await apply(self, CancelGoal(goal_id, self.ctx.config.dmn.channel))
        if before is None:
            raise ApiError(404, f"no goal {shown(goal_id)}")
        if before in ("completed", "failed", "expired"):
            raise ApiError(409, f"goal {goal_id} is {before}: there is nothing to cancel")
        found = await self.off_loop(lambda: _document(self.ctx.read(), goal_id))
        self.write_json(found)


def _document(conn: apsw.Connection, goal_id: str) -> GoalDetail | None:
    row = goal_rows.get(conn, goal_id)
    return None if row is None else goal_detail(conn, row)
