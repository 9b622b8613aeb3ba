"""Deterministic actions and retried chats as a client sees them: an `action` frame runs a skill
without the model, and a chat resent with the same client_id is answered once."""

from __future__ import annotations

from typing import Any

from chalie.llm.scripted import ScriptedProvider
from tests.actors.conftest import GatedProvider, answer, shape

PET = {"action": "remember", "key": "Pet", "value": "Rex the dog"}
PET_TEXT = '[action] memory {"action":"remember","key":"Pet","value":"Rex the dog"}'


def test_action_runs_the_skill_without_the_model(start_tree: Any) -> None:
    """A memory action stores the fact and answers with the tool's result, at zero tokens."""
    provider = ScriptedProvider([])
    tree = start_tree(provider)
    tree.action("memory", PET)
    frames = tree.outbox.wait_for_type("done")
    exchange = frames[0]["exchange_id"]
    assert frames == [
        {"type": "status", "seq": 1, "stage": "processing", "exchange_id": exchange,
         "text": '[action] memory {"action":"remember","key":"Pet","value":"Rex the dog"}'},
        {"type": "message", "seq": 2, "blocks": [{"type": "text", "text":
                                                  "remembered pet: Rex the dog"}],
         "exchange_id": exchange, "topic": None, "mode": "act", "confidence": None,
         "metrics": {"tokens_total": 0, "tools": {"memory": 1}, "response_time_s": 0.0}},
        {"type": "done", "seq": 3, "duration_ms": 0, "exchange_id": exchange},
    ]
    assert provider.requests == []
    assert tree.rows("SELECT key, value, turn_id FROM knowledge") == [
        ("pet", "Rex the dog", exchange)
    ]
    assert tree.rows("SELECT source, user_text, outcome, llm_calls, tokens_total FROM turns") == [
        ("action", PET_TEXT, "answered", 0, 0)
    ]
    assert tree.rows("SELECT name, args, result, is_error FROM tool_calls") == [
        ("memory", '{"action":"remember","key":"Pet","value":"Rex the dog"}',
         "remembered pet: Rex the dog", 0)
    ]


def test_action_naming_no_skill_gets_a_final_error_and_done(start_tree: Any) -> None:
    """An unknown skill is refused with a non-recoverable error listing the skills there are."""
    provider = ScriptedProvider([])
    tree = start_tree(provider)
    tree.action("weather", {"city": "Oslo"})
    frames = tree.outbox.wait_for_type("done")
    exchange = frames[0]["exchange_id"]
    assert frames[1:] == [
        {"type": "error", "seq": 2, "recoverable": False, "exchange_id": exchange,
         "message": "no skill named 'weather' (skills: memory, approval)",
         "metrics": {"tokens_total": 0, "tools": {}, "response_time_s": 0.0}},
        {"type": "done", "seq": 3, "duration_ms": 0, "exchange_id": exchange},
    ]
    assert provider.requests == []
    assert tree.rows("SELECT outcome, error FROM turns") == [
        ("error", "no skill named 'weather' (skills: memory, approval)")
    ]


def test_action_the_skill_refuses_gets_its_error(start_tree: Any) -> None:
    """A skill that rejects its parameters ends the action with that error, not recoverable."""
    tree = start_tree(ScriptedProvider([]))
    tree.action("memory", {"action": "remember", "key": "Pet"})
    frames = tree.outbox.wait_for_type("done")
    assert frames[1]["type"] == "error"
    assert frames[1]["message"] == "error: remember needs a non-empty string `value`"
    assert frames[1]["recoverable"] is False
    assert frames[1]["metrics"]["tools"] == {"memory": 1}
    assert tree.rows("SELECT count(*) FROM knowledge") == [(0,)]


def test_action_sent_during_a_turn_waits_until_that_turn_is_done(start_tree: Any) -> None:
    """An action arriving while the model thinks starts only after that turn's done frame."""
    provider = GatedProvider([answer("Hello!")])
    tree = start_tree(provider, threaded=True)
    tree.chat("hi")
    provider.wait_entered()
    tree.action("memory", PET)
    tree.settle()
    assert shape(tree.outbox.frames()) == [("status", 1), ("status", 2)]
    assert tree.rows("SELECT count(*) FROM knowledge") == [(0,)]
    provider.release()
    frames = tree.outbox.wait_for_type("done", 2)
    assert shape(frames) == [("status", 1), ("status", 2), ("message", 3), ("done", 4),
                             ("status", 5), ("message", 6), ("done", 7)]
    chat, action = frames[0]["exchange_id"], frames[4]["exchange_id"]
    assert chat != action
    assert frames[5]["blocks"] == [{"type": "text", "text": "remembered pet: Rex the dog"}]
    assert tree.rows("SELECT turn_id FROM knowledge") == [(action,)]
    assert tree.rows("SELECT id, user_text FROM turns ORDER BY rowid") == [
        (chat, "hi"), (action, PET_TEXT)
    ]


def test_chat_resent_while_in_flight_is_answered_once(start_tree: Any) -> None:
    """Two chats with the same client_id back to back make one turn and one model call."""
    provider = GatedProvider([answer("Hi, once."), answer("Second question answered.")])
    tree = start_tree(provider, threaded=True)
    tree.chat("hello", client_id="c-1")
    provider.wait_entered()
    tree.chat("hello", client_id="c-1")
    tree.settle()
    provider.release()
    tree.outbox.wait_for_type("done")
    tree.chat("another question", client_id="c-2")  # comes after anything the retry could send
    frames = tree.outbox.wait_for_type("done", 2)
    assert shape(frames) == [("status", 1), ("status", 2), ("message", 3), ("done", 4),
                             ("status", 5), ("status", 6), ("message", 7), ("done", 8)]
    assert [f["blocks"][0]["text"] for f in frames if f["type"] == "message"] == [
        "Hi, once.", "Second question answered."
    ]
    assert len(provider.requests) == 2
    assert tree.rows("SELECT client_id, user_text FROM turns ORDER BY client_id") == [
        ("c-1", "hello"), ("c-2", "another question")
    ]


def test_chat_resent_after_it_was_answered_gets_the_first_frames_again(start_tree: Any) -> None:
    """A chat retried with a stored client_id starts no turn; the client gets the first turn's
    frames again, with their original seqs."""
    provider = ScriptedProvider([answer("Answered once.")])
    tree = start_tree(provider)
    tree.chat("hello", client_id="c-1")
    first = tree.outbox.wait_for_type("done")
    tree.chat("hello", client_id="c-1")
    frames = tree.outbox.wait_for_type("done", 2)
    assert shape(first) == [("status", 1), ("status", 2), ("message", 3), ("done", 4)]
    assert frames == first + first
    assert len(provider.requests) == 1
    assert tree.rows("SELECT client_id, outcome FROM turns") == [("c-1", "answered")]
    assert tree.rows("SELECT max(seq) FROM events") == [(4,)]
