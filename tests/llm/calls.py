"""A weather tool, a call to it, and a request and a response around it: what the tests of
repairing calls (test_repair.py) and of tools given in the prompt (test_prompted.py) share."""

from __future__ import annotations

from chalie.llm.types import ChatRequest, ChatResponse, Message, ToolCall, ToolSpec, Usage

WEATHER = ToolSpec("weather", "The forecast for a city.",
                   {"type": "object", "properties": {"city": {"type": "string"}},
                    "required": ["city"]})
MEMORY = ToolSpec("memory", "Remember or recall a fact.", {"type": "object", "properties": {}})
PARIS = {"city": "Paris"}
CALL = '{"name": "weather", "arguments": {"city": "Paris"}}'


def request(*tools: ToolSpec, system: str = "You are Chalie.") -> ChatRequest:
    return ChatRequest(system=system, messages=(Message("user", "weather in Paris?"),),
                       tools=tools)


def response(text: str = "", *calls: ToolCall) -> ChatResponse:
    return ChatResponse(text=text, tool_calls=calls, usage=Usage(10, 5, 15),
                        finish_reason="tool_calls" if calls else "stop", latency_s=0.5,
                        reasoning="thinking")
