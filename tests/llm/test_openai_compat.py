"""The OpenAI-compatible provider's mapping, with HTTP faked at the transport (no network).

What goes over a real socket (streams, error statuses, dropped connections) is in
test_openai_wire.py, against a loopback stub server; stream assembly details that need a
fake clock or odd servers are in test_openai_stream.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from chalie.clock import ManualClock
from chalie.errors import LlmBadResponse, LlmHttpError, LlmUnavailable
from chalie.llm.openai_compat import OpenAICompatProvider
from chalie.llm.types import (
    NOT_RUN,
    ChatRequest,
    JsonSchemaFormat,
    Message,
    ToolCall,
    ToolSpec,
    Usage,
)
from chalie.values.images import Image
from tests.llm.openai_stub import completion, sse, stream_chunks, tool_call

Handler = Callable[[httpx.Request], httpx.Response]

MEMORY = ToolSpec(
    name="memory",
    description="remember and recall facts",
    parameters={"type": "object", "properties": {"action": {"type": "string"}}},
)
REQUEST = ChatRequest(system="You are Chalie.", messages=(Message("user", "What is my pet?"),))


class Server:
    """A fake LLM server: answers from a list of responses and keeps every request it got."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self._answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self._answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def body(self, n: int = 0) -> dict[str, Any]:
        return json.loads(self.requests[n].content)  # type: ignore[no-any-return]


def answer(text: str | None = "ok", tool_calls: list[dict[str, Any]] | None = None,
           usage: dict[str, Any] | None = None, finish_reason: str | None = None,
           ) -> httpx.Response:
    return httpx.Response(200, json=completion(text, tool_calls=tool_calls, usage=usage,
                                               finish_reason=finish_reason))


def event_stream(*events: dict[str, Any] | str) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/event-stream"},
                          content=b"".join(sse(*events)))


@pytest.fixture
def provider_for() -> Iterator[Callable[..., OpenAICompatProvider]]:
    made: list[OpenAICompatProvider] = []

    def build(server: Handler, **options: Any) -> OpenAICompatProvider:
        provider = OpenAICompatProvider(
            base_url="http://llm.test/v1", model="llama3.1",
            transport=httpx.MockTransport(server), **options,
        )
        made.append(provider)
        return provider

    yield build
    for provider in made:
        provider.close()


def ask(provider: OpenAICompatProvider, request: ChatRequest = REQUEST, **options: Any) -> Any:
    return provider.complete(request, timeout_s=5.0, **options)


# --- the request ----------------------------------------------------------------------------------

def test_request_carries_model_messages_and_tools_in_openai_format(provider_for: Any) -> None:
    """The server receives the model, system + user messages and the tools as functions."""
    server = Server(answer())
    ask(provider_for(server), ChatRequest(REQUEST.system, REQUEST.messages, (MEMORY,)))
    sent = server.requests[0]
    assert sent.method == "POST"
    assert str(sent.url) == "http://llm.test/v1/chat/completions"
    body = server.body()
    assert body["model"] == "llama3.1"
    assert body["stream"] is False
    assert body["messages"] == [
        {"role": "system", "content": "You are Chalie."},
        {"role": "user", "content": "What is my pet?"},
    ]
    assert body["tools"] == [{"type": "function", "function": {
        "name": "memory", "description": "remember and recall facts",
        "parameters": {"type": "object", "properties": {"action": {"type": "string"}}},
    }}]


def test_request_without_tools_has_no_tools_key(provider_for: Any) -> None:
    """A tool-free request (the forced final answer) sends no `tools` at all."""
    server = Server(answer())
    ask(provider_for(server))
    assert "tools" not in server.body()


def test_empty_system_prompt_is_left_out(provider_for: Any) -> None:
    """A request with no system prompt (compaction, encoding) sends only its own messages."""
    server = Server(answer())
    ask(provider_for(server), ChatRequest("", REQUEST.messages))
    assert server.body()["messages"] == [{"role": "user", "content": "What is my pet?"}]


def test_structured_request_carries_a_strict_json_schema_response_format(
    provider_for: Any,
) -> None:
    """A request that needs JSON sends its schema as a strict `json_schema` response_format."""
    schema = {
        "type": "object",
        "properties": {"salience": {"type": "number", "minimum": 0, "maximum": 1}},
        "required": ["salience"],
        "additionalProperties": False,
    }
    server = Server(answer('{"salience": 0.5}'))
    request = ChatRequest(REQUEST.system, REQUEST.messages,
                          response_format=JsonSchemaFormat("episode", schema))
    assert ask(provider_for(server), request).text == '{"salience": 0.5}'
    assert server.body()["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "episode", "schema": schema, "strict": True},
    }


def test_request_without_a_response_format_has_no_response_format_key(provider_for: Any) -> None:
    """A plain chat request sends no `response_format`, so the model may answer in prose."""
    server = Server(answer())
    ask(provider_for(server), ChatRequest(REQUEST.system, REQUEST.messages, (MEMORY,)))
    assert "response_format" not in server.body()


def test_bearer_header_is_sent_only_with_an_api_key(provider_for: Any) -> None:
    """With an api_key the server gets `Authorization: Bearer KEY`; without one, no header."""
    keyed, anonymous = Server(answer()), Server(answer())
    ask(provider_for(keyed, api_key="sk-test"))
    ask(provider_for(anonymous))
    assert keyed.requests[0].headers["authorization"] == "Bearer sk-test"
    assert "authorization" not in anonymous.requests[0].headers


def test_images_are_sent_as_data_urls_after_the_text(provider_for: Any) -> None:
    """A user message with images becomes a text part and one image_url part per image."""
    server = Server(answer())
    photo = Message("user", "What is in these?", images=(
        Image("image/png", b"\x89PNG\r\n"), Image("image/jpeg", b"\xff\xd8\xff")))
    ask(provider_for(server), ChatRequest("", (photo,)))
    assert server.body()["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "What is in these?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}},
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/"}},
    ]}]


def test_a_tool_round_trip_is_sent_as_tool_calls_and_tool_messages(provider_for: Any) -> None:
    """An assistant's calls go as `tool_calls` (raw arguments, or the args as JSON) and each
    answer as a `tool` message naming its call."""
    server = Server(answer())
    calls = (ToolCall("c1", "memory", {"action": "recall"}, '{"action":"recall"}'),
             ToolCall("c2", "clock", {"zone": "UTC"}, ""))
    messages = (Message("user", "hi"), Message("assistant", "", tool_calls=calls),
                Message("tool", "Rex", tool_call_id="c1"),
                Message("tool", "12:00", tool_call_id="c2"))
    ask(provider_for(server), ChatRequest("", messages))
    assert server.body()["messages"][1:] == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "memory", "arguments": '{"action":"recall"}'}},
            {"id": "c2", "type": "function",
             "function": {"name": "clock", "arguments": '{"zone":"UTC"}'}},
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "Rex"},
        {"role": "tool", "tool_call_id": "c2", "content": "12:00"},
    ]


def test_an_unanswered_tool_call_is_answered_with_an_error_result(provider_for: Any) -> None:
    """A call with no tool message gets a not-run result before the next message, since
    servers refuse a request with an unanswered call."""
    server = Server(answer())
    calls = (ToolCall("c1", "memory", {}, "{}"), ToolCall("c2", "memory", {}, "{}"))
    messages = (Message("assistant", "Let me look.", tool_calls=calls),
                Message("tool", "Rex", tool_call_id="c1"), Message("user", "well?"))
    ask(provider_for(server), ChatRequest("", messages))
    sent = server.body()["messages"]
    assert sent[0]["content"] == "Let me look."
    assert [(m["role"], m.get("tool_call_id"), m["content"]) for m in sent[1:]] == [
        ("tool", "c1", "Rex"), ("tool", "c2", NOT_RUN), ("user", None, "well?")]


def test_a_request_with_a_text_sink_asks_for_a_stream_with_usage(provider_for: Any) -> None:
    """With on_text the request says stream: true and asks for the usage chunk."""
    server = Server(event_stream(*stream_chunks(completion("Rex.")), "[DONE]"))
    pieces: list[str] = []
    ask(provider_for(server), on_text=pieces.append)
    assert server.body()["stream"] is True
    assert server.body()["stream_options"] == {"include_usage": True}
    assert "".join(pieces) == "Rex."


def test_a_structured_request_is_never_streamed_nor_shown(provider_for: Any) -> None:
    """A request with a response format is sent whole and its JSON never reaches on_text."""
    server = Server(answer('{"a": 1}'))
    pieces: list[str] = []
    request = ChatRequest("", REQUEST.messages, response_format=JsonSchemaFormat("x", {}))
    assert ask(provider_for(server), request, on_text=pieces.append).text == '{"a": 1}'
    assert server.body()["stream"] is False
    assert "stream_options" not in server.body()
    assert pieces == []


def test_with_streaming_off_the_whole_text_reaches_on_text_once(provider_for: Any) -> None:
    """stream=False sends stream: false and hands on_text the whole answer in one piece."""
    server = Server(answer("Your pet is Rex."))
    pieces: list[str] = []
    ask(provider_for(server, stream=False), on_text=pieces.append)
    assert server.body()["stream"] is False
    assert pieces == ["Your pet is Rex."]


# --- the answer -----------------------------------------------------------------------------------

def test_text_answer_and_reported_usage_are_returned(provider_for: Any) -> None:
    """A plain answer comes back with its text and the usage the server reported."""
    usage = {"prompt_tokens": 30, "completion_tokens": 4, "total_tokens": 40}
    response = ask(provider_for(Server(answer("Rex.", usage=usage))))
    assert response.text == "Rex."
    assert response.tool_calls == ()
    assert response.usage == Usage(30, 4, 40, estimated=False)
    assert response.finish_reason == "stop"
    assert response.reasoning == ""


def test_total_tokens_falls_back_to_prompt_plus_completion(provider_for: Any) -> None:
    """Usage without total_tokens counts prompt and completion tokens together."""
    usage = {"prompt_tokens": 30, "completion_tokens": 4}
    response = ask(provider_for(Server(answer(usage=usage))))
    assert response.usage == Usage(30, 4, 34, estimated=False)


def test_missing_usage_is_estimated(provider_for: Any) -> None:
    """Without usage the token count is an estimate, marked so, and above zero."""
    response = ask(provider_for(Server(answer("Your pet is Rex."))))
    # about 4 characters a token: 15 + 15 characters asked, 16 answered
    assert response.usage == Usage(8, 4, 12, estimated=True)


def test_tool_calls_are_parsed_with_dict_arguments(provider_for: Any) -> None:
    """Tool calls come back with their id, name, arguments as a dict and the raw text."""
    raw = '{"action": "recall", "query": "pet"}'
    server = Server(answer(None, [tool_call("memory", raw), tool_call("memory", "", "")]))
    response = ask(provider_for(server))
    assert response.text == ""
    assert response.tool_calls == (
        ToolCall("call_abc", "memory", {"action": "recall", "query": "pet"}, raw),
        ToolCall("call_1", "memory", {}, ""),
    )
    assert response.finish_reason == "tool_calls"


@pytest.mark.parametrize(
    ("raw", "why"),
    [('{"a": ', "not valid JSON"), ("[1]", "must be a JSON object, got list")],
)
def test_unusable_arguments_give_an_args_error_not_an_exception(
    provider_for: Any, raw: str, why: str
) -> None:
    """Arguments that are broken JSON or not an object leave args None with the reason."""
    response = ask(provider_for(Server(answer(None, [tool_call("memory", raw)]))))
    (call,) = response.tool_calls
    assert call.args is None
    assert call.raw_args == raw
    assert call.args_error is not None
    assert why in call.args_error


def test_arguments_sent_as_an_object_are_accepted(provider_for: Any) -> None:
    """Servers that send arguments as a JSON object (older Ollama) still give dict args."""
    server = Server(answer(None, [tool_call("memory", {"action": "recall"})]))
    (call,) = ask(provider_for(server)).tool_calls
    assert call.args == {"action": "recall"}
    assert json.loads(call.raw_args) == {"action": "recall"}
    assert call.args_error is None


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_a_reasoning_field_goes_to_reasoning_not_to_the_text(
    provider_for: Any, field: str
) -> None:
    """DeepSeek's reasoning_content (OpenRouter's and Ollama's reasoning) is the model's
    thinking: kept apart, never part of the answer."""
    body = completion("Rex.")
    body["choices"][0]["message"][field] = "The user asked about a pet."
    server = Server(httpx.Response(200, json=body))
    response = ask(provider_for(server))
    assert response.text == "Rex."
    assert response.reasoning == "The user asked about a pet."


def test_a_leading_think_block_is_moved_to_reasoning(provider_for: Any) -> None:
    """deepseek-r1 and qwen3 on Ollama put their thinking in <think> tags before the answer."""
    server = Server(answer("<think>\nPets... Rex.\n</think>\n\nYour pet is Rex."))
    response = ask(provider_for(server))
    assert response.text == "Your pet is Rex."
    assert response.reasoning == "Pets... Rex."


def test_an_unclosed_think_block_is_all_reasoning(provider_for: Any) -> None:
    """A model cut off while thinking has thought, not answered: the text is empty."""
    server = Server(answer("<think>Let me see, the pet", finish_reason="length"))
    response = ask(provider_for(server))
    assert (response.text, response.reasoning) == ("", "Let me see, the pet")


def test_think_tags_later_in_the_text_are_part_of_the_answer(provider_for: Any) -> None:
    """Only a block that opens the content is thinking; a tag quoted later is answer text."""
    text = "Models write <think>...</think> first."
    assert ask(provider_for(Server(answer(text)))).text == text


# --- failures -------------------------------------------------------------------------------------

def test_a_server_error_is_raised_after_one_attempt(provider_for: Any) -> None:
    """A 500 is a recoverable HTTP error; retrying is the routing layer's job, not this one's."""
    server = Server(httpx.Response(500, text="overloaded"), answer())
    with pytest.raises(LlmHttpError) as caught:
        ask(provider_for(server))
    assert (caught.value.status, caught.value.kind, caught.value.detail) == (
        500, "server", "overloaded")
    assert caught.value.recoverable is True
    assert len(server.requests) == 1


def test_an_error_body_in_a_200_answer_is_an_http_error(provider_for: Any) -> None:
    """A gateway that answers 200 with {"error": ...} raises with the server's message."""
    body = {"error": {"message": "upstream provider overloaded", "code": 502}}
    with pytest.raises(LlmHttpError) as caught:
        ask(provider_for(Server(httpx.Response(200, json=body))))
    assert (caught.value.status, caught.value.detail) == (502, "upstream provider overloaded")


@pytest.mark.parametrize(
    "reply",
    [httpx.Response(200, text="<html>gateway</html>"),
     httpx.Response(200, json={"id": "x", "object": "chat.completion"}),
     httpx.Response(200, json={"choices": []})],
    ids=["not-json", "no-choices-key", "empty-choices"],
)
def test_unreadable_answer_is_a_bad_response(provider_for: Any, reply: httpx.Response) -> None:
    """A 200 whose body is not a chat completion raises LlmBadResponse."""
    with pytest.raises(LlmBadResponse):
        ask(provider_for(Server(reply)))


@pytest.mark.parametrize(
    ("error", "message"),
    [(httpx.ConnectError("[Errno 111] Connection refused"),
      r"^cannot connect \(ConnectError: \[Errno 111\] Connection refused\)$"),
     (httpx.ConnectTimeout("timed out"), r"^cannot connect \(no answer within 5s\)$"),
     (httpx.ReadTimeout("timed out"), r"^timed out after 5s$"),
     (httpx.RemoteProtocolError("Server disconnected"), r"^the request failed \(Remote")],
    ids=["connect", "connect-timeout", "read-timeout", "disconnect"],
)
def test_transport_failures_become_llm_unavailable(
    provider_for: Any, error: Exception, message: str
) -> None:
    """A refused connection, a timeout or a vanished server is the LLM being unavailable."""
    with pytest.raises(LlmUnavailable, match=message) as caught:
        ask(provider_for(Server(error)))
    assert caught.value.recoverable is True


def test_models_from_a_server_that_refuses_is_an_http_error(provider_for: Any) -> None:
    """A model list behind a bad key raises the same classed error as a chat request."""
    server = Server(httpx.Response(401, json={"error": {"message": "Invalid API key"}}))
    with pytest.raises(LlmHttpError) as caught:
        provider_for(server).models(timeout_s=5.0)
    assert (caught.value.kind, caught.value.detail) == ("auth", "Invalid API key")


def test_a_retry_after_date_without_a_date_header_is_measured_by_the_clock(
    provider_for: Any,
) -> None:
    """Retry-After as an HTTP-date, from a server that sends no Date, counts from our clock."""
    clock = ManualClock(wall=1_700_000_000.0)  # 2023-11-14 22:13:20 UTC
    server = Server(httpx.Response(429, headers={"Retry-After": "Tue, 14 Nov 2023 22:14:00 GMT"}))
    with pytest.raises(LlmHttpError) as caught:
        ask(provider_for(server, clock=clock))
    assert (caught.value.kind, caught.value.retry_after_s) == ("rate_limited", 40.0)
