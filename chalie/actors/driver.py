"""The turn driver: one turn's ACT loop mechanics, the same for every path.

The user Session, the DMN, the Scheduler and each Goal own a TurnDriver and forward the running
turn's messages to it (`handle`). The driver builds each request from the turn's ActLoop,
compacts when a request would not fit, sends it on the worker pool, runs the tool calls the
model asks for (one at a time, on the pool), waits for the person's approval of `confirm`
tools, and ends the turn at the first answer without tool calls, at the deadline, on a failure,
when the person cancels it, or when its path runs out of budget. On the user path a
consequential call's result is first checked by the critic, when it is on; the critic and
compaction are side calls (driver_side_calls.py). The mailbox never waits: every call comes back
as a message. A path differs only by its Policy (deadline, whether a person is watching,
whether it is governed) and by its Host: where its frames go, whether a compaction's Current
State is saved, and what happens when the turn ends (driver_deps.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal

import msgspec
import structlog

from chalie.act.loop import Answer
from chalie.act.stream import DeltaStream
from chalie.actors.driver_approvals import Approvals
from chalie.actors.driver_deps import DriverDeps, Ending, Host, Policy
from chalie.actors.driver_side_calls import SideCalls
from chalie.actors.turn import Approval, Turn
from chalie.actors.turn_messages import (
    ApprovalExpired,
    CompactionReturned,
    CriticReturned,
    LlmFailed,
    LlmReturned,
    ToolReturned,
    TurnDeadline,
)
from chalie.clock import Timer
from chalie.frames import ActNarration, ImageReady, Stage, Status
from chalie.llm.types import ChatResponse, ToolCall
from chalie.store.records import Outcome
from chalie.tools.base import ToolContext

log = structlog.get_logger("chalie.driver")

NARRATION_ARGS_CHARS = 120
ARGS_SHOWN_CHARS = 2000  # of a call's arguments, under a narration's details
PAUSED = "paused: the path used its daily token budget"


def clip(text: str, chars: int = NARRATION_ARGS_CHARS) -> str:
    """Tool arguments as a person is shown them: the first `chars` characters."""
    return text if len(text) <= chars else text[:chars] + "…"


class TurnDriver:
    def __init__(self, *, host: Host, policy: Policy, deps: DriverDeps) -> None:
        self._host = host
        self.policy = policy
        self._d = deps
        self._side = SideCalls(host=host, policy=policy, deps=deps)
        self._approvals = Approvals(host=host, policy=policy, deps=deps,
                                    sentence=self._sentence)
        self.turn: Turn | None = None

    # -- life cycle --

    def begin(self, turn: Turn) -> None:
        """Own `turn` from now on: its deadline runs from `turn.received_at`."""
        assert self.turn is None, "a turn is running already"
        self.turn = turn
        # Its models, whatever the settings change meanwhile.
        turn.work = self._d.work.pinned(light=turn.light)
        turn.deadline = turn.received_at + turn.timeout_s
        turn.timer = self._deadline_timer(turn.id, turn.deadline)

    def owns(self, turn_id: str) -> bool:
        return self.turn is not None and self.turn.id == turn_id

    def handle(self, message: Any) -> bool:
        """Take a message of the running turn; False for anything else (a stale message of a
        turn that has ended is the caller's to drop)."""
        match message:
            case LlmReturned(turn_id=tid, response=response) if self.owns(tid):
                self._on_llm(response)
            case LlmFailed(turn_id=tid, error=error, recoverable=recoverable) if self.owns(tid):
                self.finish("error", error=error, recoverable=recoverable)
            case ToolReturned(turn_id=tid) if self.owns(tid):
                self._on_tool(message)
            case CompactionReturned(turn_id=tid) if self.owns(tid):
                self._side.compacted(self._require(), message)
                self.ask()
            case ApprovalExpired(turn_id=tid, approval_id=aid) if self.owns(tid):
                self.resolve_approval(aid, None)
            case TurnDeadline(turn_id=tid) if self.owns(tid):
                self.timed_out()
            case CriticReturned(turn_id=tid):
                if self.owns(tid) and self._require().phase == "critic":
                    self._side.critiqued(self._require(), message)
                    self._next_call()
                else:  # the turn ended (or was cancelled) while the check was out
                    log.debug("stale_critique_dropped", tool=message.call.name)
            case _:
                return False
        return True

    def finish(self, outcome: Outcome, *, text: str | None = None, error: str | None = None,
               recoverable: bool = True, paused: bool = False) -> None:
        """End the running turn and hand it to the host."""
        turn = self._require()
        if turn.timer is not None:
            turn.timer.cancel()
        if turn.approval is not None:
            turn.approval.timer.cancel()
            self._approvals.decided(turn, turn.approval.id, turn.approval.call.name, "expired",
                                    None)
        elapsed = self._d.clock.monotonic() - turn.received_at
        self._images_ready(turn, "failed")
        self.turn = None
        self._d.work.metrics.path_turns.labels(path=self.policy.path, outcome=outcome).inc()
        self._host.turn_ended(Ending(turn, outcome, elapsed, text, error, recoverable, paused))

    def timed_out(self) -> None:
        budget = self._require().timeout_s
        self.finish("timeout", error=f"the turn took longer than {budget:g}s and was stopped",
                    recoverable=True)

    # -- the loop --

    def ask(self) -> None:
        """Send the turn's next request (compacting first when it would not fit)."""
        turn = self._require()
        d = self._d
        remaining = turn.deadline - d.clock.monotonic()
        if remaining <= 0:
            self.timed_out()
            return
        if self.policy.governed and d.governor is not None \
                and not d.governor.has_room(self.policy.path):
            self.finish("cancelled", error=PAUSED, paused=True)
            return
        request = self._side.fitted(turn)
        if not turn.budget.fits(request) and self._side.compact(turn, request):
            return
        if turn.loop.answer_forced and not turn.responding_sent:
            turn.responding_sent = True
            self._status("responding")
        turn.phase = "llm"
        turn.steered_in_flight = False
        turn.in_flight = request
        turn.snap(request, "act", d.clock.time())
        turn_id, timeout = turn.id, min(remaining, d.request_timeout_s)
        work = turn.work or d.work
        stream = None
        if self.policy.attended and d.live is not None:
            stream = DeltaStream(turn_id, d.live, reset=turn.streamed)
            turn.delta_stream = stream

        def job() -> Any:
            return LlmReturned(turn_id, work.call_llm(request, timeout, on_text=stream))

        self._submit(job)

    def _on_llm(self, response: ChatResponse) -> None:
        turn = self._require()
        stream, turn.delta_stream = turn.delta_stream, None
        if stream is not None and stream.sent:
            turn.streamed = True  # until it proves to be the answer: then the turn ends
        self._images_ready(turn, "success")
        if turn.in_flight is not None:
            turn.budget.calibrate(turn.in_flight, response.usage)
        if turn.steered_in_flight:
            # The model answered without the steering: keep what it said, run none of its
            # calls, and ask again with the steering in the trail.
            turn.loop.count(response)
            if response.text.strip():
                turn.loop.note("draft_dropped", text=response.text.strip())
            for call in response.tool_calls:
                turn.loop.skip(call, "steered")
            self.ask()
            return
        step = turn.loop.absorb(response)
        if isinstance(step, Answer):
            if step.text:
                self.finish("answered", text=step.text)
            else:
                self.finish("error", error="the model returned an empty answer",
                            recoverable=True)
            return
        turn.queued_calls.extend(step.calls)
        self._next_call()

    def _next_call(self) -> None:
        """Run the next queued tool call, or ask the model again when none is left."""
        turn = self._require()
        if self._d.clock.monotonic() >= turn.deadline:
            self.timed_out()
            return
        if not turn.queued_calls:
            self.ask()
            return
        call = turn.queued_calls.popleft()
        if self.policy.attended:
            self._host.show(ActNarration(
                text=self._sentence(call), step=turn.loop.iteration, tool=call.name,
                exchange_id=turn.id, args=clip(call.raw_args, ARGS_SHOWN_CHARS),
            ))
        if call.args is None:
            turn.loop.record(call, f"error: {call.args_error}", is_error=True, duration_ms=0.0)
            self._next_call()
            return
        if self._d.tools.danger(call.name) == "block":
            turn.loop.skip(call, "blocked", name=call.name)
            self._next_call()
            return
        match self._approvals.needs_person(turn, call):
            case "ask":
                self._approvals.ask(turn, call)
            case "hold":
                self._approvals.hold(turn, call)
                self._next_call()
            case "skip":
                turn.loop.skip(call, "unattended", name=call.name)
                self._next_call()
            case None:
                self.run_tool(call)

    def run_action(self, skill: str, params: dict[str, Any]) -> None:
        """An action turn: one skill, run directly: no LLM, zero tokens."""
        turn = self._require()
        tools = self._d.tools
        if tools.get(skill) is None or tools.danger(skill) == "block":
            known = ", ".join(s.name for s in tools.specs())
            self.finish("error", error=f"no skill named {skill!r} (skills: {known}, approval)",
                        recoverable=False)
            return
        raw = msgspec.json.encode(params).decode()
        self.run_tool(ToolCall(f"action_{turn.id[:8]}", skill, params, raw))

    def run_tool(self, call: ToolCall, approval: str | None = None) -> None:
        """Run one call on the pool; its result comes back as ToolReturned."""
        turn = self._require()
        d = self._d
        turn.phase = "tool"
        turn.running_call = call
        turn.approval = None
        ctx = ToolContext(channel=d.channel, turn_id=turn.id, read=d.read, clock=d.clock,
                          pending=turn.pending_effects(), recall=d.recall,
                          path=self.policy.path)
        turn_id, name, args, tools = turn.id, call.name, call.args or {}, d.tools

        def job() -> Any:
            started = time.perf_counter()
            outcome = tools.run(name, args, ctx)
            duration = (time.perf_counter() - started) * 1000
            return ToolReturned(turn_id, outcome, duration, approval)

        self._submit(job)

    def _on_tool(self, returned: ToolReturned) -> None:
        turn = self._require()
        call = turn.running_call
        assert call is not None
        turn.running_call = None
        outcome = returned.outcome
        source = self._d.tools.origin(call.name)  # another program's tool: its words are data
        if source is not None:
            turn.provenance.program(outcome.text)
        turn.provenance.program(*outcome.heard)
        record = turn.loop.record(call, outcome.text, is_error=outcome.is_error,
                                  duration_ms=returned.duration_ms, effects=outcome.effects,
                                  approval=returned.approval, source=source)
        self._d.work.metrics.tool_calls.labels(
            tool=call.name, result="error" if outcome.is_error else "ok"
        ).inc()
        if outcome.card is not None and self.policy.attended:
            self._host.show(msgspec.structs.replace(outcome.card, exchange_id=turn.id))
        log.info("tool_returned", tool=call.name, is_error=outcome.is_error,
                 duration_ms=round(returned.duration_ms, 2))
        if turn.is_action:
            if outcome.is_error:
                self.finish("error", error=outcome.text, recoverable=False)
            else:
                self.finish("answered", text=outcome.text)
            return
        if not outcome.is_error and self._side.critique(turn, call, record.result):
            return
        self._next_call()

    # -- the person, mid-turn --

    def steer(self, text: str) -> None:
        """Words the person sent while the turn runs: they reach the very next request, and
        calls the model chose before it are not run."""
        turn = self._require()
        log.info("steering_received", phase=turn.phase, chars=len(text))
        turn.loop.steer(text)
        turn.provenance.person(text, request=True)
        while turn.queued_calls:
            turn.loop.skip(turn.queued_calls.popleft(), "steered")
        if turn.phase == "approval" and turn.approval is not None:
            self.resolve_approval(turn.approval.id, False, reason="redirected")
        elif turn.phase == "llm":
            turn.steered_in_flight = True
        # "tool", "critic" and "compacting": the next request, after them, carries it.

    def answer_approval(self, approval_id: str, approve: bool, *,
                        by: Literal["page", "program"] = "page") -> str | None:
        """The person's answer to an escalation; what to tell them when nothing waits for it."""
        pending = self.turn.approval if self.turn is not None else None
        if pending is None or pending.id != approval_id:
            return (f"no approval {approval_id!r} is waiting (it may have expired or been "
                    "answered)")
        self.resolve_approval(approval_id, approve, by=by)
        return None

    def resolve_approval(self, approval_id: str, approved: bool | None, reason: str = "", *,
                         by: Literal["page", "program"] | None = None) -> None:
        """approved: True runs the call; False (denied) or None (expired) tells the model no;
        `reason` names another reason_* fragment for the model."""
        turn = self._require()
        if turn.approval is None or turn.approval.id != approval_id:
            return
        call = self._approvals.resolve(turn, approval_id, approved, reason, by=by)
        turn.timer = self._deadline_timer(turn.id, turn.deadline)
        if call is not None:
            self.run_tool(call, approval="approved")
        else:
            self._next_call()

    def pending(self, approval_id: str) -> Approval | None:
        """The running turn's escalation `approval_id`, while it waits."""
        pending = self.turn.approval if self.turn is not None else None
        return pending if pending is not None and pending.id == approval_id else None

    # -- plumbing --

    def _images_ready(self, turn: Turn, status: Literal["success", "failed"]) -> None:
        """The model answered a request with the turn's images (success), or the turn ended
        before one did (failed): one image_ready frame for each, once."""
        if turn.image_ids and self.policy.attended:
            self._host.show(*(ImageReady(image_id=i, status=status) for i in turn.image_ids))
        turn.image_ids = ()

    def _sentence(self, call: ToolCall) -> str:
        narrate = self._d.narrate
        if narrate is None:
            return f"{call.name} {clip(call.raw_args)}".strip()
        return narrate(call.name, call.args)

    def _require(self) -> Turn:
        assert self.turn is not None, "no turn is running"
        return self.turn

    def _status(self, stage: Stage) -> None:
        if self.policy.attended:
            self._host.show(Status(stage=stage, exchange_id=self._require().id))

    def _deadline_timer(self, turn_id: str, deadline: float) -> Timer:
        clock = self._d.clock
        return clock.call_later(deadline - clock.monotonic(),
                                lambda: self._host.tell_self(TurnDeadline(turn_id)))

    def _submit(self, job: Callable[[], Any]) -> None:
        self._d.work.submit(job, turn_id=self._require().id, reply=self._host.tell_self)
