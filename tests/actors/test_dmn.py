"""The DMN as the person sees it: it thinks when they are away and says something only when
it is worth it, never in quiet hours (it waits), never past the daily cap, and never calls the
model when nothing changed."""

from __future__ import annotations

import logging
from typing import Any

from chalie.actors.background_messages import PersonConnected
from chalie.background.drift import NO_ACTION
from chalie.llm.scripted import ScriptCall, ScriptedProvider, ScriptStep, ScriptUsage
from chalie.store import concept_rows, db, memory_writes, proactive_rows
from chalie.store.concept_rows import ConceptRow
from chalie.store.memory_writes import EpisodeRow
from chalie.store.proactive_rows import ProactiveRow
from chalie.tools.goal import GoalTool
from chalie.tools.memory import MemoryTool
from chalie.tools.recall import RecallTool
from chalie.tools.schedule import ScheduleTool
from chalie.world.signals import WorldBoard
from tests.actors.background import NOW, of_type, run_until
from tests.actors.conftest import WAIT_S, Tree, WatchedClock, answer, calls, prompt
from tests.actors.test_world_turns import SETTINGS, send, signal

TOOLS = [MemoryTool(), RecallTool(), ScheduleTool("UTC"), GoalTool()]
# The idle trigger only where a test looks at it: two triggers at one moment make one of them
# a "busy" skip.
FAST = {"enabled": True, "idle_s": 1e7, "cadence_s": 1800.0, "boot_delay_s": 30.0}
IDLE = {"idle_s": 600.0}


def seed_episode(data_dir: str, gist: str, *, salience: float = 0.8,
                 at: float = NOW - 3600) -> None:
    """An episode in the store, as the Encoder leaves it."""
    conn = db.open_writer(data_dir, busy_timeout_ms=5000, synchronous="FULL")
    try:
        with db.immediate(conn):
            memory_writes.insert_episodes(conn, "main", [EpisodeRow(
                gist=gist, intent="plan dinner", outcome="booked", entities=("Luigi's",),
                open_loops=("confirm the table",), salience=salience, valence=0.5,
                transcript_from=1, transcript_to=2, happened_at=at)],
                upto_transcript_id=0, encoding_id=f"enc-{gist}", now=at)
    finally:
        conn.close()


def dmn_calls(provider: ScriptedProvider) -> int:
    return len(provider.requests)


def start(start_tree: Any, make_config: Any, provider: ScriptedProvider, *,
          episode: str | None = "Booked Luigi's for Friday at 8pm", **sections: Any) -> Tree:
    config = make_config()
    if episode is not None:
        seed_episode(config.store.path, episode)
    dmn = {**FAST, **sections.pop("dmn", {})}
    tree: Tree = start_tree(provider, tools=TOOLS, paths=True, dmn=dmn, **sections)
    sync(tree, "dmn")  # started: its first timers are set
    return tree


def sync(tree: Tree, actor: str) -> None:
    """Return once `actor` has handled everything it was told so far."""
    ref = tree.directory.get(actor)
    assert ref is not None
    ref.proxy().path.get(timeout=WAIT_S)


def settled(tree: Tree) -> None:
    """Return once the Dmn has no trigger in hand (its last thought is stored)."""
    ref = tree.directory.get("dmn")
    assert ref is not None
    proxy = ref.proxy()
    tree.wait_until(lambda: proxy.busy.get(timeout=WAIT_S) is None, "the Dmn to settle")


def idle_runs(tree: Tree) -> list[tuple[Any, ...]]:
    return tree.rows("SELECT at FROM dmn_runs WHERE trigger = 'idle'")


def skips(tree: Tree, trigger: str) -> float:
    return tree.metric("chalie_dmn_triggers_total", trigger=trigger, result="nothing_new")


def test_the_idle_trigger_fires_once_and_not_again_while_nothing_changes(
    start_tree: Any, make_config: Any,
) -> None:
    """Away for idle_s: one thought about the weighty recent episodes; then no more calls,
    and the cadence trigger counts a nothing-new skip."""
    provider = ScriptedProvider([answer("NOTHING")])
    tree = start(start_tree, make_config, provider, dmn={**IDLE, "boot_delay_s": 700.0})
    tree.clock.advance(700)
    run_until(tree, lambda: tree.rows("SELECT result FROM dmn_runs") == [("nothing",)],
              "the idle thought")
    settled(tree)
    [request] = provider.requests
    assert "has sent nothing since" in prompt(request)
    assert "Booked Luigi's for Friday at 8pm" in prompt(request)
    assert [t.name for t in request.tools] == ["memory", "recall", "schedule", "goal"]
    assert tree.rows("SELECT trigger FROM dmn_runs") == [("idle",)]
    tree.clock.advance(1800)
    run_until(tree, lambda: skips(tree, "cadence") == 1, "the cadence skip")
    settled(tree)
    tree.clock.advance(1800)
    # A skip counts the trigger, then the suppressed message: wait for the last of them.
    run_until(tree, lambda: skips(tree, "cadence") == 2 and tree.metric(
        "chalie_proactive_suppressed_total", reason="nothing_new") == 2, "another cadence skip")
    assert dmn_calls(provider) == 1
    assert of_type(tree, "notification") == []
    assert tree.metric("chalie_proactive_suppressed_total", reason="no_action") == 1
    assert tree.metric("chalie_proactive_suppressed_total", reason="nothing_new") == 2


def test_an_empty_store_gives_the_dmn_nothing_to_think_about_and_no_call(
    start_tree: Any, make_config: Any,
) -> None:
    """With no episode, signal, goal or open loop there is no call at all."""
    provider = ScriptedProvider([])
    tree = start(start_tree, make_config, provider, episode=None)
    tree.clock.advance(30)
    run_until(tree, lambda: skips(tree, "cadence") == 1, "the boot skip")
    assert dmn_calls(provider) == 0


def test_a_message_of_the_person_starts_the_idle_period_again(
    start_tree: Any, make_config: Any,
) -> None:
    """A chat at 500 s pushes the idle trigger from 600 s to 500 + 600 s."""
    provider = ScriptedProvider([answer("Hi.")])
    tree = start(start_tree, make_config, provider, episode=None,
                 dmn={**IDLE, "cadence_s": 86_400.0})
    tree.clock.advance(500)
    tree.chat("hello")
    tree.outbox.wait_for_type("done")
    # The Session tells the Dmn when the turn starts and again once it is stored.
    tree.wait_until(lambda: tree.metric("chalie_turns_in_flight") == 0, "the turn stored")
    tree.settle()
    sync(tree, "dmn")
    tree.clock.advance(599)
    run_until(tree, lambda: True, "nothing yet")
    assert idle_runs(tree) == []
    tree.clock.advance(1)
    run_until(tree, lambda: idle_runs(tree) == [(NOW + 1100,)], "the idle trigger")


def test_a_new_signal_makes_the_next_cadence_trigger_call_the_model(
    start_tree: Any, make_config: Any, clock: WatchedClock,
) -> None:
    """Nothing new: a skip. A signal arrives: the next cadence thinks, with it in view."""
    provider = ScriptedProvider([answer("NOTHING"), answer("NOTHING")])
    tree = start(start_tree, make_config, provider, world=WorldBoard(SETTINGS, clock))
    tree.clock.advance(30)
    run_until(tree, lambda: dmn_calls(provider) == 1, "the boot thought")
    settled(tree)
    tree.clock.advance(1800)
    run_until(tree, lambda: skips(tree, "cadence") == 1, "a skip")
    settled(tree)
    send(tree, signal(tree, "Luigi's is closed tonight", energy=0.9))
    tree.clock.advance(1800)
    run_until(tree, lambda: dmn_calls(provider) == 2, "the second thought")
    assert "Luigi's is closed tonight" in prompt(provider.requests[1])


def test_a_message_for_the_person_is_a_notification_and_enters_the_transcript(
    start_tree: Any, make_config: Any,
) -> None:
    """A thought worth sharing reaches the person as a notification and the conversation."""
    provider = ScriptedProvider([answer("Luigi's table is at 8 on Friday; shall I confirm?")])
    tree = start(start_tree, make_config, provider)
    tree.clock.advance(30)
    run_until(tree, lambda: len(of_type(tree, "notification")) == 1, "the notification")
    [note] = of_type(tree, "notification")
    assert (note["content"], note["source"]) == (
        "Luigi's table is at 8 on Friday; shall I confirm?", "dmn")
    assert tree.rows("SELECT role, text FROM transcript") == [
        ("assistant", "Luigi's table is at 8 on Friday; shall I confirm?")]
    assert tree.rows("SELECT path, status FROM proactive") == [("dmn", "sent")]
    assert tree.rows("SELECT path FROM turns") == [("dmn",)]
    assert tree.metric("chalie_proactive_messages_total", path="dmn", result="sent") == 1


def test_quiet_hours_hold_a_message_until_the_person_connects(
    start_tree: Any, make_config: Any,
) -> None:
    """Composed at 22:13 in quiet hours 22:00-08:00, the message waits; the person connects
    and gets it."""
    provider = ScriptedProvider([answer("Your parcel arrives tomorrow.")])
    tree = start(start_tree, make_config, provider, dmn={"quiet_hours": "22:00-08:00"})
    tree.clock.advance(30)
    run_until(tree, lambda: tree.rows("SELECT status FROM proactive") == [("deferred",)],
              "the deferred message")
    assert of_type(tree, "notification") == []
    assert tree.rows("SELECT count(*) FROM transcript") == [(0,)]
    assert tree.metric("chalie_proactive_suppressed_total", reason="quiet_hours") == 1
    dmn = tree.directory.get("dmn")
    assert dmn is not None
    dmn.tell(PersonConnected("main"))
    run_until(tree, lambda: len(of_type(tree, "notification")) == 1, "delivery")
    assert of_type(tree, "notification")[0]["content"] == "Your parcel arrives tomorrow."
    assert tree.rows("SELECT status FROM proactive") == [("sent",)]
    assert tree.rows("SELECT role FROM transcript") == [("assistant",)]


def test_a_deferred_message_goes_out_when_quiet_hours_end(
    start_tree: Any, make_config: Any,
) -> None:
    """Nobody connects: the message is delivered at 08:00, into the log for their resume."""
    provider = ScriptedProvider([answer("Your parcel arrives tomorrow.")])
    tree = start(start_tree, make_config, provider, dmn={"quiet_hours": "22:00-08:00"})
    tree.clock.advance(30)
    run_until(tree, lambda: tree.rows("SELECT status FROM proactive") == [("deferred",)],
              "the deferred message")
    eight = 1_700_035_200.0  # 2023-11-15 08:00 UTC
    tree.clock.advance(eight - tree.clock.time() - 1)
    run_until(tree, lambda: True, "nothing yet")
    assert of_type(tree, "notification") == []
    tree.clock.advance(1)
    run_until(tree, lambda: len(of_type(tree, "notification")) == 1, "delivery at 08:00")


def test_a_message_deferred_too_long_is_dropped_and_counted(
    start_tree: Any, make_config: Any,
) -> None:
    """Older than dmn.deferred_max_age_s when quiet hours end: dropped, never sent."""
    provider = ScriptedProvider([answer("Old news.")])
    tree = start(start_tree, make_config, provider,
                 dmn={"quiet_hours": "22:00-08:00", "deferred_max_age_s": 3600.0})
    tree.clock.advance(30)
    run_until(tree, lambda: tree.rows("SELECT status FROM proactive") == [("deferred",)],
              "the deferred message")
    tree.clock.advance(1_700_035_200.0 - tree.clock.time())
    # Stored, then counted by the StoreWriter after the commit: wait for the count.
    run_until(tree, lambda: tree.metric("chalie_proactive_messages_total", path="dmn",
                                        result="dropped") == 1, "the drop")
    assert tree.rows("SELECT status FROM proactive") == [("dropped",)]
    assert of_type(tree, "notification") == []


def test_the_daily_cap_holds_back_messages_past_it(start_tree: Any, make_config: Any) -> None:
    """With dmn.daily_cap 1 the second thought in a day is suppressed, counted."""
    provider = ScriptedProvider([answer("First thought."), answer("Second thought.")])
    config = make_config()
    tree = start(start_tree, make_config, provider, dmn={"daily_cap": 1})
    tree.clock.advance(30)
    run_until(tree, lambda: len(of_type(tree, "notification")) == 1, "the first message")
    settled(tree)
    seed_episode(config.store.path, "Planned a trip to Porto in May")
    tree.clock.advance(1800)
    run_until(tree, lambda: tree.metric("chalie_proactive_suppressed_total", reason="cap") == 1,
              "the cap")
    # Counted when decided, stored a moment later by the StoreWriter: wait for the row.
    run_until(tree, lambda: tree.rows("SELECT status, reason FROM proactive ORDER BY id") == [
        ("sent", None), ("suppressed", "cap")], "the suppressed message's row")
    assert [n["content"] for n in of_type(tree, "notification")] == ["First thought."]


def test_a_used_up_budget_skips_triggers_without_calling_the_model(
    start_tree: Any, make_config: Any,
) -> None:
    """Past governor.dmn_tokens_per_day a trigger with something new still makes no call."""
    provider = ScriptedProvider([ScriptStep(text="NOTHING",
                                            usage=ScriptUsage(prompt_tokens=90,
                                                              completion_tokens=10))])
    config = make_config()
    tree = start(start_tree, make_config, provider, governor={"dmn_tokens_per_day": 50})
    tree.clock.advance(30)
    run_until(tree, lambda: dmn_calls(provider) == 1, "the first thought")
    settled(tree)
    seed_episode(config.store.path, "Planned a trip to Porto in May")
    tree.clock.advance(1800)
    # A skip counts the trigger, then the suppressed message: wait for the last of them.
    run_until(tree, lambda: tree.metric("chalie_proactive_suppressed_total",
                                        reason="budget") == 1, "the budget skip")
    assert tree.metric("chalie_dmn_triggers_total", trigger="cadence", result="budget") == 1
    assert dmn_calls(provider) == 1
    assert tree.metric("chalie_budget_paused", path="dmn") == 1


def test_a_zone_that_cannot_be_resolved_is_quiet_all_day_and_start_up_says_why(
    start_tree: Any, make_config: Any, log_records: list[logging.LogRecord],
) -> None:
    """dmn.timezone "Mars/Olympus": every message waits for the person to connect."""
    provider = ScriptedProvider([answer("Hello from Mars.")])
    tree = start(start_tree, make_config, provider, dmn={"timezone": "Mars/Olympus",
                                                         "quiet_hours": "01:00-02:00"})
    assert any("quiet_all_day" in r.getMessage() and "Mars/Olympus" in r.getMessage()
               for r in log_records)
    tree.clock.advance(30)
    run_until(tree, lambda: tree.rows("SELECT status FROM proactive") == [("deferred",)],
              "the deferred message")
    tree.clock.advance(86_400 / 2)
    run_until(tree, lambda: True, "nothing")
    assert of_type(tree, "notification") == []


def test_the_dmn_tools_plant_an_open_loop_that_later_triggers_see(
    start_tree: Any, make_config: Any,
) -> None:
    """SEED_THREAD: the DMN notes an open loop with its memory tool; it is stored with the
    thought and shown to the next trigger, which counts it as something new."""
    provider = ScriptedProvider([
        calls(ScriptCall("memory", {"action": "open_loop",
                                    "value": "Ask how the Porto trip planning goes"})),
        answer("NOTHING"), answer("NOTHING"),
    ])
    tree = start(start_tree, make_config, provider)
    tree.clock.advance(30)
    run_until(tree, lambda: tree.rows("SELECT text, source FROM open_loops") != [], "the loop")
    settled(tree)
    assert tree.rows("SELECT text, source FROM open_loops") == [
        ("Ask how the Porto trip planning goes", "dmn")]
    tree.clock.advance(1800)
    run_until(tree, lambda: dmn_calls(provider) == 3, "the next thought")
    assert "[loop 1, " in prompt(provider.requests[2])
    assert "Ask how the Porto trip planning goes" in prompt(provider.requests[2])


def test_a_message_deferred_before_a_restart_is_delivered_after_it(
    start_tree: Any, make_config: Any,
) -> None:
    """The deferred queue is in the store: a server started after quiet hours delivers what
    waited, once; a socket on another channel delivers nothing."""
    config = make_config()
    conn = db.open_writer(config.store.path, busy_timeout_ms=5000, synchronous="FULL")
    try:
        with db.immediate(conn):
            proactive_rows.insert(conn, ProactiveRow(
                path="dmn", channel="main", content="Waited all night.", status="deferred",
                capped=True, composed_at=NOW - 3600, reason="quiet_hours"),
                turn_id=None, now=NOW - 3600)
    finally:
        conn.close()
    tree = start(start_tree, make_config, ScriptedProvider([]), episode=None,
                 dmn={"boot_delay_s": 1e6})
    run_until(tree, lambda: len(of_type(tree, "notification")) == 1, "the delivery at start")
    dmn = tree.directory.get("dmn")
    assert dmn is not None
    dmn.tell(PersonConnected("elsewhere"))
    dmn.tell(PersonConnected("main"))
    sync(tree, "dmn")
    assert [n["content"] for n in of_type(tree, "notification")] == ["Waited all night."]
    assert tree.rows("SELECT status FROM proactive") == [("sent",)]


# -- concepts and drift gists --

def seed_concepts(data_dir: str, *windows: tuple[str, ...], at: float = NOW - 3600) -> None:
    """Concepts in the store, each tuple one encoding window's, as the StoreWriter leaves them."""
    conn = db.open_writer(data_dir, busy_timeout_ms=5000, synchronous="FULL")
    try:
        with db.immediate(conn):
            for names in windows:
                concept_rows.store_window(conn, [ConceptRow(n) for n in names], (),
                                          space_id=None, now=at)
    finally:
        conn.close()


def concepts_section(request: Any) -> str:
    text = prompt(request).split("# Ideas on your mind (concepts from past conversations that "
                                 "came back to you)\n\n")[1]
    return text.split("\n\n# ", maxsplit=1)[0]


def test_the_thought_s_prompt_holds_the_concepts_activation_reached_and_they_rest(
    start_tree: Any, make_config: Any,
) -> None:
    """Concepts of the recent talk (linked by a window) are activated into the DMN's prompt,
    most activated first, and each gets its activation time (its cooldown starts)."""
    provider = ScriptedProvider([answer(drift_nothing())])
    config = make_config()
    seed_concepts(config.store.path, ("tomato garden", "watering", "balcony"),
                  ("tomato garden", "slugs"))
    tree = start(start_tree, make_config, provider)
    tree.clock.advance(30)
    run_until(tree, lambda: dmn_calls(provider) == 1, "the thought")
    settled(tree)
    lines = concepts_section(provider.requests[0]).splitlines()
    names = [line.removeprefix("- ").split(" (activation ")[0] for line in lines]
    assert set(names) == {"tomato garden", "watering", "balcony", "slugs"}
    activations = [float(line.rsplit(" ", 1)[1].rstrip(")")) for line in lines]
    assert activations == sorted(activations, reverse=True)
    assert tree.rows("SELECT count(*) FROM concepts WHERE last_activated = ?", NOW + 30) == [
        (4,)]


def test_an_empty_concept_store_says_none(start_tree: Any, make_config: Any) -> None:
    provider = ScriptedProvider([answer(drift_nothing())])
    tree = start(start_tree, make_config, provider)
    tree.clock.advance(30)
    run_until(tree, lambda: dmn_calls(provider) == 1, "the thought")
    assert concepts_section(provider.requests[0]) == "(none)"


def test_a_thought_not_sent_is_a_gist_the_next_user_turn_sees_until_it_expires(
    start_tree: Any, make_config: Any,
) -> None:
    """A thought past the daily cap becomes a drift gist of the channel; the person's next
    turn has it in its Current State, and a turn after cognition.gist_ttl_s does not."""
    provider = ScriptedProvider([answer("First thought."),
                                 answer("The slugs are back on the tomatoes; beer traps help."),
                                 answer("Hello!"), answer("Hello again!")])
    config = make_config()
    tree = start(start_tree, make_config, provider, dmn={"daily_cap": 1})
    tree.clock.advance(30)
    run_until(tree, lambda: len(of_type(tree, "notification")) == 1, "the first message")
    settled(tree)
    seed_episode(config.store.path, "Found slugs on the tomato plants")
    tree.clock.advance(1800)
    run_until(tree, lambda: tree.metric("chalie_proactive_suppressed_total", reason="cap") == 1,
              "the cap")
    settled(tree)
    assert tree.rows("SELECT channel, text, expires_at FROM drift_gists") == [
        ("main", "The slugs are back on the tomatoes; beer traps help.", NOW + 1830 + 1800)]
    tree.chat("hi")
    tree.outbox.wait_for_type("done")
    state = prompt(provider.requests[2])
    assert "Thoughts you had while the person was away" in state
    assert "- The slugs are back on the tomatoes; beer traps help." in state
    tree.clock.advance(1800)
    tree.chat("still there?")
    tree.outbox.wait_for_type("done", 2)
    tree.wait_until(lambda: dmn_calls(provider) == 4, "the second turn's call")
    assert "beer traps" not in prompt(provider.requests[3])


def drift_nothing() -> str:
    return NO_ACTION
