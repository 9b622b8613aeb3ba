"""Assembling a streamed OpenAI-compatible answer: odd servers and the time budget, with HTTP
faked at the transport (the real wire is in test_openai_wire.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from chalie.clock import ManualClock
from chalie.errors import LlmHttpError, LlmUnavailable
from chalie.llm.openai_compat import OpenAICompatProvider
from chalie.llm.types import ChatRequest, ChatResponse, Message, TextSink, Usage
from tests.llm.openai_stub import completion, sse, stream_chunks, tool_call

REQUEST = ChatRequest(system="You are Chalie.", messages=(Message("user", "What is my pet?"),))


def event_stream(*events: dict[str, Any] | str) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/event-stream"},
                          content=b"".join(sse(*events)))


def complete(reply: httpx.Response, *, on_text: TextSink | None = None, timeout_s: float = 5.0,
             clock: ManualClock | None = None) -> ChatResponse:
    """One request to a provider whose server answers `reply`."""
    provider = OpenAICompatProvider(base_url="http://llm.test/v1", model="m", clock=clock,
                                    transport=httpx.MockTransport(lambda _: reply))
    try:
        return provider.complete(REQUEST, timeout_s=timeout_s, on_text=on_text)
    finally:
        provider.close()


def test_a_whole_tool_call_in_one_chunk_without_an_index_is_taken() -> None:
    """Servers that send each call whole and without `index` (Ollama) still give every call."""
    calls = [{"id": f"c{i}", "type": "function",
              "function": {"name": "memory", "arguments": {"n": i}}} for i in (1, 2)]
    reply = event_stream(
        {"choices": [{"delta": {"tool_calls": calls[:1]}}]},
        {"choices": [{"delta": {"tool_calls": calls[1:]}, "finish_reason": "tool_calls"}]},
        "[DONE]")
    response = complete(reply, on_text=lambda _: None)
    assert [(c.call_id, c.args) for c in response.tool_calls] == [("c1", {"n": 1}),
                                                                   ("c2", {"n": 2})]


def test_a_stream_that_outlasts_the_time_budget_is_unavailable() -> None:
    """The overall timeout holds while events keep coming: past it the call gives up, at the
    first line that comes after it (keep-alive comments included)."""
    clock = ManualClock()

    def slow() -> Iterator[bytes]:
        for part in sse(*stream_chunks(completion("one two three four"), piece=4), "[DONE]"):
            yield part
            clock.advance(1.0)

    reply = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=slow())
    pieces: list[str] = []
    with pytest.raises(LlmUnavailable, match=r"timed out after 2.5s while the answer"):
        complete(reply, on_text=pieces.append, timeout_s=2.5, clock=clock)
    assert pieces == ["one ", "two "]  # the event that came past the deadline is not shown


def test_a_streamed_answer_equals_the_same_answer_sent_whole() -> None:
    """Text, reasoning, tool calls, usage and finish reason do not depend on streaming."""
    body = completion("<think>hm</think>Checking.", reasoning_content="Pet question.",
                      tool_calls=[tool_call("memory", '{"action": "recall"}')],
                      usage={"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14})
    streamed = complete(event_stream(*stream_chunks(body, 2), "[DONE]"), on_text=lambda _: None)
    whole = complete(httpx.Response(200, json=body))
    assert streamed.text == whole.text == "Checking."
    assert streamed.reasoning == whole.reasoning == "Pet question.\n\nhm"
    assert (streamed.tool_calls, streamed.usage, streamed.finish_reason) == (
        whole.tool_calls, whole.usage, whole.finish_reason)


def test_cached_prompt_tokens_are_read_from_the_usage() -> None:
    """OpenAI, vLLM and llama.cpp say how much of the prompt came from their prefix cache."""
    body = completion("Hi.", usage={"prompt_tokens": 900, "completion_tokens": 2,
                                    "total_tokens": 902,
                                    "prompt_tokens_details": {"cached_tokens": 768}})
    streamed = complete(event_stream(*stream_chunks(body, 2), "[DONE]"), on_text=lambda _: None)
    assert streamed.usage == complete(httpx.Response(200, json=body)).usage == Usage(
        900, 2, 902, cached_tokens=768)


def test_a_stream_that_finishes_with_error_is_an_http_error() -> None:
    """OpenRouter ends a stream whose upstream failed with finish_reason "error"."""
    reply = event_stream({"choices": [{"delta": {"content": "Re"}}]},
                         {"choices": [{"delta": {}, "finish_reason": "error"}]}, "[DONE]")
    with pytest.raises(LlmHttpError) as caught:
        complete(reply, on_text=lambda _: None)
    assert (caught.value.status, caught.value.kind) == (500, "server")
