"""The forget tool: dropping a stored fact is an effect, and only known facts can be dropped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest

from chalie.clock import ManualClock
from chalie.store import db, queries, writes
from chalie.store.effects import Effect, ForgetFact, RememberFact
from chalie.tools.base import ToolContext, ToolOutcome
from chalie.tools.memory import ForgetTool, MemoryTool
from tests.tools.test_memory import store


@pytest.fixture
def readers(writer: apsw.Connection, tmp_path: Path) -> db.Readers:
    """Read-only connections to the store the writer created."""
    return db.Readers(db.db_path(tmp_path / "data"), busy_timeout_ms=2000)


def context(readers: db.Readers, *pending: Effect) -> ToolContext:
    """A call's context in a turn that has already asked for the `pending` effects."""
    return ToolContext(channel="default", turn_id="turn-1", read=readers.get,
                       clock=ManualClock(), pending=pending)


def forget(readers: db.Readers, key: Any, *pending: Effect) -> ToolOutcome:
    return ForgetTool().run({"key": key}, context(readers, *pending))


def unknown(key: str) -> ToolOutcome:
    return ToolOutcome(text=f"error: no stored fact has the key {key!r}", is_error=True)


def test_forget_needs_the_person_to_confirm() -> None:
    """Forgetting is destructive, so the tool is in the "confirm" danger class."""
    assert (ForgetTool.danger, ForgetTool.spec.name) == ("confirm", "forget")


def test_forgetting_a_stored_key_gives_a_forget_effect(
    writer: apsw.Connection, readers: db.Readers
) -> None:
    """A stored key, in any case, spacing or spelling, comes back as a ForgetFact for the turn
    to store."""
    store(writer, ("favourite colour", "green"))
    assert forget(readers, "  Favorite   COLOUR ") == ToolOutcome(
        text="forgot favorite color", effects=(ForgetFact("favorite color"),)
    )
    assert queries.current_facts(writer, "color", 10)[0].value == "green"


@pytest.mark.parametrize("key", ["car", "python"], ids=["no-such-fact", "only-in-a-value"])
def test_a_key_nothing_is_stored_under_is_an_error(
    writer: apsw.Connection, readers: db.Readers, key: str
) -> None:
    """Only an exact stored key can be forgotten; a word inside another fact's value is not one."""
    store(writer, ("pet", "a python called Monty"))
    assert forget(readers, key) == unknown(key)


@pytest.mark.parametrize("key", [None, "   ", 7], ids=["missing", "blank", "number"])
def test_a_missing_key_is_an_error(readers: db.Readers, key: Any) -> None:
    """Without a usable key the model is told what forget needs."""
    assert forget(readers, key) == ToolOutcome(
        text="error: forget needs a non-empty string `key`", is_error=True
    )


def test_a_fact_remembered_earlier_in_the_turn_can_be_forgotten(readers: db.Readers) -> None:
    """A fact not yet stored but remembered by this turn is known to forget."""
    assert forget(readers, "car", RememberFact("car", "Volvo")) == ToolOutcome(
        text="forgot car", effects=(ForgetFact("car"),)
    )


def test_a_fact_forgotten_earlier_in_the_turn_cannot_be_forgotten_again(
    writer: apsw.Connection, readers: db.Readers
) -> None:
    """Once this turn forgot a key it is unknown, until the turn remembers it again."""
    store(writer, ("pet", "Rex"))
    assert forget(readers, "pet", ForgetFact("pet")) == unknown("pet")
    again = forget(readers, "pet", ForgetFact("pet"), RememberFact("pet", "Fido"))
    assert again.effects == (ForgetFact("pet"),)


def test_stored_forget_deletes_the_fact_and_remembers_to_blank_it_out(
    writer: apsw.Connection,
) -> None:
    """After the turn stores ForgetFact, the fact is gone with its index row; its value is kept
    only to be blanked out of older text; other facts stay."""
    store(writer, ("pet", "Rex the dog"), ("city", "Lyon"))
    with db.immediate(writer):
        writes.apply_effect(writer, ForgetFact("pet"), turn_id="turn-1", now=9.0)
    assert [f.key for f in queries.current_facts(writer, "", 10)] == ["city"]
    assert writer.execute("SELECT count(*) FROM knowledge WHERE key = 'pet'").fetchall() == [(0,)]
    assert writer.execute("SELECT value, forgotten_at FROM forgotten").fetchall() == [
        ("Rex the dog", 9.0)
    ]
    assert writer.execute("SELECT count(*) FROM memory_fts WHERE memory_fts MATCH 'rex'"
                          ).fetchall() == [(0,)]


def test_recall_hides_a_fact_this_turn_forgot(writer: apsw.Connection, readers: db.Readers) -> None:
    """A fact forgotten earlier in the turn, not yet stored, is no longer found by recall."""
    store(writer, ("pet", "Rex"), ("city", "Lyon"))
    ctx = context(readers, ForgetFact("pet"))
    assert MemoryTool().run({"action": "recall"}, ctx).text == "- [2] city: Lyon"
    assert MemoryTool().run({"action": "recall", "query": "rex"}, ctx).text == (
        "no facts found for 'rex'"
    )


def test_a_stored_key_is_found_however_many_facts_mention_it(
    writer: apsw.Connection, readers: db.Readers
) -> None:
    """A stored key can be forgotten even when many newer facts contain the same word."""
    store(writer, ("pet", "Rex"), *[(f"pet food {n}", "kibble") for n in range(20)])
    assert forget(readers, "pet") == ToolOutcome(text="forgot pet", effects=(ForgetFact("pet"),))
