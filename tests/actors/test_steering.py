"""How a running turn is redirected, as a client sees it: words the person sends mid-turn reach
the model's next request and drop the calls it chose before them, a cancel phrase stops the
turn, and the loop's own limits (a repeated call, the iteration cap) force one final answer.
Messages with nothing to answer end at once, without the model."""

from __future__ import annotations

from typing import Any

import pytest

from chalie.llm.scripted import ScriptCall, ScriptedProvider
from chalie.prompts import Prompts
from tests.actors.conftest import GatedExecutor, GatedProvider, answer, calls, prompt, shape

STEERING = ("MID-TURN STEERING from the person, sent while you were working; it takes precedence "
            "over the message above:\n")
DROPPED = "not run: the person sent new instructions first"
COLOUR = ScriptCall("memory", {"action": "remember", "key": "Favourite colour", "value": "green"})
NAME = ScriptCall("memory", {"action": "remember", "key": "Name", "value": "Ada"})
COLOUR_ARGS = '{"action":"remember","key":"Favourite colour","value":"green"}'
NAME_ARGS = '{"action":"remember","key":"Name","value":"Ada"}'


def test_steering_during_a_model_call_reaches_the_next_request_and_drops_its_calls(
    start_tree: Any,
) -> None:
    """Words sent while the model thinks reach its next request; the calls and draft it had
    chosen before them are neither run nor sent to the person."""
    provider = GatedProvider([calls(COLOUR, text="Saving green."), answer("Blue it is.", 30, 4)])
    tree = start_tree(provider, threaded=True)
    tree.chat("my favourite colour is green")
    provider.wait_entered()
    tree.steer("actually, make it blue")
    tree.settle()  # the steering is in before the held answer comes back
    provider.release()
    frames = tree.outbox.wait_for_type("done")
    exchange = frames[0]["exchange_id"]
    assert shape(frames) == [("status", 1), ("status", 2), ("message", 3), ("done", 4)]
    assert frames[2]["blocks"] == [{"type": "text", "text": "Blue it is."}]  # no act_narration
    assert frames[2]["metrics"] == {"tokens_total": 59, "tools": {}, "response_time_s": 0.0,
                                    "prompt_tokens": 50, "completion_tokens": 9}
    second = provider.requests[1]
    assert prompt(second).endswith(
        "# Your work on this message so far\n\n"
        f"[1] {STEERING}actually, make it blue\n\n"
        "[2] Your draft answer before the steering (not sent): Saving green.\n\n"
        f"[3] memory {COLOUR_ARGS}\n-> {DROPPED}"
    )
    assert [t.name for t in second.tools] == ["memory"]  # it may still use tools
    assert tree.rows("SELECT iteration, name, args, result, is_error, ran, approval "
                     "FROM tool_calls") == [(0, "memory", COLOUR_ARGS, DROPPED, 1, 0, None)]
    assert tree.rows("SELECT turn_id, position, text, after_iteration FROM steering") == [
        (exchange, 0, "actually, make it blue", 0)
    ]
    assert tree.rows("SELECT outcome, llm_calls, response_text FROM turns") == [
        ("answered", 2, "Blue it is.")
    ]
    assert tree.rows("SELECT count(*) FROM knowledge") == [(0,)]


def test_steering_while_a_tool_runs_drops_the_calls_queued_behind_it(start_tree: Any) -> None:
    """Steering while one tool call runs lets it finish but drops the call queued behind it,
    and the model's next request shows both outcomes after the steering."""
    pool = GatedExecutor(2)  # job 0: the context; 1: the first LLM call; 2: the first tool call
    provider = ScriptedProvider([calls(NAME, COLOUR), answer("Saved your name only.")])
    tree = start_tree(provider, pool=pool)
    tree.chat("I'm Ada and I like green")
    pool.wait_entered(2)
    tree.steer("don't save my colour")
    tree.settle()
    pool.release(2)
    frames = tree.outbox.wait_for_type("done")
    exchange = frames[0]["exchange_id"]
    assert shape(frames) == [("status", 1), ("status", 2), ("act_narration", 3), ("message", 4),
                             ("done", 5)]
    assert frames[2]["text"] == "Noting that Name is “Ada”…"
    assert frames[2]["args"] == NAME_ARGS
    assert frames[3]["metrics"]["tools"] == {"memory": 1}
    assert prompt(provider.requests[1]).endswith(
        f"[1] {STEERING}don't save my colour\n\n"
        f"[2] memory {COLOUR_ARGS}\n-> {DROPPED}\n\n"
        f"[3] memory {NAME_ARGS}\n-> remembered name: Ada"
    )
    assert tree.rows("SELECT position, iteration, args, result, ran FROM tool_calls "
                     "ORDER BY position") == [
        (0, 1, COLOUR_ARGS, DROPPED, 0),
        (1, 1, NAME_ARGS, "remembered name: Ada", 1),
    ]
    assert tree.rows("SELECT text, after_iteration FROM steering") == [
        ("don't save my colour", 1)
    ]
    assert tree.rows("SELECT key, value, turn_id FROM knowledge") == [("name", "Ada", exchange)]


def test_steering_with_no_turn_running_is_answered_as_a_chat(start_tree: Any) -> None:
    """An act_steer frame that arrives when nothing runs starts a turn with its text."""
    provider = ScriptedProvider([answer("It is sunny.")])
    tree = start_tree(provider)
    tree.steer("what's the weather like?")
    frames = tree.outbox.wait_for_type("done")
    assert shape(frames) == [("status", 1), ("status", 2), ("message", 3), ("done", 4)]
    assert frames[2]["blocks"] == [{"type": "text", "text": "It is sunny."}]
    assert "# The person's message\n\nwhat's the weather like?\n\n" in prompt(provider.requests[0])
    assert tree.rows("SELECT source, user_text, outcome FROM turns") == [
        ("text", "what's the weather like?", "answered")
    ]
    assert tree.rows("SELECT count(*) FROM steering") == [(0,)]


@pytest.mark.parametrize("send", ["steer", "chat"])
def test_cancel_phrase_during_a_turn_stops_it_without_another_model_call(
    start_tree: Any, send: str,
) -> None:
    """A cancel phrase sent mid-turn, as steering or as a chat, ends the turn with "Okay, I've
    stopped." and the late answer of the model is dropped unrun."""
    provider = GatedProvider([calls(COLOUR), answer("Hello again.")])
    tree = start_tree(provider, threaded=True)
    tree.chat("my favourite colour is green", age_s=2.0)
    provider.wait_entered()
    getattr(tree, send)("Never mind!")
    frames = tree.outbox.wait_for_type("done")
    exchange = frames[0]["exchange_id"]
    assert frames == [
        {"type": "status", "seq": 1, "stage": "processing", "exchange_id": exchange,
         "text": frames[0]["text"]},
        {"type": "status", "seq": 2, "stage": "retrieving_memory", "exchange_id": exchange},
        {"type": "message", "seq": 3, "blocks": [{"type": "text", "text": "Okay, I've stopped."}],
         "exchange_id": exchange, "topic": None, "mode": "acknowledge", "confidence": None,
         "metrics": {"tokens_total": 0, "tools": {}, "response_time_s": 2.0}},
        {"type": "done", "seq": 4, "duration_ms": 2000, "exchange_id": exchange},
    ]
    assert tree.rows("SELECT outcome, response_text, llm_calls FROM turns") == [
        ("cancelled", "Okay, I've stopped.", 0)
    ]
    assert tree.rows("SELECT turn_id, text, after_iteration FROM steering") == [
        (exchange, "Never mind!", 0)
    ]
    provider.release()  # the cancelled turn's late answer arrives and is dropped
    tree.chat("hello")
    frames = tree.outbox.wait_for_type("done", 2)
    assert shape(frames[4:]) == [("status", 5), ("status", 6), ("message", 7), ("done", 8)]
    assert frames[6]["blocks"] == [{"type": "text", "text": "Hello again."}]
    assert len(provider.requests) == 2
    text = prompt(provider.requests[1])
    assert "Person: my favourite colour is green\nYou: Okay, I've stopped.\n\n# The time" in text
    assert "# The person's message\n\nhello\n\n" in text
    assert tree.rows("SELECT count(*) FROM tool_calls") == [(0,)]
    assert tree.rows("SELECT count(*) FROM knowledge") == [(0,)]


@pytest.mark.parametrize(("text", "reply"), [
    ("", "There was nothing in that message to answer."),
    ("   ", "There was nothing in that message to answer."),
    ("cancel", "Okay."),
    ("never mind", "Okay."),
])
def test_message_with_nothing_to_answer_ends_at_once_without_the_model(
    start_tree: Any, text: str, reply: str,
) -> None:
    """An empty message, or a cancel phrase with nothing running, gets a short reply and zero
    tokens; the model is never asked."""
    provider = ScriptedProvider([])
    tree = start_tree(provider)
    tree.chat(text, age_s=0.5)
    frames = tree.outbox.wait_for_type("done")
    exchange = frames[0]["exchange_id"]
    assert frames == [
        {"type": "status", "seq": 1, "stage": "processing", "exchange_id": exchange,
         **({"text": text} if text else {})},
        {"type": "message", "seq": 2, "blocks": [{"type": "text", "text": reply}],
         "exchange_id": exchange, "topic": None, "mode": "acknowledge", "confidence": None,
         "metrics": {"tokens_total": 0, "tools": {}, "response_time_s": 0.5}},
        {"type": "done", "seq": 3, "duration_ms": 500, "exchange_id": exchange},
    ]
    assert provider.requests == []
    assert tree.rows("SELECT user_text, outcome, response_text, llm_calls, tokens_total "
                     "FROM turns") == [(text, "cancelled", reply, 0, 0)]


def recall(query: str) -> ScriptCall:
    return ScriptCall("memory", {"action": "recall", "query": query})


def test_third_identical_call_is_not_run_and_the_model_must_answer(start_tree: Any) -> None:
    """A model asking for the same call a third time gets no tools and must answer; the client
    sees a responding status, then the one answer."""
    dentist = recall("dentist")
    provider = ScriptedProvider([calls(dentist), calls(dentist), calls(dentist),
                                 answer("I have nothing stored about your dentist.")])
    tree = start_tree(provider)
    tree.chat("when is my dentist appointment?")
    frames = tree.outbox.wait_for_type("done")
    exchange = frames[0]["exchange_id"]
    assert [(f["type"], f.get("stage", f.get("step"))) for f in frames] == [
        ("status", "processing"), ("status", "retrieving_memory"), ("act_narration", 1),
        ("act_narration", 2), ("status", "responding"), ("message", None), ("done", None),
    ]
    assert frames[4] == {"type": "status", "seq": 5, "stage": "responding",
                         "exchange_id": exchange}
    assert frames[5]["blocks"] == [
        {"type": "text", "text": "I have nothing stored about your dentist."}
    ]
    assert frames[5]["metrics"]["tools"] == {"memory": 2}
    assert [[t.name for t in r.tools] for r in provider.requests] == [
        ["memory"], ["memory"], ["memory"], []
    ]
    result = '[2] memory {"action":"recall","query":"dentist"}\n-> no facts found for \'dentist\''
    dropped = ('[3] memory {"action":"recall","query":"dentist"}\n-> not run: the same call ran 2 '
               'times in a row already; answer with what you have')
    assert prompt(provider.requests[3]).endswith(
        f"{result}\n\n{dropped}\n\n{Prompts.load().render('act_final')}"
    )  # every call the model asked for is answered, the one not run too
    assert tree.rows("SELECT iteration, name, is_error FROM tool_calls ORDER BY position") == [
        (1, "memory", 0), (2, "memory", 0), (3, "memory", 1)
    ]
    assert tree.rows("SELECT outcome, llm_calls FROM turns") == [("answered", 4)]


def test_iteration_cap_ends_with_one_tool_free_request_and_its_answer(start_tree: Any) -> None:
    """After act.max_iterations rounds of tools the model is asked once more without tools;
    its text is the answer even if it asks for another call."""
    provider = ScriptedProvider([
        calls(recall("dentist")), calls(recall("doctor")),
        calls(recall("clinic"), text="I found no appointments stored."),
    ])
    tree = start_tree(provider, act={"max_iterations": 2})
    tree.chat("do I have any appointments?")
    frames = tree.outbox.wait_for_type("done")
    assert [(f["type"], f.get("stage", f.get("step"))) for f in frames] == [
        ("status", "processing"), ("status", "retrieving_memory"), ("act_narration", 1),
        ("act_narration", 2), ("status", "responding"), ("message", None), ("done", None),
    ]
    assert frames[5]["blocks"] == [{"type": "text", "text": "I found no appointments stored."}]
    final = provider.requests[2]
    assert final.tools == ()
    assert prompt(final).endswith(
        "-> no facts found for 'doctor'\n\n" + Prompts.load().render("act_final")
    )
    assert tree.rows("SELECT iteration, args FROM tool_calls ORDER BY position") == [
        (1, '{"action":"recall","query":"dentist"}'), (2, '{"action":"recall","query":"doctor"}')
    ]
    assert tree.rows("SELECT outcome, iterations, llm_calls FROM turns") == [("answered", 2, 3)]
