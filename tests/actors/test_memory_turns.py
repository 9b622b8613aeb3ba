"""What memory does to a turn: the identity hook, recall into the prompt (and the strength it
earns), forgotten values, the recall tool, and the prompt snapshots every call leaves."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

from chalie.llm.scripted import ScriptCall, ScriptedProvider
from chalie.memory.embedders import HashedEmbedder
from chalie.store import db, memory_writes
from chalie.tools.memory import MemoryTool
from chalie.tools.recall import RecallTool
from chalie.values.memory import Kind, mkey
from tests.actors.conftest import (
    WAIT_S,
    GatedExecutor,
    Tree,
    answer,
    calls,
    prompt,
    shape,
    store_turns,
)

DAY = 86400.0


def seed(tree: Tree, *pairs: tuple[str, str]) -> None:
    """Answered turns, one a day from 2020-09-13."""
    store_turns(tree, list(pairs), every_s=DAY)


def section(text: str, heading: str) -> str:
    return text.split(f"# {heading}\n\n")[1].split("\n\n# ", maxsplit=1)[0]


class RecordingEmbedder(HashedEmbedder):
    """Hashed vectors, under a semantic embedder's kind (so a turn's question is embedded on a
    thread of its own), and the texts it was asked for."""

    kind = "minilm"

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []
        self.asked = threading.Event()

    def embed(self, texts: Sequence[str], *, timeout_s: float) -> list[bytes]:
        self.texts.extend(texts)
        self.asked.set()
        return super().embed(texts, timeout_s=timeout_s)


def test_the_question_is_embedded_from_the_turns_start_while_its_context_waits(
    start_tree: Any,
) -> None:
    """The person's message is embedded for recall as soon as its turn starts, not once the
    context job runs: with that job held on the pool, the embedder already has the message.
    The context then uses that embedding: the message is embedded once."""
    pool = GatedExecutor(0)  # the turn's first job on the pool: gathering its context
    embedder = RecordingEmbedder()
    tree = start_tree(ScriptedProvider([answer("He said it needs a new valve.")]), pool=pool,
                      embedder=embedder)
    question = "what did the plumber say about the boiler?"
    tree.chat(question)
    pool.wait_entered(0)
    assert embedder.asked.wait(WAIT_S)
    assert embedder.texts == [question]
    pool.release(0)
    tree.outbox.wait_for_type("done")
    assert embedder.texts == [question]


def test_call_me_sam_is_answered_without_the_model_and_stored_as_a_trait(
    start_tree: Any,
) -> None:
    """A message that only gives a name gets a fixed reply with zero tokens and no model call;
    the name is stored with the turn as a trait the person stated."""
    provider = ScriptedProvider([])
    tree = start_tree(provider)
    tree.chat("Hi! Call me Sam.", age_s=0.2)
    frames = tree.outbox.wait_for_type("done")
    exchange = frames[0]["exchange_id"]
    assert shape(frames) == [("status", 1), ("message", 2), ("done", 3)]
    assert frames[1]["blocks"] == [{"type": "text", "text": "Nice to meet you, Sam."}]
    assert frames[1]["metrics"] == {"tokens_total": 0, "tools": {}, "response_time_s": 0.2}
    assert provider.requests == []
    assert tree.rows("SELECT key, value, kind, source, confidence, turn_id FROM knowledge") == [
        ("name", "Sam", "trait", "identity", 1.0, exchange)
    ]
    assert tree.rows("SELECT outcome, llm_calls FROM turns") == [("answered", 0)]


def test_a_name_in_a_longer_message_reaches_the_first_prompt_and_later_ones(
    start_tree: Any,
) -> None:
    """"My name is Sam and ..." goes on to the model with the name already in its identity
    section, and every later prompt has it too."""
    provider = ScriptedProvider([answer("Sure, Sam."), answer("Hello again.")])
    tree = start_tree(provider)
    tree.chat("My name is Sam and I need help with my taxes")
    tree.outbox.wait_for_type("done")
    tree.chat("what's next?")
    tree.outbox.wait_for_type("done", 2)
    for request in provider.requests:
        assert section(request.system, "Who you are talking to") == "Their name is Sam."
    assert tree.rows("SELECT value, source FROM knowledge") == [("Sam", "identity")]


def test_a_new_name_supersedes_the_old_one_and_the_reply_says_so(start_tree: Any) -> None:
    """Giving another name replaces the current one (the old value keeps its validity)."""
    tree = start_tree(ScriptedProvider([]))
    tree.chat("call me Sam")
    tree.chat("actually, please call me Samuel")
    frames = tree.outbox.wait_for_type("done", 2)
    assert frames[4]["blocks"][0]["text"] == "Got it, I'll call you Samuel from now on."
    assert tree.rows("SELECT value, superseded_at IS NOT NULL FROM knowledge ORDER BY id") == [
        ("Sam", 1), ("Samuel", 0)
    ]


def test_what_was_said_long_ago_is_recalled_into_the_prompt_and_gains_strength(
    start_tree: Any,
) -> None:
    """A message older than the literal history is found for a question about it, shown under
    "What you remember" with its date, and its retrieval strength is stored with the turn."""
    provider = ScriptedProvider([answer("Teal.")])
    tree = start_tree(provider, act={"history_turns": 2})
    seed(tree, ("My favourite colour is teal", "Noted."),
         *[(f"Small talk {n} about the weather", "Indeed.") for n in range(4)])
    tree.chat("What is my favourite colour?")
    tree.outbox.wait_for_type("done")
    text = prompt(provider.requests[0])
    assert "On 2020-09-13:\n- My favourite colour is teal" in section(
        text, "What you remember that may matter here")
    assert "teal" not in section(text, "Conversation so far")
    teal = mkey(Kind.TRANSCRIPT, 1)
    assert tree.rows("SELECT recalls FROM memory_strength WHERE mkey = ?", teal) == [(1,)]


def test_a_forgotten_value_is_blanked_out_of_the_history_where_it_was_said(
    start_tree: Any,
) -> None:
    """After the person forgets a fact, the old message that stated it reaches the prompt with
    the value blanked out; the fact itself is gone from every section."""
    provider = ScriptedProvider([answer("Noted."), answer("I don't know.")])
    tree = start_tree(provider, tools=[MemoryTool()])
    seed(tree, ("My locker code is 4312", "Got it."))
    conn = db.open_writer(tree.config.store.path, busy_timeout_ms=5000, synchronous="FULL")
    with db.immediate(conn):
        fact = memory_writes.remember(conn, memory_writes.RememberFact("locker code", "4312"),
                                      turn_id=None, now=1_700_000_000.0)
        assert fact is not None
        assert memory_writes.forget_knowledge(conn, fact, now=1_700_000_001.0)
    conn.close()
    tree.chat("what is my locker code?")
    tree.outbox.wait_for_type("done")
    text = prompt(provider.requests[0])
    assert "4312" not in text
    assert "Person: My locker code is [forgotten]" in text


def test_the_recall_tool_searches_everything_and_strengthens_what_it_finds(
    start_tree: Any,
) -> None:
    """The model may call `recall`; it gets dated matches from past conversations, and each
    item it got is recalled once more in the store."""
    search = ScriptCall("recall", {"query": "dentist appointment"})
    provider = ScriptedProvider([calls(search), answer("On the 14th.")])
    tree = start_tree(provider, tools=[RecallTool()], act={"history_turns": 1})
    seed(tree, ("My dentist appointment is on the 14th", "Noted."),
         ("I like football", "Nice."), ("It rained", "Sorry."))
    tree.chat("when do I see the dentist?")
    tree.outbox.wait_for_type("done")
    result = prompt(provider.requests[1]).split("-> ", 1)[1]
    assert result.startswith("- (2020-09-13, the person said) My dentist appointment is on "
                             "the 14th")
    assert tree.rows("SELECT recalls FROM memory_strength WHERE mkey = ?",
                     mkey(Kind.TRANSCRIPT, 1)) == [(2,)]  # the prompt, then the tool


def test_every_llm_call_of_a_turn_is_kept_as_its_prompt_snapshot(start_tree: Any) -> None:
    """Each request (system prompt, messages, tools) is stored with its turn and call number,
    exactly as the model got it."""
    remember = ScriptCall("memory", {"action": "remember", "key": "pet", "value": "Rex"})
    provider = ScriptedProvider([calls(remember), answer("Rex, noted.")])
    tree = start_tree(provider)
    tree.chat("my dog is Rex")
    exchange = tree.outbox.wait_for_type("done")[0]["exchange_id"]
    rows = tree.rows("SELECT call, purpose, system, messages, tools, response_format "
                     "FROM prompt_snapshots WHERE turn_id = ? ORDER BY call", exchange)
    assert [(r[0], r[1]) for r in rows] == [(1, "act"), (2, "act")]
    for (_, _, system, messages, tools, fmt), sent in zip(rows, provider.requests, strict=True):
        assert system == sent.system
        assert json.loads(messages) == [{"role": "user", "content": prompt(sent)}]
        assert [t["name"] for t in json.loads(tools)] == [t.name for t in sent.tools]
        assert fmt is None
