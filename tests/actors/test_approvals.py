"""Tools that need the person's approval, as a client sees it: an escalation frame that waits
for an answer, what happens on approve, deny, silence and a wrong answer, and blocked tools."""

from __future__ import annotations

from typing import Any

from chalie.llm.scripted import ScriptCall, ScriptedProvider
from chalie.tools.memory import ForgetTool, MemoryTool
from tests.actors.conftest import Tree, answer, calls, prompt, shape

REMEMBER = ScriptCall("memory", {"action": "remember", "key": "Favourite colour", "value": "green"})
ARGS = '{"action":"remember","key":"Favourite colour","value":"green"}'


def escalation(tree: Tree) -> dict[str, Any]:
    """The escalation frame of the running turn, once it has been pushed."""
    frames = tree.outbox.wait_for_type("escalation")
    return next(f for f in frames if f["type"] == "escalation")


def remember_green(start_tree: Any, **act: Any) -> tuple[Tree, ScriptedProvider]:
    """A tree whose memory tool needs approval and a model that wants to remember green."""
    provider = ScriptedProvider([calls(REMEMBER), answer("Done.", 30, 3)])
    return start_tree(provider, confirm=("memory",), act=act), provider


def test_confirm_tool_waits_for_approval_and_runs_once_approved(start_tree: Any) -> None:
    """The client gets an escalation naming the call; nothing runs until the person approves,
    then the fact is stored and the turn answers."""
    tree, provider = remember_green(start_tree)
    tree.chat("my favourite colour is green")
    asked = escalation(tree)
    exchange = asked["exchange_id"]
    assert asked == {
        "type": "escalation", "seq": 4,
        "content": "Chalie wants to go on with this: Noting that Favourite colour is “green”. "
                   "Allow it?",
        "approval_id": asked["approval_id"], "tool": "memory", "args": ARGS,
        "expires_in_s": 120.0, "exchange_id": exchange, "topic": None, "why": None,
        "always": True, "held": False,
    }
    assert len(asked["approval_id"]) == 32
    tree.settle()
    assert len(provider.requests) == 1  # the model is not asked again while it waits
    assert shape(tree.outbox.frames()) == [("status", 1), ("status", 2), ("act_narration", 3),
                                           ("escalation", 4)]
    tree.answer_approval(asked["approval_id"], True)
    frames = tree.outbox.wait_for_type("done")
    assert shape(frames[4:]) == [("decision", 5), ("message", 6), ("done", 7)]
    assert frames[4] == {"type": "decision", "seq": 5, "approval_id": asked["approval_id"],
                         "outcome": "approved", "by": "program", "tool": "memory",
                         "exchange_id": exchange}
    assert frames[5]["metrics"]["tools"] == {"memory": 1}
    assert "-> remembered favorite color: green" in prompt(provider.requests[1])
    assert tree.rows("SELECT name, result, is_error, approval, ran FROM tool_calls") == [
        ("memory", "remembered favorite color: green", 0, "approved", 1)
    ]
    assert tree.rows("SELECT key, value, turn_id FROM knowledge") == [
        ("favorite color", "green", exchange)
    ]


def test_denied_call_is_not_run_and_the_model_is_told(start_tree: Any) -> None:
    """When the person says no, nothing is stored and the model reads that they denied it."""
    tree, provider = remember_green(start_tree)
    tree.chat("my favourite colour is green")
    tree.answer_approval(escalation(tree)["approval_id"], False)
    frames = tree.outbox.wait_for_type("done")
    assert shape(frames) == [("status", 1), ("status", 2), ("act_narration", 3), ("escalation", 4),
                             ("decision", 5), ("message", 6), ("done", 7)]
    assert (frames[4]["outcome"], frames[4]["by"]) == ("denied", "program")
    assert frames[5]["metrics"]["tools"] == {}
    assert prompt(provider.requests[1]).endswith(
        f"[1] memory {ARGS}\n-> not run: the person denied it"
    )
    assert tree.rows("SELECT result, is_error, approval, ran FROM tool_calls") == [
        ("not run: the person denied it", 1, "denied", 0)
    ]
    assert tree.rows("SELECT count(*) FROM knowledge") == [(0,)]


def test_unanswered_approval_expires_and_the_model_is_told(start_tree: Any) -> None:
    """With no answer within act.approval_timeout_s the call counts as not approved."""
    tree, provider = remember_green(start_tree, approval_timeout_s=30.0)
    tree.chat("my favourite colour is green")
    assert escalation(tree)["expires_in_s"] == 30.0
    tree.clock.advance(29.0)
    tree.settle()
    assert len(provider.requests) == 1
    tree.clock.advance(1.5)
    frames = tree.outbox.wait_for_type("done")
    assert shape(frames[4:]) == [("decision", 5), ("message", 6), ("done", 7)]
    assert (frames[4]["outcome"], frames[4]["by"]) == ("expired", None)
    assert frames[5]["metrics"]["response_time_s"] == 30.5
    assert prompt(provider.requests[1]).endswith(
        f"[1] memory {ARGS}\n-> not run: no approval within 30s"
    )
    assert tree.rows("SELECT result, approval, ran FROM tool_calls") == [
        ("not run: no approval within 30s", "expired", 0)
    ]
    assert tree.rows("SELECT count(*) FROM knowledge") == [(0,)]


def test_time_waiting_for_approval_is_not_charged_to_the_turn(start_tree: Any) -> None:
    """A turn with a 10 s budget still answers after the person took 50 s to approve."""
    tree, provider = remember_green(start_tree, timeout_s=10.0, approval_timeout_s=100.0)
    tree.chat("my favourite colour is green")
    asked = escalation(tree)
    tree.clock.advance(50.0)
    tree.answer_approval(asked["approval_id"], True)
    frames = tree.outbox.wait_for_type("done")
    assert shape(frames[4:]) == [("decision", 5), ("message", 6), ("done", 7)]
    assert frames[5]["blocks"] == [{"type": "text", "text": "Done."}]
    assert frames[5]["metrics"]["response_time_s"] == 50.0
    assert tree.rows("SELECT outcome, response_text FROM turns") == [("answered", "Done.")]
    assert tree.rows("SELECT approval FROM tool_calls") == [("approved",)]
    assert "-> remembered favorite color: green" in prompt(provider.requests[1])


def test_two_calls_needing_approval_are_asked_about_one_at_a_time(start_tree: Any) -> None:
    """Each call gets its own escalation, the second only after the first was answered; the
    person may allow one and refuse the other."""
    name = ScriptCall("memory", {"action": "remember", "key": "Name", "value": "Ada"})
    provider = ScriptedProvider([calls(REMEMBER, name), answer("Saved your colour only.")])
    tree = start_tree(provider, confirm=("memory",))
    tree.chat("I'm Ada and I like green")
    first = escalation(tree)
    tree.answer_approval(first["approval_id"], True)
    frames = tree.outbox.wait_for_type("escalation", 2)
    second = frames[-1]
    assert shape(frames) == [("status", 1), ("status", 2), ("act_narration", 3), ("escalation", 4),
                             ("decision", 5), ("act_narration", 6), ("escalation", 7)]
    assert second["args"] == '{"action":"remember","key":"Name","value":"Ada"}'
    assert second["approval_id"] != first["approval_id"]
    tree.answer_approval(first["approval_id"], False)  # already answered: refused
    tree.answer_approval(second["approval_id"], False)
    frames = tree.outbox.wait_for_type("done")
    assert shape(frames[7:]) == [("error", 8), ("decision", 9), ("message", 10), ("done", 11)]
    assert tree.rows("SELECT args, approval, ran FROM tool_calls ORDER BY position") == [
        (ARGS, "approved", 1),
        ('{"action":"remember","key":"Name","value":"Ada"}', "denied", 0),
    ]
    assert tree.rows("SELECT key FROM knowledge") == [("favorite color",)]


def test_wrong_approval_answer_gets_an_error_and_the_turn_keeps_waiting(start_tree: Any) -> None:
    """An answer naming no waiting approval, or with no yes/no, is refused with a
    non-recoverable error; the right answer afterwards still runs the call."""
    tree, _ = remember_green(start_tree)
    tree.chat("my favourite colour is green")
    asked = escalation(tree)
    tree.answer_approval("not-the-id", True)
    tree.answer_approval(asked["approval_id"], "yes")
    frames = tree.outbox.wait_for_type("error", 2)
    assert frames[4:] == [
        {"type": "error", "seq": 5, "recoverable": False, "exchange_id": None, "metrics": None,
         "message": "no approval 'not-the-id' is waiting (it may have expired or been answered)"},
        {"type": "error", "seq": 6, "recoverable": False, "exchange_id": None, "metrics": None,
         "message": 'approve is missing: answer an escalation with {"skill": "approval", '
                    '"params": {"approval_id": "...", "approve": true or false}}'},
    ]
    tree.answer_approval(asked["approval_id"], True)
    frames = tree.outbox.wait_for_type("done")
    assert shape(frames[6:]) == [("decision", 7), ("message", 8), ("done", 9)]
    assert tree.rows("SELECT approval, ran FROM tool_calls") == [("approved", 1)]
    assert tree.rows("SELECT key FROM knowledge") == [("favorite color",)]


def test_approval_answer_after_expiry_gets_an_error(start_tree: Any) -> None:
    """Approving a call that already expired changes nothing and tells the client why."""
    tree, _ = remember_green(start_tree, approval_timeout_s=30.0)
    tree.chat("my favourite colour is green")
    asked = escalation(tree)
    tree.clock.advance(31.0)
    tree.outbox.wait_for_type("done")
    tree.answer_approval(asked["approval_id"], True)
    frames = tree.outbox.wait_for_type("error")
    assert frames[-1]["message"] == (
        f"no approval {asked['approval_id']!r} is waiting (it may have expired or been answered)"
    )
    assert tree.rows("SELECT count(*) FROM knowledge") == [(0,)]


def test_steering_while_an_approval_waits_declines_the_call(start_tree: Any) -> None:
    """Steering instead of answering the escalation counts as no; the model gets the steering."""
    tree, provider = remember_green(start_tree)
    tree.chat("my favourite colour is green")
    escalation(tree)
    tree.steer("no, blue")
    frames = tree.outbox.wait_for_type("done")
    assert shape(frames[4:]) == [("decision", 5), ("message", 6), ("done", 7)]
    assert (frames[4]["outcome"], frames[4]["by"]) == ("withdrawn", None)
    assert prompt(provider.requests[1]).endswith(
        "over the message above:\nno, blue\n\n"
        f"[2] memory {ARGS}\n-> not run: the person redirected instead"
    )
    assert tree.rows("SELECT approval, ran FROM tool_calls") == [("denied", 0)]
    assert tree.rows("SELECT text FROM steering") == [("no, blue",)]


def test_blocked_tool_is_never_offered_and_never_runs(start_tree: Any) -> None:
    """A tool in tools.block is missing from every request; a call to it anyway, or an action
    naming it, does nothing but return an error."""
    provider = ScriptedProvider([calls(REMEMBER), answer("I can't save that.")])
    tree = start_tree(provider, tools=[MemoryTool(), ForgetTool()], block=("memory",))
    tree.chat("my favourite colour is green")
    frames = tree.outbox.wait_for_type("done")
    assert shape(frames) == [("status", 1), ("status", 2), ("act_narration", 3), ("message", 4),
                             ("done", 5)]
    assert [[t.name for t in r.tools] for r in provider.requests] == [["forget"], ["forget"]]
    assert prompt(provider.requests[1]).endswith(
        f"[1] memory {ARGS}\n-> not run: tool 'memory' is blocked by configuration"
    )
    assert tree.rows("SELECT name, ran FROM tool_calls") == [("memory", 0)]
    tree.action("memory", {"action": "remember", "key": "pet", "value": "Rex"})
    frames = tree.outbox.wait_for_type("done", 2)
    assert frames[6]["type"] == "error"
    assert frames[6]["message"] == "no skill named 'memory' (skills: forget, approval)"
    assert tree.rows("SELECT count(*) FROM knowledge") == [(0,)]
