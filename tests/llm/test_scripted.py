"""The scripted provider: deterministic LLM answers for tests and offline demos."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from chalie.errors import ConfigError, LlmBadResponse, LlmUnavailable
from chalie.llm.scripted import Script, ScriptedProvider
from chalie.llm.types import ChatRequest, Message, ToolCall, Usage


def _request(text: str = "hello") -> ChatRequest:
    return ChatRequest(system="sys", messages=(Message("user", text),))


def _provider(*steps: dict[str, Any], loop: bool = False) -> ScriptedProvider:
    script = msgspec.convert({"steps": list(steps), "loop": loop}, Script)
    return ScriptedProvider(script.steps, loop=script.loop)


def _ask(provider: ScriptedProvider, text: str = "hello") -> Any:
    return provider.complete(_request(text), timeout_s=1.0)


def test_steps_replay_in_order_and_requests_are_recorded() -> None:
    """Each request gets the next step's answer, and every request is kept for inspection."""
    provider = _provider(
        {"tool_calls": [{"name": "memory", "args": {"action": "recall", "query": "pet"}}]},
        {"text": "Your pet is Rex."},
    )
    first = _ask(provider, "first")
    second = _ask(provider, "second")
    assert first.tool_calls == (
        ToolCall("call_0", "memory", {"action": "recall", "query": "pet"},
                 '{"action":"recall","query":"pet"}'),
    )
    assert first.finish_reason == "tool_calls"
    assert second.text == "Your pet is Rex."
    assert second.tool_calls == ()
    assert second.finish_reason == "stop"
    assert [r.messages[0].content for r in provider.requests] == ["first", "second"]


def test_raw_args_are_sent_verbatim_and_bad_json_gives_no_args() -> None:
    """A step with raw_args that are not JSON yields a call with args None and the reason."""
    provider = _provider({"tool_calls": [{"name": "memory", "raw_args": '{"action": '}]})
    (call,) = _ask(provider).tool_calls
    assert call.args is None
    assert call.raw_args == '{"action": '
    assert call.args_error is not None
    assert "not valid JSON" in call.args_error


def test_valid_raw_args_are_parsed() -> None:
    """raw_args that are a JSON object come back as dict args with the exact raw text."""
    provider = _provider({"tool_calls": [{"name": "memory", "raw_args": '{"action":"recall"}'}]})
    (call,) = _ask(provider).tool_calls
    assert call == ToolCall("call_0", "memory", {"action": "recall"}, '{"action":"recall"}')


def test_fail_step_raises_llm_unavailable_then_the_script_continues() -> None:
    """A fail step makes that request fail recoverably with its reason; the next step follows."""
    provider = _provider({"fail": "LLM is down"}, {"text": "back again"})
    with pytest.raises(LlmUnavailable, match="LLM is down") as caught:
        _ask(provider)
    assert caught.value.recoverable is True
    assert _ask(provider).text == "back again"


def test_exhausted_script_raises_bad_response() -> None:
    """Once the steps are used up every further request fails saying so."""
    provider = _provider({"text": "only answer"})
    assert _ask(provider).text == "only answer"
    for _ in range(2):
        with pytest.raises(LlmBadResponse, match="1 steps are used up"):
            _ask(provider)
    assert len(provider.requests) == 3


def test_looping_script_starts_again() -> None:
    """With loop=True the answers cycle through the steps."""
    provider = _provider({"text": "one"}, {"text": "two"}, loop=True)
    assert [_ask(provider).text for _ in range(5)] == ["one", "two", "one", "two", "one"]


def test_empty_looping_script_still_fails_clearly() -> None:
    """A looping script with no steps fails instead of spinning."""
    with pytest.raises(LlmBadResponse, match="0 steps"):
        _ask(_provider(loop=True))


def test_given_usage_is_reported_as_is() -> None:
    """A step's usage is returned with its total and not marked as estimated."""
    provider = _provider({"text": "hi", "usage": {"prompt_tokens": 100, "completion_tokens": 7}})
    assert _ask(provider).usage == Usage(100, 7, 107, estimated=False)


def test_missing_usage_is_estimated_from_the_texts() -> None:
    """Without usage, tokens are estimated from the prompt and the answer (4 characters each)."""
    provider = _provider({"text": "twelve chars"})
    # "sys" -> 1, "sixteen chars!!!" -> 4 prompt tokens; "twelve chars" -> 3 completion tokens
    assert provider.complete(_request("sixteen chars!!!"), timeout_s=1.0).usage == Usage(
        5, 3, 8, estimated=True
    )


def test_from_file_loads_steps_and_loop(tmp_path: Path) -> None:
    """A script file's steps and loop flag drive the provider."""
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"steps": [{"text": "a"}, {"text": "b"}], "loop": True}))
    provider = ScriptedProvider.from_file(str(path))
    assert [_ask(provider).text for _ in range(3)] == ["a", "b", "a"]


@pytest.mark.parametrize(
    ("content", "problem"),
    [(None, "file not found"), ("{not json", "not a valid script"),
     ('{"steps": [{"txt": "typo"}]}', "not a valid script")],
    ids=["missing", "invalid-json", "unknown-field"],
)
def test_from_file_refuses_bad_scripts_naming_llm_script(
    tmp_path: Path, content: str | None, problem: str
) -> None:
    """A missing or unreadable script file is a configuration error about llm.script."""
    path = tmp_path / "script.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError) as caught:
        ScriptedProvider.from_file(str(path))
    assert caught.value.key == "llm.script"
    assert str(caught.value).startswith("config error: llm.script:")
    assert problem in caught.value.problem
