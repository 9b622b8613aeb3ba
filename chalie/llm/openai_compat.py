"""OpenAI-compatible chat completions over httpx: OpenAI, Ollama, llama.cpp server, vLLM, ...

The internal request (system prompt + one user message + tools) maps to `messages` and
`tools`, and a structured request's schema to `response_format` (type `json_schema`, strict),
which OpenAI, Ollama, llama.cpp server and vLLM all honour; the answer's `tool_calls` and
`usage` map back. Transient failures (connection errors, timeouts, 408/429/5xx) are retried with
doubling backoff inside the caller's time budget.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import msgspec
import structlog

from chalie.errors import LlmBadResponse, LlmError, LlmHttpError, LlmUnavailable
from chalie.llm.types import (
    ChatRequest,
    ChatResponse,
    ToolCall,
    Usage,
    estimate_tokens,
    parse_tool_arguments,
)

log = structlog.get_logger("chalie.llm")


class _Function(msgspec.Struct):
    name: str = ""
    arguments: str | dict[str, Any] | None = None


class _ToolCall(msgspec.Struct):
    id: str = ""
    function: _Function = msgspec.field(default_factory=_Function)


class _Message(msgspec.Struct):
    content: str | None = None
    tool_calls: list[_ToolCall] | None = None


class _Choice(msgspec.Struct):
    message: _Message
    finish_reason: str | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int | None = None


class _Completion(msgspec.Struct):
    choices: list[_Choice]
    usage: _Usage | None = None


_decode = msgspec.json.Decoder(_Completion).decode


class OpenAICompatProvider:
    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str = "",
        retries: int = 2,
        retry_backoff_s: float = 0.5,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            base_url=base_url.rstrip("/") + "/",
            headers=headers,
            transport=transport,
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
        )
        self._model = model
        self._retries = retries
        self._backoff = retry_backoff_s

    def close(self) -> None:
        self._client.close()

    def complete(self, request: ChatRequest, *, timeout_s: float) -> ChatResponse:
        deadline = time.monotonic() + timeout_s
        body = self._body(request)
        attempt = 0
        while True:
            started = time.monotonic()
            try:
                return self._once(body, request, deadline - started, started)
            except LlmError as e:
                delay = self._backoff * (2**attempt)
                if (
                    not e.recoverable
                    or isinstance(e, LlmBadResponse)
                    or attempt >= self._retries
                    or time.monotonic() + delay >= deadline
                ):
                    raise
                attempt += 1
                log.warning("llm_retry", attempt=attempt, error=str(e), delay_s=delay)
                time.sleep(delay)

    def _body(self, request: ChatRequest) -> bytes:
        # An empty system prompt (compaction, encoding) is left out: some servers refuse one.
        messages = [{"role": "system", "content": request.system}] if request.system else []
        messages += [{"role": m.role, "content": m.content} for m in request.messages]
        body: dict[str, Any] = {"model": self._model, "messages": messages, "stream": False}
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
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
        return msgspec.json.encode(body)

    def _once(
        self, body: bytes, request: ChatRequest, budget_s: float, started: float
    ) -> ChatResponse:
        if budget_s <= 0:
            raise LlmUnavailable("no time left for the LLM request")
        timeout = httpx.Timeout(budget_s, connect=min(budget_s, 10.0))
        try:
            resp = self._client.post(
                "chat/completions",
                content=body,
                headers={"Content-Type": "application/json"},
                timeout=timeout,
            )
        except httpx.TimeoutException as e:
            raise LlmUnavailable(f"LLM request timed out after {budget_s:.1f}s") from e
        except httpx.HTTPError as e:
            raise LlmUnavailable(f"LLM server unreachable: {type(e).__name__}: {e}") from e
        if resp.status_code >= 400:
            raise LlmHttpError(resp.status_code, resp.text)
        try:
            completion = _decode(resp.content)
        except msgspec.DecodeError as e:
            raise LlmBadResponse(f"LLM answer is not a chat completion: {e}") from e
        if not completion.choices:
            raise LlmBadResponse("LLM answer has no choices")
        return _to_response(completion, request, time.monotonic() - started)


def _to_response(completion: _Completion, request: ChatRequest, latency: float) -> ChatResponse:
    choice = completion.choices[0]
    text = choice.message.content or ""
    calls = []
    for i, tc in enumerate(choice.message.tool_calls or ()):
        raw = tc.function.arguments
        args: dict[str, Any] | None
        if isinstance(raw, dict):  # some servers (older Ollama) send an object, not a string
            args, error, raw_text = raw, None, msgspec.json.encode(raw).decode()
        else:
            args, error = parse_tool_arguments(raw)
            raw_text = raw or ""
        calls.append(
            ToolCall(
                call_id=tc.id or f"call_{i}",
                name=tc.function.name,
                args=args,
                raw_args=raw_text,
                args_error=error,
            )
        )
    if completion.usage is not None:
        u = completion.usage
        total = u.total_tokens if u.total_tokens is not None else (
            u.prompt_tokens + u.completion_tokens
        )
        usage = Usage(u.prompt_tokens, u.completion_tokens, total)
    else:
        prompt = estimate_tokens(request.system) + sum(
            estimate_tokens(m.content) for m in request.messages
        )
        completion_tokens = estimate_tokens(text) + sum(
            estimate_tokens(c.raw_args) for c in calls
        )
        usage = Usage(prompt, completion_tokens, prompt + completion_tokens, estimated=True)
    return ChatResponse(
        text=text,
        tool_calls=tuple(calls),
        usage=usage,
        finish_reason=choice.finish_reason or "stop",
        latency_s=latency,
    )
