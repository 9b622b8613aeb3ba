"""Reading an Anthropic Messages answer, whole or streamed, into one `Answer`.

A whole answer is one `message` object; a streamed one is server-sent events (`message_start`,
`content_block_start`/`_delta`/`_stop` per content block, `message_delta`, `message_stop`)
that `StreamAssembler` adds up. Both end up as an `Answer` (text, reasoning, tool calls, stop
reason, usage), so the provider (chalie/llm/anthropic.py) builds its ChatResponse in one place
and a streamed answer equals the same answer sent whole.

`thinking` blocks are reasoning, never part of the text. Usage is cumulative while streaming:
a later event's counts replace the earlier ones. An `event: error` arrives after the 200
status line and is raised as the LlmHttpError Anthropic would have sent as a status.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from chalie.errors import LlmBadResponse, LlmHttpError
from chalie.llm.types import ToolCall, parse_tool_arguments

# An `event: error` arrives after the 200 status line; these are the statuses Anthropic gives
# the same errors when it can still send one, so the caller classes them alike.
_STREAM_ERROR_STATUS = {"overloaded_error": 529, "rate_limit_error": 429, "api_error": 500}


class _Block(msgspec.Struct):
    type: str
    text: str = ""
    thinking: str = ""
    id: str = ""
    name: str = ""
    input: Any = None


class _Usage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None


class _Message(msgspec.Struct):
    content: list[_Block]
    type: str = "message"
    stop_reason: str | None = None
    usage: _Usage | None = None


class _Delta(msgspec.Struct):
    type: str = ""
    text: str = ""
    partial_json: str = ""
    thinking: str = ""
    stop_reason: str | None = None


class _ErrorDetail(msgspec.Struct):
    type: str = ""
    message: str = ""


class _Event(msgspec.Struct):
    """A stream event, or an error body ({"type": "error", "error": {...}})."""

    type: str = ""
    index: int = 0
    message: _Message | None = None
    content_block: _Block | None = None
    delta: _Delta | None = None
    usage: _Usage | None = None
    error: _ErrorDetail | None = None


_decode_message = msgspec.json.Decoder(_Message).decode
_decode_event = msgspec.json.Decoder(_Event).decode


@dataclass
class Answer:
    """A message as read off the wire, before it becomes a ChatResponse."""

    text: str
    reasoning: str
    calls: list[ToolCall]
    stop_reason: str | None
    usage: _Usage | None


def error_detail(body: bytes) -> str | None:
    """The human message of an Anthropic error body ({"type": "error", "error": {"message":
    ...}}); None when the body is not one or says nothing."""
    try:
        error = _decode_event(body).error
    except msgspec.DecodeError:
        error = None
    return (error.message or None) if error is not None else None


def whole_answer(content: bytes) -> Answer:
    """A non-streamed message; LlmBadResponse when it is not one."""
    try:
        msg = _decode_message(content)
    except msgspec.DecodeError as e:
        raise LlmBadResponse(f"the Anthropic answer is not a message: {e}") from e
    if msg.type != "message":
        raise LlmBadResponse(f"the Anthropic answer is a {msg.type!r}, not a message")
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    for b in msg.content:
        if b.type == "text":
            text.append(b.text)
        elif b.type == "thinking":
            reasoning.append(b.thinking)
        elif b.type == "tool_use":
            raw = msgspec.json.encode(b.input if b.input is not None else {}).decode()
            calls.append(_tool_call(b, raw))
    return Answer("".join(text), "".join(reasoning), calls, msg.stop_reason, msg.usage)


def _tool_call(block: _Block, raw: str) -> ToolCall:
    args, error = parse_tool_arguments(raw)
    return ToolCall(call_id=block.id, name=block.name, args=args, raw_args=raw or "{}",
                    args_error=error)


@dataclass
class _Part:
    """One content block of a streamed message: its start and the pieces of its deltas."""

    block: _Block
    pieces: list[str] = field(default_factory=list)
    call: ToolCall | None = None


class StreamAssembler:
    """What the events of one streamed message add up to. `done` turns True at
    `message_stop`."""

    def __init__(self) -> None:
        self.parts: dict[int, _Part] = {}
        self.usage: _Usage | None = None
        self.stop_reason: str | None = None
        self.done = False

    def feed(self, event: str, data: str) -> str:
        """Take one event in; returns the answer text it adds ("" for every other event)."""
        try:
            ev = _decode_event(data)
        except msgspec.DecodeError as e:
            raise LlmBadResponse(f"an Anthropic stream event ({event}) is unreadable: {e}") from e
        kind = ev.type or event
        part = self.parts.get(ev.index)
        if kind == "content_block_delta" and ev.delta is not None and part is not None:
            delta = ev.delta
            if delta.type == "text_delta" and part.block.type == "text":
                part.pieces.append(delta.text)
                return delta.text
            if delta.type == "input_json_delta":
                part.pieces.append(delta.partial_json)
            elif delta.type == "thinking_delta":
                part.pieces.append(delta.thinking)
        elif kind == "content_block_start" and ev.content_block is not None:
            self.parts[ev.index] = _Part(ev.content_block)
        elif kind == "content_block_stop" and part is not None and part.block.type == "tool_use":
            part.call = self._call(part)
        elif kind == "message_start" and ev.message is not None:
            self._count(ev.message.usage)
        elif kind == "message_delta":
            self._count(ev.usage)
            if ev.delta is not None and ev.delta.stop_reason is not None:
                self.stop_reason = ev.delta.stop_reason
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            err = ev.error or _ErrorDetail()
            raise LlmHttpError(_STREAM_ERROR_STATUS.get(err.type, 400), data,
                               detail=err.message or err.type or None)
        return ""

    def answer(self) -> Answer:
        ordered = [self.parts[i] for i in sorted(self.parts)]
        text = "".join("".join(p.pieces) for p in ordered if p.block.type == "text")
        reasoning = "".join("".join(p.pieces) for p in ordered if p.block.type == "thinking")
        calls = [p.call or self._call(p) for p in ordered if p.block.type == "tool_use"]
        return Answer(text, reasoning, calls, self.stop_reason, self.usage)

    @staticmethod
    def _call(part: _Part) -> ToolCall:
        raw = "".join(part.pieces)
        if not raw and part.block.input:  # the whole input came with the block's start
            raw = msgspec.json.encode(part.block.input).decode()
        return _tool_call(part.block, raw)

    def _count(self, usage: _Usage | None) -> None:
        """Usage is cumulative: a later event's counts replace the earlier ones it names."""
        if usage is None:
            return
        if self.usage is None:
            self.usage = _Usage()
        for name in usage.__struct_fields__:
            if (value := getattr(usage, name)) is not None:
                setattr(self.usage, name, value)
