"""Tools given in the prompt to a model without native tool calling: the tools in the system
prompt, calls written as text read back, and a call's JSON never streamed to the person."""

from __future__ import annotations

import pytest

from chalie.llm.prompted import PromptedTools
from chalie.llm.types import ChatRequest, ChatResponse, TextSink, ToolCall
from chalie.prompts import Prompts
from tests.llm.calls import CALL, MEMORY, PARIS, WEATHER, request, response


class FakeProvider:
    """Records each request and answers with canned text, streamed in the given pieces."""

    def __init__(self, *pieces: str) -> None:
        self.pieces = pieces
        self.requests: list[ChatRequest] = []
        self.sinks: list[TextSink | None] = []
        self.closed = False

    def complete(self, request: ChatRequest, *, timeout_s: float,
                 on_text: TextSink | None = None) -> ChatResponse:
        self.requests.append(request)
        self.sinks.append(on_text)
        if on_text is not None:
            for piece in self.pieces:
                on_text(piece)
        return response("".join(self.pieces))

    def models(self, *, timeout_s: float) -> tuple[str, ...]:
        return ("qwen2.5:1.5b",)

    def close(self) -> None:
        self.closed = True


@pytest.fixture(scope="module")
def prompts() -> Prompts:
    return Prompts.load()


def test_the_shipped_prompt_puts_the_callers_system_prompt_first(prompts: Prompts) -> None:
    """tools_in_prompt renders with the system prompt, then the tools and how to call one."""
    text = prompts.render("tools_in_prompt", system="You are Chalie.", tools="TOOL LINES")
    assert text.startswith("You are Chalie.")
    assert text.index("TOOL LINES") < text.index('{"name": ')
    assert "plain text" in text


def test_tools_go_into_the_system_prompt_and_not_the_request(prompts: Prompts) -> None:
    """The model sees each tool as a compact JSON line in its system prompt, and no native tools."""
    inner = FakeProvider("Sunny.")
    asked = request(WEATHER, MEMORY)
    PromptedTools(inner, prompts).complete(asked, timeout_s=5)
    (sent,) = inner.requests
    assert sent.tools == ()
    assert sent.messages == asked.messages
    assert sent.system.startswith("You are Chalie.")
    assert ('{"name":"weather","description":"The forecast for a city.","parameters":'
            '{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}\n'
            '{"name":"memory","description":"Remember or recall a fact.","parameters":'
            '{"type":"object","properties":{}}}') in sent.system


def test_a_json_call_in_the_answer_becomes_a_tool_call_and_is_not_streamed(
    prompts: Prompts,
) -> None:
    """The model's JSON call runs as a call; the person never sees its JSON stream by."""
    inner = FakeProvider("  ", '{"name": "wea', 'ther", "arguments": {"city": "Paris"}}')
    streamed: list[str] = []
    answer = PromptedTools(inner, prompts).complete(request(WEATHER), timeout_s=5,
                                                    on_text=streamed.append)
    assert answer.tool_calls == (ToolCall("text_call_0", "weather", PARIS, '{"city":"Paris"}'),)
    assert (answer.text, answer.finish_reason) == ("", "tool_calls")
    assert streamed == []


@pytest.mark.parametrize("pieces", [("`", "``json\n", CALL, "\n```"),
                                    ("<tool", "_call>", CALL), ("[TOOL_", "CALLS] [", CALL, "]")])
def test_answers_that_start_like_a_call_are_held_back(
    prompts: Prompts, pieces: tuple[str, ...],
) -> None:
    """Fenced, tagged and Mistral calls are held back even when split mid-marker."""
    streamed: list[str] = []
    answer = PromptedTools(FakeProvider(*pieces), prompts).complete(
        request(WEATHER), timeout_s=5, on_text=streamed.append)
    assert [c.name for c in answer.tool_calls] == ["weather"]
    assert streamed == []


def test_a_plain_answer_streams_as_it_arrives(prompts: Prompts) -> None:
    """Text that is clearly not a call is passed on piece by piece, whitespace and all."""
    for pieces, expected in [(("It is ", "sunny ", "in Paris."), ["It is ", "sunny ", "in Paris."]),
                             (("\n", "<", "b>Sunny</b>"), ["\n<b>Sunny</b>"]),
                             (("`", "sunny`", " today"), ["`sunny`", " today"])]:
        streamed: list[str] = []
        answer = PromptedTools(FakeProvider(*pieces), prompts).complete(
            request(WEATHER), timeout_s=5, on_text=streamed.append)
        assert streamed == expected
        assert (answer.text, answer.tool_calls) == ("".join(pieces), ())


def test_without_tools_the_request_passes_through_untouched(prompts: Prompts) -> None:
    """A request offering no tools reaches the model as it is, streaming straight through."""
    inner = FakeProvider("{}")
    asked = request()
    streamed: list[str] = []
    answer = PromptedTools(inner, prompts).complete(asked, timeout_s=5, on_text=streamed.append)
    assert inner.requests[0] is asked
    assert streamed == ["{}"]
    assert answer.text == "{}"


def test_model_list_and_close_reach_the_wrapped_provider(prompts: Prompts) -> None:
    """models() answers with the wrapped provider's models; close() closes it."""
    inner = FakeProvider()
    wrapped = PromptedTools(inner, prompts)
    assert wrapped.models(timeout_s=1) == ("qwen2.5:1.5b",)
    wrapped.close()
    assert inner.closed
