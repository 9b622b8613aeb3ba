"""The memory tool's open loops: a thread to raise with the person later is an effect the turn
stores, marked with the path that opened it, and only a loop that is open can be closed."""

from __future__ import annotations

from typing import Any

import apsw
import pytest

from chalie.store import db, proactive_rows
from chalie.store.effects import CloseLoop, OpenLoop
from chalie.tools.base import ToolContext, ToolOutcome
from chalie.tools.memory import MAX_VALUE, MemoryTool

NOW = 1_700_000_000.0


def run(ctx: ToolContext, **args: Any) -> ToolOutcome:
    return MemoryTool().run(args, ctx)


def loop(writer: apsw.Connection, text: str, *, closed: bool = False) -> int:
    with db.immediate(writer):
        loop_id = proactive_rows.open_loop(writer, text, source="dmn", turn_id=None, now=NOW)
        if closed:
            proactive_rows.close_loop(writer, loop_id, NOW + 1)
    return loop_id


@pytest.mark.parametrize("path", ["user", "dmn", "goal"])
def test_open_loop_gives_an_effect_marked_with_the_path(context: Any, writer: apsw.Connection,
                                                        path: str) -> None:
    """Opening a loop gives an OpenLoop effect, single-spaced, whose source is the path that
    ran the turn; nothing is stored yet."""
    outcome = run(context(path=path), action="open_loop", value="  Ask how the\n interview went ")
    assert outcome == ToolOutcome(text="open loop noted: Ask how the interview went",
                                  effects=(OpenLoop("Ask how the interview went", source=path),))
    assert writer.execute("SELECT count(*) FROM open_loops").fetchall() == [(0,)]


@pytest.mark.parametrize(("value", "complaint"), [
    (None, "error: open_loop needs a non-empty string `value`"),
    ("   ", "error: open_loop needs a non-empty string `value`"),
    (7, "error: open_loop needs a non-empty string `value`"),
    ("x" * (MAX_VALUE + 1), "error: value is limited to 4000 characters"),
], ids=["missing", "blank", "number", "too-long"])
def test_open_loop_without_usable_text_is_an_error(context: Any, value: object,
                                                   complaint: str) -> None:
    """A loop with no text, or too much, is an error result and no effect."""
    outcome = run(context(), action="open_loop", value=value)
    assert (outcome.is_error, outcome.effects) == (True, ())
    assert outcome.text.startswith(complaint), outcome.text


def test_close_loop_of_an_open_loop_gives_an_effect(context: Any,
                                                    writer: apsw.Connection) -> None:
    """Closing an open loop by its id gives a CloseLoop effect for the turn to store."""
    loop_id = loop(writer, "Ask about the boiler")
    assert run(context(), action="close_loop", loop_id=loop_id) == ToolOutcome(
        text=f"closed loop {loop_id}", effects=(CloseLoop(loop_id),))


def test_close_loop_of_a_closed_or_unknown_loop_is_an_error(context: Any,
                                                            writer: apsw.Connection) -> None:
    """A loop already closed, or one that never existed, cannot be closed."""
    closed = loop(writer, "Sorted already", closed=True)
    for loop_id in (closed, 999):
        outcome = run(context(), action="close_loop", loop_id=loop_id)
        assert outcome == ToolOutcome(text=f"error: no open loop {loop_id}", is_error=True)


@pytest.mark.parametrize("loop_id", [None, "1", True, 1.0])
def test_close_loop_needs_an_integer_id(context: Any, writer: apsw.Connection,
                                        loop_id: object) -> None:
    """A loop id that is not an integer (a string, a boolean, a float) is an error."""
    loop(writer, "Ask about the boiler")
    outcome = run(context(), action="close_loop", loop_id=loop_id)
    assert outcome == ToolOutcome(
        text="error: close_loop needs the integer `loop_id` of an open loop", is_error=True)
