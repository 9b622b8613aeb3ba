"""What the StoreWriter stores for one turn, in one transaction."""

from __future__ import annotations

from typing import Literal

import msgspec

from chalie.store.effects import Effect
from chalie.store.memory_writes import SnapshotRow

Outcome = Literal["answered", "error", "timeout", "cancelled"]


class StoredToolCall(msgspec.Struct, frozen=True):
    iteration: int
    call_id: str
    name: str
    args: str
    result: str
    is_error: bool
    duration_ms: float
    approval: str | None = None
    ran: bool = True


class StoredSteering(msgspec.Struct, frozen=True):
    text: str
    after_iteration: int


class StoredCompaction(msgspec.Struct, frozen=True):
    stage: Literal["trail", "restart", "backstop"]
    tokens_before: int
    tokens_after: int
    tokens_used: int
    summary: str
    created_at: float


class ProgramLine(msgspec.Struct, frozen=True):
    """A paired program's message as the person's transcript keeps it: said by `program` on
    `channel`, the channel its answer went to."""

    channel: str
    program: str
    text: str


class TurnRecord(msgspec.Struct, frozen=True):
    """A turn as stored. A user turn puts the person's message and the answer in its channel's
    transcript; a program's message (`program`) puts what it said and the answer in the
    transcript of the person's channel the answer went to instead; a background path's turn
    (`path` dmn, scheduled, goal) puts nothing there itself: the message the person gets, when
    one is delivered, enters the transcript then."""

    id: str
    channel: str
    client_id: str | None
    source: str
    user_text: str
    response_text: str | None
    outcome: Outcome
    error: str | None
    iterations: int
    llm_calls: int
    tokens_total: int
    response_time_s: float
    started_at: float
    finished_at: float
    tool_calls: tuple[StoredToolCall, ...] = ()
    effects: tuple[Effect, ...] = ()
    steering: tuple[StoredSteering, ...] = ()
    compactions: tuple[StoredCompaction, ...] = ()
    snapshots: tuple[SnapshotRow, ...] = ()
    path: str = "user"
    program: ProgramLine | None = None
