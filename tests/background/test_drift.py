"""What the DMN thinks about: it reads the store's episodes, open loops and goals (each shown
with the id a tool needs), its fingerprint changes exactly when something it could think about
changed (so an unchanged store costs no LLM call), and a "NOTHING" answer, however a small
model dresses it, sends the person nothing."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import apsw
import msgspec
import pytest

from chalie.background import drift
from chalie.background.drift import is_no_action
from chalie.prompts import Prompts
from chalie.store import db, goal_rows, memory_writes, proactive_rows
from chalie.store.memory_writes import EpisodeRow
from chalie.values.signals import Signal
from chalie.world.signals import Salient

NOW = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC
DAY = 86_400.0
PROMPTS = Prompts.load()


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[apsw.Connection]:
    """The writer connection of a fresh, migrated store."""
    writer = db.open_writer(tmp_path / "data", busy_timeout_ms=5000, synchronous="FULL")
    yield writer
    writer.close()


def read(conn: apsw.Connection, trigger: str = "cadence", *, now: float = NOW,
         signals: Sequence[Signal] = (), world: Sequence[Salient] = ()) -> drift.Inputs:
    return drift.read(conn, PROMPTS, trigger=trigger, channel="main", now=now,
                      signals=signals, world=world)


def episode(conn: apsw.Connection, gist: str, *, salience: float = 0.5, at: float = NOW - 3600,
            outcome: str = "", loops: tuple[str, ...] = ()) -> None:
    """An episode as the Encoder stores it."""
    with db.immediate(conn):
        memory_writes.insert_episodes(conn, "main", [EpisodeRow(
            gist=gist, intent="chat", outcome=outcome, entities=(), open_loops=loops,
            salience=salience, valence=0.0, transcript_from=1, transcript_to=2,
            happened_at=at)], upto_transcript_id=0, encoding_id=f"enc-{gist}", now=at)


def open_loop(conn: apsw.Connection, text: str, at: float = NOW - 60) -> int:
    with db.immediate(conn):
        return proactive_rows.open_loop(conn, text, source="dmn", turn_id=None, now=at)


def goal(conn: apsw.Connection, goal_id: str, text: str, at: float = NOW - 60) -> None:
    with db.immediate(conn):
        goal_rows.insert(conn, goal_id, text, source="person", turn_id=None, now=at)


def set_goal(conn: apsw.Connection, goal_id: str, state: str, at: float = NOW - 30) -> None:
    with db.immediate(conn):
        goal_rows.set_state(conn, goal_id, state, now=at)


def signal(received_at: float, content: str = "Parcel out for delivery") -> Signal:
    return Signal(id=f"s-{received_at}", sender="courier", signal_type="delivery",
                  content=content, source="courier", topic=None, activation_energy=0.5,
                  metadata=None, received_at=received_at)


def episode_lines(inputs: drift.Inputs) -> list[str]:
    """The gists of the rendered episodes, in order ("- (date, conversation) gist")."""
    return [line.split(") ", 1)[1] for line in inputs.episodes.splitlines()]


# --- NOTHING -----------------------------------------------------------------------------------

@pytest.mark.parametrize("answer", [
    "NOTHING", "NOTHING.", "`NOTHING`", "**NOTHING**", "NOTHING - nothing new",
    "NOTHING: the person is asleep", "  NOTHING\n", '"NOTHING"', "", "  ", "\n\t",
])
def test_a_nothing_answer_sends_nothing(answer: str) -> None:
    """"NOTHING", alone, quoted, in bold or code, or followed by a reason, and an empty answer,
    all mean no message."""
    assert is_no_action(answer) is True


@pytest.mark.parametrize("answer", [
    "Nothing urgent, but your parcel arrives today",
    "NOTHINGNESS is a fine word for a Monday",
    "Your dentist appointment is tomorrow at 9.",
    "nothing",
    "I have NOTHING to add, but the parcel arrives today",
    "NOTHING to report, but your parcel arrives today",
])
def test_a_real_message_is_not_taken_for_nothing(answer: str) -> None:
    """A message that merely starts with "Nothing" in ordinary case, a longer word, or a
    normal message is a message the person gets."""
    assert is_no_action(answer) is False


# --- an empty store ----------------------------------------------------------------------------

def test_an_empty_store_has_nothing_to_think_about(conn: apsw.Connection) -> None:
    """With no episodes, loops, goals or signals the read is empty and its sections say so."""
    inputs = read(conn)
    assert inputs.empty is True
    assert inputs.episodes == ""
    assert inputs.loops == "(none)"
    assert inputs.goals == "(none)"
    assert inputs.history == ()
    assert inputs.state == ""
    assert inputs.world == ""


@pytest.mark.parametrize("what", ["episode", "loop", "goal", "signal"])
def test_any_one_thing_makes_the_store_not_empty(conn: apsw.Connection, what: str) -> None:
    """One episode, open loop, goal or signal is something to think about."""
    signals: list[Signal] = []
    if what == "episode":
        episode(conn, "Talked about the garden")
    elif what == "loop":
        open_loop(conn, "Ask how the interview went")
    elif what == "goal":
        goal(conn, "g1", "Find a plumber")
    else:
        signals.append(signal(NOW - 10))
    assert read(conn, signals=signals).empty is False


# --- the fingerprint ---------------------------------------------------------------------------

def test_the_fingerprint_is_the_same_when_nothing_changed(conn: apsw.Connection) -> None:
    """Two reads of an unchanged store, idle or cadence, a minute apart, give one fingerprint."""
    episode(conn, "Booked Luigi's")
    open_loop(conn, "Ask about Friday")
    goal(conn, "g1", "Find a plumber")
    signals = [signal(NOW - 100)]
    first = read(conn, signals=signals).fingerprint
    assert read(conn, signals=signals, now=NOW + 60).fingerprint == first
    assert read(conn, "idle", signals=signals).fingerprint == first


def test_a_new_episode_changes_the_fingerprint(conn: apsw.Connection) -> None:
    """An episode stored since the last look is something new."""
    episode(conn, "Booked Luigi's")
    before = read(conn).fingerprint
    episode(conn, "Planned a trip to Lisbon")
    assert read(conn).fingerprint != before


def test_opening_and_closing_a_loop_each_change_the_fingerprint(conn: apsw.Connection) -> None:
    """A loop opened, and then the same loop closed, are both changes."""
    empty = read(conn).fingerprint
    loop_id = open_loop(conn, "Ask how the interview went")
    opened = read(conn).fingerprint
    assert opened != empty
    with db.immediate(conn):
        assert proactive_rows.close_loop(conn, loop_id, NOW) is True
    closed = read(conn).fingerprint
    assert closed != opened
    assert read(conn).loops == "(none)"


def test_a_goal_started_or_changing_state_changes_the_fingerprint(
    conn: apsw.Connection,
) -> None:
    """A new goal is new; so is the same goal moving from pending to running to completed."""
    marks = [read(conn).fingerprint]
    goal(conn, "g1", "Find a plumber")
    marks.append(read(conn).fingerprint)
    set_goal(conn, "g1", "running")
    marks.append(read(conn).fingerprint)
    set_goal(conn, "g1", "completed")
    marks.append(read(conn).fingerprint)
    assert len(set(marks)) == 4


def test_a_newer_signal_changes_the_fingerprint(conn: apsw.Connection) -> None:
    """A signal received since the last look is new; the same signals again, or an older one
    added, are not."""
    held = [signal(NOW - 100)]
    before = read(conn, signals=held).fingerprint
    assert read(conn, signals=[*held, signal(NOW - 500)]).fingerprint == before
    assert read(conn, signals=[*held, signal(NOW - 5)]).fingerprint != before


# --- what is shown -----------------------------------------------------------------------------

def test_idle_looks_at_the_weeks_most_salient_episodes(conn: apsw.Connection) -> None:
    """An idle trigger shows the last week's episodes, most salient first; a weightier one
    older than a week is left out."""
    episode(conn, "Old but weighty", salience=0.95, at=NOW - 8 * DAY)
    episode(conn, "Middling", salience=0.5, at=NOW - 1 * DAY)
    episode(conn, "Weighty", salience=0.8, at=NOW - 2 * DAY, outcome="booked")
    episode(conn, "Light", salience=0.3, at=NOW - 3600)
    inputs = read(conn, "idle")
    assert inputs.episodes.splitlines()[0] == "- (2023-11-12, conversation) Weighty (booked)"
    assert episode_lines(inputs) == ["Weighty (booked)", "Middling", "Light"]


def test_cadence_weighs_salience_by_recency(conn: apsw.Connection) -> None:
    """A cadence trigger counts an episode 30 days old half as much: a fresh middling one comes
    before an old weighty one, and old ones are still seen."""
    episode(conn, "Old but weighty", salience=0.9, at=NOW - 60 * DAY)  # 0.9 / 3 = 0.30
    episode(conn, "Recent middling", salience=0.5, at=NOW - 1 * DAY)   # 0.5 / 1.03 = 0.48
    episode(conn, "Fresh light", salience=0.4, at=NOW - 60)            # about 0.40
    episode(conn, "Month old", salience=0.7, at=NOW - 30 * DAY)        # 0.7 / 2 = 0.35
    assert episode_lines(read(conn, "cadence")) == [
        "Recent middling", "Fresh light", "Month old", "Old but weighty"]


def test_at_most_eight_episodes_are_shown(conn: apsw.Connection) -> None:
    """Of ten recent episodes, the eight weightiest are shown."""
    for n in range(10):
        episode(conn, f"Episode {n}", salience=n / 10, at=NOW - 3600 - n)
    assert episode_lines(read(conn, "idle")) == [f"Episode {n}" for n in range(9, 1, -1)]


def test_open_loops_are_shown_with_their_ids(conn: apsw.Connection) -> None:
    """Each open loop is shown with the id close_loop needs and the day it was opened, oldest
    first; a closed one is not shown. Loops left open in conversations show on cadence only."""
    first = open_loop(conn, "Ask how the interview went", at=NOW - 2 * DAY)
    second = open_loop(conn, "Remind about the boiler service")
    closed = open_loop(conn, "Already sorted")
    with db.immediate(conn):
        proactive_rows.close_loop(conn, closed, NOW)
    episode(conn, "Dinner plans", loops=("confirm the table",))
    own = [f"- [loop {first}, 2023-11-12] Ask how the interview went",
           f"- [loop {second}, 2023-11-14] Remind about the boiler service"]
    assert read(conn, "cadence").loops.splitlines() == [
        *own, "- (left open in a conversation) confirm the table"]
    assert read(conn, "idle").loops.splitlines() == own


def test_goals_are_shown_with_their_ids(conn: apsw.Connection) -> None:
    """Goals are shown with their id and state, newest first: every goal on cadence, only the
    active ones when idle."""
    goal(conn, "g-old", "Renew the passport", at=NOW - 300)
    goal(conn, "g-new", "Find a plumber", at=NOW - 200)
    set_goal(conn, "g-old", "completed")
    assert read(conn, "cadence").goals.splitlines() == [
        "- [goal g-new, pending] Find a plumber",
        "- [goal g-old, completed] Renew the passport"]
    assert read(conn, "idle").goals.splitlines() == ["- [goal g-new, pending] Find a plumber"]


@pytest.mark.parametrize("trigger", ["idle", "cadence", "signal"])
def test_every_trigger_sees_world_state(conn: apsw.Connection, trigger: str) -> None:
    """The most salient signals go into every trigger's prompt: an idle thought sees them
    too."""
    held = signal(NOW - 60, content="Parcel out for delivery")
    world = [Salient(salience=0.5, age_s=60.0, signal=held)]
    shown = read(conn, trigger, signals=[held], world=world).world
    assert "Parcel out for delivery" in shown
    assert shown.startswith("Signals that paired programs sent")


def test_a_signal_under_the_wake_threshold_is_not_something_new(conn: apsw.Connection) -> None:
    """A signal sent with less activation energy than dmn.signal_wake neither makes an empty
    store something to think about nor changes the fingerprint: it never costs a call."""
    weak = msgspec.structs.replace(signal(NOW - 10), activation_energy=0.4)
    strong = msgspec.structs.replace(signal(NOW - 5, content="Luigi's is closed tonight"),
                                     id="s-strong", activation_energy=0.9)
    empty = drift.read(conn, PROMPTS, trigger="cadence", channel="main", now=NOW, signals=[],
                       world=[], wake=0.7)
    with_weak = drift.read(conn, PROMPTS, trigger="cadence", channel="main", now=NOW,
                           signals=[weak], world=[], wake=0.7)
    assert with_weak.empty is True
    assert with_weak.fingerprint == empty.fingerprint
    with_strong = drift.read(conn, PROMPTS, trigger="cadence", channel="main", now=NOW,
                             signals=[weak, strong], world=[], wake=0.7)
    assert with_strong.empty is False
    assert with_strong.fingerprint != empty.fingerprint


def test_a_signal_trigger_shows_the_signals_that_woke_it_fenced(conn: apsw.Connection) -> None:
    """A signal trigger's read carries the signals that woke it, in the data fence, and looks
    at everything a cadence trigger does."""
    episode(conn, "Booked Luigi's for tonight at 8", loops=("confirm the table",))
    goal(conn, "g-1", "Plan the weekend")
    set_goal(conn, "g-1", "completed")
    woke = signal(NOW - 20, content="Luigi's is closed tonight")
    inputs = drift.read(conn, PROMPTS, trigger="signal", channel="main", now=NOW,
                        signals=[woke], world=[], wake=0.0,
                        woke=[Salient(salience=0.9, age_s=20.0, signal=woke)])
    assert "<<<data from paired programs' signals\n- [delivery from courier, 20s ago" in inputs.woke
    assert "Luigi's is closed tonight\ndata>>>" in inputs.woke
    assert "(left open in a conversation) confirm the table" in inputs.loops
    assert "[goal g-1, completed]" in inputs.goals
    assert read(conn, "cadence").woke == ""
