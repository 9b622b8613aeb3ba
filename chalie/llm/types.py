"""The one shape every provider converts to and from at its boundary."""

from __future__ import annotations

from typing import Any, Protocol

import msgspec


class ToolSpec(msgspec.Struct, frozen=True):
    """A tool as the model sees it: a name, what it does, and a JSON-schema for its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


class Message(msgspec.Struct, frozen=True):
    role: str
    content: str


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


class ToolCall(msgspec.Struct, frozen=True):
    """One call the model asked for. `args` is None when its arguments were not a JSON object;
    `args_error` then says why, and the call is answered with an error result, never run."""

    call_id: str
    name: str
    args: dict[str, Any] | None
    raw_args: str
    args_error: str | None = None


class Usage(msgspec.Struct, frozen=True):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    estimated: bool = False


class ChatResponse(msgspec.Struct, frozen=True):
    text: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    finish_reason: str
    latency_s: float


class LlmProvider(Protocol):
    def complete(self, request: ChatRequest, *, timeout_s: float) -> ChatResponse:
        """Send one request; raise LlmError when no usable answer came back in time."""
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
