"""Budgeted context assembly: plain arithmetic over token counts, no I/O.

The share `context.reply_reserve` of the context window is kept free for the person's message,
the turn's tool trail and the answer. The rest is divided among five sections by their shares
(identity, state and world, memory, tools, history). A section over its budget drops its least
relevant whole items, never half of one; a section that uses less than its budget lends the
difference to the history, which is fitted last and drops its oldest lines first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

import msgspec

T = TypeVar("T")
SECTIONS = ("identity", "state", "memory", "tools", "history")


class Piece(msgspec.Struct, Generic[T], frozen=True):
    """One whole item of a section: what it is, its size in tokens, how much it matters."""

    value: T
    tokens: int
    relevance: float


class Budgets(msgspec.Struct, frozen=True):
    identity: int
    state: int
    memory: int
    tools: int
    history: int

    @property
    def total(self) -> int:
        return self.identity + self.state + self.memory + self.tools + self.history


def budgets(context_window: int, reply_reserve: float, shares: dict[str, float]) -> Budgets:
    """Each section's tokens: its share of the window less the reply reserve."""
    available = max(0, int(context_window * (1 - reply_reserve)))
    return Budgets(**{name: int(available * shares[name]) for name in SECTIONS})


PINNED = float("inf")  # the relevance of an item that is never dropped


def fit(pieces: Sequence[Piece[T]], budget: int) -> list[Piece[T]]:
    """The pieces that stay within `budget`: the least relevant are dropped first (the later
    one of two equally relevant), whole; those kept stay in their order. Pinned pieces are
    never dropped, even when they alone are over the budget."""
    total = sum(p.tokens for p in pieces)
    dropped: set[int] = set()
    by_relevance = sorted(range(len(pieces)), key=lambda i: (pieces[i].relevance, -i))
    for i in by_relevance:
        if total <= budget or pieces[i].relevance == PINNED:
            break
        dropped.add(i)
        total -= pieces[i].tokens
    return [p for i, p in enumerate(pieces) if i not in dropped]


def used(pieces: Sequence[Piece[T]]) -> int:
    return sum(p.tokens for p in pieces)


class Fitted(msgspec.Struct, Generic[T], frozen=True):
    """Every section after fitting, with what each one used and what the history was given."""

    identity: list[Piece[str]]
    state: list[Piece[str]]
    memory: list[Piece[T]]
    tools: list[Piece[object]]
    history: list[Piece[object]]
    history_budget: int


def assemble(
    b: Budgets,
    *,
    identity: Sequence[Piece[str]],
    state: Sequence[Piece[str]],
    memory: Sequence[Piece[T]],
    tools: Sequence[Piece[object]],
    history: Sequence[Piece[object]],
) -> Fitted[T]:
    """Fit every section to its budget, then the history (oldest lines dropped first) to its
    own budget plus whatever the others left unused. Pinned items (the system prompt, the
    person's name, the Current State) are never dropped: what they take beyond their section's
    budget is taken from the history."""
    kept_identity = fit(identity, b.identity)
    kept_state = fit(state, b.state)
    kept_memory = fit(memory, b.memory)
    kept_tools = fit(tools, b.tools)
    spare = (b.identity - used(kept_identity)) + (b.state - used(kept_state)) \
        + (b.memory - used(kept_memory)) + (b.tools - used(kept_tools))
    history_budget = max(0, b.history + spare)
    # Oldest first in `history`: relevance is recency, so the oldest lines go first.
    ranked = [Piece(p.value, p.tokens, float(i)) for i, p in enumerate(history)]
    kept_history = fit(ranked, history_budget)
    return Fitted(kept_identity, kept_state, kept_memory, kept_tools,
                  [history[int(p.relevance)] for p in kept_history], history_budget)
