"""Session(channel): the user path. It owns the channel's turns and drives the ACT loop.

The mailbox never blocks: LLM, compaction and tool calls run on the shared worker pool and come
back as messages. So mid-turn steering is just a message: `Steer` lands here while a call is out
and goes into the next request. A turn ends by handing its record and closing frames to the
StoreWriter (CommitTurn); the next queued message starts once TurnStored arrives, so its prompt
reads a history that includes the turn before it.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from typing import Any

import msgspec
import structlog

from chalie.act import approval
from chalie.act.budget import PromptBudget
from chalie.act.fastpath import is_cancel, is_empty
from chalie.act.loop import Answer
from chalie.actors.messages import (
    ActionRequest,
    AppendFrames,
    ApprovalExpired,
    BackstopChecked,
    CloseOpenExchange,
    CommitTurn,
    CompactionReturned,
    ContextReady,
    FrameRejected,
    LlmFailed,
    LlmReturned,
    RepushExchange,
    Steer,
    ToolReturned,
    TurnDeadline,
    TurnStored,
    TurnStoreFailed,
    UserMessage,
)
from chalie.actors.session_approvals import ApprovalsMixin
from chalie.actors.session_base import SessionDeps, clip
from chalie.actors.session_compaction import CompactionMixin
from chalie.actors.session_memory import MemoryMixin
from chalie.actors.turn import Turn, closing_frames, turn_record
from chalie.frames import ActNarration, Done, Error, Notification, Status
from chalie.llm.types import ChatResponse, ToolCall
from chalie.memory.identity import read_name
from chalie.store import queries
from chalie.store.records import Outcome
from chalie.tools.base import ToolContext

log = structlog.get_logger("chalie.session")

__all__ = ["Session", "SessionDeps"]

CANCELLED = "Okay, I've stopped."
NOTHING_TO_CANCEL = "Okay."
EMPTY = "There was nothing in that message to answer."


class Session(ApprovalsMixin, CompactionMixin, MemoryMixin):
    """One channel's turns, one at a time; steering, approvals and compaction mid-turn."""

    def started(self) -> None:
        # A predecessor that crashed mid-turn left an open exchange: close it with an error.
        self._to_writer(CloseOpenExchange(self.channel))

    def on_receive(self, message: Any) -> Any:
        turn_id = self._turn.id if self._turn else None
        with structlog.contextvars.bound_contextvars(
            actor="session", channel=self.channel, turn_id=turn_id
        ):
            self._dispatch(message)

    def _dispatch(self, message: Any) -> None:
        match message:
            case UserMessage():
                self._on_user_message(message)
            case Steer(text=text, received_at=received_at):
                self._on_steer(text, received_at)
            case ActionRequest(skill=skill) if skill in approval.SKILLS:
                self._on_approval_answer(skill, message.params)
            case ActionRequest():
                self._enqueue(message)
            case FrameRejected(reason=reason):
                self._emit(Error(message=reason, recoverable=True))
            case ContextReady(turn_id=tid, context=context) if self._is_current(tid):
                self._on_context(context)
            case LlmReturned(turn_id=tid, response=response) if self._is_current(tid):
                self._on_llm(response)
            case LlmFailed(turn_id=tid, error=error, recoverable=recoverable) if (
                self._is_current(tid)
            ):
                self._finish("error", error=error, recoverable=recoverable)
            case ToolReturned(turn_id=tid) if self._is_current(tid):
                self._on_tool(message)
            case (CompactionReturned(stage="backstop") | LlmFailed(turn_id="backstop")
                  | BackstopChecked()):
                self._backstop_running = False
            case CompactionReturned(turn_id=tid) if self._is_current(tid):
                self._on_compaction(message)
            case ApprovalExpired(turn_id=tid, approval_id=aid) if self._is_current(tid):
                self._resolve_approval(aid, None)
            case TurnDeadline(turn_id=tid) if self._is_current(tid):
                self._timed_out()
            case TurnStored(turn_id=tid) | TurnStoreFailed(turn_id=tid) if (
                self._storing and tid == self._storing[0]
            ):
                self._on_stored(message)
            case (ContextReady() | LlmReturned() | LlmFailed() | ToolReturned() | TurnDeadline()
                  | CompactionReturned() | ApprovalExpired() | TurnStored() | TurnStoreFailed()):
                log.debug("stale_message_dropped", message=type(message).__name__)
            case _:
                log.warning("unexpected_message", message=type(message).__name__)

    # -- what the person sends --

    def _on_user_message(self, message: UserMessage) -> None:
        if self._turn is not None and not self._turn.is_action and is_cancel(message.text):
            self._cancel_running(message.text)
            return
        self._enqueue(message)

    def _on_steer(self, text: str, received_at: float) -> None:
        turn = self._turn
        if turn is None or turn.is_action:
            self._on_user_message(UserMessage(text=text, received_at=received_at))
            return
        if is_cancel(text):
            self._cancel_running(text)
            return
        log.info("steering_received", phase=turn.phase, chars=len(text))
        turn.loop.steer(text)
        while turn.queued_calls:  # calls the model chose before it saw the steering
            turn.loop.skip(turn.queued_calls.popleft(), "steered")
        if turn.phase == "approval" and turn.approval is not None:
            self._resolve_approval(turn.approval.id, False, reason="redirected")
        elif turn.phase == "llm":
            turn.steered_in_flight = True
        # "tool" and "compacting": the next request, after the call returns, carries the steering.

    def _enqueue(self, message: UserMessage | ActionRequest) -> None:
        client_id = message.client_id
        if client_id is not None and self._is_known(client_id):
            return
        self._inbox.append(message)
        self._start_next()

    def _is_known(self, client_id: str) -> bool:
        """A client retrying a message it already sent: start nothing, show the first turn."""
        if (self._turn and self._turn.client_id == client_id) or any(
            m.client_id == client_id for m in self._inbox
        ) or (self._storing and self._storing[1] == client_id):
            log.info("duplicate_client_id_in_flight", client_id=client_id)
            return True
        stored = queries.turn_for_client_id(self._deps.read(), self.channel, client_id)
        if stored is None:
            return False
        log.info("duplicate_client_id_replayed", client_id=client_id, exchange_id=stored)
        self._to_writer(RepushExchange(self.channel, stored))
        return True

    # -- turn start --

    def _start_next(self) -> None:
        if self._turn is not None or self._storing is not None or not self._inbox:
            return
        request = self._inbox.popleft()
        d = self._deps
        d.metrics.turns_in_flight.inc()
        turn_id = uuid.uuid4().hex
        structlog.contextvars.bind_contextvars(turn_id=turn_id)
        action = isinstance(request, ActionRequest)
        text = _action_text(request) if isinstance(request, ActionRequest) else request.text
        log.info("turn_started", chars=len(text), kind="action" if action else "chat")
        statement = None if action else read_name(text)
        recalls = not action and not is_empty(text) and not is_cancel(text) and not (
            statement is not None and statement.whole)
        # First, after only those pure checks: the exchange is open in the log, so a crash from
        # here on is closed with an error frame by whoever comes next. A turn that goes on to
        # recall says so in the same message (one transaction for the writer, not two).
        opening = Status(stage="processing", exchange_id=turn_id)
        self._emit(opening, *([Status(stage="retrieving_memory", exchange_id=turn_id)]
                              if recalls else []))
        now = datetime.fromtimestamp(d.clock.time(), UTC).strftime("%Y-%m-%d %H:%M UTC")
        if action:  # runs a skill: no history, no recall
            loop, upto = self._new_loop(d.read(), text, now, with_history=False)
        else:  # the context is gathered on the pool once the fast exits are passed
            loop, upto = self._bare_loop(text, now), 0
        deadline = request.received_at + d.act.timeout_s
        self._turn = Turn(
            id=turn_id, request=request, loop=loop,
            budget=PromptBudget(d.llm.context_window, d.act.compaction_threshold,
                                self._token_ratio),
            started_at=d.clock.time(), deadline=deadline,
            timer=self._deadline_timer(turn_id, deadline),
            history_upto=upto,
        )
        if isinstance(request, ActionRequest):
            self._run_action(request)
            return
        if is_empty(text):
            self._finish("cancelled", text=EMPTY)
            return
        if is_cancel(text):
            self._finish("cancelled", text=NOTHING_TO_CANCEL)
            return
        if statement is not None and self._identity_hook(statement):
            return
        self._gather_context()

    def _run_action(self, request: ActionRequest) -> None:
        """A deterministic skill, run directly: no LLM, zero tokens."""
        turn = self._require_turn()
        tool = self._deps.tools.get(request.skill)
        if tool is None or self._deps.tools.danger(request.skill) == "block":
            known = ", ".join(s.name for s in self._deps.tools.specs())
            self._finish("error", error=f"no skill named {request.skill!r} (skills: {known}, "
                         f"approval)", recoverable=False)
            return
        raw = msgspec.json.encode(request.params).decode()
        self._run_tool(ToolCall(f"action_{turn.id[:8]}", request.skill, request.params, raw))

    # -- the loop --

    def _ask_llm(self) -> None:
        turn = self._require_turn()
        d = self._deps
        remaining = turn.deadline - d.clock.monotonic()
        if remaining <= 0:
            self._timed_out()
            return
        request = turn.loop.request()
        if not turn.budget.fits(request) and self._compact(request):
            return
        if turn.loop.answer_forced and not turn.responding_sent:
            turn.responding_sent = True
            self._status("responding")
        turn.phase = "llm"
        turn.steered_in_flight = False
        turn.in_flight = request
        turn.snap(request, "act", d.clock.time())
        turn_id, timeout = turn.id, min(remaining, d.llm.request_timeout_s)

        def job() -> Any:
            return LlmReturned(turn_id, self._work.call_llm(request, timeout))

        self._submit(job)

    def _on_llm(self, response: ChatResponse) -> None:
        turn = self._require_turn()
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
            self._ask_llm()
            return
        step = turn.loop.absorb(response)
        if isinstance(step, Answer):
            if step.text:
                self._finish("answered", text=step.text)
            else:
                self._finish("error", error="the model returned an empty answer", recoverable=True)
            return
        turn.queued_calls.extend(step.calls)
        self._next_call()

    def _next_call(self) -> None:
        turn = self._require_turn()
        if self._deps.clock.monotonic() >= turn.deadline:
            self._timed_out()
            return
        if not turn.queued_calls:
            self._ask_llm()
            return
        call = turn.queued_calls.popleft()
        self._emit(ActNarration(
            text=_narrate(call), step=turn.loop.iteration, tool=call.name, exchange_id=turn.id
        ))
        if call.args is None:
            turn.loop.record(call, f"error: {call.args_error}", is_error=True, duration_ms=0.0)
            self._next_call()
            return
        danger = self._deps.tools.danger(call.name)
        if danger == "block":
            turn.loop.skip(call, "blocked", name=call.name)
            self._next_call()
            return
        if danger == "confirm":
            self._ask_approval(call)
            return
        self._run_tool(call)

    def _run_tool(self, call: ToolCall, approval: str | None = None) -> None:
        turn = self._require_turn()
        d = self._deps
        turn.phase = "tool"
        turn.running_call = call
        turn.approval = None
        ctx = ToolContext(channel=self.channel, turn_id=turn.id, read=d.read, clock=d.clock,
                          pending=turn.pending_effects(), recall=d.recall)
        turn_id, name, args = turn.id, call.name, call.args or {}

        def job() -> Any:
            started = time.perf_counter()
            outcome = d.tools.run(name, args, ctx)
            duration = (time.perf_counter() - started) * 1000
            return ToolReturned(turn_id, outcome, duration, approval)

        self._submit(job)

    def _on_tool(self, returned: ToolReturned) -> None:
        turn = self._require_turn()
        call = turn.running_call
        assert call is not None
        turn.running_call = None
        outcome = returned.outcome
        turn.loop.record(call, outcome.text, is_error=outcome.is_error,
                         duration_ms=returned.duration_ms, effects=outcome.effects,
                         approval=returned.approval)
        self._deps.metrics.tool_calls.labels(
            tool=call.name, result="error" if outcome.is_error else "ok"
        ).inc()
        if outcome.card is not None:
            self._emit(msgspec.structs.replace(outcome.card, exchange_id=turn.id))
        log.info("tool_returned", tool=call.name, is_error=outcome.is_error,
                 duration_ms=round(returned.duration_ms, 2))
        if turn.is_action:
            if outcome.is_error:
                self._finish("error", error=outcome.text, recoverable=False)
            else:
                self._finish("answered", text=outcome.text)
            return
        self._next_call()

    # -- turn end --

    def _cancel_running(self, text: str) -> None:
        turn = self._require_turn()
        log.info("turn_cancelled_by_person")
        turn.loop.steer(text)
        if turn.approval is not None:
            turn.approval.timer.cancel()
        self._finish("cancelled", text=CANCELLED)

    def _timed_out(self) -> None:
        budget = self._deps.act.timeout_s
        self._finish("timeout", error=f"the turn took longer than {budget:g}s and was stopped",
                     recoverable=True)

    def _finish(self, outcome: Outcome, *, text: str | None = None, error: str | None = None,
                recoverable: bool = True) -> None:
        turn = self._require_turn()
        d = self._deps
        turn.timer.cancel()
        elapsed = d.clock.monotonic() - turn.request.received_at
        frames = closing_frames(turn, outcome, elapsed, text=text, error=error,
                                recoverable=recoverable)
        record = turn_record(turn, self.channel, outcome, elapsed, d.clock.time(), text=text,
                             error=error)
        d.metrics.turns.labels(outcome=outcome).inc()
        d.metrics.turn_seconds.observe(elapsed)
        log.info("turn_finished", outcome=outcome, tokens_total=record.tokens_total,
                 llm_calls=record.llm_calls, response_time_s=round(elapsed, 6),
                 llm_s=round(turn.loop.llm_seconds, 6), error=error)
        self._turn = None
        self._token_ratio = turn.budget.ratio
        self._storing = (turn.id, turn.client_id)
        self._to_writer(CommitTurn(record, frames, turn.request.received_at,
                                   notify=_notification(turn.request, text)))
        # If the writer never answers (it crashed holding this turn), do not wait forever.
        wait = d.store.reply_timeout_s
        self._storing_timer = d.clock.call_later(wait, lambda: self._tell_self(
            TurnStoreFailed(turn.id, f"the store did not confirm within {wait:g}s")))

    def _on_stored(self, message: TurnStored | TurnStoreFailed) -> None:
        turn_id = message.turn_id
        if self._storing_timer is not None:
            self._storing_timer.cancel()
            self._storing_timer = None
        self._deps.metrics.turns_in_flight.dec()
        if isinstance(message, TurnStoreFailed):
            self._emit(Error(message=f"the answer could not be stored: {message.error}",
                             recoverable=True, exchange_id=turn_id),
                       Done(duration_ms=0, exchange_id=turn_id))
        self._storing = None
        if not self._inbox:
            self._backstop(turn_id)
        self._start_next()

def _notification(request: UserMessage | ActionRequest, answer: str | None) -> AppendFrames | None:
    """An interface's message was answered: the answer goes to the person as a notification."""
    if not isinstance(request, UserMessage) or request.notify_channel is None or not answer:
        return None
    return AppendFrames(request.notify_channel,
                        (Notification(content=answer, topic=request.topic),))


def _action_text(request: ActionRequest) -> str:
    return f"[action] {request.skill} {msgspec.json.encode(request.params).decode()}"


def _narrate(call: ToolCall) -> str:
    return f"{call.name} {clip(call.raw_args)}".strip()
