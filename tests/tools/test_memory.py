"""The memory tool: remember gives an effect for the turn to store; recall reads facts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest

from chalie.clock import ManualClock
from chalie.store import db, writes
from chalie.store.effects import RememberFact
from chalie.tools.base import ToolContext, ToolOutcome
from chalie.tools.memory import MAX_KEY, MemoryTool


@pytest.fixture
def context(writer: apsw.Connection, tmp_path: Path) -> Any:
    """Build a ToolContext that reads the real store through a read-only connection."""
    readers = db.Readers(db.db_path(tmp_path / "data"), busy_timeout_ms=2000)

    def build(*pending: RememberFact) -> ToolContext:
        return ToolContext(channel="default", turn_id="turn-1", read=readers.get,
                           clock=ManualClock(), pending=pending)

    return build


def store(writer: apsw.Connection, *facts: tuple[str, str]) -> None:
    with db.immediate(writer):
        for n, (key, value) in enumerate(facts):
            writes.apply_effect(writer, RememberFact(key, value), turn_id="old", now=float(n))


def run(ctx: ToolContext, **args: Any) -> ToolOutcome:
    return MemoryTool().run(args, ctx)


# --- remember -------------------------------------------------------------------------------------

def test_remember_returns_the_fact_as_an_effect_with_a_normalised_key(
    context: Any, writer: apsw.Connection
) -> None:
    """Remembering gives back a fact with a lower-case single-spaced key and writes nothing yet."""
    outcome = run(context(), action="remember", key="  Favourite   COLOUR ", value=" green \n")
    assert outcome == ToolOutcome(
        text="remembered favorite color: green",
        effects=(RememberFact("favorite color", "green"),),
    )
    assert writer.execute("SELECT count(*) FROM knowledge").fetchall() == [(0,)]


@pytest.mark.parametrize(
    ("args", "complaint"),
    [({}, "action must be remember, recall, open_loop or close_loop, got None"),
     ({"action": "forget"},
      "action must be remember, recall, open_loop or close_loop, got 'forget'"),
     ({"action": "remember", "value": "green"}, "non-empty string `key`"),
     ({"action": "remember", "key": "   ", "value": "green"}, "non-empty string `key`"),
     ({"action": "remember", "key": "colour", "value": 5}, "non-empty string `value`"),
     ({"action": "remember", "key": "colour", "value": "  "}, "non-empty string `value`"),
     ({"action": "remember", "key": "k" * (MAX_KEY + 1), "value": "v"}, "limited to 200"),
     ({"action": "recall", "query": ["pet"]}, "`query` must be a string")],
    ids=["no-action", "bad-action", "no-key", "blank-key", "number-value", "blank-value",
         "long-key", "list-query"],
)
def test_bad_arguments_give_an_error_outcome(
    context: Any, args: dict[str, Any], complaint: str
) -> None:
    """Arguments the tool cannot use come back as an "error:" result for the model, no effect."""
    outcome = MemoryTool().run(args, context())
    assert outcome.is_error is True
    assert outcome.text.startswith("error: ")
    assert complaint in outcome.text
    assert outcome.effects == ()


# --- recall ---------------------------------------------------------------------------------------

def test_recall_finds_stored_facts_by_key_or_value(context: Any, writer: apsw.Connection) -> None:
    """Stored facts whose key or value contains the query are listed, newest first."""
    store(writer, ("pet", "a dog called Rex"), ("city", "Lyon"), ("vet", "Dr Dogood"))
    outcome = run(context(), action="recall", query="DOG")
    assert outcome == ToolOutcome(text="- [3] vet: Dr Dogood\n- [1] pet: a dog called Rex")
    assert run(context(), action="recall", query="city").text == "- [2] city: Lyon"


def test_recall_without_query_lists_recent_facts(context: Any, writer: apsw.Connection) -> None:
    """An empty or missing query lists every current fact, newest first."""
    store(writer, ("pet", "Rex"), ("city", "Lyon"))
    assert run(context(), action="recall").text == "- [2] city: Lyon\n- [1] pet: Rex"
    assert run(context(), action="recall", query="  ").text == "- [2] city: Lyon\n- [1] pet: Rex"


def test_recall_sees_facts_remembered_earlier_in_this_turn(context: Any) -> None:
    """A fact remembered in this turn, not yet stored, is already found by recall."""
    ctx = context(RememberFact("pet", "Rex"), RememberFact("city", "Lyon"))
    assert run(ctx, action="recall", query="rex").text == "- pet: Rex"


def test_pending_value_overrides_the_stored_one(context: Any, writer: apsw.Connection) -> None:
    """When this turn changed a fact, recall shows the new value and never the stored one."""
    store(writer, ("pet", "Rex"), ("city", "Lyon"))
    ctx = context(RememberFact("pet", "Fido"), RememberFact("pet", "Bella"))
    assert run(ctx, action="recall", query="").text == "- pet: Bella\n- [2] city: Lyon"
    assert run(ctx, action="recall", query="rex").text == "no facts found for 'rex'"


def test_recall_with_nothing_found_says_so(context: Any, writer: apsw.Connection) -> None:
    """A query matching nothing gets a plain "no facts found" answer, not an error."""
    store(writer, ("pet", "Rex"))
    assert run(context(), action="recall", query="car") == ToolOutcome(
        text="no facts found for 'car'"
    )


def test_remember_then_recall_through_the_store(context: Any, writer: apsw.Connection) -> None:
    """A remembered fact, once the turn stored its effect, is found by a later turn's recall."""
    outcome = run(context(), action="remember", key="Birthday", value="12 March")
    with db.immediate(writer):
        for effect in outcome.effects:
            writes.apply_effect(writer, effect, turn_id="turn-1", now=5.0)
    assert run(context(), action="recall", query="march").text == "- [1] birthday: 12 March"
