"""Session(channel): the user path. It owns the channel's turns and drives the ACT loop.

The mailbox never blocks: LLM and tool calls run on the shared worker pool and come back as
LlmReturned / LlmFailed / ToolReturned messages. A turn ends by handing its record and closing
frames to the StoreWriter (CommitTurn); the next queued message starts once TurnStored arrives,
so its prompt reads a history that includes the turn before it.
"""

from __future__ import annotations

import time
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import apsw
import pykka
import structlog

from chalie.act.loop import ActLoop, Answer, ToolRecord
from chalie.act.prompts import Prompts
from chalie.actors.messages import (
    AppendFrames,
    CloseOpenExchange,
    CommitTurn,
    FrameRejected,
    LlmFailed,
    LlmReturned,
    ToolReturned,
    TurnDeadline,
    TurnStored,
    TurnStoreFailed,
    UserMessage,
)
from chalie.actors.supervisor import Directory, Link, SupervisedActor
from chalie.clock import Clock, Timer
from chalie.config import ActConfig, LlmConfig
from chalie.errors import LlmError
from chalie.frames import (
    ActNarration,
    Done,
    Error,
    Frame,
    FrameMetrics,
    Message,
    Status,
    text_blocks,
)
from chalie.llm.types import LlmProvider, ToolCall
from chalie.metrics import Metrics
from chalie.store.queries import recent_transcript
from chalie.store.records import Outcome, StoredToolCall, TurnRecord
from chalie.tools.base import ToolContext, ToolOutcome
from chalie.tools.registry import ToolRegistry

log = structlog.get_logger("chalie.session")

NARRATION_ARGS_CHARS = 120


@dataclass(frozen=True)
class SessionDeps:
    """Everything a Session needs from outside; tests swap the provider, clock and pool."""

    provider: LlmProvider
    tools: ToolRegistry
    prompts: Prompts
    act: ActConfig
    llm: LlmConfig
    read: Callable[[], apsw.Connection]
    clock: Clock
    pool: Executor
    directory: Directory
    metrics: Metrics


@dataclass
class _Turn:
    id: str
    message: UserMessage
    loop: ActLoop
    started_at: float  # wall clock, stored
    deadline: float  # monotonic
    timer: Timer
    queued_calls: deque[ToolCall] = field(default_factory=deque)
    running_call: ToolCall | None = None


class Session(SupervisedActor):
    def __init__(self, link: Link | None, *, channel: str, deps: SessionDeps) -> None:
        super().__init__(link)
        self.channel = channel
        self._deps = deps
        self._inbox: deque[UserMessage] = deque()
        self._turn: _Turn | None = None
        self._storing: str | None = None  # turn id handed to the StoreWriter, not yet stored

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
                self._inbox.append(message)
                self._start_next()
            case FrameRejected(reason=reason):
                self._emit(Error(message=reason, recoverable=True))
            case LlmReturned(turn_id=tid, response=response) if self._is_current(tid):
                self._on_llm(response)
            case LlmFailed(turn_id=tid, error=error, recoverable=recoverable) if self._is_current(
                tid
            ):
                self._finish("error", error=error, recoverable=recoverable)
            case ToolReturned(turn_id=tid) if self._is_current(tid):
                self._on_tool(message)
            case TurnDeadline(turn_id=tid) if self._is_current(tid):
                self._timed_out()
            case TurnStored(turn_id=tid) | TurnStoreFailed(turn_id=tid) if tid == self._storing:
                if isinstance(message, TurnStoreFailed):
                    self._emit(Error(
                        message=f"the answer could not be stored: {message.error}",
                        recoverable=True, exchange_id=tid,
                    ))
                self._storing = None
                self._start_next()
            case LlmReturned() | LlmFailed() | ToolReturned() | TurnDeadline() | TurnStored() | \
                    TurnStoreFailed():
                log.debug("stale_message_dropped", message=type(message).__name__)
            case _:
                log.warning("unexpected_message", message=type(message).__name__)

    def _is_current(self, turn_id: str) -> bool:
        return self._turn is not None and self._turn.id == turn_id

    # -- turn start --

    def _start_next(self) -> None:
        if self._turn is not None or self._storing is not None or not self._inbox:
            return
        message = self._inbox.popleft()
        d = self._deps
        turn_id = uuid.uuid4().hex
        structlog.contextvars.bind_contextvars(turn_id=turn_id)
        log.info("turn_started", chars=len(message.text), source=message.source)
        self._emit(Status(stage="processing", exchange_id=turn_id))
        history = recent_transcript(d.read(), self.channel, 2 * d.act.history_turns)
        loop = ActLoop(
            prompts=d.prompts,
            user_text=message.text,
            history=history,
            tools=d.tools.specs(),
            max_iterations=d.act.max_iterations,
            max_result_chars=d.act.max_tool_result_chars,
            now_text=datetime.fromtimestamp(d.clock.time(), UTC).strftime("%Y-%m-%d %H:%M UTC"),
        )
        deadline = message.received_at + d.act.timeout_s
        timer = d.clock.call_later(
            deadline - d.clock.monotonic(), lambda: self._tell_self(TurnDeadline(turn_id))
        )
        self._turn = _Turn(turn_id, message, loop, d.clock.time(), deadline, timer)
        self._ask_llm()

    # -- the loop --

    def _ask_llm(self) -> None:
        turn = self._require_turn()
        d = self._deps
        remaining = turn.deadline - d.clock.monotonic()
        if remaining <= 0:
            self._timed_out()
            return
        request = turn.loop.request()
        timeout = min(remaining, d.llm.request_timeout_s)
        turn_id = turn.id

        def job() -> Any:
            try:
                response = d.provider.complete(request, timeout_s=timeout)
            except LlmError as e:
                log.warning("llm_failed", error=str(e), recoverable=e.recoverable)
                d.metrics.llm_calls.labels(result="error").inc()
                return LlmFailed(turn_id, str(e), e.recoverable)
            d.metrics.llm_calls.labels(result="ok").inc()
            d.metrics.llm_tokens.labels(kind="prompt").inc(response.usage.prompt_tokens)
            d.metrics.llm_tokens.labels(kind="completion").inc(response.usage.completion_tokens)
            log.info(
                "llm_answered",
                tool_calls=len(response.tool_calls),
                tokens=response.usage.total_tokens,
                latency_s=round(response.latency_s, 4),
            )
            return LlmReturned(turn_id, response)

        self._submit(job)

    def _on_llm(self, response: Any) -> None:
        turn = self._require_turn()
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
        d = self._deps
        if d.clock.monotonic() >= turn.deadline:
            self._timed_out()
            return
        if not turn.queued_calls:
            self._ask_llm()
            return
        call = turn.queued_calls.popleft()
        turn.running_call = call
        self._emit(ActNarration(
            text=_narrate(call), step=turn.loop.iteration, tool=call.name, exchange_id=turn.id
        ))
        if call.args is None:
            self._on_tool(ToolReturned(
                turn.id, ToolOutcome(f"error: {call.args_error}", is_error=True), 0.0
            ))
            return
        ctx = ToolContext(
            channel=self.channel, turn_id=turn.id, read=d.read, clock=d.clock,
            pending=turn.loop.pending_effects(),
        )
        turn_id, name, args = turn.id, call.name, call.args

        def job() -> Any:
            started = time.perf_counter()
            outcome = d.tools.run(name, args, ctx)
            return ToolReturned(turn_id, outcome, (time.perf_counter() - started) * 1000)

        self._submit(job)

    def _on_tool(self, returned: ToolReturned) -> None:
        turn = self._require_turn()
        call = turn.running_call
        assert call is not None
        turn.running_call = None
        outcome = returned.outcome
        turn.loop.record(
            call, outcome.text, is_error=outcome.is_error, duration_ms=returned.duration_ms,
            effects=outcome.effects,
        )
        self._deps.metrics.tool_calls.labels(
            tool=call.name, result="error" if outcome.is_error else "ok"
        ).inc()
        log.info("tool_returned", tool=call.name, is_error=outcome.is_error,
                 duration_ms=round(returned.duration_ms, 2))
        self._next_call()

    def _timed_out(self) -> None:
        budget = self._deps.act.timeout_s
        self._finish("timeout", error=f"the turn took longer than {budget:g}s and was stopped",
                     recoverable=True)

    # -- turn end --

    def _finish(
        self, outcome: Outcome, *, text: str | None = None, error: str | None = None,
        recoverable: bool = True,
    ) -> None:
        turn = self._require_turn()
        d = self._deps
        turn.timer.cancel()
        metrics = turn.loop.metrics()
        elapsed = d.clock.monotonic() - turn.message.received_at
        block = FrameMetrics(metrics.tokens_total, metrics.tools, round(elapsed, 4))
        closing: tuple[Frame, ...]
        if outcome == "answered":
            assert text is not None
            closing = (Message(blocks=text_blocks(text), exchange_id=turn.id, metrics=block),)
        else:
            closing = (Error(message=error or outcome, recoverable=recoverable,
                             exchange_id=turn.id, metrics=block),)
        closing += (Done(duration_ms=round(elapsed * 1000), exchange_id=turn.id),)
        record = TurnRecord(
            id=turn.id,
            channel=self.channel,
            client_id=turn.message.client_id,
            source=turn.message.source,
            user_text=turn.message.text,
            response_text=text,
            outcome=outcome,
            error=error,
            iterations=metrics.iterations,
            llm_calls=metrics.llm_calls,
            tokens_total=metrics.tokens_total,
            response_time_s=elapsed,
            started_at=turn.started_at,
            finished_at=d.clock.time(),
            tool_calls=tuple(_stored(r) for r in turn.loop.trail),
            effects=turn.loop.pending_effects(),
        )
        d.metrics.turns.labels(outcome=outcome).inc()
        d.metrics.turn_seconds.observe(elapsed)
        log.info("turn_finished", outcome=outcome, tokens_total=metrics.tokens_total,
                 llm_calls=metrics.llm_calls, response_time_s=round(elapsed, 4), error=error)
        self._turn = None
        self._storing = turn.id
        self._to_writer(CommitTurn(record, closing))

    # -- plumbing --

    def _require_turn(self) -> _Turn:
        assert self._turn is not None, "no turn is running"
        return self._turn

    def _emit(self, *frames: Frame) -> None:
        self._to_writer(AppendFrames(self.channel, frames))

    def _to_writer(self, message: Any) -> None:
        self._deps.directory.tell("store_writer", message)

    def _tell_self(self, message: Any) -> None:
        try:
            self.actor_ref.tell(message)
        except pykka.ActorDeadError:
            pass  # this instance was stopped or replaced; its turn is gone with it

    def _submit(self, job: Callable[[], Any]) -> None:
        """Run `job` on the worker pool with this turn's log context; tell self its result."""
        context = structlog.contextvars.get_contextvars()
        turn_id = self._require_turn().id

        def run() -> None:
            with structlog.contextvars.bound_contextvars(**context):
                try:
                    result = job()
                except Exception as e:  # a bug in a job must still end the turn
                    log.exception("worker_job_failed")
                    result = LlmFailed(turn_id, f"internal error: {e!r}", True)
                self._tell_self(result)

        self._deps.pool.submit(run)


def _narrate(call: ToolCall) -> str:
    args = call.raw_args if len(call.raw_args) <= NARRATION_ARGS_CHARS else (
        call.raw_args[:NARRATION_ARGS_CHARS] + "…"
    )
    return f"{call.name} {args}".strip()


def _stored(record: ToolRecord) -> StoredToolCall:
    return StoredToolCall(
        iteration=record.iteration,
        call_id=record.call.call_id,
        name=record.call.name,
        args=record.call.raw_args,
        result=record.result,
        is_error=record.is_error,
        duration_ms=record.duration_ms,
    )
