"""Budgeted context assembly: what survives when a prompt's sections are over their shares."""

from __future__ import annotations

from chalie.memory.assembly import Budgets, Piece, assemble, budgets, fit

SHARES = {"identity": 0.15, "state": 0.10, "memory": 0.30, "tools": 0.20, "history": 0.25}


def pieces(*spec: tuple[str, int, float]) -> list[Piece[str]]:
    return [Piece(name, tokens, relevance) for name, tokens, relevance in spec]


def names(kept: list[Piece[str]]) -> list[str]:
    return [p.value for p in kept]


def test_budgets_share_out_the_window_less_the_reply_reserve() -> None:
    """An 8192-token window less 35% kept for the reply leaves 5324 tokens, shared by the shares."""
    b = budgets(8192, 0.35, SHARES)
    assert b == Budgets(identity=798, state=532, memory=1597, tools=1064, history=1331)
    assert b.total <= 8192 * 0.65


def test_a_section_within_budget_keeps_everything_in_order() -> None:
    """Nothing is dropped while the items fit."""
    items = pieces(("a", 10, 0.1), ("b", 10, 0.9), ("c", 10, 0.5))
    assert names(fit(items, 30)) == ["a", "b", "c"]


def test_a_section_over_budget_drops_its_least_relevant_whole_items() -> None:
    """The least relevant items go first, whole, until the rest fit; the kept keep their order."""
    items = pieces(("a", 10, 0.1), ("b", 40, 0.9), ("c", 10, 0.5), ("d", 10, 0.3))
    assert names(fit(items, 55)) == ["b", "c"]
    assert names(fit(items, 60)) == ["b", "c", "d"]
    assert names(fit(items, 39)) == []  # the one item that matters most does not fit at all


def test_of_two_equally_relevant_items_the_later_one_is_dropped() -> None:
    """Ties are broken by position: the earlier item stays."""
    assert names(fit(pieces(("first", 10, 1.0), ("second", 10, 1.0)), 15)) == ["first"]


def test_unused_budget_is_lent_to_the_history_which_drops_its_oldest_lines() -> None:
    """Sections that use less than their share let the history keep more of the newest lines."""
    b = Budgets(identity=20, state=10, memory=30, tools=20, history=25)
    history: list[Piece[object]] = [Piece(f"line {n}", 10, 0.0) for n in range(10)]
    fitted = assemble(b, identity=pieces(("system", 20, float("inf"))), state=[],
                      memory=pieces(("m", 10, 1.0)), tools=[], history=history)
    # spare: state 10 + memory 20 + tools 20 = 50, so the history gets 75 tokens: 7 lines
    assert fitted.history_budget == 75
    assert [p.value for p in fitted.history] == [f"line {n}" for n in range(3, 10)]


def test_an_oversized_current_state_is_kept_and_paid_for_by_the_history() -> None:
    """The Current State is never dropped; what it takes beyond its share comes off the history."""
    b = Budgets(identity=0, state=10, memory=0, tools=0, history=50)
    history: list[Piece[object]] = [Piece(f"line {n}", 10, 0.0) for n in range(5)]
    fitted = assemble(b, identity=[], state=pieces(("state", 40, float("inf"))), memory=[],
                      tools=[], history=history)
    assert names(fitted.state) == ["state"]
    assert fitted.history_budget == 20
    assert [p.value for p in fitted.history] == ["line 3", "line 4"]


def test_pinned_items_stay_even_over_budget() -> None:
    """A pinned item (the system prompt, the name) is kept when it alone is over the budget;
    everything droppable goes first."""
    items = pieces(("system", 50, float("inf")), ("trait", 5, 1.0), ("name", 5, float("inf")))
    assert names(fit(items, 20)) == ["system", "name"]
