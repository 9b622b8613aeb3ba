"""The critic's pure part: which calls it checks, what it asks the light model, how it reads the
answer, and what a verdict puts in the turn's trail or in front of the person."""

from __future__ import annotations

from typing import Any

import pytest

from chalie.act import critic
from chalie.act.critic import Checked, Critic, Critique
from chalie.act.loop import ActLoop
from chalie.config import CognitionConfig
from chalie.errors import LlmUnavailable, StructuredOutputError
from chalie.frames import Escalation
from chalie.llm.types import ChatRequest, ChatResponse, ToolCall, Usage
from chalie.prompts import Prompts

PROMPTS = Prompts.load()
BOOK = ToolCall("call_7", "book_meeting", {"day": "monday"}, '{"day":"monday"}')


def cognition(**values: Any) -> CognitionConfig:
    settings: dict[str, Any] = {
        "topic_threshold": 0.3, "topic_cosine": 0.5, "recent_topics": 20, "focus_after": 3,
        "silence_gap_s": 2700.0, "gist_ttl_s": 1800.0, "social_phrases": [],
        "social_max_chars": 40, "critic": True, "consequential": [],
    }
    return CognitionConfig(**{**settings, **values})


def make_loop(text: str = "Book a meeting with Alice on Monday") -> ActLoop:
    return ActLoop(prompts=PROMPTS, user_text=text, history=(), tools=(), max_iterations=3,
                   max_result_chars=100, now_text="2024-05-01 10:00 UTC")


def reply(text: str, tokens: int = 9) -> ChatResponse:
    return ChatResponse(text, (), Usage(tokens - 2, 2, tokens), "stop", 0.1)


def body(request: ChatRequest) -> str:
    (message,) = request.messages
    return message.content


# --- which calls ----------------------------------------------------------------------------------

def test_critic_is_off_without_config_or_when_configured_off() -> None:
    """No [cognition] section, or critic = false, means no critic at all."""
    assert Critic.of(None, PROMPTS) is None
    assert Critic.of(cognition(critic=False, consequential=["book_meeting"]), PROMPTS) is None
    on = Critic.of(cognition(consequential=["book_meeting"]), PROMPTS)
    assert on == Critic(PROMPTS, frozenset({"book_meeting"}))


def test_confirm_tools_and_named_tools_are_checked_and_safe_ones_are_not() -> None:
    """A `confirm` tool is always consequential; a safe one only when the config names it."""
    on = Critic(PROMPTS, frozenset({"book_meeting"}))
    assert on.checks("send_email", "confirm")
    assert on.checks("book_meeting", "safe")
    assert not on.checks("memory", "safe")


# --- the request ----------------------------------------------------------------------------------

def test_request_holds_the_message_the_steering_the_call_and_its_result() -> None:
    """The light model reads what the person asked (and added mid-turn), the call and what it
    returned, and must answer with the critique schema."""
    loop = make_loop()
    loop.steer("make it 3pm")
    request = Critic(PROMPTS).request(loop, BOOK, "booked: Tuesday 15:00 with Bob")
    assert request.response_format == critic.FORMAT
    assert request.tools == ()
    assert body(request) == PROMPTS.render(
        "critic", user_text="Book a meeting with Alice on Monday", steering="- make it 3pm",
        tool="book_meeting", args='{"day":"monday"}', result="booked: Tuesday 15:00 with Bob")
    assert "book_meeting {\"day\":\"monday\"}\n\nWhat it returned:\nbooked: Tuesday" \
        in body(request)


def test_request_without_steering_says_nothing_was_added() -> None:
    """With no mid-turn words the steering section reads "(nothing)"; no args read "{}"."""
    call = ToolCall("c", "book_meeting", {}, "")
    text = body(Critic(PROMPTS).request(make_loop(), call, "done"))
    assert "What the person added while the assistant worked:\n(nothing)\n" in text
    assert "book_meeting {}\n" in text


def test_critique_schema_allows_exactly_three_verdicts_and_a_reason() -> None:
    """The schema the model must follow: a closed object with a verdict enum and a reason."""
    schema = critic.FORMAT.schema
    assert critic.FORMAT.name == "critique"
    assert schema["required"] == ["verdict", "reason"]
    assert schema["additionalProperties"] is False
    assert sorted(schema["properties"]["verdict"]["enum"]) == ["correctable", "needs_attention",
                                                               "ok"]


# --- reading the reply ----------------------------------------------------------------------------

def test_reply_is_read_with_a_lenient_verdict() -> None:
    """A fenced reply and "Needs attention" spelled loosely still read as the verdict."""
    text = '```json\n{"verdict": "Needs Attention", "reason": "  It is  Tuesday. "}\n```'
    assert critic.parse(text) == Critique("needs_attention", "It is Tuesday.")
    assert critic.parse('{"verdict": "ok", "reason": ""}') == Critique("ok", "")
    assert critic.parse('{"verdict": "correctable", "reason": "x"}').verdict == "correctable"


def test_a_long_reason_is_cut() -> None:
    """A reason longer than the limit is cut, so the frame and the trail stay short."""
    reason = critic.parse('{"verdict": "correctable", "reason": "' + "a" * 900 + '"}').reason
    assert reason == "a" * critic.MAX_REASON_CHARS + "…"


@pytest.mark.parametrize(("text", "why"), [
    ('{"verdict": "maybe", "reason": "x"}', "schema"),
    ('{"verdict": "needs_attention", "reason": ""}', "needs a reason"),
    ('{"verdict": "ok"}', "schema"),
    ("looks fine to me", "no JSON object"),
])
def test_unusable_replies_are_refused_with_the_reason(text: str, why: str) -> None:
    """An unknown verdict, a missing reason, or no JSON at all is a StructuredOutputError."""
    with pytest.raises(StructuredOutputError, match=why):
        critic.parse(text)


def test_check_turns_every_failure_into_no_verdict() -> None:
    """A provider that fails, or a reply that cannot be read, gives a Checked with no critique
    and an error saying why; the tokens of a reply that came are kept."""
    request = Critic(PROMPTS).request(make_loop(), BOOK, "booked")

    def down(_: ChatRequest) -> ChatResponse:
        raise LlmUnavailable("connection refused")

    failed = critic.check(down, request)
    assert failed == Checked(None, None, "the check failed: connection refused")
    garbled = critic.check(lambda _: reply("sure"), request)
    assert garbled.response == reply("sure")
    assert garbled.critique is None
    assert garbled.error.startswith("the check's reply could not be read: the reply holds no")
    fine = critic.check(lambda _: reply('{"verdict": "ok", "reason": ""}'), request)
    assert fine.critique == Critique("ok", "")
    assert fine.error == ""


# --- what a verdict does --------------------------------------------------------------------------

def test_ok_adds_only_the_tokens() -> None:
    """An ok verdict puts nothing in the trail; its call counts in the turn's metrics."""
    loop = make_loop()
    shown = critic.absorb(loop, BOOK, Checked(reply("{}", 11), Critique("ok", "")),
                          exchange_id="t1")
    assert shown is None
    assert loop.trail == []
    assert (loop.metrics().tokens_total, loop.metrics().llm_calls) == (11, 1)


def test_correctable_puts_the_critique_in_the_trail() -> None:
    """The model's next request shows the critique, numbered like any trail entry."""
    loop = make_loop()
    shown = critic.absorb(loop, BOOK, Checked(reply("{}"), Critique("correctable", "Wrong day.")),
                          exchange_id="t1")
    assert shown is None
    assert loop.render_trail() == "[1] " + PROMPTS.fragment(
        "note_critic_correctable", name="book_meeting", reason="Wrong day.")
    assert "The problem: Wrong day." in loop.render_trail()


def test_needs_attention_escalates_to_the_person_and_tells_the_model() -> None:
    """The person gets an escalation that waits for nothing; the model reads the critique."""
    loop = make_loop()
    checked = Checked(reply("{}"), Critique("needs_attention", "It booked Tuesday, not Monday."))
    shown = critic.absorb(loop, BOOK, checked, exchange_id="t1")
    assert shown == Escalation(
        content="Please check: It booked Tuesday, not Monday. (after book_meeting)",
        approval_id="critic-call_7", tool="book_meeting", args='{"day":"monday"}',
        expires_in_s=0.0, exchange_id="t1")
    assert loop.render_trail() == "[1] " + PROMPTS.fragment(
        "note_critic_attention", name="book_meeting", reason="It booked Tuesday, not Monday.")


def test_a_failed_check_changes_nothing_but_is_logged(log_records: list[Any]) -> None:
    """No verdict: no trail entry, no frame, a warning naming the tool; no tokens if no reply."""
    loop = make_loop()
    assert critic.absorb(loop, BOOK, Checked(None, None, "the check failed: down"),
                         exchange_id="t1") is None
    assert loop.trail == []
    assert loop.metrics().llm_calls == 0
    warnings = [r.getMessage() for r in log_records if r.levelname == "WARNING"]
    assert any("critic_failed" in w and "book_meeting" in w for w in warnings)
