"""The DMN prefers the person's usual hours: a thought composed when they are usually away
waits in the deferred queue for their next usual hour, within bounds."""

from __future__ import annotations

from typing import Any

import pytest

from chalie.actors.background_messages import PersonConnected
from chalie.llm.scripted import ScriptedProvider
from chalie.store import db, trait_rows
from chalie.values.cognition import Trait
from chalie.world.signals import WorldBoard
from tests.actors.background import NOW, of_type, run_until
from tests.actors.conftest import WatchedClock, answer
from tests.actors.test_dmn import start, sync
from tests.actors.test_world_turns import SETTINGS, send, signal

EIGHT = 1_700_035_200.0  # 2023-11-15 08:00 UTC; NOW is 2023-11-14 22:13 UTC


def seed_usual_hours(data_dir: str, hours: tuple[int, ...], *, messages: float = 20.0) -> None:
    """The person's active_hours trait, as the Sessions leave it: `messages` spread over
    `hours` (UTC, the tests' zone)."""
    conn = db.open_writer(data_dir, busy_timeout_ms=5000, synchronous="FULL")
    try:
        each = messages / len(hours)
        with db.immediate(conn):
            trait_rows.save(conn, {"active_hours": Trait(
                {str(h): each for h in hours}, messages, NOW - 3600)})
    finally:
        conn.close()


def test_a_thought_outside_the_persons_usual_hours_waits_for_the_next_one(
    start_tree: Any, make_config: Any,
) -> None:
    """The person is usually about 08:00-10:00: a thought composed at 22:13 waits (no quiet
    hours are set) and goes out at 08:00."""
    provider = ScriptedProvider([answer("Your parcel arrives tomorrow.")])
    seed_usual_hours(make_config().store.path, (8, 9))
    tree = start(start_tree, make_config, provider)
    tree.clock.advance(30)
    run_until(tree, lambda: tree.rows("SELECT status, reason FROM proactive")
              == [("deferred", "inactive_hours")], "the waiting message")
    assert tree.metric("chalie_proactive_suppressed_total", reason="inactive_hours") == 1
    tree.clock.advance(EIGHT - tree.clock.time() - 1)
    run_until(tree, lambda: True, "nothing yet")
    assert of_type(tree, "notification") == []
    tree.clock.advance(1)
    run_until(tree, lambda: len(of_type(tree, "notification")) == 1, "delivery at 08:00")
    assert tree.rows("SELECT status FROM proactive") == [("sent",)]


def test_a_thought_waiting_for_the_usual_hours_goes_out_when_the_person_connects(
    start_tree: Any, make_config: Any,
) -> None:
    provider = ScriptedProvider([answer("Your parcel arrives tomorrow.")])
    seed_usual_hours(make_config().store.path, (8, 9))
    tree = start(start_tree, make_config, provider)
    tree.clock.advance(30)
    run_until(tree, lambda: tree.rows("SELECT status FROM proactive") == [("deferred",)],
              "the waiting message")
    dmn = tree.directory.get("dmn")
    assert dmn is not None
    dmn.tell(PersonConnected("main"))
    run_until(tree, lambda: len(of_type(tree, "notification")) == 1, "delivery")
    assert tree.rows("SELECT status FROM proactive") == [("sent",)]


@pytest.mark.parametrize(("hours", "messages", "dmn"), [
    ((14,), 20.0, {}),  # the next usual hour is more than 12 hours away
    ((8, 9), 3.0, {}),  # too few messages to know
    ((8, 9), 20.0, {"deferred_max_age_s": 3600.0}),  # it would be dropped before 08:00
], ids=["far", "unknown", "too_old"])
def test_a_thought_is_sent_at_once_when_the_usual_hours_are_far_unknown_or_too_late(
    start_tree: Any, make_config: Any, hours: tuple[int, ...], messages: float,
    dmn: dict[str, Any],
) -> None:
    provider = ScriptedProvider([answer("Your parcel arrives tomorrow.")])
    seed_usual_hours(make_config().store.path, hours, messages=messages)
    tree = start(start_tree, make_config, provider, dmn=dmn)
    tree.clock.advance(30)
    run_until(tree, lambda: len(of_type(tree, "notification")) == 1, "the notification")
    assert tree.rows("SELECT status FROM proactive") == [("sent",)]


def test_a_thought_a_signal_woke_does_not_wait_for_the_usual_hours(
    start_tree: Any, make_config: Any, clock: WatchedClock,
) -> None:
    """The person is usually about 08:00-10:00, and it is 22:13: a warning a salient signal
    woke goes out at once (its news would not keep till morning)."""
    provider = ScriptedProvider([answer("Luigi's is closed tonight: shall I find another?")])
    seed_usual_hours(make_config().store.path, (8, 9))
    tree = start(start_tree, make_config, provider, world=WorldBoard(SETTINGS, clock),
                 dmn={"boot_delay_s": 1e6})
    send(tree, signal(tree, "Luigi's is closed tonight", energy=0.9))
    sync(tree, "dmn")
    tree.clock.advance(20)
    run_until(tree, lambda: len(of_type(tree, "notification")) == 1, "the warning")
    assert tree.rows("SELECT status FROM proactive") == [("sent",)]
