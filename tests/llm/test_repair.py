"""Tool calling that survives small models: arguments repaired, calls written as text read back."""

from __future__ import annotations

import logging
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalie.llm.repair import calls_in_text, normalise, repair_arguments
from chalie.llm.types import ChatRequest, JsonSchemaFormat, Message, ToolCall, Usage
from tests.llm.calls import CALL, MEMORY, PARIS, WEATHER, request, response

TOOLS = ("weather", "memory")


def repaired_events(records: list[logging.LogRecord]) -> list[dict[str, Any]]:
    return [r.msg for r in records
            if isinstance(r.msg, dict) and r.msg.get("event") == "tool_call_repaired"]


# --- repair_arguments ---------------------------------------------------------------------------

@pytest.mark.parametrize(("raw", "expected"), [
    ('{"city": "Paris"}', PARIS),
    ('  {"city": "Paris"}\n', PARIS),
    ("", {}),
    ("  \n", {}),
    ('{"arguments": "{\\"a\\": 1}"}', {"arguments": '{"a": 1}'}),  # only a top-level string
    ('{"note": "it\'s True, None of that {"}', {"note": "it's True, None of that {"}),
])
def test_strict_json_objects_are_taken_as_sent(raw: str, expected: dict[str, Any]) -> None:
    """Valid JSON objects (and no arguments at all) are read without counting as repaired."""
    assert repair_arguments(raw) == (expected, None, False)


@pytest.mark.parametrize(("raw", "expected"), [
    ('```json\n{"city": "Paris"}\n```', PARIS),
    ('```\n{"city": "Paris"}\n```', PARIS),
    ('Sure! Here are the arguments: {"city": "Paris"} Hope that helps.', PARIS),
    ('{"days": [1, 2,], "city": "Paris",}', {"days": [1, 2], "city": "Paris"}),
    ('{"days": [1, 2 ,\n ] ,\n}', {"days": [1, 2]}),
    ("{'city': 'Paris'}", PARIS),
    ("{'text': 'it\\'s here'}", {"text": "it's here"}),
    ("{'text': 'say \"hi\"'}", {"text": 'say "hi"'}),
    ("{'text': \"it's fine\", 'path': 'C:\\\\tmp'}", {"text": "it's fine", "path": "C:\\tmp"}),
    ('{"a": True, "b": False, "c": None}', {"a": True, "b": False, "c": None}),
    ("{'a': 'True', \"b\": True, \"c\": [None]}", {"a": "True", "b": True, "c": [None]}),
    ('{city: "Paris", days : 3, _unit_2: "C"}', {"city": "Paris", "days": 3, "_unit_2": "C"}),
    ('"{\\"city\\": \\"Paris\\"}"', PARIS),
    ('"{\'city\': \'Paris\',}"', PARIS),
    ('""', {}),
    ('{"text": "line one\nline two\tend"}', {"text": "line one\nline two\tend"}),
    ("```python\n{'city': 'Paris', 'metric': True, 'n': 1e3,}\n```",
     {"city": "Paris", "metric": True, "n": 1000.0}),
])
def test_what_small_models_send_is_repaired(raw: str, expected: dict[str, Any]) -> None:
    """Fences, prose, trailing commas, Python quotes and literals, bare keys and double encoding
    are all read as the object the model meant."""
    assert repair_arguments(raw) == (expected, None, True)


@pytest.mark.parametrize(("raw", "why"), [
    ("Paris, please", "no JSON object"),
    ("[1, 2]", "must be a JSON object, got an array"),
    ("42", "must be a JSON object, got a number"),
    ('"Paris"', "a JSON string, not an object"),
    ('{"city": "Paris"', "never closed"),
    ('{"city": Paris}', "not valid JSON, even repaired"),
    ("{'text': 'don't'}", "never closed"),
    ("__import__('os').system('true')", "no JSON object"),
    ('{"a": "' + "x" * 100_001, "too long"),
])
def test_unrepairable_arguments_say_why(raw: str, why: str) -> None:
    """Arguments that are no JSON object, even repaired, come back as an error that says why."""
    args, error, repaired = repair_arguments(raw)
    assert (args, repaired) == (None, False)
    assert error is not None
    assert why in error


def test_adversarial_arguments_are_refused_quickly() -> None:
    """Deep nesting, endless brackets and unclosed quotes end in an error, not a hang or crash."""
    for raw in ("[" * 100_000, "{" * 99_999, "{'" * 49_999, "{\"a\":" * 20_000 + "1",
                "{" + "a:" * 49_999, '"\ud800"', "{'\ud800': 1}"):
        args, error, _ = repair_arguments(raw)
        assert args is None
        assert error


JSON_ISH = st.text(alphabet=st.sampled_from(list("{}[]\"':,\\ \n`TrueFalsNonab1-_.x")),
                   max_size=60)


@given(st.one_of(st.text(max_size=200), JSON_ISH))
def test_repair_never_raises_and_answers_either_args_or_an_error(raw: str) -> None:
    """Whatever a model sends, the answer is an object or a reason, never an exception."""
    args, error, repaired = repair_arguments(raw)
    if args is None:
        assert isinstance(error, str)
        assert error
        assert repaired is False
    else:
        assert isinstance(args, dict)
        assert error is None
        msgspec.json.encode(args)  # what was read can be sent back as JSON


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=12,
)


@given(st.dictionaries(st.text(max_size=10), JSON_VALUES, max_size=5))
def test_strict_json_objects_round_trip_unchanged(value: dict[str, Any]) -> None:
    """Any valid JSON object comes back equal and not marked repaired."""
    assert repair_arguments(msgspec.json.encode(value).decode()) == (value, None, False)


# --- calls_in_text ------------------------------------------------------------------------------

def only_call(found: tuple[tuple[ToolCall, ...], str] | None) -> tuple[ToolCall, str]:
    assert found is not None
    calls, rest = found
    assert len(calls) == 1
    return calls[0], rest


@pytest.mark.parametrize(("text", "rest"), [
    (CALL, ""),
    (f"```json\n{CALL}\n```", ""),
    (f"Let me check the forecast.\n```json\n{CALL}\n```\n", "Let me check the forecast."),
    (f"Let me check. {CALL}", "Let me check."),
    (f"<tool_call>\n{CALL}\n</tool_call>", ""),
    (f"I will look.\n<tool_call>\n{CALL}", "I will look."),
    (f"[TOOL_CALLS] [{CALL}]", ""),
    (f"[TOOL_CALLS]{CALL}", ""),
    (f"[{CALL}]", ""),
    ('{"tool": "weather", "args": {"city": "Paris"}}', ""),
    ('{"function": "weather", "parameters": {"city": "Paris"}}', ""),
    ('{"name": "weather", "input": {"city": "Paris"}}', ""),
    ('{"type": "function", "id": "c1", '
     '"function": {"name": "weather", "arguments": "{\\"city\\": \\"Paris\\"}"}}', ""),
    ('{"name": "weather", "arguments": "{\'city\': \'Paris\',}"}', ""),
    ("{'name': 'weather', 'arguments': {'city': 'Paris'}}", ""),
])
def test_a_call_written_as_text_is_read_in_every_syntax(text: str, rest: str) -> None:
    """Bare, fenced, tagged (Hermes/Qwen), Mistral and OpenAI-shaped calls all become a call."""
    call, remaining = only_call(calls_in_text(text, TOOLS))
    assert call == ToolCall("text_call_0", "weather", PARIS, '{"city":"Paris"}')
    assert remaining == rest


def test_several_calls_in_text_are_numbered_in_order() -> None:
    """Two tagged calls, or a list of two, become two calls with ids in the order written."""
    memory = '{"name": "memory", "arguments": {"action": "recall", "key": "home"}}'
    for text in (f"<tool_call>{CALL}</tool_call>\n<tool_call>{memory}</tool_call>",
                 f"[TOOL_CALLS] [{CALL}, {memory}]"):
        found = calls_in_text(text, TOOLS)
        assert found is not None
        calls, rest = found
        assert [(c.call_id, c.name) for c in calls] == [("text_call_0", "weather"),
                                                        ("text_call_1", "memory")]
        assert calls[1].args == {"action": "recall", "key": "home"}
        assert rest == ""


def test_a_call_without_arguments_gets_an_empty_object() -> None:
    """{"name": "memory"} and "arguments": null are calls with no arguments."""
    for text in ('{"name": "memory"}', '{"name": "memory", "arguments": null}'):
        call, _ = only_call(calls_in_text(text, TOOLS))
        assert (call.args, call.raw_args, call.args_error) == ({}, "{}", None)


def test_a_text_call_with_unreadable_arguments_is_a_call_with_an_error() -> None:
    """The model meant a call: it is answered with an error naming the problem, not shown."""
    call, _ = only_call(calls_in_text('{"name": "weather", "arguments": "Paris"}', TOOLS))
    assert (call.name, call.args, call.raw_args) == ("weather", None, "Paris")
    assert call.args_error is not None
    assert "no JSON object" in call.args_error
    call, _ = only_call(calls_in_text('{"name": "weather", "arguments": [1]}', TOOLS))
    assert (call.args, call.raw_args) == (None, "[1]")


@pytest.mark.parametrize("text", [
    "It will be sunny in Paris tomorrow.",
    '{"name": "search", "arguments": {"q": "Paris"}}',  # not an offered tool
    '{"name": "weather", "summary": "sunny"}',  # an answer that holds a name
    '{"name": "weather", "arguments": {}, "tool": "memory"}',  # two names: ambiguous
    '[{"name": "weather", "arguments": {}}, {"city": "Paris"}]',
    '{"answer": {"name": "weather", "arguments": {"city": "Paris"}}}',  # quoting a call
    '{"episodes": [{"text": "Rex is a dog", "salience": 0.8}]}',  # a structured answer
    "Use {city} as the placeholder, and [1] for the footnote.",
    "<tool_call>not json</tool_call>",
])
def test_text_that_is_not_a_call_to_an_offered_tool_stays_an_answer(text: str) -> None:
    """Only a JSON call naming one of the request's tools counts."""
    assert calls_in_text(text, TOOLS) is None


def test_no_offered_tools_means_no_calls() -> None:
    """Without tools, even a perfect call is just text."""
    assert calls_in_text(CALL, ()) is None


def test_a_call_after_unclosed_brackets_in_prose_is_still_found() -> None:
    """Prose with a stray bracket or apostrophe inside braces does not hide a later call."""
    call, rest = only_call(calls_in_text(f"Hmm {{don't [know\n<tool_call>{CALL}</tool_call>",
                                         TOOLS))
    assert call.name == "weather"
    assert rest == "Hmm {don't [know"


# --- normalise ----------------------------------------------------------------------------------

def test_good_responses_come_back_as_the_same_object() -> None:
    """A plain answer, a good native call and a structured answer are left exactly as they are."""
    good_call = ToolCall("c1", "weather", PARIS, '{"city": "Paris"}')
    structured = ChatRequest(system="s", messages=(Message("user", "u"),),
                             response_format=JsonSchemaFormat("call", {"type": "object"}))
    cases = [
        (response("Sunny."), request(WEATHER)),
        (response("", good_call), request(WEATHER)),
        (response(CALL, good_call), request(WEATHER)),  # native calls win over text
        (response(CALL), structured),
        (response('{"name": "weather", "arguments": "Paris"}',
                  ToolCall("c1", "weather", None, "Paris", "not JSON")), request(WEATHER)),
    ]
    for answer, asked in cases:
        assert normalise(answer, asked) is answer


def test_repairable_native_arguments_are_repaired_and_logged_without_content(
    log_records: list[logging.LogRecord],
) -> None:
    """A native call whose arguments were fenced and single-quoted runs with the meant object."""
    broken = ToolCall("c1", "weather", None, "```json\n{'city': 'Paris',}\n```", "not JSON")
    fixed = normalise(response("", broken), request(WEATHER))
    assert fixed.tool_calls == (ToolCall("c1", "weather", PARIS, '{"city":"Paris"}'),)
    assert (fixed.text, fixed.finish_reason, fixed.usage) == ("", "tool_calls", Usage(10, 5, 15))
    events = repaired_events(log_records)
    assert [(e["kind"], e["tool"]) for e in events] == [
        ("fence+single_quotes+trailing_comma", "weather")]
    assert "Paris" not in repr(events)


def test_a_call_written_as_text_becomes_a_tool_call(log_records: list[logging.LogRecord]) -> None:
    """With tools offered and none called natively, a call in the text is made a tool call."""
    answer = response(f"Checking.\n<tool_call>\n{CALL}\n</tool_call>")
    read = normalise(answer, request(WEATHER, MEMORY))
    assert read.tool_calls == (ToolCall("text_call_0", "weather", PARIS, '{"city":"Paris"}'),)
    assert (read.text, read.finish_reason) == ("Checking.", "tool_calls")
    assert (read.usage, read.latency_s, read.reasoning) == (answer.usage, 0.5, "thinking")
    assert [(e["kind"], e["tool"]) for e in repaired_events(log_records)] == [
        ("text_call", "weather")]
