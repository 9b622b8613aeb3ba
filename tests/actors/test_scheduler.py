"""Scheduled prompts as the person sees them: a notification when one is due, exactly once;
the runs missed while the server was down; a failed run; a path out of budget."""

from __future__ import annotations

from typing import Any

from chalie.llm.scripted import ScriptCall, ScriptedProvider, ScriptStep, ScriptUsage
from chalie.store import db
from chalie.store.background_ops import InsertSchedule
from chalie.store.schedule_rows import ScheduleRow
from chalie.tools.goal import GoalTool
from chalie.tools.memory import MemoryTool
from chalie.tools.schedule import ScheduleTool
from tests.actors.background import NOW, apply, of_type, run_until
from tests.actors.conftest import Tree, answer, calls, prompt

TOOLS = [MemoryTool(), ScheduleTool("UTC"), GoalTool()]


def schedule(schedule_id: str = "s1", *, next_run: float, prompt: str = "Call mum",
             at: float | None = None, cron: str | None = None, timezone: str = "UTC",
             source: str = "person") -> ScheduleRow:
    if at is None and cron is None:
        at = next_run
    return ScheduleRow(id=schedule_id, prompt=prompt, timezone=timezone, at=at, cron=cron,
                       next_run=next_run, last_run=None, state="active", source=source,
                       turn_id=None, created_at=NOW - 100)


def seed(tree_config: Any, *rows: ScheduleRow) -> None:
    """Schedules in the store before the tree starts (as after a restart)."""
    store = tree_config.store
    conn = db.open_writer(store.path, busy_timeout_ms=5000, synchronous="FULL")
    try:
        with db.immediate(conn):
            for row in rows:
                conn.execute(
                    "INSERT INTO schedules (id, prompt, timezone, at, cron, next_run, last_run, "
                    "state, source, turn_id, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (row.id, row.prompt, row.timezone, row.at, row.cron, row.next_run,
                     row.last_run, row.state, row.source, row.turn_id, row.created_at))
    finally:
        conn.close()


def notifications(tree: Tree) -> list[dict[str, Any]]:
    return of_type(tree, "notification")


def test_a_one_shot_prompt_notifies_once_when_due(start_tree: Any) -> None:
    """At its time the prompt runs once: the answer is a notification, stored with the run."""
    provider = ScriptedProvider([answer("Time to call mum.")])
    tree = start_tree(provider, tools=TOOLS, paths=True)
    apply(tree, InsertSchedule(schedule(next_run=NOW + 60)))
    tree.clock.advance(59)
    run_until(tree, lambda: True, "nothing")
    assert notifications(tree) == []
    tree.clock.advance(1)
    # The Scheduler counts the run after handing it to the StoreWriter: wait for both.
    run_until(tree, lambda: len(notifications(tree)) == 1 and tree.metric(
        "chalie_schedule_runs_total", outcome="done") == 1, "the notification")
    [note] = notifications(tree)
    assert note["content"] == "Time to call mum."
    assert (note["source"], note["schedule_id"]) == ("schedule", "s1")
    [(turn_id, path, outcome, channel)] = tree.rows(
        "SELECT id, path, outcome, channel FROM turns")
    assert (path, outcome, channel) == ("scheduled", "answered", "main")
    assert tree.rows("SELECT due_at, outcome, turn_id FROM schedule_runs") == [
        (NOW + 60, "done", turn_id)]
    assert tree.rows("SELECT state, next_run, last_run FROM schedules") == [
        ("done", None, NOW + 60)]
    assert tree.rows("SELECT role, text FROM transcript") == [("assistant", "Time to call mum.")]
    tree.clock.advance(86_400)
    run_until(tree, lambda: True, "nothing more")
    assert len(notifications(tree)) == 1
    assert len(provider.requests) == 1
    assert tree.metric("chalie_schedule_runs_total", outcome="done") == 1


def test_a_scheduled_run_sees_the_prompt_but_cannot_schedule_or_start_goals(
    start_tree: Any,
) -> None:
    """The run's request carries the prompt and offers every tool but schedule and goal."""
    provider = ScriptedProvider([answer("Done.")])
    tree = start_tree(provider, tools=TOOLS, paths=True)
    apply(tree, InsertSchedule(schedule(next_run=NOW + 5, prompt="Summarise the weather")))
    tree.clock.advance(5)
    run_until(tree, lambda: len(notifications(tree)) == 1, "the notification")
    [request] = provider.requests
    assert "Summarise the weather" in prompt(request)
    assert [t.name for t in request.tools] == ["memory"]


def test_a_recurring_prompt_runs_at_each_time_of_its_cron(start_tree: Any) -> None:
    """A cron schedule runs at each of its times, in its zone, and stays active."""
    provider = ScriptedProvider([answer("First."), answer("Second.")])
    tree = start_tree(provider, tools=TOOLS, paths=True)
    first = 1_700_002_800.0  # 2023-11-14 23:00 UTC, the next "0 * * * *" after NOW
    apply(tree, InsertSchedule(schedule(next_run=first, cron="0 * * * *")))
    tree.clock.advance(first - NOW)
    run_until(tree, lambda: len(notifications(tree)) == 1, "the first run")
    tree.clock.advance(3600)
    run_until(tree, lambda: len(notifications(tree)) == 2, "the second run")
    assert [n["content"] for n in notifications(tree)] == ["First.", "Second."]
    assert tree.rows("SELECT state, next_run FROM schedules") == [("active", first + 7200)]
    assert tree.rows("SELECT due_at FROM schedule_runs ORDER BY due_at") == [
        (first,), (first + 3600,)]


def test_a_run_whose_model_fails_still_reminds_the_person(start_tree: Any) -> None:
    """When the LLM is down the person still gets the prompt itself; the run is failed."""
    provider = ScriptedProvider([ScriptStep(fail="connection refused")])
    tree = start_tree(provider, tools=TOOLS, paths=True)
    apply(tree, InsertSchedule(schedule(next_run=NOW + 5, prompt="Take the bins out")))
    tree.clock.advance(5)
    # The Scheduler counts the run after handing it to the StoreWriter: wait for both.
    run_until(tree, lambda: len(notifications(tree)) == 1 and tree.metric(
        "chalie_schedule_runs_total", outcome="failed") == 1, "the fallback notification")
    assert notifications(tree)[0]["content"] == "Reminder: Take the bins out"
    assert tree.rows("SELECT outcome, error FROM schedule_runs") == [
        ("failed", "connection refused")]


def test_the_schedule_tool_in_a_turn_sets_up_a_prompt_that_runs_later(start_tree: Any) -> None:
    """The person asks in chat; the tool's schedule is stored with the turn and runs later."""
    provider = ScriptedProvider([
        calls(ScriptCall("schedule", {"prompt": "Stretch", "at": "2023-11-14T23:00:00Z"})),
        answer("I'll remind you at 23:00."),
        answer("Time to stretch!"),
    ])
    tree = start_tree(provider, tools=TOOLS, paths=True)
    tree.chat("remind me to stretch at 23:00")
    tree.outbox.wait_for_type("done")
    [(source, turn_id, state)] = tree.rows("SELECT source, turn_id, state FROM schedules")
    assert (source, state) == ("tool", "active")
    assert tree.rows("SELECT id FROM turns WHERE path = 'user'") == [(turn_id,)]
    tree.clock.advance(2800)
    run_until(tree, lambda: len(notifications(tree)) == 1, "the reminder")
    assert notifications(tree)[0]["content"] == "Time to stretch!"


def test_runs_missed_while_down_run_once_if_recent_and_are_recorded_otherwise(
    start_tree: Any, make_config: Any,
) -> None:
    """At start the latest missed run of a recent schedule runs once; older due times and
    schedules missed too long ago are recorded as missed."""
    config = make_config()
    hourly_since = 1_699_991_400.0  # 19:50 UTC: an hourly cron due at 19:50, 20:50 and 21:50
    seed(config,
         schedule("recent", next_run=NOW - 600, prompt="Recent one"),
         schedule("stale", next_run=NOW - 7200, prompt="Stale one"),
         schedule("hourly", next_run=hourly_since, cron="50 * * * *", prompt="Hourly"))
    provider = ScriptedProvider([answer("Recent done."), answer("Hourly done.")])
    tree = start_tree(provider, tools=TOOLS, paths=True)
    run_until(tree, lambda: len(notifications(tree)) == 2, "the two catch-up runs")
    assert sorted(n["content"] for n in notifications(tree)) == ["Hourly done.",
                                                                  "Recent done."]
    runs = tree.rows("SELECT schedule_id, due_at, outcome FROM schedule_runs "
                     "ORDER BY schedule_id, due_at")
    assert runs == [
        ("hourly", hourly_since, "missed"), ("hourly", hourly_since + 3600, "missed"),
        ("hourly", hourly_since + 7200, "done"),
        ("recent", NOW - 600, "done"), ("stale", NOW - 7200, "missed")]
    assert dict(tree.rows("SELECT id, state FROM schedules")) == {
        "recent": "done", "stale": "missed", "hourly": "active"}
    assert tree.rows("SELECT next_run FROM schedules WHERE id = 'hourly'") == [
        (hourly_since + 3 * 3600,)]
    assert tree.metric("chalie_schedule_runs_total", outcome="missed") == 3


def test_an_exhausted_budget_pauses_runs_until_the_day_frees_room(start_tree: Any) -> None:
    """Over governor.scheduled_tokens_per_day the next due run waits, counted as paused,
    and runs once the first run's tokens are a day old."""
    usage = ScriptUsage(prompt_tokens=40, completion_tokens=10)
    provider = ScriptedProvider([ScriptStep(text="One.", usage=usage),
                                 ScriptStep(text="Two.", usage=usage)])
    tree = start_tree(provider, tools=TOOLS, paths=True,
                      governor={"scheduled_tokens_per_day": 30})
    apply(tree, InsertSchedule(schedule("a", next_run=NOW + 10, prompt="First")),
          InsertSchedule(schedule("b", next_run=NOW + 20, prompt="Second")))
    tree.clock.advance(10)
    run_until(tree, lambda: len(notifications(tree)) == 1, "the first run")
    tree.clock.advance(10)
    run_until(tree, lambda: tree.metric("chalie_schedule_runs_total", outcome="paused") == 1,
              "the pause")
    assert tree.metric("chalie_budget_paused", path="scheduled") == 1
    assert tree.metric("chalie_budget_tokens_used", path="scheduled") == 50
    assert len(notifications(tree)) == 1
    tree.clock.advance(86_400)
    run_until(tree, lambda: len(notifications(tree)) == 2, "the second run, a day later")
    assert notifications(tree)[1]["content"] == "Two."
    assert tree.metric("chalie_budget_paused", path="scheduled") == 0


def test_a_reminder_the_dmn_set_itself_counts_against_the_daily_cap(start_tree: Any) -> None:
    """A schedule of the DMN's is a proactive message: over the cap it is not sent."""
    provider = ScriptedProvider([answer("By the way...")])
    tree = start_tree(provider, tools=TOOLS, paths=True, dmn={"daily_cap": 0})
    apply(tree, InsertSchedule(schedule(next_run=NOW + 5, source="dmn")))
    tree.clock.advance(5)
    # The Scheduler counts the message after handing it to the StoreWriter: wait for both.
    run_until(tree, lambda: tree.rows("SELECT status FROM proactive") == [("suppressed",)]
              and tree.metric("chalie_proactive_suppressed_total", reason="cap") == 1,
              "the suppressed message")
    assert notifications(tree) == []
    assert tree.rows("SELECT outcome FROM schedule_runs") == [("done",)]
