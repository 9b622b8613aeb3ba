"""A running turn's bookkeeping, and what it becomes at its end: a record and closing frames."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

from chalie.act.budget import PromptBudget
from chalie.act.loop import ActLoop, ToolRecord
from chalie.act.provenance import Provenance
from chalie.act.snapshots import snapshot
from chalie.clock import Timer
from chalie.frames import Done, Error, Frame, FrameMetrics, Message, text_blocks
from chalie.llm.types import ChatRequest, ToolCall
from chalie.store.effects import Effect, Recalled
from chalie.store.memory_writes import SnapshotRow
from chalie.store.records import (
    Outcome,
    StoredCompaction,
    StoredSteering,
    StoredToolCall,
    TurnRecord,
)

Phase = Literal["context", "llm", "tool", "critic", "approval", "compacting"]


@dataclass
class Approval:
    id: str
    call: ToolCall
    asked_at: float  # monotonic
    timer: Timer
    always: bool = False  # "Always allow this tool" was offered


@dataclass
class Turn:
    """One run of the ACT loop, on any path. `received_at` (monotonic) is when what started it
    arrived: the response time is measured from it, and `deadline` is `timeout_s` after it."""

    id: str
    loop: ActLoop
    budget: PromptBudget
    started_at: float  # wall clock, stored
    received_at: float
    timeout_s: float
    source: str  # text, voice, action, interface, dmn, scheduled, goal
    client_id: str | None = None
    is_action: bool = False  # runs one skill without the LLM
    request: Any = None  # what the hosting actor started the turn for
    deadline: float = 0.0  # monotonic; pushed back by time spent waiting for approvals
    timer: Timer | None = None
    history_upto: int = 0  # transcript id the turn's history reaches; a checkpoint covers it
    phase: Phase = "llm"
    queued_calls: deque[ToolCall] = field(default_factory=deque)
    running_call: ToolCall | None = None
    approval: Approval | None = None
    in_flight: ChatRequest | None = None  # the loop request out now, to calibrate the budget
    steered_in_flight: bool = False  # steering arrived while an LLM call was out
    responding_sent: bool = False
    streamed: bool = False  # message_delta frames went out that were not the answer
    delta_stream: Any = None  # the DeltaStream of the LLM call out now, if it streams
    image_ids: tuple[str, ...] = ()  # images whose analysis has no image_ready frame yet
    light: bool = False  # every call on the light job's model
    compactions: list[StoredCompaction] = field(default_factory=list)
    effects: list[Effect] = field(default_factory=list)  # the turn's own, before any tool's
    recalled: tuple[int, ...] = ()  # memory keys that went into the prompt
    snapshots: list[SnapshotRow] = field(default_factory=list)
    cognition: Any = None  # a person's turn: its TurnCognition (chalie/actors/session_cognition)
    work: Any = None  # the path's Work with the models the turn began with (Work.pinned)
    provenance: Provenance = field(default_factory=Provenance)  # whose words it read
    held: list[Any] = field(default_factory=list)  # calls held for the person (HeldCall)
    for_program: bool = False  # a program's message: nobody watches it, the person is asked
    embedding: Any = None  # the message's embedding for recall (a Future), begun with the turn

    def snap(self, request: ChatRequest, purpose: str, now: float) -> None:
        """Keep this LLM request as sent."""
        self.snapshots.append(snapshot(request, call=len(self.snapshots) + 1, purpose=purpose,
                                       now=now))

    def pending_effects(self) -> tuple[Effect, ...]:
        """What the turn will store, so far: its own effects, then its tools'."""
        return (*self.effects, *self.loop.pending_effects())

    @property
    def user_text(self) -> str:
        return self.loop.user_text


def closing_frames(
    turn: Turn, outcome: Outcome, elapsed: float, *, text: str | None, error: str | None,
    recoverable: bool, topic: str | None = None, mode: str = "act",
    confidence: float | None = None,
) -> tuple[Frame, ...]:
    """`message` (or `error`) with the metrics block, then `done`: how every turn ends."""
    metrics = turn.loop.metrics()
    block = FrameMetrics(metrics.tokens_total, metrics.tools, round(elapsed, 4),
                         metrics.prompt_tokens, metrics.completion_tokens)
    last: Frame
    if text is not None:
        last = Message(blocks=text_blocks(text), exchange_id=turn.id, metrics=block,
                       topic=topic, mode=mode, confidence=confidence)
    else:
        last = Error(message=error or outcome, recoverable=recoverable, exchange_id=turn.id,
                     metrics=block)
    return (last, Done(duration_ms=round(elapsed * 1000), exchange_id=turn.id))


def turn_record(
    turn: Turn, channel: str, outcome: Outcome, elapsed: float, finished_at: float, *,
    text: str | None, error: str | None, path: str = "user",
) -> TurnRecord:
    """What the store keeps of a turn."""
    metrics = turn.loop.metrics()
    return TurnRecord(
        id=turn.id,
        channel=channel,
        path=path,
        client_id=turn.client_id,
        source=turn.source,
        user_text=turn.user_text,
        response_text=text,
        outcome=outcome,
        error=error,
        iterations=metrics.iterations,
        llm_calls=metrics.llm_calls,
        tokens_total=metrics.tokens_total,
        response_time_s=elapsed,
        started_at=turn.started_at,
        finished_at=finished_at,
        tool_calls=tuple(_stored(r) for r in turn.loop.records),
        effects=(*turn.pending_effects(), *((Recalled(turn.recalled),) if turn.recalled else ())),
        steering=tuple(StoredSteering(s.text, s.after_iteration) for s in turn.loop.steering),
        compactions=tuple(turn.compactions),
        snapshots=tuple(turn.snapshots),
    )


def _stored(record: ToolRecord) -> StoredToolCall:
    return StoredToolCall(
        iteration=record.iteration,
        call_id=record.call.call_id,
        name=record.call.name,
        args=record.call.raw_args,
        result=record.result,
        is_error=record.is_error,
        duration_ms=record.duration_ms,
        approval=record.approval,
        ran=record.ran,
    )
