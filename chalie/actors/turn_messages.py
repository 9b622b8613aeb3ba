"""The messages of a running turn, on any path: what comes back from the worker pool (its
gathered context, the LLM, a tool, a compaction, the critic), the turn's timers (its deadline,
an approval's expiry), and the StoreWriter's answer to CommitTurn. The TurnDriver (driver.py)
and the actor hosting it handle them."""

from __future__ import annotations

import msgspec

from chalie.act.critic import Checked
from chalie.cognition.topics import TopicChoice
from chalie.llm.types import ChatResponse, ToolCall
from chalie.memory.context import TurnContext
from chalie.tools.base import ToolOutcome
from chalie.values.images import Image


class _Msg(msgspec.Struct, frozen=True, tag=True):
    pass


class ContextReady(_Msg, frozen=True):
    """The turn's context (identity, state, recall, history, tools) was gathered and fitted."""

    turn_id: str
    context: TurnContext
    images: tuple[Image, ...] = ()  # the turn's images, as the store has them
    missing_images: tuple[str, ...] = ()  # image ids the store has no image for
    topic: TopicChoice | None = None  # the message's topic (chalie/cognition/topics.py)


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
    approval: str | None = None


class TurnDeadline(_Msg, frozen=True):
    turn_id: str


class CompactionReturned(_Msg, frozen=True):
    """A compaction call came back: stage 'trail' or 'restart' of a turn, or the 'backstop'."""

    turn_id: str
    stage: str
    response: ChatResponse
    tokens_before: int


class CriticReturned(_Msg, frozen=True):
    """The critic's check of a consequential tool call came back (chalie/act/critic.py)."""

    turn_id: str
    call: ToolCall
    checked: Checked


class ApprovalExpired(_Msg, frozen=True):
    turn_id: str
    approval_id: str


class TurnStored(_Msg, frozen=True):
    turn_id: str


class TurnStoreFailed(_Msg, frozen=True):
    turn_id: str
    error: str
    # Set when the store itself cannot take writes (chalie/store/health.py's state: full,
    # read_only, damaged, io_error): the error is then in words a person can act on.
    cause: str | None = None
