"""The DMN's attention as the person sees it: a salient signal wakes a thought within seconds
(a burst is one thought, each signal wakes it once), a faint one costs nothing, and no thought
interrupts a conversation: what comes due meanwhile runs once it pauses."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from chalie.llm.scripted import ScriptedProvider
from chalie.store import db, interface_rows
from chalie.values.signals import Signal
from chalie.world.signals import WorldBoard
from tests.actors.background import of_type, run_until
from tests.actors.conftest import GatedProvider, Tree, WatchedClock, answer, prompt
from tests.actors.test_dmn import dmn_calls, seed_episode, settled, start, sync
from tests.actors.test_world_turns import SETTINGS, send, signal

WARNING = "Luigi's is closed tonight, and you have a table there at 8. Shall I find another?"
# Only signals wake the DMN here: boot and cadence far away.
QUIET = {"boot_delay_s": 1e6, "cadence_s": 1e7}


def attentive(start_tree: Any, make_config: Any, clock: WatchedClock,
              provider: ScriptedProvider, **dmn: Any) -> Tree:
    return start(start_tree, make_config, provider, episode="Booked Luigi's for tonight at 8",
                 world=WorldBoard(SETTINGS, clock), dmn={**QUIET, **dmn})


def gated(start_tree: Any, make_config: Any, clock: WatchedClock, provider: GatedProvider,
          *, dmn: dict[str, Any], **options: Any) -> Tree:
    """A tree whose LLM holds the calls the test names (GatedProvider), the DMN on, an episode
    stored; started, its timers set."""
    seed_episode(make_config().store.path, "Booked Luigi's for tonight at 8")
    tree: Tree = start_tree(provider, paths=True, world=WorldBoard(SETTINGS, clock),
                            dmn={"enabled": True, **dmn}, **options)
    sync(tree, "dmn")
    return tree


def held(tree: Tree, trigger: str) -> None:
    """Wait until `trigger` is held (for a conversation, or the thought in hand)."""
    run_until(tree, lambda: tree.metric("chalie_dmn_triggers_total", trigger=trigger,
                                        result="held") == 1, f"the {trigger} held")


def why(request: Any) -> str:
    """The prompt's "Why you are thinking now" section."""
    return prompt(request).split("# Why you are thinking now\n\n")[1].split("\n\n")[0]


def notice(tree: Tree, *signals: Signal) -> None:
    """Signals reach world state, and the Dmn has heard of the salient ones (their wake is
    set) before the test moves the clock."""
    send(tree, *signals)
    sync(tree, "dmn")


def runs(tree: Tree) -> list[tuple[Any, ...]]:
    return tree.rows("SELECT trigger, result, signals FROM dmn_runs ORDER BY id")


def test_a_salient_signal_wakes_one_thought_after_the_debounce_for_the_whole_burst(
    start_tree: Any, make_config: Any, clock: WatchedClock,
) -> None:
    """Two salient signals 5 s apart and a faint one: one thought 20 s after the first, about
    both salient ones; the faint one is counted unattended; the warning reaches the person."""
    provider = ScriptedProvider([answer(WARNING)])
    tree = attentive(start_tree, make_config, clock, provider)
    notice(tree, signal(tree, "Luigi's is closed tonight", energy=0.9))
    tree.clock.advance(5)
    notice(tree, signal(tree, "Storm warning for the evening", energy=0.75),
         signal(tree, "AAPL up 0.3%", energy=0.3))
    tree.clock.advance(14)
    run_until(tree, lambda: True, "nothing yet")
    assert dmn_calls(provider) == 0
    tree.clock.advance(1)
    run_until(tree, lambda: len(of_type(tree, "notification")) == 1, "the warning")
    [request] = provider.requests
    woke = why(request)
    assert "Luigi's is closed tonight" in woke
    assert "Storm warning for the evening" in woke
    assert "AAPL" not in woke
    assert "Booked Luigi's for tonight at 8" in prompt(request)
    assert of_type(tree, "notification")[0]["content"] == WARNING
    assert tree.metric("chalie_dmn_triggers_total", trigger="signal", result="ran") == 1
    assert tree.metric("chalie_signals_unattended_total") == 1
    settled(tree)
    [(trigger, result, ids)] = runs(tree)
    assert (trigger, result) == ("signal", "sent")
    assert sorted(json.loads(ids)) == ["Luigi's is closed tonight",
                                       "Storm warning for the evening"]


def test_each_signal_wakes_the_dmn_at_most_once(
    start_tree: Any, make_config: Any, clock: WatchedClock,
) -> None:
    """The same signal told again (a second SignalsIn of its id) after its thought wakes
    nothing; a new one wakes a second thought."""
    provider = ScriptedProvider([answer("NOTHING"), answer("NOTHING")])
    tree = attentive(start_tree, make_config, clock, provider)
    luigi = signal(tree, "Luigi's is closed tonight", energy=0.9)
    notice(tree, luigi)
    tree.clock.advance(20)
    run_until(tree, lambda: dmn_calls(provider) == 1, "the first thought")
    settled(tree)
    notice(tree, luigi)
    tree.clock.advance(3600)
    run_until(tree, lambda: True, "nothing")
    settled(tree)
    assert dmn_calls(provider) == 1
    notice(tree, signal(tree, "The 8pm train is cancelled", energy=0.8))
    tree.clock.advance(20)
    run_until(tree, lambda: dmn_calls(provider) == 2, "the second thought")
    assert "The 8pm train is cancelled" in why(provider.requests[1])
    assert "Luigi's" not in why(provider.requests[1])


def test_faint_signals_cost_no_call_at_all(
    start_tree: Any, make_config: Any, clock: WatchedClock,
) -> None:
    """Signals under dmn.signal_wake wake nothing, and a cadence trigger finds nothing new in
    them: no LLM call, each counted unattended."""
    provider = ScriptedProvider([])
    tree = start(start_tree, make_config, provider, episode=None,
                 world=WorldBoard(SETTINGS, clock), dmn={"boot_delay_s": 1800.0})
    notice(tree, *(signal(tree, f"reading {n}", energy=0.5) for n in range(3)))
    tree.clock.advance(1800)
    run_until(tree, lambda: tree.metric("chalie_dmn_triggers_total", trigger="cadence",
                                        result="nothing_new") == 1, "the cadence skip")
    assert dmn_calls(provider) == 0
    assert tree.metric("chalie_signals_unattended_total") == 3
    assert tree.metric("chalie_dmn_triggers_total", trigger="signal", result="ran") == 0


def test_a_signal_while_a_thought_is_in_hand_waits_for_it_and_is_not_lost(
    start_tree: Any, make_config: Any, clock: WatchedClock,
) -> None:
    """The cadence thought's call is still out when a salient signal's time comes: the
    signal's thought runs once that one is stored."""
    provider = GatedProvider([answer("NOTHING"), answer("NOTHING")], hold=(0,))
    tree = gated(start_tree, make_config, clock, provider, paths_pool=ThreadPoolExecutor(2),
                 dmn={"boot_delay_s": 20.0, "cadence_s": 1e7})
    tree.clock.advance(20)
    provider.wait_entered(0)
    notice(tree, signal(tree, "Luigi's is closed tonight", energy=0.9))
    tree.clock.advance(20)
    held(tree, "signal")
    assert len(provider.requests) == 1
    provider.release(0)
    run_until(tree, lambda: len(provider.requests) == 2, "the signal's thought")
    assert "Luigi's is closed tonight" in why(provider.requests[1])
    settled(tree)
    assert [(t, r) for t, r, _ in runs(tree)] == [("cadence", "nothing"), ("signal", "nothing")]


def test_no_thought_fires_during_a_conversation_and_a_held_one_runs_once_after(
    start_tree: Any, make_config: Any, clock: WatchedClock,
) -> None:
    """The person chats; a salient signal's time and a cadence trigger both come within
    dmn.busy_s of their message: nothing fires until the conversation pauses, then one
    thought, the signal's (the cadence merged into it)."""
    provider = ScriptedProvider([answer("NOTHING"), answer("Sure."), answer(WARNING)])
    tree = attentive(start_tree, make_config, clock, provider, boot_delay_s=30.0,
                     cadence_s=100.0, busy_s=120.0)
    tree.clock.advance(30)
    run_until(tree, lambda: dmn_calls(provider) == 1, "the boot thought")
    settled(tree)
    tree.chat("what's on tonight?")
    tree.outbox.wait_for_type("done")
    tree.settle()
    sync(tree, "dmn")
    said_at = tree.clock.time()
    notice(tree, signal(tree, "Luigi's is closed tonight", energy=0.9))
    tree.clock.advance(119)  # the signal's wake at +20 and the cadence at +100 come in it
    held(tree, "cadence")
    assert tree.metric("chalie_dmn_triggers_total", trigger="signal", result="held") == 1
    assert len(provider.requests) == 2  # the boot thought and the person's turn
    tree.clock.advance(1)
    run_until(tree, lambda: len(of_type(tree, "notification")) == 1, "the thought after")
    assert tree.clock.time() - said_at == 120
    assert "Luigi's is closed tonight" in why(provider.requests[2])
    assert tree.metric("chalie_dmn_triggers_total", trigger="cadence", result="merged") == 1
    assert tree.metric("chalie_dmn_triggers_total", trigger="signal", result="ran") == 1
    assert tree.metric("chalie_dmn_triggers_total", trigger="cadence", result="ran") == 1


def test_a_thought_waits_while_a_turn_of_the_person_runs_however_long(
    start_tree: Any, make_config: Any, clock: WatchedClock,
) -> None:
    """A turn still running 10 minutes after the message (a long tool call): no thought until
    it is stored, and then dmn.busy_s more."""
    provider = GatedProvider([answer("Done at last."), answer(WARNING)], hold=(0,))
    tree = gated(start_tree, make_config, clock, provider, threaded=True,
                 act={"timeout_s": 1e6}, dmn={**QUIET, "busy_s": 120.0})
    tree.chat("book me somewhere else")
    provider.wait_entered(0)
    notice(tree, signal(tree, "Luigi's is closed tonight", energy=0.9))
    tree.clock.advance(600)
    held(tree, "signal")
    assert len(provider.requests) == 1
    provider.release(0)
    tree.outbox.wait_for_type("done")
    tree.settle()
    sync(tree, "dmn")
    tree.clock.advance(119)
    run_until(tree, lambda: True, "nothing yet")
    assert len(provider.requests) == 1
    tree.clock.advance(1)
    run_until(tree, lambda: len(of_type(tree, "notification")) == 1, "the thought after")


def test_a_message_composed_as_a_conversation_starts_waits_for_its_pause(
    start_tree: Any, make_config: Any, clock: WatchedClock,
) -> None:
    """The person writes while the DMN's thought is out: its message is deferred (reason
    conversation) and delivered dmn.busy_s after their last message, not in between."""
    provider = GatedProvider([answer(WARNING), answer("Hi!")], hold=(0,))
    tree = gated(start_tree, make_config, clock, provider, threaded=True,
                 paths_pool=ThreadPoolExecutor(2), dmn={**QUIET, "busy_s": 120.0})
    notice(tree, signal(tree, "Luigi's is closed tonight", energy=0.9))
    tree.clock.advance(20)
    provider.wait_entered(0)
    tree.chat("hello")
    run_until(tree, lambda: len(provider.requests) == 2, "the person's turn")
    tree.outbox.wait_for_type("done")
    tree.settle()
    sync(tree, "dmn")
    provider.release(0)
    run_until(tree, lambda: tree.rows("SELECT status, reason FROM proactive") == [
        ("deferred", "conversation")], "the deferred thought")
    assert of_type(tree, "notification") == []
    tree.clock.advance(120)
    run_until(tree, lambda: len(of_type(tree, "notification")) == 1, "delivery at the pause")
    assert tree.rows("SELECT status FROM proactive") == [("sent",)]


def test_a_salient_signal_that_came_before_a_restart_is_thought_about_at_boot(
    start_tree: Any, make_config: Any, clock: WatchedClock,
) -> None:
    """World state read back at start holds a salient signal no thought has seen (the server
    stopped before its wake): the first trigger is that signal's."""
    config = make_config()
    seed_episode(config.store.path, "Booked Luigi's for tonight at 8")
    conn = db.open_writer(config.store.path, busy_timeout_ms=5000, synchronous="FULL")
    try:
        with db.immediate(conn):
            interface_rows.save_world(conn, [Signal(
                id="luigi", sender="iface-1", signal_type="closure",
                content="Luigi's is closed tonight", source="luigis", topic=None,
                activation_energy=0.9, metadata=None, received_at=clock.time() - 60)])
    finally:
        conn.close()
    provider = ScriptedProvider([answer(WARNING)])
    tree: Tree = start_tree(provider, paths=True, world=WorldBoard(SETTINGS, clock),
                            dmn={"enabled": True, "boot_delay_s": 30.0, "cadence_s": 1e7,
                                 "idle_s": 1e7})
    sync(tree, "dmn")
    tree.clock.advance(30)
    run_until(tree, lambda: len(of_type(tree, "notification")) == 1, "the boot thought")
    assert "Luigi's is closed tonight" in why(provider.requests[0])
    settled(tree)
    assert [(t, json.loads(i)) for t, _, i in runs(tree)] == [("signal", ["luigi"])]
