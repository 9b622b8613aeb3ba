"""The person's say over a turn's tool calls, for the TurnDriver (chalie/actors/driver.py).

Before a call runs the driver asks here whether it needs the person: a `confirm` tool always
does (unless they always allow it), and so does any call that is not read-only when it came
from another program's words (chalie/act/provenance.py). On a turn the person watches they are
asked at once: an `escalation` frame, waiting `act.approval_timeout_s` (not charged to the
turn's deadline), answered by their `approval` action, and a `decision` frame that every client
shows. On a turn nobody watches (a program's message; the DMN, a goal or a scheduled prompt
for a program's words) the call is held: stored with the turn, the person is asked on their
own channel (chalie/actors/consent.py), and the model goes on without it. Elsewhere on an
unattended path a `confirm` tool is simply not run (it is not offered there).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Literal

import structlog

from chalie.actors import consent
from chalie.actors.consent import HeldCall
from chalie.actors.driver_deps import DriverDeps, Host, Policy
from chalie.actors.turn import Approval, Turn
from chalie.actors.turn_messages import ApprovalExpired
from chalie.frames import Decision, Escalation
from chalie.llm.types import ToolCall
from chalie.tools.base import options

log = structlog.get_logger("chalie.driver")

DecisionOutcome = Literal["approved", "denied", "expired", "withdrawn"]
By = Literal["page", "program"]


class Approvals:
    def __init__(self, *, host: Host, policy: Policy, deps: DriverDeps,
                 sentence: Callable[[ToolCall], str]) -> None:
        self._host = host
        self._policy = policy
        self._d = deps
        self._sentence = sentence

    def needs_person(self, turn: Turn, call: ToolCall) -> Literal["ask", "hold", "skip"] | None:
        """What the call needs before it runs: ask the person now, hold it for them, skip it
        (a `confirm` tool on an unattended path); None: it runs."""
        danger = self._d.tools.danger(call.name)
        why = self.program_words(turn, call)
        if why is None and danger != "confirm":
            return None
        if self._policy.attended and not turn.for_program:
            return "ask"
        return "hold" if why is not None or turn.for_program else "skip"

    def program_words(self, turn: Turn, call: ToolCall) -> str | None:
        """Why this call comes from another program's words, or None: it only reads, or the
        person's words are enough for it."""
        tools = self._d.tools
        if call.args is None or tools.reads_only(call.name, call.args):
            return None
        tool = tools.get(call.name)
        return turn.provenance.taint(call, options=options(tool) if tool is not None else ())

    def hold(self, turn: Turn, call: ToolCall) -> None:
        """Nobody watches the turn: the call waits for the person (asked when the turn is
        stored); the model is told so and goes on."""
        why = self.program_words(turn, call)
        log.info("call_held", tool=call.name, why=why)
        turn.held.append(HeldCall(call, why))
        turn.loop.skip(call, "held")

    def ask(self, turn: Turn, call: ToolCall) -> None:
        """An escalation for the person, offering "Always allow" for a tool that needs
        approval; the turn's deadline waits while they decide."""
        d = self._d
        why = self.program_words(turn, call)
        always = d.tools.danger(call.name) == "confirm"
        approval_id = uuid.uuid4().hex
        timeout = d.approval_timeout_s
        if turn.timer is not None:
            turn.timer.cancel()  # waiting for the person is not charged to the turn's budget
        turn.phase = "approval"
        turn.running_call = call
        turn_id = turn.id
        turn.approval = Approval(
            approval_id, call, d.clock.monotonic(),
            d.clock.call_later(timeout, lambda: self._host.tell_self(
                ApprovalExpired(turn_id, approval_id))),
            always=always,
        )
        log.info("approval_requested", tool=call.name, approval_id=approval_id, why=why)
        self._host.show(Escalation(
            content=consent.content(self._sentence(call), why), approval_id=approval_id,
            tool=call.name, args=call.raw_args, expires_in_s=timeout, exchange_id=turn.id,
            why=why, always=always))

    def resolve(self, turn: Turn, approval_id: str, approved: bool | None, reason: str = "",
                *, by: By | None = None) -> ToolCall | None:
        """The answer to the turn's escalation: the call to run when approved; otherwise the
        model is told no (`reason` names another reason_* fragment) and None comes back. The
        caller re-arms the turn's deadline (pushed back by the wait)."""
        pending = turn.approval
        assert pending is not None
        assert pending.id == approval_id
        d = self._d
        pending.timer.cancel()
        turn.approval = None
        turn.running_call = None
        turn.deadline += d.clock.monotonic() - pending.asked_at
        verdict: DecisionOutcome = "approved" if approved else (
            "denied" if approved is False else "expired")
        log.info("approval_resolved", tool=pending.call.name, verdict=verdict)
        self.decided(turn, pending.id, pending.call.name,
                     "withdrawn" if reason else verdict, by)
        if approved:
            return pending.call
        if reason:
            turn.loop.skip(pending.call, reason, approval=verdict)
        elif approved is False:
            turn.loop.skip(pending.call, "denied", approval=verdict)
        else:
            turn.loop.skip(pending.call, "expired", approval=verdict,
                           seconds=f"{d.approval_timeout_s:g}")
        return None

    def decided(self, turn: Turn, approval_id: str, tool: str, outcome: DecisionOutcome,
                by: By | None) -> None:
        """How an escalation ended, in the log: every client shows it (frames.Decision)."""
        self._host.show(Decision(approval_id=approval_id, outcome=outcome, by=by, tool=tool,
                                 exchange_id=turn.id))
