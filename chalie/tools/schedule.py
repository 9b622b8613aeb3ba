"""The innate `schedule` tool: set up a prompt to run later, list them, cancel one.

A new schedule is checked as POST /api/schedules checks it (chalie/background/schedules.py) and
stored with the turn (an effect): the Scheduler is told once the turn is stored. One the DMN
sets (a reminder to raise something later) counts as a proactive message when it runs; one the
person's turn sets is what they asked for, sent on time.
"""

from __future__ import annotations

import uuid
from typing import Any

from chalie.background import schedules
from chalie.background.schedules import ScheduleError
from chalie.llm.types import ToolSpec
from chalie.store import effects as fx
from chalie.store import schedule_rows
from chalie.tools.base import Danger, ToolContext, ToolOutcome, tool_description, tool_error

LIST_LIMIT = 20


class ScheduleTool:
    danger: Danger = "safe"

    def __init__(self, default_zone: str) -> None:
        self._zone = default_zone
        self.spec = ToolSpec(
            name="schedule",
            description=tool_description("schedule"),
            parameters={
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["create", "list", "cancel"]},
                    "prompt": {"type": "string"},
                    "at": {"type": "string", "description": "e.g. 2026-11-24T17:00:00+01:00"},
                    "cron": {"type": "string"},
                    "timezone": {"type": "string", "description": f"default {default_zone}"},
                    "schedule_id": {"type": "string"},
                },
                "required": [],
            },
        )

    @staticmethod
    def reads_only(args: dict[str, Any]) -> bool:
        return bool(args.get("action", "create") == "list")

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        action = args.get("action", "create")
        if action == "create":
            return self._create(args, ctx)
        if action == "list":
            return self._list(ctx)
        if action == "cancel":
            return self._cancel(args, ctx)
        return tool_error(f"action must be create, list or cancel, got {action!r}")

    def _create(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        now = ctx.clock.time()
        try:
            spec = schedules.check(args.get("prompt"), at=args.get("at"), cron=args.get("cron"),
                                   timezone=args.get("timezone"), now=now,
                                   default_zone=self._zone)
        except ScheduleError as e:
            return tool_error(f"{e.field}: {e}")
        next_run = schedules.next_after(spec, now)
        if next_run is None:
            return tool_error("at: is in the past")
        schedule_id = uuid.uuid4().hex[:12]
        effect = fx.CreateSchedule(
            id=schedule_id, prompt=spec.prompt, timezone=spec.timezone, next_run=next_run,
            at=spec.at, cron=spec.cron, source="dmn" if ctx.path == "dmn" else "tool")
        when = f"on {spec.cron!r} ({spec.timezone})" if spec.cron else "once"
        return ToolOutcome(
            text=f"scheduled {schedule_id} {when}: next run "
                 f"{schedules.iso(next_run, spec.timezone)}",
            effects=(effect,))

    def _list(self, ctx: ToolContext) -> ToolOutcome:
        lines = []
        cancelled = {e.id for e in ctx.pending if isinstance(e, fx.CancelSchedule)}
        for effect in ctx.pending:
            if isinstance(effect, fx.CreateSchedule) and effect.id not in cancelled:
                lines.append(f"- {effect.id} (set just now): {effect.prompt!r} next "
                             f"{schedules.iso(effect.next_run, effect.timezone)}")
        for row in schedule_rows.active(ctx.read())[:LIST_LIMIT]:
            if row.id in cancelled or row.next_run is None:
                continue
            kind = f"cron {row.cron!r}" if row.cron else "once"
            lines.append(f"- {row.id} ({kind}): {row.prompt!r} next "
                         f"{schedules.iso(row.next_run, row.timezone)}")
        return ToolOutcome(text="\n".join(lines) if lines else "no scheduled prompts")

    def _cancel(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        schedule_id = args.get("schedule_id")
        if not isinstance(schedule_id, str) or not schedule_id.strip():
            return tool_error("cancel needs `schedule_id` (see action list)")
        schedule_id = schedule_id.strip()
        row = schedule_rows.get(ctx.read(), schedule_id)
        pending = any(isinstance(e, fx.CreateSchedule) and e.id == schedule_id
                      for e in ctx.pending)
        if not pending and (row is None or row.state != "active"):
            return tool_error(f"no active schedule {schedule_id!r}")
        return ToolOutcome(text=f"cancelled {schedule_id}",
                           effects=(fx.CancelSchedule(schedule_id),))
