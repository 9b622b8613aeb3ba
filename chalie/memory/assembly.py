"""Budgeted context assembly: plain arithmetic over token counts, no I/O.

The share `context.reply_reserve` of the context window is kept free for the person's message
and the answer (the turn's tool trail takes its room from memory first: chalie.act.loop's
yield_memory). The rest is divided among five sections by their shares
(identity, state and world, memory, tools, history). A section over its budget drops its least
relevant whole items, never half of one. Identity, state and tools lend what they leave unused
to the history, which is fitted last and drops its oldest lines a block at a time, so that its
start, and with it the beginning of the prompt, stays the same for many turns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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


class Fitted(msgspec.Struct, frozen=True):
    """The fixed sections after fitting, and the tokens the history may use: its own budget
    and what identity, state and tools left unused."""

    identity: list[Piece[str]]
    state: list[Piece[str]]
    tools: list[Piece[object]]
    history_budget: int


def assemble(
    b: Budgets,
    *,
    identity: Sequence[Piece[str]],
    state: Sequence[Piece[str]],
    tools: Sequence[Piece[object]],
) -> Fitted:
    """Fit identity, state and tools to their budgets; the history gets its own budget plus
    whatever they left unused. Pinned items (the system prompt, the person's name, the Current
    State) are never dropped: what they take beyond their section's budget is taken from the
    history. The memory section is fitted on its own (`fit`) and lends the history nothing:
    what recall finds changes every turn, and the history's length must not follow it."""
    kept_identity = fit(identity, b.identity)
    kept_state = fit(state, b.state)
    kept_tools = fit(tools, b.tools)
    spare = (b.identity - used(kept_identity)) + (b.state - used(kept_state)) \
        + (b.tools - used(kept_tools))
    return Fitted(kept_identity, kept_state, kept_tools, max(0, b.history + spare))


def history_blocks(lines: Sequence[Piece[T]], budget: int, *, cap: int, block: int,
                   start_id: int, id_of: Callable[[T], int]) -> list[Piece[T]]:
    """The recent history (`lines`, oldest first) within `budget` tokens and `cap` lines,
    trimmed so that its start stays put: it starts where it started last time (`start_id`,
    the id of that first line) for as long as that fits. When it no longer does (or there is
    no usable start: a first turn, or the old start is no longer among `lines`), it starts
    afresh with room to grow: at most `cap - block` lines in at most three quarters of the
    budget, so that the next several turns keep the new start. When so much room would leave
    less than two lines, it keeps the newest lines that fit, as many as it can."""
    start = next((i for i, p in enumerate(lines) if id_of(p.value) >= start_id), len(lines))
    kept = list(lines[start:])
    usable = start_id > 0 and bool(lines) and id_of(lines[0].value) <= start_id
    if usable and len(kept) <= cap and used(kept) <= budget:
        return kept
    roomy = newest(lines, max(0, cap - block), budget * 3 // 4)
    return roomy if len(roomy) >= 2 else newest(lines, cap, budget)


def newest(lines: Sequence[Piece[T]], count: int, budget: int) -> list[Piece[T]]:
    """The newest lines, at most `count` of them, whose tokens fit `budget` together."""
    kept: list[Piece[T]] = []
    total = 0
    for piece in reversed(lines[max(0, len(lines) - count):] if count > 0 else []):
        if total + piece.tokens > budget:
            break
        kept.append(piece)
        total += piece.tokens
    return kept[::-1]
