"""Server -> client frames of /ws (spec/interfaces.md section 5).

They live outside edge/ because actors build them and the StoreWriter logs them; the edge only
pushes their bytes. Every frame gets its channel's next `seq` when the StoreWriter appends it to
the event log, just before it is pushed. Frames that belong to a turn carry its `exchange_id`.
"""

from __future__ import annotations

import msgspec


class TextBlock(msgspec.Struct, frozen=True, tag="text", tag_field="type"):
    text: str


Block = TextBlock


class FrameMetrics(msgspec.Struct, frozen=True):
    """The per-turn metrics block: tokens over every LLM call, calls per tool, seconds."""

    tokens_total: int
    tools: dict[str, int]
    response_time_s: float


class _Frame(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    seq: int = 0


class Status(_Frame, frozen=True, kw_only=True, tag="status"):
    stage: str  # processing | thinking | retrieving_memory | responding
    exchange_id: str | None = None


class ActNarration(_Frame, frozen=True, kw_only=True, tag="act_narration"):
    text: str
    step: int
    tool: str
    exchange_id: str


class Message(_Frame, frozen=True, kw_only=True, tag="message"):
    blocks: tuple[Block, ...]
    exchange_id: str
    metrics: FrameMetrics
    topic: str | None = None
    mode: str = "act"
    confidence: float | None = None


class Done(_Frame, frozen=True, kw_only=True, tag="done"):
    duration_ms: int
    exchange_id: str


class Error(_Frame, frozen=True, kw_only=True, tag="error"):
    message: str
    recoverable: bool
    exchange_id: str | None = None
    metrics: FrameMetrics | None = None


Frame = Status | ActNarration | Message | Done | Error

_encode = msgspec.json.Encoder().encode


def frame_type(frame: Frame) -> str:
    return str(type(frame).__struct_config__.tag)


def encode_frame(frame: Frame, seq: int) -> str:
    return _encode(msgspec.structs.replace(frame, seq=seq)).decode()


def text_blocks(text: str) -> tuple[Block, ...]:
    return (TextBlock(text=text),)
