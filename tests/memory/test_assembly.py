"""Budgeted context assembly: what survives when a prompt's sections are over their shares."""

from __future__ import annotations

from chalie.memory.assembly import Budgets, Piece, assemble, budgets, fit, history_blocks

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


def history(n: int, tokens: int = 10) -> list[Piece[int]]:
    """n history lines, oldest first, whose transcript ids are 1..n."""
    return [Piece(i, tokens, 0.0) for i in range(1, n + 1)]


def ids(kept: list[Piece[int]]) -> list[int]:
    return [p.value for p in kept]


def blocks(lines: list[Piece[int]], budget: int, start_id: int, cap: int = 8,
           block: int = 2) -> list[int]:
    return ids(history_blocks(lines, budget, cap=cap, block=block, start_id=start_id,
                              id_of=lambda i: i))


def test_unused_budget_is_lent_to_the_history_but_memory_lends_nothing() -> None:
    """Identity, state and tools lend what they leave unused to the history; the memory section
    is fitted on its own, so what recall finds never moves the history's start."""
    b = Budgets(identity=20, state=10, memory=30, tools=20, history=25)
    fitted = assemble(b, identity=pieces(("system", 20, float("inf"))), state=[], tools=[])
    assert fitted.history_budget == 25 + 10 + 20  # state 10 + tools 20 unused


def test_an_oversized_current_state_is_kept_and_paid_for_by_the_history() -> None:
    """The Current State is never dropped; what it takes beyond its share comes off the history."""
    b = Budgets(identity=0, state=10, memory=0, tools=0, history=50)
    fitted = assemble(b, identity=[], state=pieces(("state", 40, float("inf"))), tools=[])
    assert names(fitted.state) == ["state"]
    assert fitted.history_budget == 20
    assert blocks(history(5), fitted.history_budget, start_id=4) == [4, 5]


def test_the_history_keeps_its_start_while_it_fits() -> None:
    """Turn after turn the history grows at its end and starts where it started."""
    assert blocks(history(5), 100, start_id=2) == [2, 3, 4, 5]
    assert blocks(history(7), 100, start_id=2) == [2, 3, 4, 5, 6, 7]
    assert blocks(history(9), 80, start_id=2) == [2, 3, 4, 5, 6, 7, 8, 9]  # at cap and budget


def test_past_its_cap_or_budget_the_history_starts_afresh_with_room_to_grow() -> None:
    """Over its cap of lines or its budget of tokens, it moves its start far enough that the
    next turns fit again: a block of lines short of the cap, a quarter of the budget free."""
    assert blocks(history(10), 100, start_id=2) == [5, 6, 7, 8, 9, 10]  # 9 lines > cap 8
    assert blocks(history(10), 60, start_id=5) == [5, 6, 7, 8, 9, 10]  # 60 of 60: it fits
    assert blocks(history(10), 50, start_id=5) == [8, 9, 10]  # 30 of 37 tokens
    assert blocks(history(12), 100, start_id=5) == [5, 6, 7, 8, 9, 10, 11, 12]  # kept: it fits


def test_a_history_without_a_usable_start_leaves_room_to_grow() -> None:
    """On a first turn (or when the old start is gone) it takes a block less than its cap."""
    assert blocks(history(10), 100, start_id=0) == [5, 6, 7, 8, 9, 10]
    lines = history(10)[4:]  # ids 5..10: the old start 2 is no longer among them
    assert blocks(lines, 100, start_id=2) == [5, 6, 7, 8, 9, 10]
    assert blocks(history(3), 100, start_id=0) == [1, 2, 3]
    assert blocks([], 100, start_id=3) == []


def test_a_tight_budget_keeps_the_newest_lines_that_fit() -> None:
    """When room to grow would leave less than two lines, as many as fit are kept."""
    assert blocks(history(6, tokens=30), 70, start_id=0) == [5, 6]  # 3/4 of 70: one line
    assert blocks(history(6, tokens=80), 70, start_id=3) == []  # not even one fits


def test_pinned_items_stay_even_over_budget() -> None:
    """A pinned item (the system prompt, the name) is kept when it alone is over the budget;
    everything droppable goes first."""
    items = pieces(("system", 50, float("inf")), ("trait", 5, 1.0), ("name", 5, float("inf")))
    assert names(fit(items, 20)) == ["system", "name"]
