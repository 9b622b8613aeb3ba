"""The OpenAI-compatible provider over a real socket: streams, error statuses and dropped
connections from a stub server on 127.0.0.1 (tests/llm/openai_stub.py)."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest

from chalie.clock import ManualClock
from chalie.errors import LlmBadResponse, LlmHttpError, LlmUnavailable
from chalie.llm.openai_compat import OpenAICompatProvider
from chalie.llm.types import ChatRequest, Message, ToolCall, ToolSpec, Usage
from tests.llm.openai_stub import (
    OpenAIStub,
    Reply,
    completion,
    error_reply,
    garbage_reply,
    json_reply,
    sse_reply,
    stream_chunks,
    tool_call,
)

REQUEST = ChatRequest(system="You are Chalie.", messages=(Message("user", "What is my pet?"),))
MEMORY = ToolSpec("memory", "remember and recall facts",
                  {"type": "object", "properties": {"action": {"type": "string"}}})
USAGE = {"prompt_tokens": 21, "completion_tokens": 9, "total_tokens": 30}


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    server = OpenAIStub()
    yield server
    server.close()


@pytest.fixture
def provider(stub: OpenAIStub) -> Iterator[OpenAICompatProvider]:
    made = OpenAICompatProvider(base_url=stub.base_url, model="stub")
    yield made
    made.close()


class Sink:
    """An on_text that keeps every piece."""

    def __init__(self, then: Callable[[str], None] | None = None) -> None:
        self.pieces: list[str] = []
        self._then = then

    def __call__(self, piece: str) -> None:
        self.pieces.append(piece)
        if self._then is not None:
            self._then(piece)


def stream(provider: OpenAICompatProvider, request: ChatRequest = REQUEST) -> tuple[Any, Sink]:
    sink = Sink()
    return provider.complete(request, timeout_s=10.0, on_text=sink), sink


# --- the stub speaks the wire format --------------------------------------------------------------

def test_the_official_openai_client_reads_the_stub_stream(stub: OpenAIStub) -> None:
    """OpenAI's own client assembles the stub's stream into the text, tool call and usage it
    was cut from, so what our provider reads is the real format."""
    body = completion("Let me check.", tool_calls=[tool_call("memory", '{"action": "recall"}')],
                      usage=USAGE)
    stub.queue(sse_reply(body, piece=2))
    # openai 3 runs on its own HTTP stack (httpx2): a second, independent reader of the wire
    with openai.OpenAI(base_url=stub.base_url, api_key="sk-stub", max_retries=0) as client:
        chunks = list(client.chat.completions.create(
            model="stub", messages=[{"role": "user", "content": "pet?"}], stream=True,
            stream_options={"include_usage": True}))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert "".join(d.content or "" for d in deltas) == "Let me check."
    fragments = [t for d in deltas for t in d.tool_calls or ()]
    assert {(t.index, t.id, t.function and t.function.name) for t in fragments if t.id} == {
        (0, "call_abc", "memory")}
    assert "".join(t.function.arguments or "" for t in fragments if t.function) == (
        '{"action": "recall"}')
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    assert chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.total_tokens) == (21, 30)
    assert stub.body()["stream"] is True


# --- streaming ------------------------------------------------------------------------------------

def test_streamed_text_reaches_on_text_in_pieces_that_make_the_answer(
    stub: OpenAIStub, provider: OpenAICompatProvider
) -> None:
    """Each text delta goes to on_text as it comes; together they are the response's text."""
    stub.queue(sse_reply(completion("Your pet is a dog called Rex.", usage=USAGE), piece=4))
    response, sink = stream(provider)
    assert len(sink.pieces) == 8
    assert "".join(sink.pieces) == response.text == "Your pet is a dog called Rex."
    assert response.usage == Usage(21, 9, 30)
    assert response.finish_reason == "stop"
    assert stub.body()["stream_options"] == {"include_usage": True}


def test_text_is_shown_before_the_server_has_finished_sending(
    stub: OpenAIStub, provider: OpenAICompatProvider
) -> None:
    """The first piece reaches on_text while the server still holds back the rest."""
    reply = sse_reply(completion("Rex is your dog."), pause_after=3)
    stub.queue(reply)
    sink = Sink(then=lambda _: reply.resume.set())
    response = provider.complete(REQUEST, timeout_s=10.0, on_text=sink)
    assert reply.waited_out is False
    assert response.text == "Rex is your dog."


def test_streamed_tool_call_arguments_are_put_together(
    stub: OpenAIStub, provider: OpenAICompatProvider
) -> None:
    """Two calls whose arguments arrive in 3-character pieces come back whole and parsed."""
    calls = [tool_call("memory", '{"action": "recall", "query": "pet"}'),
             tool_call("memory", '{"action": "list"}', call_id="call_def")]
    stub.queue(sse_reply(completion(None, tool_calls=calls, usage=USAGE)))
    response, sink = stream(provider, ChatRequest(REQUEST.system, REQUEST.messages, (MEMORY,)))
    assert response.tool_calls == (
        ToolCall("call_abc", "memory", {"action": "recall", "query": "pet"},
                 '{"action": "recall", "query": "pet"}'),
        ToolCall("call_def", "memory", {"action": "list"}, '{"action": "list"}'),
    )
    assert response.finish_reason == "tool_calls"
    assert (response.text, sink.pieces) == ("", [])


def test_streamed_reasoning_content_never_reaches_on_text(
    stub: OpenAIStub, provider: OpenAICompatProvider
) -> None:
    """DeepSeek's streamed reasoning_content is kept as reasoning; the person sees the answer."""
    body = completion("Rex.", reasoning_content="They asked about their pet; it is Rex.")
    stub.queue(sse_reply(body, piece=5))
    response, sink = stream(provider)
    assert "".join(sink.pieces) == response.text == "Rex."
    assert response.reasoning == "They asked about their pet; it is Rex."


def test_a_streamed_think_block_is_held_back_and_becomes_reasoning(
    stub: OpenAIStub, provider: OpenAICompatProvider
) -> None:
    """A <think> block cut anywhere (even inside its tags) never reaches on_text."""
    stub.queue(sse_reply(completion("\n<think>\nThe pet is Rex.\n</think>\n\nRex!"), piece=3))
    response, sink = stream(provider)
    assert "".join(sink.pieces) == response.text == "Rex!"
    assert response.reasoning == "The pet is Rex."


def test_a_plain_json_answer_to_a_stream_request_is_read_whole(
    stub: OpenAIStub, provider: OpenAICompatProvider
) -> None:
    """A server that ignores stream: true and answers JSON is read normally, and on_text gets
    the whole text once."""
    stub.queue(json_reply(completion("Rex.", usage=USAGE)))
    response, sink = stream(provider)
    assert sink.pieces == ["Rex."]
    assert (response.text, response.usage) == ("Rex.", Usage(21, 9, 30))


def test_a_stream_dropped_midway_is_unavailable(
    stub: OpenAIStub, provider: OpenAICompatProvider
) -> None:
    """A connection that closes in the middle of the stream raises LlmUnavailable, after the
    text that did arrive was shown."""
    reply = sse_reply(completion("Your pet is Rex."), piece=4)
    reply.parts, reply.drop = reply.parts[:4], True
    stub.queue(reply)
    sink = Sink()
    with pytest.raises(LlmUnavailable, match=r"^the stream broke off \(RemoteProtocolError"):
        provider.complete(REQUEST, timeout_s=10.0, on_text=sink)
    assert sink.pieces == ["Your", " pet"]


def test_a_stream_that_stops_sending_is_given_up_after_the_stall_timeout(
    stub: OpenAIStub
) -> None:
    """A server that sends two pieces and then nothing is given up after llm.stall_timeout_s,
    long before the request's budget, as LlmUnavailable (like a dropped connection); the text
    that did arrive was shown once."""
    reply = sse_reply(completion("Your pet is Rex."), piece=4, pause_after=4)
    stub.queue(reply)
    provider = OpenAICompatProvider(base_url=stub.base_url, model="stub", stall_timeout_s=0.3)
    sink = Sink()
    try:
        with pytest.raises(LlmUnavailable, match=r"^the stream stalled: the server sent nothing "
                                                 r"for 0\.3s$") as caught:
            provider.complete(REQUEST, timeout_s=10.0, on_text=sink)
    finally:
        reply.resume.set()
        provider.close()
    assert sink.pieces == ["Your", " pet"]
    assert caught.value.recoverable is True


def test_a_server_that_never_starts_its_stream_is_a_stall_too(stub: OpenAIStub) -> None:
    """Headers and then silence: the same stall, before any text."""
    reply = sse_reply(completion("Rex."), pause_after=0)
    stub.queue(reply)
    provider = OpenAICompatProvider(base_url=stub.base_url, model="stub", stall_timeout_s=0.3)
    sink = Sink()
    try:
        with pytest.raises(LlmUnavailable, match="the stream stalled"):
            provider.complete(REQUEST, timeout_s=10.0, on_text=sink)
    finally:
        reply.resume.set()
        provider.close()
    assert sink.pieces == []


class _Ticking(ManualClock):
    """A clock that moves a second each time it is read: a slow stream without waiting."""

    def monotonic(self) -> float:
        self.advance(1.0)
        return super().monotonic()


def test_a_stream_of_keep_alives_alone_is_cut_at_the_budget(stub: OpenAIStub) -> None:
    """Comments keep the connection busy but answer nothing: the request's budget ends it
    (checked between lines), where the stall timeout cannot."""
    reply = sse_reply(completion("Rex."), pause_after=40)
    reply.parts = [b": keep-alive\n\n"] * 40 + reply.parts
    stub.queue(reply)
    provider = OpenAICompatProvider(base_url=stub.base_url, model="stub", stall_timeout_s=5.0,
                                    clock=_Ticking())
    try:
        with pytest.raises(LlmUnavailable, match=r"timed out after 10s while the answer was "
                                                 r"streaming"):
            provider.complete(REQUEST, timeout_s=10.0, on_text=Sink())
    finally:
        reply.resume.set()
        provider.close()


def test_a_stream_that_ends_before_the_answer_is_unavailable(
    stub: OpenAIStub, provider: OpenAICompatProvider
) -> None:
    """A stream closed cleanly with neither a finish reason nor [DONE] broke off."""
    events: list[dict[str, Any] | str] = list(stream_chunks(completion("Rex is"))[:-1])
    stub.queue(sse_reply(events=events, done=False, chunked=False, drop=True))
    with pytest.raises(LlmUnavailable, match="the stream broke off before the answer"):
        stream(provider)


@pytest.mark.parametrize(
    ("error", "status", "detail"),
    [({"message": "This model's maximum context length is 8192 tokens", "code": 400}, 400,
      "This model's maximum context length is 8192 tokens"),
     ({"message": "Provider returned error", "code": "server_error"}, 500,
      "Provider returned error"),
     ("model runner has unexpectedly stopped", 500, "model runner has unexpectedly stopped")],
    ids=["vllm-status-code", "openrouter-string-code", "ollama-string"],
)
def test_an_error_event_in_the_stream_is_an_http_error(
    stub: OpenAIStub, provider: OpenAICompatProvider, error: Any, status: int, detail: str
) -> None:
    """A `data: {"error": ...}` event raises LlmHttpError with its status and message."""
    events: list[dict[str, Any] | str] = [*stream_chunks(completion("Re"))[:2],
                                          {"error": error}]
    stub.queue(sse_reply(events=events, done=False))
    with pytest.raises(LlmHttpError) as caught:
        stream(provider)
    assert (caught.value.status, caught.value.detail) == (status, detail)


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
def test_garbage_instead_of_an_answer_is_a_bad_response(
    stub: OpenAIStub, provider: OpenAICompatProvider, streamed: bool
) -> None:
    """An HTML page with status 200 is not an answer, streamed or not."""
    stub.queue(garbage_reply())
    with pytest.raises(LlmBadResponse):
        provider.complete(REQUEST, timeout_s=10.0, on_text=Sink() if streamed else None)


def test_garbage_inside_an_event_stream_is_a_bad_response(
    stub: OpenAIStub, provider: OpenAICompatProvider
) -> None:
    """An event whose data is not a chunk raises LlmBadResponse."""
    stub.queue(sse_reply(events=["<html>oops</html>"]))
    with pytest.raises(LlmBadResponse, match="not a chat completion chunk"):
        stream(provider)


# --- error statuses -------------------------------------------------------------------------------

HTTP_ERRORS = [
    (error_reply(401, {"error": {"message": "Incorrect API key provided: sk-...",
                                 "type": "invalid_request_error", "code": "invalid_api_key"}}),
     401, "auth", "Incorrect API key provided: sk-...", None),
    (error_reply(404, {"error": 'model "x" not found, try pulling it first'}),
     404, "not_found", 'model "x" not found, try pulling it first', None),
    (error_reply(400, {"error": {"message": "This model's maximum context length is 128000 "
                                            "tokens.", "code": "context_length_exceeded"}}),
     400, "context", "This model's maximum context length is 128000 tokens.", None),
    (error_reply(400, {"object": "error", "message": "This model's maximum context length is "
                                                     "4096 tokens.", "code": 400}),
     400, "context", "This model's maximum context length is 4096 tokens.", None),
    (error_reply(429, {"error": {"message": "Rate limit reached"}}, {"Retry-After": "2"}),
     429, "rate_limited", "Rate limit reached", 2.0),
    (error_reply(429, "slow down", {"Retry-After": "Wed, 21 Oct 2026 07:28:30 GMT",
                                    "Date": "Wed, 21 Oct 2026 07:28:00 GMT"}),
     429, "rate_limited", "slow down", 30.0),
    (error_reply(503, "Service Unavailable", {"Retry-After": "soon"}),
     503, "server", "Service Unavailable", None),
]


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize(
    ("reply", "expected"), [(case[0], case[1:]) for case in HTTP_ERRORS],
    ids=["openai-401", "ollama-404", "openai-context", "vllm-context", "429-seconds",
         "429-http-date", "503"])
def test_an_error_status_is_classed_with_the_server_message_and_retry_after(
    stub: OpenAIStub, provider: OpenAICompatProvider, streamed: bool, reply: Reply,
    expected: tuple[Any, ...],
) -> None:
    """Each server's error body gives its own message as detail (status, kind, detail), the
    status its kind, and Retry-After (seconds or a date) how long to wait."""
    stub.queue(reply)
    with pytest.raises(LlmHttpError) as caught:
        provider.complete(REQUEST, timeout_s=10.0, on_text=Sink() if streamed else None)
    error = caught.value
    assert (error.status, error.kind, error.detail, error.retry_after_s) == expected
    assert stub.base_url not in str(error)


def test_a_refused_port_is_unavailable(stub: OpenAIStub) -> None:
    """Nothing listening on the port: LlmUnavailable that names the cause, not the address."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = OpenAICompatProvider(base_url=f"http://127.0.0.1:{port}/v1", model="m")
    try:
        with pytest.raises(LlmUnavailable, match=r"^cannot connect \(ConnectError: ") as caught:
            provider.complete(REQUEST, timeout_s=10.0, on_text=Sink())
    finally:
        provider.close()
    assert str(port) not in str(caught.value)
    assert caught.value.recoverable is True


def test_models_lists_what_the_server_offers(
    stub: OpenAIStub, provider: OpenAICompatProvider
) -> None:
    """models() asks GET /v1/models and returns the ids."""
    stub.queue(json_reply({"object": "list", "data": [{"id": "stub", "object": "model"},
                                                      {"id": "qwen3:8b", "object": "model"}]}))
    assert provider.models(timeout_s=10.0) == ("stub", "qwen3:8b")
    assert (stub.received[0].method, stub.received[0].path) == ("GET", "/v1/models")
