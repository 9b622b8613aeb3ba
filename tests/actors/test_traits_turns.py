"""Adaptive traits in a Session: loaded when it starts, learned after each of the person's
turns, saved by the StoreWriter, and said in the next prompt's identity section."""

from __future__ import annotations

from typing import Any

from chalie.llm.scripted import ScriptedProvider
from chalie.store import db, trait_rows
from chalie.values.cognition import Trait
from tests.actors.background import NOW
from tests.actors.conftest import answer
from tests.actors.test_memory_turns import section

IDENTITY = "Who you are talking to"
SITUATION = "Where the conversation stands"


def test_stored_traits_are_in_the_first_prompt_after_a_start(
    start_tree: Any, make_config: Any,
) -> None:
    """Traits learned before a restart shape the first prompt after it."""
    conn = db.open_writer(make_config().store.path, busy_timeout_ms=5000, synchronous="FULL")
    with db.immediate(conn):
        trait_rows.save(conn, {"answer_length": Trait({"short": 1.0}, 1.0, NOW),
                               "language": Trait({"fr": 4.0}, 4.0, NOW)})
    conn.close()
    provider = ScriptedProvider([answer("D'accord.")])
    tree = start_tree(provider)
    tree.chat("Quel temps fait-il?")
    tree.outbox.wait_for_type("done")
    # Learned from every message, they change more often than who the person is: they are
    # with where the conversation stands, after the history, not in the system prompt.
    assert "Learned" not in provider.requests[0].system
    assert (
        "- Learned from how they write: Prefers short answers.\n"
        "- Learned from how they write: Writes in French."
    ) in section(provider.requests[0].messages[0].content, SITUATION)


def test_asking_for_shorter_answers_is_learned_saved_and_in_the_next_prompt(
    start_tree: Any,
) -> None:
    provider = ScriptedProvider([answer(" ".join(["Lisbon has a long history."] * 40)),
                                 answer("Old; rebuilt after 1755."), answer("Port wine.")])
    tree = start_tree(provider)
    for n, text in enumerate(("Tell me about the history of Lisbon", "please keep it shorter",
                              "What is Porto known for?"), start=1):
        tree.chat(text)
        tree.outbox.wait_for_type("done", n)
    messages = [r.messages[0].content for r in provider.requests]
    assert "Prefers short answers." not in messages[1]
    assert "- Learned from how they write: Prefers short answers." in section(messages[2],
                                                                               SITUATION)
    tree.wait_until(lambda: tree.rows("SELECT name FROM adaptive_traits "
                                      "WHERE name = 'answer_length'") != [], "the saved trait")
    [(value, weight)] = tree.rows(
        "SELECT value, weight FROM adaptive_traits WHERE name = 'answer_length'")
    assert value == '{"short":1.0}'
    assert weight == 1.0
