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
- Prompt caching is explicit: `cache_control` breakpoints (at most 4 a request) mark where a
  prefix that the next request repeats ends. One goes on the last tool, one on the system
  prompt (who the person is included), and one at the end of the history: a user message with
  `cuts` (chalie/llm/types.py) is sent as one text block per history line, the last of them
  marked, then its images, then the rest. Anthropic looks for a cached prefix at the block
  boundaries before a breakpoint, so the next turn, whose history has a few more lines, finds
  the one this turn wrote. Usage counts cache reads and writes as prompt tokens.

This module builds the request and speaks HTTP (timeouts, errors classed, the model list); the
answer, a whole message or a stream of events, is read by chalie/llm/anthropic_stream.py.

One attempt per call: retries and fallback are the caller's (chalie/llm/route.py), which needs
to see each failure classed (LlmUnavailable, LlmHttpError.kind, LlmBadResponse). A stream that
sends nothing for `stall_timeout_s` (llm.stall_timeout_s) is given up as stalled, an
LlmUnavailable like a dropped connection.
"""

from __future__ import annotations

import base64
import itertools
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import msgspec

from chalie.errors import LlmBadResponse, LlmHttpError, LlmUnavailable
from chalie.llm.anthropic_stream import Answer, StreamAssembler, error_detail, whole_answer
from chalie.llm.sse import iter_sse, retry_after, stalled, stream_timeout, within
from chalie.llm.types import (
    NOT_RUN,
    ChatRequest,
    ChatResponse,
    Message,
    TextSink,
    Usage,
    answer_every_call,
    estimate_tokens,
)

_CACHE = {"type": "ephemeral"}  # a cache breakpoint: the prefix up to here may be reused
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls",
           "max_tokens": "length"}
_STRUCTURED_TOOL = "Give your whole answer as this tool's input; it is read as your reply."


class _Model(msgspec.Struct):
    id: str


class _ModelList(msgspec.Struct):
    data: list[_Model]


_decode_models = msgspec.json.Decoder(_ModelList).decode


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
        stall_timeout_s: float = 60.0,
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
        self._stall_s = stall_timeout_s

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
                answer = whole_answer(resp.content)
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
            body["system"] = [{"type": "text", "text": system, "cache_control": _CACHE}]
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
            tools[-1]["cache_control"] = _CACHE
            body["tools"] = tools
        if stream:
            body["stream"] = True
        return body

    def _streamed(self, body: bytes, timeout_s: float, deadline: float,
                  on_text: TextSink) -> Answer:
        def late() -> LlmUnavailable:
            return LlmUnavailable(f"the Anthropic API timed out after {timeout_s:.1f}s "
                                  "(still streaming)")

        try:
            with self._client.stream("POST", "messages", content=body,
                                     timeout=stream_timeout(timeout_s, self._stall_s),
                                     headers={"content-type": "application/json"}) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    raise _http_error(resp)
                if resp.headers.get("content-type", "").startswith("application/json"):
                    answer = whole_answer(resp.read())  # a server that does not stream
                    if answer.text:
                        on_text(answer.text)
                    return answer
                stream = StreamAssembler()
                try:
                    lines = within(resp.iter_lines(), deadline, time.monotonic, late)
                    for event, data in iter_sse(lines, unfinished=False):
                        if piece := stream.feed(event, data):
                            on_text(piece)
                        if stream.done:
                            return stream.answer()
                except httpx.TimeoutException:
                    raise
                except httpx.TransportError as e:
                    raise LlmUnavailable(
                        f"the stream broke off: {type(e).__name__}: {e}") from e
        except httpx.ReadTimeout as e:
            raise stalled(timeout_s, self._stall_s) from e
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


def _wire_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Internal messages (system ones left out) as Anthropic's alternating user/assistant
    messages of content blocks, every tool call answered; the last message with `cuts` gets
    the request's third cache breakpoint."""
    out: list[dict[str, Any]] = []
    answered = answer_every_call(tuple(messages))
    marked = max((n for n, m in enumerate(answered) if m.cuts and m.role == "user"), default=-1)
    for n, m in enumerate(answered):
        if m.role == "system":
            continue
        role = "assistant" if m.role == "assistant" else "user"
        blocks = _cut_blocks(m) if n == marked else _blocks(m)
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
        blocks += _images(m)
    if m.content:
        blocks.append({"type": "text", "text": m.content})
    if m.role == "assistant":
        blocks += [{"type": "tool_use", "id": c.call_id, "name": c.name, "input": c.args or {}}
                   for c in m.tool_calls]
    return blocks


def _cut_blocks(m: Message) -> list[dict[str, Any]]:
    """A user message cut at its `cuts`: a text block per piece up to the last cut, that one
    marked as a cache breakpoint, then the images, then the rest of the text."""
    bounds = [c for c in m.cuts if 0 < c <= len(m.content)]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content[a:b]}
                                    for a, b in itertools.pairwise([0, *bounds]) if b > a]
    if blocks:
        blocks[-1]["cache_control"] = _CACHE
    blocks += _images(m)
    if rest := m.content[bounds[-1] if bounds else 0:]:
        blocks.append({"type": "text", "text": rest})
    return blocks


def _images(m: Message) -> list[dict[str, Any]]:
    return [{"type": "image", "source": {
        "type": "base64", "media_type": i.media_type,
        "data": base64.b64encode(i.data).decode("ascii")}} for i in m.images]


def _to_response(answer: Answer, request: ChatRequest, latency: float) -> ChatResponse:
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
        usage = Usage(prompt, done, prompt + done, cached_tokens=u.cache_read_input_tokens or 0)
    return ChatResponse(text=text, tool_calls=calls, usage=usage, finish_reason=finish,
                        latency_s=latency, reasoning=answer.reasoning)


def _timeout(timeout_s: float) -> httpx.Timeout:
    return httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0))


def _http_error(resp: httpx.Response) -> LlmHttpError:
    return LlmHttpError(resp.status_code, resp.text, detail=error_detail(resp.content),
                        retry_after_s=retry_after(resp.headers, time.time()))
