"""The Anthropic Messages provider, against a real Messages API stub on 127.0.0.1."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from typing import Any, get_args, get_type_hints

import httpx
import pytest

from chalie.act.loop import ActLoop
from chalie.errors import LlmBadResponse, LlmHttpError, LlmUnavailable
from chalie.llm.anthropic import AnthropicProvider
from chalie.llm.types import (
    NOT_RUN,
    ChatRequest,
    JsonSchemaFormat,
    Message,
    ToolCall,
    ToolSpec,
    Usage,
)
from chalie.prompts import Prompts
from chalie.store.queries import HistoryLine
from chalie.values.images import Image
from tests.llm.anthropic_stub import (
    StubAnthropic,
    broken,
    drop,
    endless_pings,
    garbage,
    http_error,
    message,
    plain,
    stalled,
    stream_error,
)

MEMORY = ToolSpec(
    name="memory",
    description="remember and recall facts",
    parameters={"type": "object", "properties": {"action": {"type": "string"}}},
)
REQUEST = ChatRequest(system="You are Chalie.", messages=(Message("user", "What is my pet?"),))
EPHEMERAL = {"type": "ephemeral"}
RECALL = ("toolu_1", "memory", {"action": "recall", "topic": "pets"})
CLOCK = ToolSpec(name="clock", description="the time", parameters={"type": "object"})


@pytest.fixture
def stub() -> Iterator[StubAnthropic]:
    server = StubAnthropic(models=("claude-sonnet-4-5", "claude-haiku-4-5"))
    yield server
    server.close()


@pytest.fixture
def provider_for(stub: StubAnthropic) -> Iterator[Callable[..., AnthropicProvider]]:
    made: list[AnthropicProvider] = []

    def build(**options: Any) -> AnthropicProvider:
        options.setdefault("base_url", stub.base_url)
        options.setdefault("api_key", "sk-ant-test")
        made.append(AnthropicProvider(model="claude-sonnet-4-5", **options))
        return made[-1]

    yield build
    for provider in made:
        provider.close()


@pytest.fixture
def provider(provider_for: Callable[..., AnthropicProvider]) -> AnthropicProvider:
    return provider_for()


def sent(stub: StubAnthropic, n: int = -1) -> dict[str, Any]:
    body: dict[str, Any] = stub.requests[n][1]
    return body


# --- the stub speaks the wire format -------------------------------------------------------------

def test_the_official_client_reads_the_stubs_answer_with_a_tool_use(stub: StubAnthropic) -> None:
    """Anthropic's own client parses a plain answer from the stub, text and tool_use alike."""
    anthropic = pytest.importorskip("anthropic")
    stub.queue(message("Let me look.", [RECALL], input_tokens=30))
    with anthropic.Anthropic(base_url=stub.base_url.removesuffix("/v1"), api_key="k",
                             max_retries=0) as client:
        reply = client.messages.create(model="claude-stub-1", max_tokens=64,
                                       messages=[{"role": "user", "content": "My pet?"}])
    assert [b.type for b in reply.content] == ["text", "tool_use"]
    assert reply.content[1].input == RECALL[2]
    assert (reply.stop_reason, reply.usage.input_tokens) == ("tool_use", 30)


def test_the_official_client_reads_the_stubs_stream_with_a_tool_use(stub: StubAnthropic) -> None:
    """Anthropic's own client assembles the stub's event stream, pieces and tool input."""
    anthropic = pytest.importorskip("anthropic")
    stub.queue(message("Let me look that up.", [RECALL]), message("Fine."))
    with anthropic.Anthropic(base_url=stub.base_url.removesuffix("/v1"), api_key="k",
                             max_retries=0) as client:
        ask: dict[str, Any] = {"model": "claude-stub-1", "max_tokens": 64,
                               "messages": [{"role": "user", "content": "My pet?"}]}
        with client.messages.stream(**ask) as stream:
            pieces = list(stream.text_stream)
            final = stream.get_final_message()
        events = [e.type for e in client.messages.create(**ask, stream=True)]
    assert len(pieces) > 1
    assert "".join(pieces) == "Let me look that up."
    assert final.content[1].input == RECALL[2]
    assert final.stop_reason == "tool_use"
    assert events[0] == "message_start"
    assert events[-2:] == ["message_delta", "message_stop"]


# --- request mapping -----------------------------------------------------------------------------

def test_the_system_prompt_goes_top_level_with_version_and_key_headers(
        stub: StubAnthropic, provider: AnthropicProvider) -> None:
    """System text (the request's and system messages') is one top-level field; headers name
    the API version and carry the key."""
    provider.complete(ChatRequest(system="You are Chalie.", messages=(
        Message("system", "Be brief."), Message("user", "Hi"))), timeout_s=5)
    headers, body = stub.requests[0]
    assert body["system"] == [{"type": "text", "text": "You are Chalie.\n\nBe brief.",
                               "cache_control": EPHEMERAL}]
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    assert (body["model"], body["max_tokens"]) == ("claude-sonnet-4-5", 4096)
    assert "stream" not in body
    assert headers["anthropic-version"] == "2023-06-01"
    assert headers["x-api-key"] == "sk-ant-test"
    assert headers["content-type"] == "application/json"


def test_no_key_and_no_system_prompt_are_left_out(
        stub: StubAnthropic, provider_for: Callable[..., AnthropicProvider]) -> None:
    """Without a key no x-api-key header is sent, and an empty system prompt is not sent."""
    provider_for(api_key="", max_tokens=256).complete(
        ChatRequest(system="", messages=(Message("user", "Hi"),)), timeout_s=5)
    headers, body = stub.requests[0]
    assert "x-api-key" not in headers
    assert "system" not in body
    assert body["max_tokens"] == 256


def test_tools_are_sent_with_their_input_schema(
        stub: StubAnthropic, provider: AnthropicProvider) -> None:
    """A tool goes out as name, description and input_schema; the last one ends the first
    cached prefix."""
    provider.complete(ChatRequest(system="s", messages=REQUEST.messages, tools=(MEMORY,)),
                      timeout_s=5)
    assert sent(stub)["tools"] == [{"name": "memory", "description": "remember and recall facts",
                                    "input_schema": MEMORY.parameters,
                                    "cache_control": EPHEMERAL}]


def test_a_tool_round_trip_becomes_tool_use_and_tool_result_blocks(
        stub: StubAnthropic, provider: AnthropicProvider) -> None:
    """Calls become tool_use blocks, answers tool_result blocks in one user message, and a call
    left unanswered gets an error result so the server accepts the history."""
    calls = (ToolCall("toolu_1", "memory", {"action": "recall"}, '{"action":"recall"}'),
             ToolCall("toolu_2", "memory", None, "{oops", args_error="bad"))
    provider.complete(ChatRequest(system="s", tools=(MEMORY,), messages=(
        Message("user", "My pet?"), Message("assistant", "Checking.", tool_calls=calls),
        Message("tool", "a cat called Miso", tool_call_id="toolu_1"),
        Message("user", "And?"))), timeout_s=5)
    assert sent(stub)["messages"][1:] == [
        {"role": "assistant", "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "memory",
             "input": {"action": "recall"}},
            {"type": "tool_use", "id": "toolu_2", "name": "memory", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a cat called Miso"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": NOT_RUN,
             "is_error": True},
            {"type": "text", "text": "And?"}]},
    ]


def test_images_go_before_the_text_as_base64_blocks(
        stub: StubAnthropic, provider: AnthropicProvider) -> None:
    """An attached image is a base64 image block ahead of the message's text."""
    png = b"\x89PNG\r\n\x1a\nfake"
    provider.complete(ChatRequest(system="", messages=(
        Message("user", "What is this?", images=(Image("image/png", png),)),)), timeout_s=5)
    assert sent(stub)["messages"][0]["content"] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": base64.b64encode(png).decode()}},
        {"type": "text", "text": "What is this?"}]


def test_consecutive_messages_of_one_role_are_merged(
        stub: StubAnthropic, provider: AnthropicProvider) -> None:
    """Roles alternate on the wire: neighbours of one role become one message."""
    provider.complete(ChatRequest(system="", messages=(
        Message("user", "one"), Message("user", "two"), Message("assistant", "three"),
        Message("assistant", "four"), Message("user", "five"))), timeout_s=5)
    assert [(m["role"], [b["text"] for b in m["content"]]) for m in sent(stub)["messages"]] == [
        ("user", ["one", "two"]), ("assistant", ["three", "four"]), ("user", ["five"])]


def test_structured_output_forces_a_tool_and_answers_its_input_as_text(
        stub: StubAnthropic, provider: AnthropicProvider) -> None:
    """A schema is sent as a forced tool; the answer's text is that tool's input as JSON."""
    schema = {"type": "object", "properties": {"mood": {"type": "string"}},
              "required": ["mood"]}
    stub.queue(message("", [("toolu_9", "mood_report", {"mood": "calm"})]))
    got: list[str] = []
    response = provider.complete(
        ChatRequest(system="s", messages=REQUEST.messages,
                    response_format=JsonSchemaFormat("mood_report", schema)),
        timeout_s=5, on_text=got.append)
    body = sent(stub)
    assert body["tools"][-1]["name"] == "mood_report"
    assert body["tools"][-1]["input_schema"] == schema
    assert body["tool_choice"] == {"type": "tool", "name": "mood_report"}
    assert "stream" not in body
    assert (response.text, response.tool_calls, got) == ('{"mood":"calm"}', (), [])
    assert response.finish_reason == "stop"


# --- prompt caching ------------------------------------------------------------------------------

def turn_request(n: int, images: tuple[Image, ...] = ()) -> ChatRequest:
    """Turn n's first request as the ACT loop makes it: n exchanges of history."""
    history = [HistoryLine("assistant" if i % 2 else "user", f"line {i}", float(i), id=i)
               for i in range(2 * n)]
    loop = ActLoop(prompts=Prompts.load(), user_text=f"question {n}", history=history,
                   tools=(MEMORY, CLOCK), max_iterations=3, max_result_chars=100,
                   now_text=f"2024-05-01 10:{n:02d} UTC")
    loop.use_context(identity="Their name is Sam.", state="They have a cat.",
                     situation=f"Turn {n}.", memory=f"- recalled {n}", history=history,
                     tools=(MEMORY, CLOCK))
    loop.images = images
    return loop.request()


def breakpoints(body: Any) -> list[str]:
    """Where the body's cache_control marks are, as JSON paths."""
    found: list[str] = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, dict):
            if value.get("cache_control") == EPHEMERAL:
                found.append(path)
            for k, v in value.items():
                walk(v, f"{path}.{k}")
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{path}[{i}]")

    walk(body, "")
    return found


def test_a_turn_marks_the_tools_the_system_prompt_and_the_history_end(
        stub: StubAnthropic, provider: AnthropicProvider) -> None:
    """Three cache breakpoints (of the four Anthropic allows): the last tool, the system block
    with who the person is, and the last history line; the images and the rest come after."""
    png = b"\x89PNG\r\n\x1a\nfake"
    request = turn_request(2, images=(Image("image/png", png),))
    provider.complete(request, timeout_s=5)
    body = sent(stub)
    assert breakpoints(body) == [".messages[0].content[3]", ".system[0]", ".tools[1]"]
    assert body["system"][0]["text"].endswith("Their name is Sam.")
    blocks = body["messages"][0]["content"]
    assert [b["type"] for b in blocks] == ["text"] * 4 + ["image", "text"]
    assert blocks[3]["text"] == "\nYou: line 3"
    assert blocks[5]["text"].startswith("\n\n# The time now\n\n2024-05-01 10:02 UTC")
    (message,) = request.messages
    assert "".join(b["text"] for b in blocks if b["type"] == "text") == message.content


def test_the_next_turn_repeats_the_blocks_up_to_the_last_breakpoint(
        stub: StubAnthropic, provider: AnthropicProvider) -> None:
    """Anthropic finds a cached prefix at block boundaries before a breakpoint: the next turn
    sends the previous turn's tools, system and history blocks unchanged, so the history that
    the previous turn cached is read back."""
    provider.complete(turn_request(2), timeout_s=5)
    provider.complete(turn_request(3), timeout_s=5)
    before, after = sent(stub, 0), sent(stub, 1)
    assert (after["tools"], after["system"]) == (before["tools"], before["system"])
    texts = [b["text"] for b in after["messages"][0]["content"]]
    assert texts[:4] == [b["text"] for b in before["messages"][0]["content"][:4]]
    assert breakpoints(before)[0] == ".messages[0].content[3]"
    assert breakpoints(after)[0] == ".messages[0].content[5]"


def test_the_breakpoints_are_where_the_official_client_declares_them(
        stub: StubAnthropic, provider: AnthropicProvider) -> None:
    """Every block, tool and system part we send uses only keys that Anthropic's own client
    declares for it, and cache_control is its ephemeral kind."""
    types = pytest.importorskip("anthropic.types")
    provider.complete(turn_request(2, images=(Image("image/png", b"png"),)), timeout_s=5)
    body = sent(stub)

    def declared(typed: Any) -> set[str]:
        return set(get_type_hints(typed))

    assert set(body["tools"][-1]) <= declared(types.ToolParam)
    assert set(body["system"][0]) <= declared(types.TextBlockParam)
    for block in body["messages"][0]["content"]:
        kind = types.TextBlockParam if block["type"] == "text" else types.ImageBlockParam
        assert set(block) <= declared(kind)
    hints = get_type_hints(types.CacheControlEphemeralParam)
    assert set(EPHEMERAL) <= set(hints)
    assert "ephemeral" in get_args(hints["type"])


# --- response mapping ----------------------------------------------------------------------------

def test_text_and_tool_calls_come_back(stub: StubAnthropic, provider: AnthropicProvider) -> None:
    """Text blocks are the text; tool_use blocks are calls with their input as arguments."""
    stub.queue(message("Let me look.", [RECALL, ("toolu_2", "memory", "not an object")]))
    response = provider.complete(REQUEST, timeout_s=5)
    assert response.text == "Let me look."
    first, second = response.tool_calls
    assert first == ToolCall("toolu_1", "memory", RECALL[2],
                             '{"action":"recall","topic":"pets"}')
    assert (second.args, second.args_error) == (None, "arguments must be a JSON object, got str")
    assert response.finish_reason == "tool_calls"
    assert response.latency_s > 0


def test_thinking_is_reasoning_never_text(stub: StubAnthropic,
                                          provider: AnthropicProvider) -> None:
    """A thinking block is kept as reasoning and never shows in the answer."""
    stub.queue(message("A cat.", thinking="The trail says Miso is a cat."))
    response = provider.complete(REQUEST, timeout_s=5)
    assert (response.text, response.reasoning) == ("A cat.", "The trail says Miso is a cat.")


@pytest.mark.parametrize(("stop_reason", "finish"), [
    ("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length"),
    ("tool_use", "tool_calls"), ("refusal", "refusal")])
def test_stop_reasons_map_to_finish_reasons(stub: StubAnthropic, provider: AnthropicProvider,
                                            stop_reason: str, finish: str) -> None:
    """Anthropic's stop_reason becomes the finish reason callers know; others pass through."""
    stub.queue(message("x", stop_reason=stop_reason))
    assert provider.complete(REQUEST, timeout_s=5).finish_reason == finish


def test_usage_counts_cached_prompt_tokens(stub: StubAnthropic,
                                           provider: AnthropicProvider) -> None:
    """Prompt tokens are the uncached, cache-written and cache-read input tokens together."""
    stub.queue(message("ok", input_tokens=10, cache_creation_input_tokens=100,
                       cache_read_input_tokens=1000, output_tokens=7))
    assert provider.complete(REQUEST, timeout_s=5).usage == Usage(1110, 7, 1117,
                                                                   cached_tokens=1000)


def test_usage_is_estimated_when_the_server_reports_none(
        stub: StubAnthropic, provider: AnthropicProvider) -> None:
    """Without usage in the answer the counts are estimated, and marked so."""
    stub.queue(message("A cat called Miso.", usage=False))
    assert provider.complete(REQUEST, timeout_s=5).usage == Usage(8, 5, 13, estimated=True)


# --- streaming -----------------------------------------------------------------------------------

def test_streamed_text_arrives_in_pieces_that_make_the_answer(
        stub: StubAnthropic, provider: AnthropicProvider) -> None:
    """Each text delta reaches on_text as it arrives; together they are the answer's text."""
    stub.queue(message("Your pet is a cat called Miso.", thinking="Recall says so.",
                       input_tokens=40, cache_read_input_tokens=2, output_tokens=9))
    pieces: list[str] = []
    response = provider.complete(REQUEST, timeout_s=5, on_text=pieces.append)
    assert sent(stub)["stream"] is True
    assert len(pieces) > 1
    assert "".join(pieces) == response.text == "Your pet is a cat called Miso."
    assert response.reasoning == "Recall says so."
    assert response.usage == Usage(42, 9, 51, cached_tokens=2)
    assert response.finish_reason == "stop"


def test_streamed_tool_input_is_assembled_from_its_pieces(
        stub: StubAnthropic, provider: AnthropicProvider) -> None:
    """Tool input arrives as partial JSON; the call has it whole, and on_text never sees it.
    Input that is not JSON makes a call with an error, not an exception."""
    stub.queue(message("Looking.", [RECALL, ("toolu_2", "memory", '{"action": "rec')]))
    pieces: list[str] = []
    response = provider.complete(REQUEST, timeout_s=5, on_text=pieces.append)
    first, second = response.tool_calls
    assert (first.call_id, first.name, first.args) == ("toolu_1", "memory", RECALL[2])
    assert (second.args, second.raw_args) == (None, '{"action": "rec')
    assert second.args_error is not None
    assert "".join(pieces) == "Looking."
    assert response.finish_reason == "tool_calls"


def test_a_json_answer_to_a_stream_request_is_read_whole(
        stub: StubAnthropic, provider: AnthropicProvider) -> None:
    """A server that answers a stream request with plain JSON still gives the answer, and
    on_text gets its text once."""
    stub.queue(plain(message("All at once.")))
    pieces: list[str] = []
    assert provider.complete(REQUEST, timeout_s=5, on_text=pieces.append).text == "All at once."
    assert pieces == ["All at once."]


def test_streaming_can_be_switched_off(stub: StubAnthropic,
                                       provider_for: Callable[..., AnthropicProvider]) -> None:
    """With stream=False the request is plain and on_text gets the whole text once."""
    pieces: list[str] = []
    provider_for(stream=False).complete(REQUEST, timeout_s=5, on_text=pieces.append)
    assert "stream" not in sent(stub)
    assert pieces == ["stub answer"]


def test_a_stream_that_breaks_off_is_unavailable(stub: StubAnthropic,
                                                 provider: AnthropicProvider) -> None:
    """A connection cut mid-stream is LlmUnavailable, after the text that did arrive."""
    stub.queue(broken(message("This answer never ends"), after=4))
    pieces: list[str] = []
    with pytest.raises(LlmUnavailable, match="the stream broke off"):
        provider.complete(REQUEST, timeout_s=5, on_text=pieces.append)
    assert pieces == ["This"]


def test_an_overloaded_error_event_is_a_server_error(stub: StubAnthropic,
                                                     provider: AnthropicProvider) -> None:
    """An `event: error` of type overloaded_error reads as HTTP 529, a server error."""
    stub.queue(stream_error("overloaded_error", "Overloaded", after=3))
    with pytest.raises(LlmHttpError) as caught:
        provider.complete(REQUEST, timeout_s=5, on_text=lambda _: None)
    assert (caught.value.status, caught.value.kind) == (529, "server")
    assert caught.value.detail == "Overloaded"
    assert caught.value.recoverable


def test_an_error_status_to_a_stream_request_is_an_http_error(
        stub: StubAnthropic, provider: AnthropicProvider) -> None:
    """A stream request refused before it starts raises the status like a plain one."""
    stub.queue(http_error(400, "prompt is too long: 210000 tokens > 200000 maximum"))
    with pytest.raises(LlmHttpError) as caught:
        provider.complete(REQUEST, timeout_s=5, on_text=lambda _: None)
    assert caught.value.kind == "context"


def test_a_stream_that_stops_sending_is_given_up_after_the_stall_timeout(
        stub: StubAnthropic) -> None:
    """A stream that goes silent mid-answer ends after llm.stall_timeout_s, not at the
    request's budget: LlmUnavailable, as a dropped connection, with the text shown once."""
    stub.queue(stalled(message("This answer never ends"), after=5))
    provider = AnthropicProvider(base_url=stub.base_url, model="claude-stub-1",
                                 stall_timeout_s=0.3)
    pieces: list[str] = []
    try:
        with pytest.raises(LlmUnavailable, match=r"the stream stalled: the server sent nothing "
                                                 r"for 0\.3s"):
            provider.complete(REQUEST, timeout_s=30, on_text=pieces.append)
    finally:
        provider.close()
    assert pieces == ["This", " ans"]


def test_a_stream_that_outlasts_the_budget_is_cut_off(stub: StubAnthropic,
                                                      provider: AnthropicProvider) -> None:
    """A server that keeps pinging without answering is given up on at the time budget."""
    stub.queue(endless_pings())
    with pytest.raises(LlmUnavailable, match=r"timed out after 0\.3s \(still streaming\)"):
        provider.complete(REQUEST, timeout_s=0.3, on_text=lambda _: None)


# --- errors --------------------------------------------------------------------------------------

def test_a_closed_port_is_unavailable_and_says_so() -> None:
    """Nothing listening: LlmUnavailable naming the refused connection."""
    closed = StubAnthropic()
    closed.close()
    provider = AnthropicProvider(base_url=closed.base_url, model="m")
    try:
        with pytest.raises(LlmUnavailable, match="connection refused"):
            provider.complete(REQUEST, timeout_s=5)
        with pytest.raises(LlmUnavailable, match="connection refused"):
            provider.models(timeout_s=5)
    finally:
        provider.close()


def test_a_dropped_connection_is_unavailable(stub: StubAnthropic,
                                             provider: AnthropicProvider) -> None:
    """A server that hangs up without answering is LlmUnavailable."""
    stub.queue(drop())
    with pytest.raises(LlmUnavailable):
        provider.complete(REQUEST, timeout_s=5)


def test_a_timeout_is_unavailable_and_names_the_budget() -> None:
    """A request that times out is LlmUnavailable saying how long it waited."""
    def timing_out(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("read timed out", request=request)

    provider = AnthropicProvider(model="m", transport=httpx.MockTransport(timing_out))
    with pytest.raises(LlmUnavailable, match=r"timed out after 12\.0s"):
        provider.complete(REQUEST, timeout_s=12)
    provider.close()


RATE_LIMIT = "Number of request tokens has exceeded your per-minute rate limit"


@pytest.mark.parametrize(("reply", "expected"), [
    (http_error(401, "invalid x-api-key"), (401, "auth", "invalid x-api-key", None)),
    (http_error(429, RATE_LIMIT, headers={"Retry-After": "3"}),
     (429, "rate_limited", RATE_LIMIT, 3.0)),
    (http_error(404, "model: claude-nope"), (404, "not_found", "model: claude-nope", None)),
    (http_error(529, "Overloaded", headers={"Retry-After": "soon"}),
     (529, "server", "Overloaded", None)),
])
def test_error_statuses_are_classed_with_anthropics_message(
        stub: StubAnthropic, provider: AnthropicProvider, reply: Any,
        expected: tuple[int, str, str, float | None]) -> None:
    """An error status keeps Anthropic's own message as detail and its Retry-After."""
    stub.queue(reply)
    with pytest.raises(LlmHttpError) as caught:
        provider.complete(REQUEST, timeout_s=5)
    error = caught.value
    assert (error.status, error.kind, error.detail, error.retry_after_s) == expected


@pytest.mark.parametrize("body", [b"<html>502 Bad Gateway</html>", b'{"choices": []}',
                                  b'{"type": "completion", "content": []}'])
def test_an_answer_that_is_not_a_message_is_a_bad_response(
        stub: StubAnthropic, provider: AnthropicProvider, body: bytes) -> None:
    """A 200 whose body is not a Messages answer is LlmBadResponse, streamed or not."""
    stub.queue(garbage(body), garbage(body))
    with pytest.raises(LlmBadResponse):
        provider.complete(REQUEST, timeout_s=5)
    with pytest.raises(LlmBadResponse):
        provider.complete(REQUEST, timeout_s=5, on_text=lambda _: None)


def test_models_lists_the_servers_model_ids(provider: AnthropicProvider) -> None:
    """models() is the ids of GET /v1/models."""
    assert provider.models(timeout_s=5) == ("claude-sonnet-4-5", "claude-haiku-4-5")


def test_models_refused_is_an_http_error() -> None:
    """A refused model list raises the status with Anthropic's message."""
    def refuse(request: httpx.Request) -> httpx.Response:
        assert request.headers["x-api-key"] == "bad"
        return httpx.Response(401, json={"type": "error", "error": {
            "type": "authentication_error", "message": "invalid x-api-key"}})

    provider = AnthropicProvider(model="m", api_key="bad", transport=httpx.MockTransport(refuse))
    with pytest.raises(LlmHttpError) as caught:
        provider.models(timeout_s=5)
    assert (caught.value.kind, caught.value.detail) == ("auth", "invalid x-api-key")
    provider.close()
