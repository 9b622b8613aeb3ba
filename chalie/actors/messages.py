"""Messages the actors exchange: frozen, tagged msgspec structs, dispatched with `match`."""

from __future__ import annotations

from typing import Any

import msgspec

from chalie.frames import Frame
from chalie.llm.types import ChatResponse
from chalie.store.records import TurnRecord
from chalie.tools.base import ToolOutcome


class _Msg(msgspec.Struct, frozen=True, tag=True):
    pass


# --- supervision -------------------------------------------------------------------------------

class ChildFailed(_Msg, frozen=True):
    """A child crashed. `pending` holds the messages left in its inbox, to hand to its successor."""

    name: str
    urn: str
    error: str
    pending: tuple[Any, ...] = ()


class RestartChild(_Msg, frozen=True):
    name: str


# --- session -----------------------------------------------------------------------------------

class UserMessage(_Msg, frozen=True):
    """A person's chat message; `received_at` is the edge's monotonic receipt time."""

    text: str
    received_at: float
    source: str = "text"
    client_id: str | None = None


class FrameRejected(_Msg, frozen=True):
    """The edge could not accept a client frame; the session answers with an `error` frame."""

    reason: str


class LlmReturned(_Msg, frozen=True):
    turn_id: str
    response: ChatResponse


class LlmFailed(_Msg, frozen=True):
    turn_id: str
    error: str
    recoverable: bool


class ToolReturned(_Msg, frozen=True):
    turn_id: str
    outcome: ToolOutcome
    duration_ms: float


class TurnDeadline(_Msg, frozen=True):
    turn_id: str


class TurnStored(_Msg, frozen=True):
    turn_id: str


class TurnStoreFailed(_Msg, frozen=True):
    turn_id: str
    error: str


SessionMessage = (
    UserMessage | FrameRejected | LlmReturned | LlmFailed | ToolReturned | TurnDeadline
    | TurnStored | TurnStoreFailed
)


class Deliver(_Msg, frozen=True):
    """To the SessionSupervisor: route `message` to the channel's Session, starting it if needed."""

    channel: str
    message: SessionMessage


# --- store writer ------------------------------------------------------------------------------

class AppendFrames(_Msg, frozen=True):
    channel: str
    frames: tuple[Frame, ...]


class CommitTurn(_Msg, frozen=True):
    """Store the turn and log its closing frames in one transaction, then push the frames."""

    record: TurnRecord
    frames: tuple[Frame, ...]


class CloseOpenExchange(_Msg, frozen=True):
    """A Session (re)started: end a turn of the channel that was cut off with error + done."""

    channel: str


class CreateAuthSession(_Msg, frozen=True):
    token_hash: str
    created_at: float
    expires_at: float
