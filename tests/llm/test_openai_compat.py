"""The OpenAI-compatible provider, with HTTP faked at the transport (no network)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from chalie.errors import LlmBadResponse, LlmHttpError, LlmUnavailable
from chalie.llm.openai_compat import OpenAICompatProvider
from chalie.llm.types import ChatRequest, JsonSchemaFormat, Message, ToolCall, ToolSpec, Usage

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


def completion(
    text: str | None = "ok",
    tool_calls: list[dict[str, Any]] | None = None,
    usage: dict[str, Any] | None = None,
) -> httpx.Response:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    body: dict[str, Any] = {"choices": [{"message": message, "finish_reason": "stop"}]}
    if usage is not None:
        body["usage"] = usage
    return httpx.Response(200, json=body)


def call(name: str, arguments: Any, call_id: str = "call_abc") -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": arguments}}


@pytest.fixture
def provider_for() -> Iterator[Callable[..., OpenAICompatProvider]]:
    made: list[OpenAICompatProvider] = []

    def build(server: Handler, **options: Any) -> OpenAICompatProvider:
        options.setdefault("retry_backoff_s", 0)
        provider = OpenAICompatProvider(
            base_url="http://llm.test/v1", model="llama3.1",
            transport=httpx.MockTransport(server), **options,
        )
        made.append(provider)
        return provider

    yield build
    for provider in made:
        provider.close()


def ask(provider: OpenAICompatProvider, request: ChatRequest = REQUEST) -> Any:
    return provider.complete(request, timeout_s=5.0)


# --- the request ----------------------------------------------------------------------------------

def test_request_carries_model_messages_and_tools_in_openai_format(provider_for: Any) -> None:
    """The server receives the model, system + user messages and the tools as functions."""
    server = Server(completion())
    ask(provider_for(server), ChatRequest(REQUEST.system, REQUEST.messages, (MEMORY,)))
    sent = server.requests[0]
    assert sent.method == "POST"
    assert str(sent.url) == "http://llm.test/v1/chat/completions"
    body = server.body()
    assert body["model"] == "llama3.1"
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
    server = Server(completion())
    ask(provider_for(server))
    assert "tools" not in server.body()


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
    server = Server(completion('{"salience": 0.5}'))
    request = ChatRequest(REQUEST.system, REQUEST.messages,
                          response_format=JsonSchemaFormat("episode", schema))
    assert ask(provider_for(server), request).text == '{"salience": 0.5}'
    assert server.body()["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "episode", "schema": schema, "strict": True},
    }


def test_request_without_a_response_format_has_no_response_format_key(provider_for: Any) -> None:
    """A plain chat request sends no `response_format`, so the model may answer in prose."""
    server = Server(completion())
    ask(provider_for(server), ChatRequest(REQUEST.system, REQUEST.messages, (MEMORY,)))
    assert "response_format" not in server.body()


def test_bearer_header_is_sent_only_with_an_api_key(provider_for: Any) -> None:
    """With an api_key the server gets `Authorization: Bearer KEY`; without one, no header."""
    keyed, anonymous = Server(completion()), Server(completion())
    ask(provider_for(keyed, api_key="sk-test"))
    ask(provider_for(anonymous))
    assert keyed.requests[0].headers["authorization"] == "Bearer sk-test"
    assert "authorization" not in anonymous.requests[0].headers


# --- the answer -----------------------------------------------------------------------------------

def test_text_answer_and_reported_usage_are_returned(provider_for: Any) -> None:
    """A plain answer comes back with its text and the usage the server reported."""
    usage = {"prompt_tokens": 30, "completion_tokens": 4, "total_tokens": 40}
    response = ask(provider_for(Server(completion("Rex.", usage=usage))))
    assert response.text == "Rex."
    assert response.tool_calls == ()
    assert response.usage == Usage(30, 4, 40, estimated=False)
    assert response.finish_reason == "stop"


def test_total_tokens_falls_back_to_prompt_plus_completion(provider_for: Any) -> None:
    """Usage without total_tokens counts prompt and completion tokens together."""
    usage = {"prompt_tokens": 30, "completion_tokens": 4}
    response = ask(provider_for(Server(completion(usage=usage))))
    assert response.usage == Usage(30, 4, 34, estimated=False)


def test_missing_usage_is_estimated(provider_for: Any) -> None:
    """Without usage the token count is an estimate, marked so, and above zero."""
    response = ask(provider_for(Server(completion("Your pet is Rex."))))
    # about 4 characters a token: 15 + 15 characters asked, 16 answered
    assert response.usage == Usage(8, 4, 12, estimated=True)


def test_tool_calls_are_parsed_with_dict_arguments(provider_for: Any) -> None:
    """Tool calls come back with their id, name, arguments as a dict and the raw text."""
    raw = '{"action": "recall", "query": "pet"}'
    server = Server(completion(None, [call("memory", raw), call("memory", "", call_id="")]))
    response = ask(provider_for(server))
    assert response.text == ""
    assert response.tool_calls == (
        ToolCall("call_abc", "memory", {"action": "recall", "query": "pet"}, raw),
        ToolCall("call_1", "memory", {}, ""),
    )


@pytest.mark.parametrize(
    ("raw", "why"),
    [('{"a": ', "not valid JSON"), ("[1]", "must be a JSON object, got list")],
)
def test_unusable_arguments_give_an_args_error_not_an_exception(
    provider_for: Any, raw: str, why: str
) -> None:
    """Arguments that are broken JSON or not an object leave args None with the reason."""
    response = ask(provider_for(Server(completion(None, [call("memory", raw)]))))
    (tool_call,) = response.tool_calls
    assert tool_call.args is None
    assert tool_call.raw_args == raw
    assert tool_call.args_error is not None
    assert why in tool_call.args_error


def test_arguments_sent_as_an_object_are_accepted(provider_for: Any) -> None:
    """Servers that send arguments as a JSON object (older Ollama) still give dict args."""
    server = Server(completion(None, [call("memory", {"action": "recall"})]))
    (tool_call,) = ask(provider_for(server)).tool_calls
    assert tool_call.args == {"action": "recall"}
    assert json.loads(tool_call.raw_args) == {"action": "recall"}
    assert tool_call.args_error is None


# --- failures -------------------------------------------------------------------------------------

def test_server_error_then_success_is_retried(provider_for: Any) -> None:
    """A 500 followed by a good answer succeeds on the second attempt when one retry is allowed."""
    server = Server(httpx.Response(500, text="overloaded"), completion("fine"))
    response = ask(provider_for(server, retries=1))
    assert response.text == "fine"
    assert len(server.requests) == 2


def test_server_error_without_retries_is_a_recoverable_http_error(provider_for: Any) -> None:
    """A 500 with no retries left raises an HTTP error that a later turn may get past."""
    server = Server(httpx.Response(500, text="overloaded"))
    with pytest.raises(LlmHttpError) as caught:
        ask(provider_for(server, retries=0))
    assert caught.value.status == 500
    assert caught.value.recoverable is True
    assert "overloaded" in str(caught.value)
    assert len(server.requests) == 1


def test_unauthorised_is_not_recoverable_and_not_retried(provider_for: Any) -> None:
    """A 401 is raised at once as a non-recoverable error, even with retries configured."""
    server = Server(httpx.Response(401, text="bad key"), completion())
    with pytest.raises(LlmHttpError) as caught:
        ask(provider_for(server, retries=3))
    assert caught.value.status == 401
    assert caught.value.recoverable is False
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "answer",
    [httpx.Response(200, text="<html>gateway</html>"),
     httpx.Response(200, json={"id": "x", "object": "chat.completion"}),
     httpx.Response(200, json={"choices": []})],
    ids=["not-json", "no-choices-key", "empty-choices"],
)
def test_unreadable_answer_is_a_bad_response_and_not_retried(
    provider_for: Any, answer: httpx.Response
) -> None:
    """A 200 whose body is not a chat completion raises LlmBadResponse after one attempt."""
    server = Server(answer, completion())
    with pytest.raises(LlmBadResponse):
        ask(provider_for(server, retries=2))
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("error", "message"),
    [(httpx.ConnectError("connection refused"), "unreachable"),
     (httpx.ReadTimeout("timed out"), "timed out")],
    ids=["connect", "read-timeout"],
)
def test_transport_failures_become_llm_unavailable(
    provider_for: Any, error: Exception, message: str
) -> None:
    """A refused connection or a read timeout is reported as the LLM being unavailable."""
    server = Server(error)
    with pytest.raises(LlmUnavailable, match=message) as caught:
        ask(provider_for(server, retries=0))
    assert caught.value.recoverable is True
    assert len(server.requests) == 1


def test_connection_error_then_success_is_retried(provider_for: Any) -> None:
    """A refused connection followed by an answer succeeds within the retry budget."""
    server = Server(httpx.ConnectError("connection refused"), completion("back"))
    assert ask(provider_for(server, retries=2)).text == "back"
    assert len(server.requests) == 2
