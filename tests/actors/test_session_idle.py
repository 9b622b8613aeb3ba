"""Idle Sessions stop after server.session_idle_s and start again from the store on the
channel's next message, with nothing lost; busy ones, and messages racing a stop, are safe."""

from __future__ import annotations

import threading
from typing import Any

import apsw
import pykka

from chalie.actors.session_messages import SessionIdle
from chalie.cognition.mind import Mind
from chalie.llm.scripted import ScriptCall, ScriptedProvider
from chalie.prompts import Prompts
from chalie.store import db
from tests.actors.conftest import (
    WAIT_S,
    Gate,
    GatedProvider,
    Read,
    Tree,
    answer,
    calls,
    prompt,
    shape,
)

IDLE_S = 30.0
REMEMBER = ScriptCall("memory", {"action": "remember", "key": "Favourite colour", "value": "green"})


def session(tree: Tree, channel: str = "main") -> pykka.ActorRef[Any] | None:
    """The channel's current Session, or None when it is not running."""
    sessions = tree.directory.get("sessions")
    assert sessions is not None
    ref: pykka.ActorRef[Any] | None = sessions.proxy().child(f"session:{channel}").get(
        timeout=WAIT_S)
    return ref


def session_threads() -> int:
    return sum(t.name.startswith("Session-") for t in threading.enumerate())


def stopped(tree: Tree) -> float:
    return tree.metric("chalie_sessions_stopped_total")


def idle_out(tree: Tree, count: float = 1.0) -> None:
    """Let the idle timeout pass and wait for the supervisor to stop the Session."""
    tree.settle()
    tree.clock.advance(IDLE_S)
    tree.wait_until(lambda: stopped(tree) >= count, f"{count:g} idle Session(s) stopped")


def test_idle_session_stops_after_the_timeout_and_its_thread_is_gone(start_tree: Any) -> None:
    """A Session with nothing to do stops after session_idle_s: no actor, no thread left."""
    tree = start_tree(ScriptedProvider([answer("Hello.")]), session_idle_s=IDLE_S)
    tree.chat("hi")
    tree.outbox.wait_for_type("done")
    ref = session(tree)
    assert ref is not None
    assert tree.metric("chalie_sessions") == 1.0
    tree.settle()
    tree.clock.advance(IDLE_S - 1)
    tree.settle()
    assert session(tree) is ref  # not yet
    assert stopped(tree) == 0.0
    tree.clock.advance(1)
    # Counted, then told to stop: it ends a moment later on its own thread.
    tree.wait_until(lambda: stopped(tree) == 1.0 and not ref.is_alive(),
                    "the idle Session stopped")
    assert session(tree) is None
    tree.wait_until(lambda: session_threads() == 0, "the Session's thread ended")
    assert tree.metric("chalie_sessions") == 0.0


def test_next_message_starts_a_new_session_that_continues_the_conversation(
    start_tree: Any,
) -> None:
    """After a stop, the next chat is answered by a new Session whose prompt has the earlier
    turns and the channel's conversation state, on the same seq sequence."""
    provider = ScriptedProvider([answer("Noted: Lisbon with Maria."), answer("Yes, Lisbon.")])
    tree = start_tree(provider, session_idle_s=IDLE_S, cognition={})
    tree.chat("I am planning a trip to Lisbon with Maria next month")
    tree.outbox.wait_for_type("done")
    first = session(tree)
    idle_out(tree)
    conn = db.connect(db.db_path(tree.config.store.path), busy_timeout_ms=5000, readonly=True)
    try:
        state = Mind.load(conn, "main").state_text(Prompts.load())
    finally:
        conn.close()
    assert state  # the first turn left a conversation state in the store
    tree.chat("where was I going?")
    frames = tree.outbox.wait_for_type("done", 2)
    assert session(tree) not in (None, first)
    assert [seq for _, seq in shape(frames)] == list(range(1, len(frames) + 1))
    assert frames[-2]["blocks"] == [{"type": "text", "text": "Yes, Lisbon."}]
    seen = prompt(provider.requests[1])
    assert "I am planning a trip to Lisbon with Maria next month" in seen
    assert "Noted: Lisbon with Maria." in seen
    assert state in seen
    assert tree.metric("chalie_sessions") == 1.0


def test_retried_client_id_after_a_stop_replays_the_first_answer(start_tree: Any) -> None:
    """A client retrying a message the stopped Session answered gets that answer again; the
    model is not asked twice."""
    provider = ScriptedProvider([answer("Answered once.")])
    tree = start_tree(provider, session_idle_s=IDLE_S)
    tree.chat("hello", client_id="c-1")
    first = tree.outbox.wait_for_type("done")
    idle_out(tree)
    tree.chat("hello", client_id="c-1")
    frames = tree.outbox.wait_for(lambda fs: len(fs) >= 2 * len(first), "the replayed exchange")
    assert frames[len(first):] == first
    assert len(provider.requests) == 1
    assert tree.rows("SELECT client_id, response_text FROM turns") == [("c-1", "Answered once.")]


def test_session_mid_turn_is_not_stopped(start_tree: Any) -> None:
    """A Session whose model call is out stays up past the timeout and answers."""
    provider = GatedProvider([answer("Took a while.")])
    tree = start_tree(provider, threaded=True, session_idle_s=IDLE_S, act={"timeout_s": 600})
    tree.chat("think hard")
    provider.wait_entered()
    ref = session(tree)
    tree.clock.advance(IDLE_S * 3)
    tree.settle()
    assert session(tree) is ref
    assert stopped(tree) == 0.0
    provider.release()
    frames = tree.outbox.wait_for_type("done")
    assert frames[-2]["blocks"] == [{"type": "text", "text": "Took a while."}]
    idle_out(tree)  # once done and idle for the timeout, it stops
    assert session(tree) is None


def test_session_waiting_for_approval_is_not_stopped(start_tree: Any) -> None:
    """A turn waiting for the person's approval keeps its Session: the answer still counts."""
    provider = ScriptedProvider([calls(REMEMBER), answer("Done.")])
    tree = start_tree(provider, confirm=("memory",), session_idle_s=IDLE_S)
    tree.chat("my favourite colour is green")
    frames = tree.outbox.wait_for_type("escalation")
    asked = next(f for f in frames if f["type"] == "escalation")
    ref = session(tree)
    tree.settle()
    tree.clock.advance(IDLE_S * 2)  # within act.approval_timeout_s (120 s)
    tree.settle()
    assert session(tree) is ref
    assert stopped(tree) == 0.0
    tree.answer_approval(asked["approval_id"], True)
    tree.outbox.wait_for_type("done")
    assert tree.rows("SELECT key, value FROM knowledge") == [("favorite color", "green")]


def test_session_with_queued_messages_is_not_stopped(start_tree: Any) -> None:
    """Messages queued behind a running turn keep the Session until all are answered."""
    provider = GatedProvider([answer("One."), answer("Two."), answer("Three.")])
    tree = start_tree(provider, threaded=True, session_idle_s=IDLE_S, act={"timeout_s": 600})
    tree.chat("first")
    provider.wait_entered()
    tree.chat("second")
    tree.chat("third")
    tree.settle()
    tree.clock.advance(IDLE_S * 2)
    tree.settle()
    assert stopped(tree) == 0.0
    provider.release()
    frames = tree.outbox.wait_for_type("done", 3)
    assert [f["blocks"][0]["text"] for f in frames if f["type"] == "message"] == [
        "One.", "Two.", "Three."]
    assert stopped(tree) == 0.0


def test_chat_delivered_just_before_the_stop_keeps_the_session(start_tree: Any) -> None:
    """A chat that reaches the Session after its idle timer fired but before the supervisor
    asks it to stop makes it busy: it is not stopped, and the chat is answered by it."""
    gate = Gate("the Session's store read")
    armed = threading.Event()

    def gated(read: Read) -> Read:
        def get() -> apsw.Connection:
            if armed.is_set():
                armed.clear()
                gate.pass_through()
            return read()
        return get

    tree = start_tree(ScriptedProvider([answer("First."), answer("Second.")]),
                      session_idle_s=IDLE_S, wrap_read=gated)
    tree.chat("one")
    tree.outbox.wait_for_type("done")
    tree.settle()
    ref = session(tree)
    assert ref is not None
    sessions = tree.directory.get("sessions")
    assert sessions is not None
    # The interleaving, fixed: the Session is held while handling the chat; its idle timer
    # fires behind it, and the supervisor acts on a word that it is idle.
    armed.set()
    tree.chat("two", client_id="c-2")  # the Session reads the store for the client_id
    gate.wait_entered()
    tree.clock.advance(IDLE_S)
    sessions.tell(SessionIdle("main", ref.actor_urn))
    gate.open()
    frames = tree.outbox.wait_for_type("done", 2)
    assert [f["blocks"][0]["text"] for f in frames if f["type"] == "message"] == [
        "First.", "Second."]
    tree.settle()
    assert session(tree) is ref
    assert stopped(tree) == 0.0


def test_chat_delivered_just_after_the_stop_starts_a_new_session(start_tree: Any) -> None:
    """A chat the supervisor routes right after it stopped the idle Session starts a new one
    and is answered: nothing is run on the stopping actor or lost."""
    tree = start_tree(ScriptedProvider([answer("First."), answer("Second.")]),
                      session_idle_s=IDLE_S)
    tree.chat("one")
    tree.outbox.wait_for_type("done")
    tree.settle()
    ref = session(tree)
    assert ref is not None
    tree.clock.advance(IDLE_S)
    sessions = tree.directory.get("sessions")
    assert sessions is not None
    sessions.tell(SessionIdle("main", ref.actor_urn))
    tree.chat("two")
    frames = tree.outbox.wait_for_type("done", 2)
    assert [f["blocks"][0]["text"] for f in frames if f["type"] == "message"] == [
        "First.", "Second."]
    assert stopped(tree) >= 1.0
    assert session(tree) not in (None, ref)
    assert tree.rows("SELECT user_text FROM turns ORDER BY started_at") == [("one",), ("two",)]
