"""A Session as a client sees it: the frames of a turn, the rows it stores, and how it survives
a failing model, a deadline and its own crash."""

from __future__ import annotations

from typing import Any

import pytest

from chalie.actors.session_messages import FrameRejected
from chalie.actors.store_writer_messages import CommitTurn
from chalie.llm.scripted import ScriptCall, ScriptedProvider, ScriptStep, ScriptUsage
from chalie.llm.types import ToolSpec
from chalie.prompts import Prompts
from chalie.store.effects import RememberFact
from chalie.store.event_log import INTERRUPTED
from chalie.tools.base import ToolContext, ToolOutcome
from tests.actors.conftest import BlockingProvider, RecorderActor, Recording

REMEMBER = ScriptCall("memory", {"action": "remember", "key": "Favourite colour", "value": "green"})


def answer(text: str, prompt: int = 10, completion: int = 2) -> ScriptStep:
    return ScriptStep(text=text, usage=ScriptUsage(prompt, completion))


def calls(*tool_calls: ScriptCall, prompt: int = 20, completion: int = 5) -> ScriptStep:
    return ScriptStep(tool_calls=tool_calls, usage=ScriptUsage(prompt, completion))


def shape(frames: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(f["type"], f["seq"]) for f in frames]


def test_plain_chat_gets_status_message_and_done_in_seq_order(start_tree: Any) -> None:
    """A chat the model answers without tools reaches the client as status, message, done."""
    tree = start_tree(ScriptedProvider([answer("Hello there.", 30, 7)]))
    tree.chat("hi", age_s=1.5)
    frames = tree.outbox.wait_for_type("done")
    exchange = frames[0]["exchange_id"]
    assert frames == [
        {"type": "status", "seq": 1, "stage": "processing", "exchange_id": exchange,
         "text": frames[0]["text"]},
        {"type": "status", "seq": 2, "stage": "retrieving_memory", "exchange_id": exchange},
        {"type": "message", "seq": 3, "blocks": [{"type": "text", "text": "Hello there."}],
         "exchange_id": exchange, "topic": None, "mode": "respond", "confidence": None,
         "metrics": {"tokens_total": 37, "tools": {}, "response_time_s": 1.5,
                     "prompt_tokens": 30, "completion_tokens": 7}},
        {"type": "done", "seq": 4, "duration_ms": 1500, "exchange_id": exchange},
    ]
    assert tree.rows("SELECT id, outcome, user_text, response_text, llm_calls, tokens_total "
                     "FROM turns") == [(exchange, "answered", "hi", "Hello there.", 1, 37)]


def test_answer_is_stored_before_its_message_frame_is_pushed(start_tree: Any) -> None:
    """By the time the client gets the message frame, the turn and its transcript are stored."""
    tree = start_tree(ScriptedProvider([answer("Stored first.")]))
    seen: dict[str, Any] = {}

    def look(channel: str, frames: list[dict[str, Any]]) -> None:
        if any(f["type"] == "message" for f in frames):
            seen["turns"] = tree.rows("SELECT outcome, response_text FROM turns")
            seen["transcript"] = tree.rows("SELECT role, text FROM transcript ORDER BY id")
            seen["logged"] = tree.rows("SELECT seq, type FROM events ORDER BY seq")

    tree.outbox.on_push = look
    tree.chat("remember this moment")
    tree.outbox.wait_for_type("done")
    assert seen == {
        "turns": [("answered", "Stored first.")],
        "transcript": [("user", "remember this moment"), ("assistant", "Stored first.")],
        "logged": [(1, "status"), (2, "status"), (3, "message"), (4, "done")],
    }


def test_remember_request_narrates_the_tool_and_stores_the_fact(start_tree: Any) -> None:
    """A model that calls memory(remember) narrates it, counts it in metrics and keeps the fact."""
    provider = ScriptedProvider([calls(REMEMBER), answer("I'll remember green.", 30, 3)])
    tree = start_tree(provider)
    tree.chat("my favourite colour is green")
    frames = tree.outbox.wait_for_type("done")
    exchange = frames[0]["exchange_id"]
    assert shape(frames) == [("status", 1), ("status", 2), ("act_narration", 3), ("message", 4),
                             ("done", 5)]
    assert frames[2] == {
        "type": "act_narration", "seq": 3, "step": 1, "tool": "memory", "exchange_id": exchange,
        "text": "Noting that Favourite colour is “green”…",
        "args": '{"action":"remember","key":"Favourite colour","value":"green"}',
    }
    assert frames[3]["metrics"] == {"tokens_total": 58, "tools": {"memory": 1},
                                    "response_time_s": 0.0, "prompt_tokens": 50,
                                    "completion_tokens": 8}
    assert tree.rows("SELECT turn_id, position, iteration, name, result, is_error "
                     "FROM tool_calls") == [
        (exchange, 0, 1, "memory", "remembered favorite color: green", 0)
    ]
    assert tree.rows("SELECT key, value, turn_id, superseded_at FROM knowledge") == [
        ("favorite color", "green", exchange, None)
    ]
    assert "-> remembered favorite color: green" in provider.requests[1].messages[0].content


def test_tool_call_with_invalid_json_gives_the_model_an_error_and_still_answers(
    start_tree: Any,
) -> None:
    """Arguments that are not JSON come back to the model as an error result; the turn answers."""
    broken = ScriptCall("memory", raw_args='{"action": "remember", ')
    provider = ScriptedProvider([calls(broken), answer("Sorry, I could not save that.")])
    tree = start_tree(provider)
    tree.chat("remember my colour")
    frames = tree.outbox.wait_for_type("done")
    assert shape(frames) == [("status", 1), ("status", 2), ("act_narration", 3), ("message", 4),
                             ("done", 5)]
    assert frames[3]["blocks"] == [{"type": "text", "text": "Sorry, I could not save that."}]
    second_prompt = provider.requests[1].messages[0].content
    assert '[1] memory {"action": "remember", \n-> error: arguments are not valid JSON' in (
        second_prompt
    )
    assert tree.rows("SELECT name, is_error FROM tool_calls") == [("memory", 1)]
    assert tree.rows("SELECT count(*) FROM knowledge") == [(0,)]


def test_llm_failure_ends_the_turn_with_a_recoverable_error_and_done(start_tree: Any) -> None:
    """When the model fails mid-turn the client gets a recoverable error with metrics, then done."""
    tree = start_tree(ScriptedProvider([calls(REMEMBER), ScriptStep(fail="model server down")]))
    tree.chat("my favourite colour is green", age_s=0.25)
    frames = tree.outbox.wait_for_type("done")
    exchange = frames[0]["exchange_id"]
    assert shape(frames) == [("status", 1), ("status", 2), ("act_narration", 3), ("error", 4),
                             ("done", 5)]
    assert frames[3] == {
        "type": "error", "seq": 4, "message": "model server down", "recoverable": True,
        "exchange_id": exchange,
        "metrics": {"tokens_total": 25, "tools": {"memory": 1}, "response_time_s": 0.25,
                    "prompt_tokens": 20, "completion_tokens": 5},
    }
    assert frames[4] == {"type": "done", "seq": 5, "duration_ms": 250, "exchange_id": exchange}
    assert tree.rows("SELECT outcome, error, response_text, llm_calls FROM turns") == [
        ("error", "model server down", None, 1)
    ]
    assert tree.rows("SELECT role FROM transcript") == [("user",)]


def test_turn_past_its_deadline_ends_with_a_timeout_error_and_done(start_tree: Any) -> None:
    """A model still thinking when the turn's time is up gives a timeout error and done."""
    provider = BlockingProvider("too late", "On time.")
    tree = start_tree(provider, threaded=True, act={"timeout_s": 30.0})
    tree.chat("slow question")
    provider.wait_entered()
    tree.clock.advance(31.0)
    frames = tree.outbox.wait_for_type("done")
    exchange = frames[0]["exchange_id"]
    assert frames[2:] == [
        {"type": "error", "seq": 3, "recoverable": True, "exchange_id": exchange,
         "message": "the turn took longer than 30s and was stopped",
         "metrics": {"tokens_total": 0, "tools": {}, "response_time_s": 31.0}},
        {"type": "done", "seq": 4, "duration_ms": 31000, "exchange_id": exchange},
    ]
    assert tree.rows("SELECT outcome, response_text FROM turns") == [("timeout", None)]
    provider.release()  # the late answer is dropped; the next chat is answered normally
    tree.chat("next question")
    frames = tree.outbox.wait_for_type("done", 2)
    assert shape(frames[4:]) == [("status", 5), ("status", 6), ("message", 7), ("done", 8)]
    assert frames[6]["blocks"] == [{"type": "text", "text": "On time."}]


def test_two_chats_are_answered_in_order_and_the_second_sees_the_first(start_tree: Any) -> None:
    """Back-to-back chats get their answers in order; the second prompt holds the first exchange."""
    provider = ScriptedProvider([answer("Nice to meet you, Ada."), answer("You are Ada.")])
    tree = start_tree(provider)
    tree.chat("I am Ada")
    tree.chat("who am I?")
    frames = tree.outbox.wait_for_type("done", 2)
    assert shape(frames) == [("status", 1), ("status", 2), ("message", 3), ("done", 4),
                             ("status", 5), ("status", 6), ("message", 7), ("done", 8)]
    assert [f["blocks"][0]["text"] for f in frames if f["type"] == "message"] == [
        "Nice to meet you, Ada.", "You are Ada."
    ]
    assert frames[0]["exchange_id"] != frames[4]["exchange_id"]
    assert "(this is the start of the conversation)" in provider.requests[0].messages[0].content
    assert "Person: I am Ada\nYou: Nice to meet you, Ada." in (
        provider.requests[1].messages[0].content
    )


def test_channels_are_answered_independently_with_their_own_seqs(start_tree: Any) -> None:
    """Two channels each get their own session, and each channel's frames start at seq 1."""
    tree = start_tree(ScriptedProvider([answer("A"), answer("B")]))
    tree.chat("one", channel="phone")
    tree.outbox.wait_for_type("done", channel="phone")
    tree.chat("two", channel="laptop")
    laptop = tree.outbox.wait_for_type("done", channel="laptop")
    assert shape(laptop) == [("status", 1), ("status", 2), ("message", 3), ("done", 4)]
    assert shape(tree.outbox.frames("phone")) == [("status", 1), ("status", 2), ("message", 3),
                                                  ("done", 4)]
    assert tree.rows("SELECT channel, response_text FROM turns ORDER BY channel") == [
        ("laptop", "B"), ("phone", "A")
    ]


def test_rejected_frame_gets_an_error_frame_outside_any_exchange(start_tree: Any) -> None:
    """A frame the edge could not accept is answered with an error naming why, tied to no turn."""
    tree = start_tree(ScriptedProvider([]))
    tree.deliver(FrameRejected("frame of 70000 bytes is over the 65536-byte limit"))
    frames = tree.outbox.wait_for_type("error")
    assert frames == [{
        "type": "error", "seq": 1, "recoverable": True, "exchange_id": None, "metrics": None,
        "message": "frame of 70000 bytes is over the 65536-byte limit",
    }]
    assert tree.rows("SELECT count(*) FROM turns") == [(0,)]


class RenderFailsOnce(Prompts):
    """Prompts whose first system prompt raises on the Session's own thread (right after the
    turn has opened its exchange), crashing the actor."""

    failures = 0

    def render(self, name: str, **values: str) -> str:
        if name == "act_system" and RenderFailsOnce.failures == 0:
            RenderFailsOnce.failures += 1
            raise RuntimeError("prompt file unreadable")
        return super().render(name, **values)

    @classmethod
    def fresh(cls) -> RenderFailsOnce:
        cls.failures = 0
        shipped = Prompts.load()
        return cls(shipped._templates, shipped._fragments)


@pytest.mark.allow_error_logs
def test_session_crash_mid_turn_is_restarted_and_the_turn_closed(start_tree: Any) -> None:
    """A Session that crashes mid-turn comes back, ends that turn with error + done, chats on."""
    tree = start_tree(ScriptedProvider([answer("Back again.")]), prompts=RenderFailsOnce.fresh())
    tree.chat("this one crashes")
    tree.outbox.wait_for_type("status")
    tree.clock.wait_for_timers(1)  # the supervisor has scheduled the restart
    assert tree.restarts("session") == 0.0
    tree.clock.advance(1.0)
    frames = tree.outbox.wait_for_type("done")
    exchange = frames[0]["exchange_id"]
    assert frames == [
        {"type": "status", "seq": 1, "stage": "processing", "exchange_id": exchange,
         "text": frames[0]["text"]},
        {"type": "status", "seq": 2, "stage": "retrieving_memory", "exchange_id": exchange},
        {"type": "error", "seq": 3, "message": INTERRUPTED, "recoverable": True,
         "exchange_id": exchange, "metrics": None},
        {"type": "done", "seq": 4, "duration_ms": 0, "exchange_id": exchange},
    ]
    assert tree.restarts("session") == 1.0
    tree.chat("are you there?")
    frames = tree.outbox.wait_for_type("done", 2)
    assert shape(frames[4:]) == [("status", 5), ("status", 6), ("message", 7), ("done", 8)]
    assert frames[6]["blocks"] == [{"type": "text", "text": "Back again."}]
    assert tree.rows("SELECT user_text, outcome FROM turns") == [("are you there?", "answered")]


@pytest.mark.allow_error_logs
def test_chat_sent_while_the_session_restarts_is_answered_by_the_new_one(
    start_tree: Any,
) -> None:
    """A chat arriving during the restart backoff is held and answered once the Session is back."""
    tree = start_tree(ScriptedProvider([answer("Still here.")]), prompts=RenderFailsOnce.fresh())
    tree.chat("this one crashes")
    tree.clock.wait_for_timers(1)
    tree.chat("hello again")
    tree.clock.advance(1.0)
    frames = tree.outbox.wait_for_type("done", 2)
    assert shape(frames) == [("status", 1), ("status", 2), ("error", 3), ("done", 4),
                             ("status", 5), ("status", 6), ("message", 7), ("done", 8)]
    assert frames[2]["exchange_id"] == frames[0]["exchange_id"]
    assert frames[6]["blocks"] == [{"type": "text", "text": "Still here."}]
    assert tree.restarts("session") == 1.0


class UnstorableTool:
    """A tool whose effect the store refuses (a fact with no value), so the turn cannot commit."""

    danger = "safe"
    spec = ToolSpec("jot", "Jot a note.", {"type": "object", "properties": {}})

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        return ToolOutcome("jotted", effects=(RememberFact(key="note", value=None),))  # type: ignore[arg-type]


@pytest.mark.allow_error_logs
def test_turn_whose_answer_cannot_be_stored_still_ends_with_done(start_tree: Any) -> None:
    """When the store refuses a turn, the client sees an error and then done for that turn."""
    provider = ScriptedProvider([calls(ScriptCall("jot", {})), answer("Jotted."), answer("Hi.")])
    tree = start_tree(provider, tools=[UnstorableTool()])
    tree.chat("jot this down")
    tree.outbox.wait_for_type("error")
    tree.chat("still there?")  # its frames come after anything the first turn still sends
    frames = tree.outbox.wait_for_type("message")
    first = [f for f in frames if f.get("exchange_id") == frames[0]["exchange_id"]]
    assert first[3]["message"] == (
        "the answer could not be stored: "
        "AttributeError(\"'NoneType' object has no attribute 'casefold'\")"
    )
    assert [f["type"] for f in first] == ["status", "status", "act_narration", "error", "done"]


def test_a_turn_the_store_never_confirms_ends_with_an_error_after_the_reply_timeout(
    start_tree: Any,
) -> None:
    """If the writer never answers a CommitTurn, the Session reports it after
    store.reply_timeout_s instead of waiting forever, and takes the next message."""
    tree = start_tree(ScriptedProvider([answer("Lost."), answer("Found.")]),
                      store={"reply_timeout_s": 30.0})
    swallowed = Recording()
    writer = tree.directory.get("store_writer")
    tree.directory.set("store_writer", RecorderActor.start(swallowed))  # a writer that never acks
    tree.chat("hello?")
    swallowed.wait_for(lambda xs: any(isinstance(x, CommitTurn) for x in xs), "the commit")
    tree.directory.set("store_writer", writer)
    tree.clock.advance(30.0)
    frames = tree.outbox.wait_for_type("done")
    exchange = next(x for x in swallowed.items if isinstance(x, CommitTurn)).record.id
    assert frames == [
        {"type": "error", "seq": 1, "recoverable": True, "exchange_id": exchange,
         "metrics": None,
         "message": "the answer could not be stored: the store did not confirm within 30s"},
        {"type": "done", "seq": 2, "duration_ms": 0, "exchange_id": exchange},
    ]
    tree.chat("again")
    assert tree.outbox.wait_for_type("done", 2)[-2]["blocks"] == [
        {"type": "text", "text": "Found."}
    ]
