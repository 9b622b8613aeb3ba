"""What a Session receives (through its SessionSupervisor): the person's chat, steering and
actions, the edge's refusals, the backstop's answer, and the idle handshake with its supervisor.
Frozen, tagged msgspec structs, dispatched with `match`."""

from __future__ import annotations

from typing import Any

import msgspec

from chalie.actors.turn_messages import (
    ApprovalExpired,
    CompactionReturned,
    ContextReady,
    LlmFailed,
    LlmReturned,
    ToolReturned,
    TurnDeadline,
    TurnStored,
    TurnStoreFailed,
)


class _Msg(msgspec.Struct, frozen=True, tag=True):
    pass


class UserMessage(_Msg, frozen=True):
    """A person's chat message; `received_at` is the edge's monotonic receipt time."""

    text: str
    received_at: float
    source: str = "text"
    client_id: str | None = None
    notify_channel: str | None = None  # an interface's message: the answer also goes here
    topic: str | None = None  # as a `notification` frame with this topic
    program: str | None = None  # an interface's message: the program's name
    program_text: str | None = None  # what it said (`text` frames it for the model)
    image_ids: tuple[str, ...] = ()  # images uploaded with POST /api/images, for the model
    light: bool = False  # answered by the light job's model (the `chalie-light` model)


class FrameRejected(_Msg, frozen=True):
    """The edge could not accept a client frame; the session answers with an `error` frame."""

    reason: str


class Steer(_Msg, frozen=True):
    """`act_steer`: redirect the running turn; with none running it is a chat."""

    text: str
    received_at: float


class ActionRequest(_Msg, frozen=True):
    """`action`: run a skill without the LLM, or answer an escalation (skill "approval")."""

    skill: str
    params: dict[str, Any]
    received_at: float
    client_id: str | None = None
    via: str = "program"  # "page": from the person's /ws (an approval's `by`)
    held_id: str | None = None  # it runs a call held for the person, who approved it


class BackstopChecked(_Msg, frozen=True):
    """The turn-boundary check found the next prompt within budget: nothing to compact."""


SessionMessage = (
    UserMessage | FrameRejected | Steer | ActionRequest | ContextReady | LlmReturned | LlmFailed
    | ToolReturned | BackstopChecked
    | TurnDeadline | CompactionReturned | ApprovalExpired | TurnStored | TurnStoreFailed
)


class Deliver(_Msg, frozen=True):
    """To the SessionSupervisor: route `message` to the channel's Session, starting it if needed."""

    channel: str
    message: SessionMessage


class IdleCheck(_Msg, frozen=True):
    """To a Session, from its own idle timer: has it been idle for server.session_idle_s?"""


class SessionIdle(_Msg, frozen=True):
    """To the SessionSupervisor: the Session `urn` of `channel` has been idle long enough."""

    channel: str
    urn: str


class StopIfIdle(_Msg, frozen=True):
    """To a Session, from its supervisor (which holds the channel's messages meanwhile): answer
    IdleAnswer, stop=True when it is still idle and may be stopped, False when something
    arrived since it said idle."""


class IdleAnswer(_Msg, frozen=True):
    """To the SessionSupervisor: the Session `urn` of `channel` answers StopIfIdle."""

    channel: str
    urn: str
    stop: bool


class StoreWritable(_Msg, frozen=True):
    """From the StoreWriter, through the SessionSupervisor to every Session: the store takes
    writes again; the messages held while it could not are stored and answered now."""
