"""The innate `goal` tool: pursue a goal in the background, list goals, see one, cancel one.

A goal started here is stored with the turn (an effect); once the turn is stored its Goal actor
plans it and works through the plan (or, with no usable plan, on the goal itself), reporting
`task` frames, and its result reaches the person as a notification. Goals the DMN starts (its
PLAN action) are pursued the same way. Status says how a goal runs and, once it is over, why it
ended (completed, failed, cancelled, or expired after waiting too long for budget).
"""

from __future__ import annotations

import uuid
from typing import Any

from chalie.llm.types import ToolSpec
from chalie.store import effects as fx
from chalie.store import goal_rows
from chalie.tools.base import Danger, ToolContext, ToolOutcome, tool_description, tool_error

MAX_GOAL = 2000
LIST_LIMIT = 20
RESULT_CHARS = 300


class GoalTool:
    danger: Danger = "safe"
    spec = ToolSpec(
        name="goal",
        description=tool_description("goal"),
        parameters={
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["start", "list", "status", "cancel"]},
                "goal": {"type": "string", "description": "what to achieve"},
                "goal_id": {"type": "string"},
            },
            "required": ["action"],
        },
    )

    @staticmethod
    def reads_only(args: dict[str, Any]) -> bool:
        return args.get("action") in ("list", "status")

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        action = args.get("action")
        if action == "start":
            return self._start(args, ctx)
        if action == "list":
            return self._list(ctx)
        if action == "status":
            return self._status(args, ctx)
        if action == "cancel":
            return self._cancel(args, ctx)
        return tool_error(f"action must be start, list, status or cancel, got {action!r}")

    @staticmethod
    def _start(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        goal = args.get("goal")
        if not isinstance(goal, str) or not goal.strip():
            return tool_error("start needs `goal`: what to achieve")
        if len(goal) > MAX_GOAL:
            return tool_error(f"`goal` is limited to {MAX_GOAL} characters")
        goal_id = uuid.uuid4().hex[:12]
        effect = fx.StartGoal(id=goal_id, goal=" ".join(goal.split()),
                              source="dmn" if ctx.path == "dmn" else "tool")
        return ToolOutcome(text=f"started goal {goal_id}: it is planned and pursued in the "
                                "background; its result reaches the person as a notification",
                           effects=(effect,))

    @staticmethod
    def _list(ctx: ToolContext) -> ToolOutcome:
        cancelled = {e.id for e in ctx.pending if isinstance(e, fx.CancelGoal)}
        lines = [f"- {e.id} (started just now): {e.goal}" for e in ctx.pending
                 if isinstance(e, fx.StartGoal) and e.id not in cancelled]
        conn = ctx.read()
        for row in goal_rows.listing(conn, state=None, limit=LIST_LIMIT, offset=0):
            coverage = goal_rows.coverage(conn, row.id)
            state = "cancelled just now" if row.id in cancelled else row.state
            lines.append(f"- {row.id} ({state}, {round(coverage * 100)}% of steps done): "
                         f"{row.goal}")
        return ToolOutcome(text="\n".join(lines) if lines else "no goals")

    @staticmethod
    def _status(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        goal_id = _goal_id(args)
        if goal_id is None:
            return tool_error("status needs `goal_id` (see action list)")
        conn = ctx.read()
        row = goal_rows.get(conn, goal_id)
        if row is None:
            return tool_error(f"no goal {goal_id!r}")
        lines = [f"goal {row.id} ({row.state}): {row.goal}"]
        if row.mode == "plain":
            lines.append("runs without a plan, as its plans failed the checks: "
                         + " ".join(row.plan_problems or ()))
        for step in goal_rows.steps(conn, goal_id):
            result = f" -> {_short(step.result)}" if step.result else ""
            lines.append(f"- step {step.step_id} ({step.status}): {step.description}{result}")
        if row.end_reason:
            lines.append(f"ended: {row.end_reason}")
        if row.error:
            lines.append(f"error: {row.error}")
        if row.result:
            lines.append(f"result: {_short(row.result)}")
        return ToolOutcome(text="\n".join(lines))

    @staticmethod
    def _cancel(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        goal_id = _goal_id(args)
        if goal_id is None:
            return tool_error("cancel needs `goal_id` (see action list)")
        row = goal_rows.get(ctx.read(), goal_id)
        pending = any(isinstance(e, fx.StartGoal) and e.id == goal_id for e in ctx.pending)
        if not pending and (row is None or row.state not in goal_rows.ACTIVE):
            state = "no such goal" if row is None else f"it is {row.state}"
            return tool_error(f"goal {goal_id!r} cannot be cancelled: {state}")
        return ToolOutcome(text=f"cancelled goal {goal_id}", effects=(fx.CancelGoal(goal_id),))


def _goal_id(args: dict[str, Any]) -> str | None:
    value = args.get("goal_id")
    return value.strip() if isinstance(value, str) and value.strip() else None


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= RESULT_CHARS else text[:RESULT_CHARS] + "…"
