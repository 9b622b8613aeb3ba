"""Knowledge that updates, through the `memory` tool on a real store: the current facts a new
one may make untrue are listed by meaning and by the words of their keys, `replaces` supersedes
the ones the model names (keeping their validity interval), and recall shows a current fact with
what it replaced."""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import apsw
import pytest

from chalie.clock import ManualClock
from chalie.errors import EmbedError
from chalie.memory.recall import Recall
from chalie.store import db, memory_writes, writes
from chalie.store.effects import RememberFact
from chalie.tools.base import ToolContext, ToolOutcome
from chalie.tools.memory import MemoryTool
from chalie.values.memory import Kind, knowledge_text

# What a text is about, for the fake embedder: a text naming one of a topic's words points
# along that topic's axis (a semantic embedder's neighbourhoods, made deterministic).
TOPICS = (
    ("lisbon", "porto", "city", "home", "live", "moved", "braga"),
    ("dog", "cat", "pet", "rex", "puppy"),
    ("job", "work", "employer", "engineer", "acme"),
)


class TopicEmbedder:
    """A fake at the Embedder seam: one axis per topic of TOPICS, and one for the rest."""

    kind = "topics"
    space = "topics-v1"
    origin = "a test's"
    binary_knn = False
    in_process = True

    def __init__(self, *, broken: bool = False) -> None:
        self.broken = broken

    def embed(self, texts: Sequence[str], *, timeout_s: float) -> list[bytes]:
        if self.broken:
            raise EmbedError("the embedder is down")
        out = []
        for text in texts:
            words = text.casefold()
            axes = [float(any(w in words for w in topic)) for topic in TOPICS]
            axes.append(0.0 if any(axes) else 1.0)
            norm = sum(a * a for a in axes) ** 0.5
            packed = array("f", [a / norm for a in axes])
            if sys.byteorder == "big":
                packed.byteswap()
            out.append(packed.tobytes())
        return out

    def close(self) -> None:
        pass


@pytest.fixture
def config(make_config: Any) -> Any:
    return make_config().memory


@pytest.fixture
def space(writer: apsw.Connection) -> int:
    with db.immediate(writer):
        return memory_writes.ensure_space(writer, TopicEmbedder.space, now=1.0)


@pytest.fixture
def tool_context(tmp_path: Path, config: Any, space: int) -> Callable[..., ToolContext]:
    readers = db.Readers(db.db_path(tmp_path / "data"), busy_timeout_ms=2000)

    def build(*pending: Any, embedder: Any = None) -> ToolContext:
        recall = Recall(embedder=embedder or TopicEmbedder(), space_id=space, config=config,
                        clock=ManualClock())
        return ToolContext(channel="main", turn_id="turn-1", read=readers.get,
                           clock=ManualClock(), pending=pending, recall=recall)

    return build


def store(writer: apsw.Connection, space: int, *facts: tuple[str, str],
          embed: bool = True) -> list[int]:
    """Store facts (a day apart) and, as the Encoder would later, their vectors; their ids."""
    ids = []
    with db.immediate(writer):
        for n, (key, value) in enumerate(facts):
            new = memory_writes.remember(writer, RememberFact(key, value), turn_id="old",
                                         now=86400.0 * (n + 1))
            assert new is not None
            ids.append(new)
        if embed:
            vectors = TopicEmbedder().embed([knowledge_text(k, v) for k, v in facts],
                                            timeout_s=1.0)
            memory_writes.store_vectors(writer, space, TopicEmbedder.kind, Kind.KNOWLEDGE,
                                        list(zip(ids, vectors, strict=True)), upto_id=ids[-1],
                                        now=1.0)
    return ids


def apply(writer: apsw.Connection, outcome: ToolOutcome, now: float) -> None:
    with db.immediate(writer):
        for effect in outcome.effects:
            writes.apply_effect(writer, effect, turn_id="new", now=now)


def run(ctx: ToolContext, **args: Any) -> ToolOutcome:
    return MemoryTool().run(args, ctx)


def current(writer: apsw.Connection) -> list[tuple[str, str]]:
    return [(str(k), str(v)) for k, v in writer.execute(
        "SELECT key, value FROM knowledge WHERE superseded_at IS NULL ORDER BY id")]


def test_remember_lists_current_facts_of_the_same_subject_under_other_keys(
    tool_context: Callable[..., ToolContext], writer: apsw.Connection, space: int,
) -> None:
    """A fact about where the person lives lists the one stored under another key, with its id
    and since when it holds, and not the facts about other things."""
    home, pet, job = store(writer, space, ("home", "Lisbon"), ("pet", "a dog called Rex"),
                           ("job", "engineer at Acme"))
    outcome = run(tool_context(), action="remember", key="city", value="Porto")
    assert outcome.effects == (RememberFact("city", "Porto"),)
    assert f"[{home}] home: Lisbon (since 1970-01-02)" in outcome.text
    assert "replaces=[their ids]" in outcome.text
    assert f"[{pet}]" not in outcome.text
    assert f"[{job}]" not in outcome.text


def test_replaces_supersedes_the_named_fact_keeping_its_interval(
    tool_context: Callable[..., ToolContext], writer: apsw.Connection, space: int,
) -> None:
    """Called again with the same key and value and `replaces`, the old fact is no longer
    current: it keeps when it held (until the new one), points at its successor, and leaves
    recall's indexes; recall shows the new fact with what it replaced."""
    (home,) = store(writer, space, ("home", "Lisbon"))
    first = run(tool_context(), action="remember", key="city", value="Porto")
    second = run(tool_context(*first.effects), action="remember", key="city", value="Porto",
                 replaces=[home])
    assert second.effects == (RememberFact("city", "Porto", replaces=(home,)),)
    assert f"it replaces [{home}] home: Lisbon" in second.text
    assert "may be about the same thing" not in second.text  # nothing left to list
    apply(writer, first, now=86400.0 * 30)
    apply(writer, second, now=86400.0 * 30)
    assert current(writer) == [("city", "Porto")]
    (since, until, by), = writer.execute(
        "SELECT created_at, superseded_at, superseded_by FROM knowledge WHERE id = ?", (home,))
    new_id = writer.execute("SELECT id FROM knowledge WHERE key = 'city'").fetchall()[0][0]
    assert (since, until, by) == (86400.0, 86400.0 * 30, new_id)
    assert writer.execute("SELECT count(*) FROM memory_fts WHERE rowid = ?",
                          (home * 4 + int(Kind.KNOWLEDGE),)).fetchall() == [(0,)]
    assert writer.execute("SELECT count(*) FROM vectors WHERE mkey = ?",
                          (home * 4 + int(Kind.KNOWLEDGE),)).fetchall() == [(0,)]
    shown = run(tool_context(), action="recall", query="porto").text
    assert shown == f"- [{new_id}] city: Porto (since 1970-01-31; before: home: Lisbon)"


def test_a_related_fact_that_replaces_nothing_leaves_the_old_one_current(
    tool_context: Callable[..., ToolContext], writer: apsw.Connection, space: int,
) -> None:
    """"Visited Porto" is listed beside "home: Lisbon" (the same subject), but without
    `replaces` both stay current: the model, not a similarity, decides what is an update."""
    (home,) = store(writer, space, ("home", "Lisbon"))
    outcome = run(tool_context(), action="remember", key="visited", value="Porto, last week")
    assert f"[{home}] home: Lisbon" in outcome.text
    apply(writer, outcome, now=86400.0 * 5)
    assert current(writer) == [("home", "Lisbon"), ("visited", "Porto, last week")]


def test_the_same_key_is_replaced_by_itself_and_not_listed(
    tool_context: Callable[..., ToolContext], writer: apsw.Connection, space: int,
) -> None:
    (home,) = store(writer, space, ("home", "Lisbon"))
    outcome = run(tool_context(), action="remember", key="Home", value="Porto")
    assert outcome.text.startswith("remembered home: Porto (this replaces the earlier value: "
                                   "Lisbon)")
    assert f"[{home}]" not in outcome.text
    apply(writer, outcome, now=86400.0 * 5)
    shown = run(tool_context(), action="recall", query="home").text
    assert shown.endswith("home: Porto (since 1970-01-06; before: Lisbon)")


def test_facts_not_yet_embedded_are_found_by_the_words_of_their_keys(
    tool_context: Callable[..., ToolContext], writer: apsw.Connection, space: int,
) -> None:
    """A fact stored moments ago has no vector yet; a key sharing a word still finds it, and
    so does a broken embedder's turn (storing a fact never fails for it)."""
    (home,) = store(writer, space, ("home city", "Lisbon"), embed=False)
    for embedder in (TopicEmbedder(), TopicEmbedder(broken=True)):
        outcome = run(tool_context(embedder=embedder), action="remember", key="city",
                      value="Porto")
        assert f"[{home}] home city: Lisbon" in outcome.text
        assert outcome.effects == (RememberFact("city", "Porto"),)


@pytest.mark.parametrize(("replaces", "problem"), [
    ("3", "replaces must be a list"),
    ([True], "replaces must be a list"),
    (["3"], "replaces must be a list"),
    (list(range(21)), "replaces must be a list of at most 20"),
    ([999], "no current fact has the id 999"),
])
def test_replaces_must_name_current_facts(
    tool_context: Callable[..., ToolContext], writer: apsw.Connection, space: int,
    replaces: Any, problem: str,
) -> None:
    store(writer, space, ("home", "Lisbon"))
    outcome = run(tool_context(), action="remember", key="city", value="Porto",
                  replaces=replaces)
    assert outcome.is_error
    assert problem in outcome.text
    assert outcome.effects == ()


def test_a_fact_already_superseded_cannot_be_replaced_again(
    tool_context: Callable[..., ToolContext], writer: apsw.Connection, space: int,
) -> None:
    (home,) = store(writer, space, ("home", "Lisbon"))
    apply(writer, ToolOutcome("", effects=(RememberFact("home", "Porto"),)), now=86400.0 * 9)
    outcome = run(tool_context(), action="remember", key="city", value="Braga",
                  replaces=[home])
    assert outcome.is_error
    assert f"no current fact has the id {home}" in outcome.text


def test_a_fact_newer_than_the_statement_is_not_replaced(writer: apsw.Connection,
                                                         space: int) -> None:
    """The encoder reads old messages: a fact it read from a line older than a fact the
    person stated since does not supersede that newer fact."""
    (home,) = store(writer, space, ("home", "Lisbon"))  # since day 1
    with db.immediate(writer):
        memory_writes.remember(writer, RememberFact("city", "Porto", observed_at=10.0,
                                                    replaces=(home,)),
                               turn_id=None, now=86400.0 * 3)
    assert current(writer) == [("home", "Lisbon"), ("city", "Porto")]
