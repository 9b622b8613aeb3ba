"""OpenAI-compatible chat completions over httpx: OpenAI, Ollama, llama.cpp server, vLLM,
OpenRouter, DeepSeek.

The request maps faithfully to `messages` (images as data URLs, a tool round trip as
`tool_calls` and `tool` messages), `tools` and, for structured output, a strict `json_schema`
`response_format`. With an `on_text` sink and no response format the answer is streamed
(server-sent events, read by chalie/llm/openai_stream.py) so the person sees text as the model
writes it; otherwise it comes whole.

One attempt per call: the routing layer above retries by error class and falls back to another
provider, so every failure here is mapped to one LlmError that says what happened (never the
base URL: the layer above names the provider and its address). The overall `timeout_s` holds
while streaming too, checked line by line; a stream that sends nothing for `stall_timeout_s`
(llm.stall_timeout_s) is given up as stalled, an LlmUnavailable like a dropped connection.
"""

from __future__ import annotations

import base64
from typing import Any

import httpx
import msgspec

from chalie.clock import Clock, SystemClock
from chalie.errors import LlmBadResponse, LlmHttpError, LlmUnavailable
from chalie.llm.openai_stream import Assembled, StreamAssembler, error_detail, whole_answer
from chalie.llm.sse import iter_sse, retry_after, stalled, stream_timeout, within
from chalie.llm.types import (
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

_JSON = {"Content-Type": "application/json"}


class _Model(msgspec.Struct):
    id: str


class _ModelList(msgspec.Struct):
    data: list[_Model]


_decode_models = msgspec.json.Decoder(_ModelList).decode


class OpenAICompatProvider:
    """An LlmProvider for any server that speaks OpenAI's `/chat/completions`.

    `stream=False` turns streaming off for servers whose event streams are broken; `on_text`
    then gets the whole text at once. `stall_timeout_s`: the longest silence of a stream.
    `clock` is the time seam for the streaming deadline."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str = "",
        stream: bool = True,
        stall_timeout_s: float = 60.0,
        transport: httpx.BaseTransport | None = None,
        clock: Clock | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            base_url=base_url.rstrip("/") + "/",
            headers=headers,
            transport=transport,
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
        )
        self._model = model
        self._stream = stream
        self._stall_s = stall_timeout_s
        self._clock: Clock = clock or SystemClock()

    def close(self) -> None:
        self._client.close()

    def models(self, *, timeout_s: float) -> tuple[str, ...]:
        try:
            resp = self._client.get("models", timeout=_timeout(timeout_s))
        except httpx.HTTPError as e:
            raise _unavailable(e, timeout_s, streaming=False) from e
        if resp.status_code >= 400:
            raise self._http_error(resp)
        try:
            listing = _decode_models(resp.content)
        except msgspec.DecodeError as e:
            raise LlmBadResponse(f"the model list is not OpenAI's shape ({e})") from e
        return tuple(m.id for m in listing.data)

    def complete(self, request: ChatRequest, *, timeout_s: float,
                 on_text: TextSink | None = None) -> ChatResponse:
        if timeout_s <= 0:
            raise LlmUnavailable("no time left for the request")
        started = self._clock.monotonic()
        # A structured answer is JSON for the code, not text for the person: never shown.
        sink = on_text if request.response_format is None else None
        streaming = self._stream and sink is not None
        body = msgspec.json.encode(chat_body(request, model=self._model, stream=streaming))
        if sink is not None and streaming:
            answer = self._streamed(body, timeout_s, started, sink)
        else:
            answer = self._whole(body, timeout_s)
            if sink is not None and answer.text:
                sink(answer.text)
        return to_response(answer, request, self._clock.monotonic() - started)

    def _whole(self, body: bytes, timeout_s: float) -> Assembled:
        try:
            resp = self._client.post("chat/completions", content=body, headers=_JSON,
                                     timeout=_timeout(timeout_s))
        except httpx.HTTPError as e:
            raise _unavailable(e, timeout_s, streaming=False) from e
        if resp.status_code >= 400:
            raise self._http_error(resp)
        return whole_answer(resp.content)

    def _streamed(self, body: bytes, timeout_s: float, started: float,
                  on_text: TextSink) -> Assembled:
        deadline = started + timeout_s
        assembler = StreamAssembler(on_text)
        reading, content_type = False, ""
        def late() -> LlmUnavailable:
            return LlmUnavailable(f"timed out after {timeout_s:g}s while the answer was streaming")

        try:
            with self._client.stream("POST", "chat/completions", content=body, headers=_JSON,
                                     timeout=stream_timeout(timeout_s, self._stall_s)) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    raise self._http_error(resp)
                content_type = resp.headers.get("content-type", "")
                if "json" in content_type and "event-stream" not in content_type:
                    # The server ignored "stream": true and answered whole.
                    answer = whole_answer(resp.read())
                    if answer.text:
                        on_text(answer.text)
                    return answer
                reading = True
                lines = within(resp.iter_lines(), deadline, self._clock.monotonic, late)
                for _event, data in iter_sse(lines):
                    assembler.feed(data)
                    if assembler.done:
                        break
                    if self._clock.monotonic() > deadline:
                        raise late()
        except httpx.ReadTimeout as e:
            raise stalled(timeout_s, self._stall_s) from e
        except httpx.HTTPError as e:
            raise _unavailable(e, timeout_s, streaming=reading) from e
        if assembler.events == 0:
            raise LlmBadResponse(
                f"the answer is not an event stream (content-type {content_type!r})")
        if not assembler.finished:
            raise LlmUnavailable("the stream broke off before the answer was complete")
        return assembler.result()

    def _http_error(self, resp: httpx.Response) -> LlmHttpError:
        text = resp.text
        try:
            detail = error_detail(msgspec.json.decode(text))
        except msgspec.DecodeError:
            detail = None
        return LlmHttpError(resp.status_code, text, detail=detail,
                            retry_after_s=retry_after(resp.headers, self._clock.time()))


def _timeout(timeout_s: float) -> httpx.Timeout:
    # Connecting gets at most 10s of the budget: a server that is down should say so quickly.
    return httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0))


def _unavailable(e: httpx.HTTPError, timeout_s: float, *, streaming: bool) -> LlmUnavailable:
    cause = f"{type(e).__name__}: {e}"
    if isinstance(e, httpx.ConnectTimeout):
        return LlmUnavailable(f"cannot connect (no answer within {min(timeout_s, 10.0):g}s)")
    if isinstance(e, httpx.TimeoutException):
        return LlmUnavailable(f"timed out after {timeout_s:g}s")
    if isinstance(e, httpx.ConnectError):
        return LlmUnavailable(f"cannot connect ({cause})")
    if streaming:
        return LlmUnavailable(f"the stream broke off ({cause})")
    return LlmUnavailable(f"the request failed ({cause})")


def chat_body(request: ChatRequest, *, model: str | None, stream: bool) -> dict[str, Any]:
    """The request as an OpenAI chat-completions body (llama.cpp in process takes it too)."""
    body: dict[str, Any] = {"messages": _messages(request), "stream": stream}
    if model is not None:
        body["model"] = model
    if stream:
        body["stream_options"] = {"include_usage": True}
    if request.tools:
        body["tools"] = [
            {"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in request.tools
        ]
    if request.response_format is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": request.response_format.name,
                "schema": request.response_format.schema,
                "strict": True,
            },
        }
    return body


def _messages(request: ChatRequest) -> list[dict[str, Any]]:
    # An empty system prompt (compaction, encoding) is left out: some servers refuse one.
    out = [{"role": "system", "content": request.system}] if request.system else []
    out += [_message(m) for m in answer_every_call(request.messages)]
    return out


def _message(m: Message) -> dict[str, Any]:
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
    if m.role == "assistant" and m.tool_calls:
        return {"role": "assistant", "content": m.content or None,
                "tool_calls": [_wire_call(c) for c in m.tool_calls]}
    if m.role == "user" and m.images:
        parts: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
        parts += [
            {"type": "image_url", "image_url": {
                "url": f"data:{i.media_type};base64,{base64.b64encode(i.data).decode('ascii')}"}}
            for i in m.images
        ]
        return {"role": "user", "content": parts}
    return {"role": m.role, "content": m.content}


def _wire_call(call: ToolCall) -> dict[str, Any]:
    arguments = call.raw_args or msgspec.json.encode(call.args or {}).decode()
    return {"id": call.call_id, "type": "function",
            "function": {"name": call.name, "arguments": arguments}}


def to_response(answer: Assembled, request: ChatRequest, latency: float) -> ChatResponse:
    """An assembled answer (whole or streamed) as a ChatResponse: arguments parsed, usage
    estimated when the server sent none."""
    calls = []
    for i, (call_id, name, raw) in enumerate(answer.calls):
        args: dict[str, Any] | None
        if isinstance(raw, dict):  # some servers (older Ollama) send an object, not a string
            args, error, raw_text = raw, None, msgspec.json.encode(raw).decode()
        else:
            args, error = parse_tool_arguments(raw)
            raw_text = raw or ""
        calls.append(ToolCall(call_id=call_id or f"call_{i}", name=name, args=args,
                              raw_args=raw_text, args_error=error))
    usage = answer.usage
    if usage is None:
        prompt = estimate_tokens(request.system) + sum(
            estimate_tokens(m.content) for m in request.messages)
        completion = estimate_tokens(answer.text) + sum(estimate_tokens(c.raw_args)
                                                        for c in calls)
        usage = Usage(prompt, completion, prompt + completion, estimated=True)
    return ChatResponse(
        text=answer.text,
        tool_calls=tuple(calls),
        usage=usage,
        finish_reason=answer.finish_reason or ("tool_calls" if calls else "stop"),
        latency_s=latency,
        reasoning=answer.reasoning,
    )
