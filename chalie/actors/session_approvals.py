"""The Session's approval detour: a `confirm` tool waits for the person's decision."""

from __future__ import annotations

import uuid
from typing import Any

import structlog

from chalie.act import approval
from chalie.actors.messages import ApprovalExpired
from chalie.actors.session_base import SessionBase, clip
from chalie.actors.turn import Approval
from chalie.frames import Error, Escalation
from chalie.llm.types import ToolCall

log = structlog.get_logger("chalie.session")


class ApprovalsMixin(SessionBase):
    def _ask_approval(self, call: ToolCall) -> None:
        turn = self._require_turn()
        d = self._deps
        approval_id = uuid.uuid4().hex
        timeout = d.act.approval_timeout_s
        turn.timer.cancel()  # waiting for the person is not charged to the turn's budget
        turn.phase = "approval"
        turn.running_call = call
        turn.approval = Approval(
            approval_id, call, d.clock.monotonic(),
            d.clock.call_later(timeout, lambda: self._tell_self(
                ApprovalExpired(turn.id, approval_id))),
        )
        log.info("approval_requested", tool=call.name, approval_id=approval_id)
        self._emit(Escalation(
            content=f"Chalie wants to run {call.name} {clip(call.raw_args)}. Allow it?",
            approval_id=approval_id, tool=call.name, args=call.raw_args,
            expires_in_s=timeout, exchange_id=turn.id,
        ))

    def _on_approval_answer(self, skill: str, params: dict[str, Any]) -> None:
        decision = approval.read_decision(skill, params)
        pending = self._turn.approval if self._turn else None
        if isinstance(decision, str):
            self._emit(Error(message=decision, recoverable=False))
        elif pending is None or pending.id != decision.approval_id:
            self._emit(Error(message=f"no approval {decision.approval_id!r} is waiting (it may "
                             "have expired or been answered)", recoverable=False))
        else:
            self._resolve_approval(decision.approval_id, decision.approve)

    def _resolve_approval(self, approval_id: str, approved: bool | None, reason: str = "") -> None:
        """approved: True runs the call; False (denied) or None (expired) tells the model no;
        `reason` names another reason_* fragment for the model."""
        turn = self._require_turn()
        pending = turn.approval
        if pending is None or pending.id != approval_id:
            return
        d = self._deps
        pending.timer.cancel()
        turn.approval = None
        turn.running_call = None
        turn.deadline += d.clock.monotonic() - pending.asked_at
        turn.timer = self._deadline_timer(turn.id, turn.deadline)
        verdict = "approved" if approved else ("denied" if approved is False else "expired")
        log.info("approval_resolved", tool=pending.call.name, verdict=verdict)
        if approved:
            self._run_tool(pending.call, approval="approved")
            return
        if reason:
            turn.loop.skip(pending.call, reason, approval=verdict)
        elif approved is False:
            turn.loop.skip(pending.call, "denied", approval=verdict)
        else:
            turn.loop.skip(pending.call, "expired", approval=verdict,
                           seconds=f"{d.act.approval_timeout_s:g}")
        self._next_call()

