"""The answer as it is written: message_delta frames from a streaming provider, in order with the
turn's logged frames, trimmed so they add up to exactly the message's text."""

from __future__ import annotations

from typing import Any

from chalie.llm.scripted import ScriptCall, ScriptedProvider, ScriptStep, ScriptUsage

REMEMBER = ScriptCall("memory", {"action": "remember", "key": "Favourite colour", "value": "green"})


def test_deltas_come_before_the_message_and_add_up_to_its_text(start_tree: Any) -> None:
    """A streamed answer: each delta carries the exchange id; their texts join to the answer."""
    tree = start_tree(ScriptedProvider([ScriptStep(text="  Green is a fine colour.  ",
                                                   usage=ScriptUsage(10, 5))]))
    tree.chat("hi")
    frames = tree.outbox.wait_for_type("done")
    message = next(f for f in frames if f["type"] == "message")
    live = tree.outbox.live_frames()
    assert [d["type"] for _, d in live] == ["message_delta"] * len(live)
    assert len(live) == 5
    assert "".join(d["text"] for _, d in live) == message["blocks"][0]["text"] == \
        "Green is a fine colour."
    assert {d["exchange_id"] for _, d in live} == {message["exchange_id"]}
    before_message = frames.index(message)
    assert all(position <= before_message for position, _ in live)
    assert not any(d.get("reset") for _, d in live)


def test_a_draft_before_a_tool_call_is_followed_by_a_reset(start_tree: Any) -> None:
    """Text streamed before a tool call is not the answer: the answer's first delta resets it,
    and comes after the tool call's narration."""
    tree = start_tree(ScriptedProvider([
        ScriptStep(text="Let me remember that.", tool_calls=(REMEMBER,)),
        ScriptStep(text="Noted: green."),
    ]))
    tree.chat("my favourite colour is green")
    frames = tree.outbox.wait_for_type("done")
    live = tree.outbox.live_frames()
    reset = [n for n, (_, d) in enumerate(live) if d.get("reset")]
    assert len(reset) == 1
    narration = next(n for n, f in enumerate(frames) if f["type"] == "act_narration")
    assert live[reset[0]][0] > narration
    assert "".join(d["text"] for _, d in live[reset[0]:]) == "Noted: green."


def test_an_action_streams_nothing(start_tree: Any) -> None:
    """A skill run directly makes no LLM call, so no delta goes out."""
    tree = start_tree(ScriptedProvider([]))
    tree.action("memory", {"action": "remember", "key": "k", "value": "v"})
    tree.outbox.wait_for_type("done")
    assert tree.outbox.live_frames() == []
