"""Anthropic's Messages API (POST {base_url}/messages) over httpx, streamed or not.

Where the wire differs from the internal shape:
- The system prompt is a top-level `system` field, not a message; system messages join it.
- Roles must alternate user/assistant, and every tool_use must be answered in the next user
  message: tool results become `tool_result` blocks in a user message, and consecutive messages
  of the same role are merged into one.
- There is no `response_format`. Forcing a tool whose `input_schema` is the schema is the
  documented way to get JSON of a schema, so a structured request sends that tool with
  `tool_choice`, and the forced call's input comes back as the response's text.
- `thinking` blocks are reasoning, never part of the answer.

One attempt per call: retries and fallback are the caller's (chalie/llm/route.py), which needs
to see each failure classed (LlmUnavailable, LlmHttpError.kind, LlmBadResponse).
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import msgspec

from chalie.errors import LlmBadResponse, LlmHttpError, LlmUnavailable
from chalie.llm.sse import iter_sse, retry_after
from chalie.llm.types import (
    NOT_RUN,
    ChatRequest,
    ChatResponse,
    Message,
    TextSink,
    ToolCall,
    Usage,
    answer_every_call,
    estimate_tokens,
    parse_tool_arguments,
)

_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls",
           "max_tokens": "length"}
# An `event: error` arrives after the 200 status line; these are the statuses Anthropic gives
# the same errors when it can still send one, so the caller classes them alike.
_STREAM_ERROR_STATUS = {"overloaded_error": 529, "rate_limit_error": 429, "api_error": 500}
_STRUCTURED_TOOL = "Give your whole answer as this tool's input; it is read as your reply."


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


class _Model(msgspec.Struct):
    id: str


class _ModelList(msgspec.Struct):
    data: list[_Model]


_decode_message = msgspec.json.Decoder(_Message).decode
_decode_event = msgspec.json.Decoder(_Event).decode
_decode_models = msgspec.json.Decoder(_ModelList).decode


@dataclass
class _Answer:
    """A message as read off the wire, before it becomes a ChatResponse."""

    text: str
    reasoning: str
    calls: list[ToolCall]
    stop_reason: str | None
    usage: _Usage | None


class AnthropicProvider:
    """An LlmProvider for Anthropic's Messages API (or a server that speaks it)."""

    def __init__(
        self,
        *,
        base_url: str = "https://api.anthropic.com/v1",
        model: str,
        api_key: str = "",
        max_tokens: int = 4096,
        version: str = "2023-06-01",
        stream: bool = True,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"anthropic-version": version}
        if api_key:
            headers["x-api-key"] = api_key
        self._base_url = base_url.rstrip("/")
        self._client = httpx.Client(
            base_url=self._base_url + "/",
            headers=headers,
            transport=transport,
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
        )
        self._model = model
        self._max_tokens = max_tokens
        self._stream = stream

    def close(self) -> None:
        self._client.close()

    def complete(self, request: ChatRequest, *, timeout_s: float,
                 on_text: TextSink | None = None) -> ChatResponse:
        started = time.monotonic()
        # Structured output is never streamed: its answer is a tool's input, not text to show.
        streaming = self._stream and on_text is not None and request.response_format is None
        body = msgspec.json.encode(self._body(request, stream=streaming))
        with self._reaching(timeout_s):
            if streaming and on_text is not None:
                answer = self._streamed(body, timeout_s, started + timeout_s, on_text)
            else:
                resp = self._client.post("messages", content=body, timeout=_timeout(timeout_s),
                                         headers={"content-type": "application/json"})
                if resp.status_code >= 400:
                    raise _http_error(resp)
                answer = _from_message(resp.content)
                if on_text is not None and answer.text and request.response_format is None:
                    on_text(answer.text)
        return _to_response(answer, request, time.monotonic() - started)

    def models(self, *, timeout_s: float) -> tuple[str, ...]:
        with self._reaching(timeout_s):
            resp = self._client.get("models", params={"limit": 1000},
                                    timeout=_timeout(timeout_s))
        if resp.status_code >= 400:
            raise _http_error(resp)
        try:
            return tuple(m.id for m in _decode_models(resp.content).data)
        except msgspec.DecodeError as e:
            raise LlmBadResponse(f"the Anthropic model list is not readable: {e}") from e

    def _body(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        parts = (request.system, *(m.content for m in request.messages if m.role == "system"))
        body: dict[str, Any] = {"model": self._model, "max_tokens": self._max_tokens,
                                "messages": _wire_messages(request.messages)}
        if system := "\n\n".join(p for p in parts if p):
            body["system"] = system
        tools = [{"name": t.name, "description": t.description,
                  "input_schema": t.parameters or {"type": "object", "properties": {}}}
                 for t in request.tools]
        if (rf := request.response_format) is not None:
            # The request's own tools stay: Anthropic refuses tool_use blocks in the history
            # of a request that does not define their tools.
            tools.append({"name": rf.name, "description": _STRUCTURED_TOOL,
                          "input_schema": rf.schema})
            body["tool_choice"] = {"type": "tool", "name": rf.name}
        if tools:
            body["tools"] = tools
        if stream:
            body["stream"] = True
        return body

    def _streamed(self, body: bytes, timeout_s: float, deadline: float,
                  on_text: TextSink) -> _Answer:
        with self._client.stream("POST", "messages", content=body, timeout=_timeout(timeout_s),
                                 headers={"content-type": "application/json"}) as resp:
            if resp.status_code >= 400:
                resp.read()
                raise _http_error(resp)
            if resp.headers.get("content-type", "").startswith("application/json"):
                answer = _from_message(resp.read())  # a server that does not stream
                if answer.text:
                    on_text(answer.text)
                return answer
            stream = _Stream()
            try:
                for event, data in iter_sse(_until(deadline, timeout_s, resp.iter_lines()),
                                            unfinished=False):
                    if piece := stream.feed(event, data):
                        on_text(piece)
                    if stream.done:
                        return stream.answer()
            except httpx.TimeoutException:
                raise
            except httpx.TransportError as e:
                raise LlmUnavailable(f"the stream broke off: {type(e).__name__}: {e}") from e
        raise LlmUnavailable("the stream broke off before message_stop")

    @contextmanager
    def _reaching(self, timeout_s: float) -> Iterator[None]:
        """httpx's transport failures as LlmUnavailable, saying what happened."""
        try:
            yield
        except httpx.TimeoutException as e:
            raise LlmUnavailable(f"the Anthropic API timed out after {timeout_s:.1f}s") from e
        except httpx.ConnectError as e:
            reason = "connection refused" if "refused" in str(e).lower() else str(e)
            raise LlmUnavailable(
                f"could not connect to the Anthropic API at {self._base_url}: {reason}") from e
        except httpx.HTTPError as e:
            raise LlmUnavailable(
                f"the Anthropic API at {self._base_url} failed: {type(e).__name__}: {e}") from e


def _until(deadline: float, timeout_s: float, lines: Iterable[str]) -> Iterator[str]:
    """`lines` until the time budget is spent. httpx's read timeout alone would let a server
    that keeps sending pings or comments hold the caller for ever."""
    for line in lines:
        if time.monotonic() > deadline:
            raise LlmUnavailable(f"the Anthropic API timed out after {timeout_s:.1f}s "
                                 "(still streaming)")
        yield line


def _wire_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Internal messages (system ones left out) as Anthropic's alternating user/assistant
    messages of content blocks, every tool call answered."""
    out: list[dict[str, Any]] = []
    for m in answer_every_call(tuple(messages)):
        if m.role == "system":
            continue
        role = "assistant" if m.role == "assistant" else "user"
        blocks = _blocks(m)
        if not blocks:  # Anthropic refuses an empty message
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _blocks(m: Message) -> list[dict[str, Any]]:
    if m.role == "tool":
        result = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}
        return [result | {"is_error": True}] if m.content == NOT_RUN else [result]
    blocks: list[dict[str, Any]] = []
    if m.role != "assistant":  # images go before the text, as Anthropic recommends
        blocks += [{"type": "image", "source": {
            "type": "base64", "media_type": i.media_type,
            "data": base64.b64encode(i.data).decode("ascii")}} for i in m.images]
    if m.content:
        blocks.append({"type": "text", "text": m.content})
    if m.role == "assistant":
        blocks += [{"type": "tool_use", "id": c.call_id, "name": c.name, "input": c.args or {}}
                   for c in m.tool_calls]
    return blocks


def _from_message(content: bytes) -> _Answer:
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
    return _Answer("".join(text), "".join(reasoning), calls, msg.stop_reason, msg.usage)


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


class _Stream:
    """What the events of one streamed message add up to."""

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

    def answer(self) -> _Answer:
        ordered = [self.parts[i] for i in sorted(self.parts)]
        text = "".join("".join(p.pieces) for p in ordered if p.block.type == "text")
        reasoning = "".join("".join(p.pieces) for p in ordered if p.block.type == "thinking")
        calls = [p.call or self._call(p) for p in ordered if p.block.type == "tool_use"]
        return _Answer(text, reasoning, calls, self.stop_reason, self.usage)

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


def _to_response(answer: _Answer, request: ChatRequest, latency: float) -> ChatResponse:
    text, calls = answer.text, tuple(answer.calls)
    finish = _FINISH.get(answer.stop_reason or "", answer.stop_reason or "stop")
    if (rf := request.response_format) is not None:
        forced = next((c for c in calls if c.name == rf.name), None)
        if forced is not None:
            text = forced.raw_args
            finish = "stop" if finish == "tool_calls" else finish
        calls = ()
    u = answer.usage
    if u is None or (u.input_tokens is None and u.output_tokens is None):
        prompt = estimate_tokens(request.system) + sum(
            estimate_tokens(m.content) for m in request.messages)
        done = estimate_tokens(text) + sum(estimate_tokens(c.raw_args) for c in calls)
        usage = Usage(prompt, done, prompt + done, estimated=True)
    else:
        prompt = ((u.input_tokens or 0) + (u.cache_creation_input_tokens or 0)
                  + (u.cache_read_input_tokens or 0))
        done = u.output_tokens or 0
        usage = Usage(prompt, done, prompt + done)
    return ChatResponse(text=text, tool_calls=calls, usage=usage, finish_reason=finish,
                        latency_s=latency, reasoning=answer.reasoning)


def _timeout(timeout_s: float) -> httpx.Timeout:
    return httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0))


def _http_error(resp: httpx.Response) -> LlmHttpError:
    try:
        error = _decode_event(resp.content).error
    except msgspec.DecodeError:
        error = None
    return LlmHttpError(resp.status_code, resp.text,
                        detail=(error.message or None) if error is not None else None,
                        retry_after_s=retry_after(resp.headers, time.time()))


