"""The one shape every provider converts to and from at its boundary."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import msgspec

from chalie.values.images import Image

TextSink = Callable[[str], None]
"""Where a streaming provider hands each piece of the answer's text as it arrives."""


class ToolSpec(msgspec.Struct, frozen=True):
    """A tool as the model sees it: a name, what it does, and a JSON-schema for its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


class ToolCall(msgspec.Struct, frozen=True):
    """One call the model asked for. `args` is None when its arguments were not a JSON object;
    `args_error` then says why, and the call is answered with an error result, never run."""

    call_id: str
    name: str
    args: dict[str, Any] | None
    raw_args: str
    args_error: str | None = None


class Message(msgspec.Struct, frozen=True):
    """One message of a request. `role` is system, user, assistant or tool.

    The ACT loop sends one user message (the trail is text inside it), with the turn's images;
    `tool_calls` (an assistant message) and `tool_call_id` (a tool message answering one call)
    carry a native tool round trip, which `chalie doctor` uses to probe a provider. Every
    provider maps them to its own wire format.

    `cuts` are offsets into `content`, ascending, where it may be cut into blocks without
    changing what it says: the text before the last cut (the history) comes back unchanged at
    the start of this conversation's next request, and each earlier cut ends one line of it. A
    provider whose cache works on blocks (Anthropic) sends the pieces as blocks and marks the
    last cut; the others send `content` whole, and their servers match the prefix themselves."""

    role: str
    content: str
    images: tuple[Image, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    cuts: tuple[int, ...] = ()


class JsonSchemaFormat(msgspec.Struct, frozen=True):
    """Structured output: the reply must be one JSON value of `schema` (a JSON Schema object).
    Providers send it the way their wire format asks (OpenAI-compatible servers as
    `response_format: {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`)."""

    name: str
    schema: dict[str, Any]


class ChatRequest(msgspec.Struct, frozen=True):
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    response_format: JsonSchemaFormat | None = None


class Usage(msgspec.Struct, frozen=True):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    estimated: bool = False
    cached_tokens: int = 0  # of prompt_tokens, those the server took from its prefix cache


class ChatResponse(msgspec.Struct, frozen=True):
    text: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    finish_reason: str
    latency_s: float
    reasoning: str = ""  # a reasoning model's thinking (DeepSeek's reasoning_content): never
    #                      part of the answer


class LlmProvider(Protocol):
    def complete(self, request: ChatRequest, *, timeout_s: float,
                 on_text: TextSink | None = None) -> ChatResponse:
        """Send one request; raise LlmError when no usable answer came back in time.

        With `on_text`, a provider that can stream hands it each piece of the answer's text as
        it arrives (never the reasoning, never tool-call arguments); the response's `text` is
        still the whole answer. One attempt only: retries and fallback are the caller's
        (chalie/llm/route.py)."""
        ...

    def models(self, *, timeout_s: float) -> tuple[str, ...]:
        """The models the server offers (its model list; an in-process provider: its own).
        Raises LlmError when the server cannot be reached or refuses. `chalie doctor` and the
        start-up check use it; it costs no tokens."""
        ...

    def close(self) -> None: ...


def estimate_tokens(text: str) -> int:
    """A rough token count (4 characters a token) for when a provider reports no usage."""
    return max(1, (len(text) + 3) // 4) if text else 0


def parse_tool_arguments(raw: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """Arguments as the model sent them -> (args, None) or (None, why they are unusable)."""
    if raw is None or raw.strip() == "":
        return {}, None
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError as e:
        return None, f"arguments are not valid JSON ({e})"
    if not isinstance(value, dict):
        return None, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, None


NOT_RUN = "error: this call was not run"


def answer_every_call(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """`messages` with every tool call of an assistant message answered by a tool message
    before the next non-tool message: a missing answer is added as an error result. Servers
    (OpenAI's and Anthropic's both) reject a request with an unanswered tool call id."""
    out: list[Message] = []
    pending: list[str] = []

    def close_pending() -> None:
        out.extend(Message("tool", NOT_RUN, tool_call_id=cid) for cid in pending)
        pending.clear()

    for m in messages:
        if m.role == "tool":
            if m.tool_call_id in pending:
                pending.remove(m.tool_call_id)
            out.append(m)
            continue
        close_pending()
        out.append(m)
        if m.role == "assistant":
            pending.extend(c.call_id for c in m.tool_calls)
    close_pending()
    return tuple(out)
