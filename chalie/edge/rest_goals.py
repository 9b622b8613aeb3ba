"""/api/goals: goals Chalie pursues in the background.

POST {goal} -> 201 {id, goal, state}; the goal is stored first, then its actor plans it.
GET lists goals, newest first (?state=, limit, offset), each with its progress (`coverage`,
the share of its plan's steps done); GET /api/goals/<id> adds its plan with every step's status
and result. DELETE cancels a goal that is still active (a step it is running stops at once and
is not stored); 409 for one that already completed or failed.
"""

from __future__ import annotations

import uuid
from typing import Any

import apsw
import msgspec

from chalie.edge.rest_base import ApiError, AuthedHandler, shown
from chalie.edge.rest_schedules import apply
from chalie.store import goal_rows
from chalie.store.background_ops import CancelGoal, InsertGoal
from chalie.store.goal_rows import GoalRow

MAX_GOAL = 2000
MAX_LIMIT = 1000
DEFAULT_LIMIT = 100


class GoalBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    goal: str


def goal_document(conn: apsw.Connection, row: GoalRow, *, plan: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": row.id, "goal": row.goal, "state": row.state, "source": row.source,
        "coverage": goal_rows.coverage(conn, row.id), "result": row.result, "error": row.error,
        "iterations": row.iterations, "elapsed_s": round(row.elapsed_s, 3),
        "tokens": row.tokens, "paused_until": row.paused_until, "created_at": row.created_at,
        "updated_at": row.updated_at, "finished_at": row.finished_at,
    }
    if plan:
        steps = goal_rows.steps(conn, row.id)
        doc["plan"] = None if not steps else {
            "confidence": row.confidence,
            "steps": [{"id": s.step_id, "description": s.description,
                       "depends_on": list(s.depends_on), "status": s.status,
                       "result": s.result, "turn_id": s.turn_id, "attempts": s.attempts,
                       "finished_at": s.finished_at} for s in steps]}
    return doc


class GoalsHandler(AuthedHandler):
    async def get(self) -> None:
        params = self.query_params("state", "limit", "offset")
        state = params.text("state", max_chars=20)
        if state is not None and state not in goal_rows.STATES:
            raise ApiError(400, f"state: one of {', '.join(goal_rows.STATES)}, got "
                                f"{shown(state)}")
        limit = params.whole("limit", default=DEFAULT_LIMIT, lo=1, hi=MAX_LIMIT)
        offset = params.whole("offset", default=0, lo=0)

        def read() -> list[dict[str, Any]]:
            conn = self.ctx.read()
            return [goal_document(conn, r, plan=False) for r in goal_rows.listing(
                conn, state=state, limit=limit, offset=offset)]

        self.write_json({"items": await self.off_loop(read)})

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
        self.write_json({"id": goal_id, "goal": goal, "state": "pending"})


class GoalHandler(AuthedHandler):
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
        if before in ("completed", "failed"):
            raise ApiError(409, f"goal {goal_id} is {before}: there is nothing to cancel")
        found = await self.off_loop(lambda: _document(self.ctx.read(), goal_id))
        self.write_json(found)


def _document(conn: apsw.Connection, goal_id: str) -> dict[str, Any] | None:
    row = goal_rows.get(conn, goal_id)
    return None if row is None else goal_document(conn, row, plan=True)
