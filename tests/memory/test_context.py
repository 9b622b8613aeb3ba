"""A turn's context on a real store: recall fills the memory section's budget, shows what it
found dated and in the order it was said, beside its neighbours, never a line the history
holds; the history's start stays put while it fits."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

import apsw
import pytest

from chalie.clock import ManualClock
from chalie.config import Config
from chalie.llm.types import estimate_tokens
from chalie.memory import assembly, context
from chalie.memory.context import ContextSettings, TurnContext
from chalie.memory.embedders import HashedEmbedder
from chalie.memory.recall import NEIGHBOUR_WEIGHT, Recall
from chalie.prompts import Prompts
from chalie.store import db, memory_writes
from chalie.store.effects import RememberFact
from chalie.values.memory import Kind, memory_text

SHARES = {"identity": 0.15, "state": 0.10, "memory": 0.30, "tools": 0.20, "history": 0.25}
DAY_S = 86400.0


@pytest.fixture
def config(make_config: Any) -> Config:
    built: Config = make_config()
    return built


def say(conn: apsw.Connection, text: str, *, at: float, channel: str = "main",
        role: str = "user") -> int:
    """A transcript line; its id."""
    with db.immediate(conn):
        return memory_writes.add_transcript(conn, channel, None, role=role, text=text, at=at)


def build(conn: apsw.Connection, config: Config, clock: ManualClock, text: str, *,
          window: int = 8192, history_turns: int = 20, recall_k: int = 200,
          history_from: int = 0) -> TurnContext:
    with db.immediate(conn):
        space = memory_writes.ensure_space(conn, HashedEmbedder.space, now=1.0)
    recall = Recall(embedder=HashedEmbedder(), space_id=space, config=config.memory,
                    clock=clock)
    settings = ContextSettings(context_window=window, reply_reserve=0.35, shares=SHARES,
                               history_turns=history_turns, recall_k=recall_k)
    return context.build(conn, channel="main", text=text, recall=recall,
                         prompts=Prompts.load(), system="You are Chalie.", tools=(),
                         settings=settings, history_from=history_from)


def test_recall_fills_the_memory_budget_with_more_than_a_fixed_count(
    writer: apsw.Connection, config: Config, clock: ManualClock
) -> None:
    """Ninety lines about the boat: the memory section takes as many as its budget holds, well
    past the dozen it used to stop at, and stays within the budget."""
    start = clock.time() - 30 * DAY_S
    for n in range(90):
        say(writer, f"the boat needed repair number {n} on the hull", at=start + n * 60)
    for n in range(40):  # the recent conversation, about something else
        say(writer, f"the weather report {n} says rain", at=clock.time() - 600 + n)
    ctx = build(writer, config, clock, "what happened with the boat?", window=4096)
    share = assembly.budgets(4096, 0.35, SHARES).memory
    # The memory section has its share and what the history left of its own budget: what the
    # 40 newest lines (2 x history_turns) leave, not the room block trimming keeps free (the
    # history starts afresh here with 30 of them, so that the next turns keep its start).
    newest = [f"the weather report {n} says rain" for n in range(40)]
    line_by_line = sum(max(1, round(estimate_tokens(t))) + 2 for t in newest)
    left = ctx.tokens["history_budget"] - line_by_line
    assert left > 0
    assert ctx.tokens["history"] < line_by_line
    assert ctx.tokens["memory_budget"] == share + left
    boat_lines = [line for line in ctx.memory.splitlines() if "the boat needed" in line]
    assert 12 < len(boat_lines) <= 90
    assert len(ctx.recalled) == 12  # the best dozen are reinforced, not all that came along
    # ... and theirs are the words the answer is checked against (did it use what was found?)
    assert len(ctx.recalled_texts) == 12
    assert all("the boat needed" in text for text in ctx.recalled_texts)
    # ... and they are the lines that give their room to a tool trail last
    best = [line.text for line in ctx.memory_lines if line.best]
    assert sorted(best) == sorted(f"- {text}" for text in ctx.recalled_texts)
    assert share < ctx.tokens["memory"] <= ctx.tokens["memory_budget"]
    assert ctx.memory_fill == 1.0  # of its own share


def test_recalled_lines_are_dated_and_in_the_order_they_were_said(
    writer: apsw.Connection, config: Config, clock: ManualClock
) -> None:
    """Whatever their scores, recalled lines read forwards in time, each with its date."""
    days = [40, 10, 25]
    for d in days:
        say(writer, f"the kayak trip {d} days ago was wonderful", at=clock.time() - d * DAY_S)
    for n in range(40):
        say(writer, f"filler line {n} about lunch", at=clock.time() - 60 + n)
    ctx = build(writer, config, clock, "tell me about the kayak trip")
    dates = [datetime.fromtimestamp(clock.time() - d * DAY_S, UTC).strftime("%Y-%m-%d")
             for d in sorted(days, reverse=True)]
    lines = [line for line in ctx.memory.splitlines()
             if "kayak" in line or line.removeprefix("On ").removesuffix(":") in dates]
    assert lines == [
        f"On {dates[0]}:", "- the kayak trip 40 days ago was wonderful",
        f"On {dates[1]}:", "- the kayak trip 25 days ago was wonderful",
        f"On {dates[2]}:", "- the kayak trip 10 days ago was wonderful",
    ]


def test_a_day_is_shown_once_and_the_same_words_once(
    writer: apsw.Connection, config: Config, clock: ManualClock
) -> None:
    """Lines said on one day sit under one date; a text said twice is shown once."""
    at = clock.time() - 5 * DAY_S
    say(writer, "the piano tuner comes on friday", at=at)
    say(writer, "The piano tuner  comes on Friday", at=at + 60)
    say(writer, "the piano needs new felts", at=at + 120)
    for n in range(40):
        say(writer, f"filler line {n} about lunch", at=clock.time() - 60 + n)
    ctx = build(writer, config, clock, "when does the piano tuner come?")
    day = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d")
    piano = [line for line in ctx.memory.splitlines() if "piano" in line.casefold()]
    assert ctx.memory.count(f"On {day}:") == 1
    assert piano == ["- the piano tuner comes on friday",
                     "- the piano needs new felts"]


def test_a_recalled_line_comes_with_the_lines_said_around_it(
    writer: apsw.Connection, config: Config, clock: ManualClock
) -> None:
    """A question and its answer are two lines: the answer holds no word of the question asked
    now, but it comes along beside the line that does."""
    old = clock.time() - 20 * DAY_S
    say(writer, "Melanie: what instrument did you pick up last spring?", at=old)
    say(writer, "Caroline: the clarinet, I practise every evening", at=old + 30)
    for n in range(40):
        say(writer, f"filler line {n} about lunch", at=clock.time() - 60 + n)
    ctx = build(writer, config, clock, "Which instrument did she pick up?")
    assert "the clarinet, I practise every evening" in ctx.memory
    # Line by line (what gives room back when a turn needs it), the neighbour at half the score
    # of the line it came beside.
    assert memory_text(ctx.memory_lines) == ctx.memory
    scores = {line.text.split(": ")[0]: line.score for line in ctx.memory_lines
              if line.text.startswith(("- Melanie", "- Caroline"))}
    assert scores["- Caroline"] == pytest.approx(scores["- Melanie"] * NEIGHBOUR_WEIGHT)


def test_history_and_memory_never_hold_the_same_line(
    writer: apsw.Connection, config: Config, clock: ManualClock
) -> None:
    """Lines in the history are not recalled again; lines older than the history's start are
    recalled even when they come after the newest checkpoint."""
    ids = [say(writer, f"garden note {n}: the roses need water", at=clock.time() - 3600 + n)
           for n in range(60)]
    ctx = build(writer, config, clock, "what about the roses?", history_turns=5)
    in_history = {line.id for line in ctx.history}
    assert in_history  # the newest lines
    recalled = {key >> 2 for key in ctx.recalled if key & 3 == int(Kind.TRANSCRIPT)}
    assert recalled
    assert not recalled & in_history
    assert min(in_history) == ctx.history_from
    assert recalled <= {i for i in ids if i < ctx.history_from}


def test_the_history_keeps_its_start_across_turns(
    writer: apsw.Connection, config: Config, clock: ManualClock
) -> None:
    """Turn after turn (two lines each) the history starts at the same line until its cap is
    reached; then it moves once, far enough to stay put again for several turns."""
    for n in range(10):
        say(writer, f"line {n}", at=clock.time() + n, role="user" if n % 2 == 0 else "assistant")
    starts = []
    start = 0
    for turn in range(12):
        ctx = build(writer, config, clock, f"question {turn}", history_turns=8,
                    history_from=start)
        start = ctx.history_from
        starts.append(start)
        say(writer, f"question {turn}", at=clock.time() + 100 + 2 * turn)
        say(writer, f"answer {turn}", at=clock.time() + 101 + 2 * turn, role="assistant")
    # Cap 16 lines, a block of 4: 10, 12, 14, 16 lines; then 18 is over, and it starts afresh
    # with 12 (room for two more turns), and so on.
    runs = [len(list(group)) for _, group in itertools.groupby(starts)]
    assert runs == [4, 3, 3, 2]


def test_a_programs_message_is_recalled_as_the_programs_not_the_persons(
    writer: apsw.Connection, config: Config, clock: ManualClock
) -> None:
    """What a paired program said, kept in the person's transcript, is found by recall weeks
    later and shown as that program's words."""
    at = clock.time() - 20 * DAY_S
    with db.immediate(writer):
        memory_writes.add_transcript(writer, "main", None, role="program", speaker="hospital",
                                     text="Your cardiology appointment moved to 3 PM", at=at)
    say(writer, "Your appointment is now at 3 PM.", at=at + 1, role="assistant")
    for n in range(40):
        say(writer, f"filler line {n} about lunch", at=clock.time() - 60 + n)
    ctx = build(writer, config, clock, "when was my cardiology appointment?")
    assert ("- <<<data from hospital, a paired program (its message)\nYour cardiology "
            "appointment moved to 3 PM\ndata>>>") in ctx.memory


def test_a_recalled_fact_shows_what_it_replaced_and_never_both_as_current(
    writer: apsw.Connection, config: Config, clock: ManualClock
) -> None:
    """After "city: Porto" replaced "home: Lisbon" (another key, named by the model), recall
    shows the current fact with its history, compactly, and the old value is no fact of its
    own any more."""
    day = 86400.0
    with db.immediate(writer):
        old = memory_writes.remember(writer, RememberFact("home", "Lisbon"), turn_id=None,
                                     now=1_700_000_000.0)
        assert old is not None
        memory_writes.remember(writer, RememberFact("city", "Porto", replaces=(old,)),
                               turn_id=None, now=1_700_000_000.0 + 200 * day)
    clock.advance(1_700_000_000.0 + 201 * day - clock.time())
    built = build(writer, config, clock, "Which city do they live in, Porto or Lisbon?")
    facts = [line.text for line in built.memory_lines if "(learned)" in line.text]
    assert facts == ["- (learned) city: Porto (since 2024-06-01; before: home: Lisbon)"]
