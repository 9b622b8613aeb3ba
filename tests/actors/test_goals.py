"""Goal pursuit as the person sees it: a plan, `task` frames for each step, the result as a
notification; a bad plan asked for again with its reasons; resuming after a restart;
cancelling; a goal paused for budget; a step whose model fails; why each goal ended."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from chalie.llm.scripted import ScriptCall, ScriptedProvider, ScriptStep, ScriptUsage
from chalie.store import db, goal_rows
from chalie.store.background_ops import CancelGoal, InsertGoal
from chalie.tools.goal import GoalTool
from chalie.tools.memory import MemoryTool
from chalie.tools.schedule import ScheduleTool
from tests.actors.background import NOW, apply, of_type, run_until
from tests.actors.conftest import GatedProvider, Tree, answer, calls, prompt

TOOLS = [MemoryTool(), ScheduleTool("UTC"), GoalTool()]
STEPS = [
    ("s1", "Find the three cheapest flights to Lisbon in May", []),
    ("s2", "Compare their departure times and baggage allowances carefully", ["s1"]),
    ("s3", "Write a short recommendation for the person with prices", ["s2"]),
]


def plan(steps: list[tuple[str, str, list[str]]] = STEPS, confidence: float = 0.9) -> str:
    return json.dumps({"steps": [{"id": i, "description": d, "depends_on": deps}
                                 for i, d, deps in steps], "confidence": confidence})


def tasks(tree: Tree) -> list[tuple[str | None, str]]:
    return [(f["step_id"], f["status"]) for f in of_type(tree, "task")]


def start_goal(tree: Tree, goal_id: str = "g1", goal: str = "Find me a flight to Lisbon") -> None:
    apply(tree, InsertGoal(goal_id, goal, "person"))


def test_a_three_step_goal_reports_each_step_and_notifies_its_result(start_tree: Any) -> None:
    """The goal is planned, each step runs once in order with `task` frames, and the last
    step's answer is the result the person is notified of."""
    provider = ScriptedProvider([ScriptStep(text=plan()), answer("TAP 89, Ryanair 45, easyJet 60"),
                                 answer("Ryanair leaves at 6am, no bag"),
                                 answer("Take easyJet: 60 euros, a bag, leaves at noon.")])
    tree = start_tree(provider, tools=TOOLS, paths=True)
    start_goal(tree)
    run_until(tree, lambda: ("", "completed") in [(s or "", t) for s, t in tasks(tree)],
              "the goal to complete")
    assert tasks(tree) == [
        (None, "planning"), (None, "running"),
        ("s1", "running"), ("s1", "done"), ("s2", "running"), ("s2", "done"),
        ("s3", "running"), ("s3", "done"), (None, "completed")]
    assert [f["coverage"] for f in of_type(tree, "task")] == [
        0.0, 0.0, 0.0, 0.33, 0.33, 0.67, 0.67, 1.0, 1.0]
    [note] = of_type(tree, "notification")
    assert (note["content"], note["source"], note["goal_id"]) == (
        "Take easyJet: 60 euros, a bag, leaves at noon.", "goal", "g1")
    assert tree.rows("SELECT state, result, iterations, mode, end_reason FROM goals") == [
        ("completed", "Take easyJet: 60 euros, a bag, leaves at noon.", 3, "plan", "completed")]
    assert tree.rows("SELECT step_id, status, attempts FROM goal_steps ORDER BY position") == [
        ("s1", "done", 1), ("s2", "done", 1), ("s3", "done", 1)]
    assert tree.rows("SELECT count(*) FROM turns WHERE path = 'goal'") == [(3,)]
    second_step = prompt(provider.requests[2])
    assert "TAP 89, Ryanair 45, easyJet 60" in second_step
    assert "Step s2: Compare their departure times" in second_step
    assert [t.name for t in provider.requests[1].tools] == ["memory", "schedule"]
    assert tree.metric("chalie_goals", state="completed") == 1


def test_a_vague_plan_is_asked_for_again_and_a_good_one_is_pursued(start_tree: Any) -> None:
    """A plan with a too-short step and low confidence is re-asked with every reason; the
    second, good plan is followed."""
    vague = plan([("x", "Do it", [])], confidence=0.3)
    good = plan([("x", "Search the web for the best rated ramen near the office", [])])
    provider = ScriptedProvider([ScriptStep(text=vague), ScriptStep(text=good),
                                 answer("Ichiran, 4.6 stars.")])
    tree = start_tree(provider, tools=TOOLS, paths=True)
    start_goal(tree, goal="Find ramen")
    run_until(tree, lambda: (None, "completed") in tasks(tree), "the goal to complete")
    retry = prompt(provider.requests[1])
    assert "has 2 words; describe each step in 4 to 30 words" in retry
    assert "confidence is 0.3" in retry


def test_a_goal_resumes_after_a_restart_without_running_finished_steps_again(
    start_tree: Any,
) -> None:
    """The server stops during step 2: started again, the goal runs step 2 and 3 only."""
    first = GatedProvider([ScriptStep(text=plan()), answer("Three flights found."),
                           answer("never stored")], hold=(2,))
    tree = start_tree(first, tools=TOOLS, paths=True, paths_pool=ThreadPoolExecutor(2))
    start_goal(tree)
    first.wait_entered(2)  # step 2's first LLM call is out
    tree.wait_until(lambda: ("s2", "running") in tasks(tree), "step 2's task frame")
    assert tree.rows("SELECT step_id, status FROM goal_steps ORDER BY position") == [
        ("s1", "done"), ("s2", "running"), ("s3", "pending")]
    tree.root.stop(block=True)

    second = ScriptedProvider([answer("Compared."), answer("Book easyJet.")])
    again = start_tree(second, tools=TOOLS, paths=True)
    run_until(again, lambda: again.rows("SELECT state FROM goals") == [("completed",)],
              "the goal to complete after the restart")
    assert "Step s2:" in prompt(second.requests[0])
    assert "Step s3:" in prompt(second.requests[1])
    assert again.rows("SELECT step_id, status, attempts FROM goal_steps ORDER BY position") == [
        ("s1", "done", 1), ("s2", "done", 2), ("s3", "done", 1)]
    assert again.rows("SELECT result FROM goals") == [("Book easyJet.",)]


def test_a_cancelled_goal_stops_its_running_step_and_stores_nothing_of_it(
    start_tree: Any,
) -> None:
    """Cancelling while a step's LLM call is out: the goal is cancelled, the step's answer is
    never stored, and no further call is made."""
    provider = GatedProvider([ScriptStep(text=plan()), answer("Found flights.")], hold=(1,))
    tree = start_tree(provider, tools=TOOLS, paths=True, paths_pool=ThreadPoolExecutor(2))
    start_goal(tree)
    provider.wait_entered(1)
    (before,) = apply(tree, CancelGoal("g1", "main"))
    assert before == "running"
    provider.release(1)
    run_until(tree, lambda: (None, "cancelled") in tasks(tree), "the cancelled task frame")
    tree.wait_until(lambda: tree.directory.get("goals") is not None, "the goals supervisor")
    assert tree.rows("SELECT state, end_reason FROM goals") == [("cancelled", "cancelled")]
    assert tree.rows("SELECT count(*) FROM turns WHERE path = 'goal'") == [(0,)]
    assert tree.rows("SELECT status FROM goal_steps WHERE step_id = 's1'") == [("pending",)]
    assert len(provider.requests) == 2


def test_a_goal_out_of_budget_pauses_and_resumes_when_the_day_frees_room(
    start_tree: Any,
) -> None:
    """Over governor.goal_tokens_per_day the goal pauses (a `paused` task frame) instead of
    failing, and goes on once its tokens are a day old."""
    usage = ScriptUsage(prompt_tokens=90, completion_tokens=10)
    one = [("s1", "Find the three cheapest flights to Lisbon in May", [])]
    provider = ScriptedProvider([ScriptStep(text=plan(one), usage=usage),
                                 ScriptStep(text="easyJet, 60 euros.", usage=usage)])
    tree = start_tree(provider, tools=TOOLS, paths=True, governor={"goal_tokens_per_day": 100})
    start_goal(tree)
    run_until(tree, lambda: (None, "paused") in tasks(tree), "the pause")
    assert tree.rows("SELECT state, paused_at FROM goals") == [("running", NOW)]
    assert tree.metric("chalie_budget_paused", path="goal") == 1
    tree.clock.advance(86_400)
    run_until(tree, lambda: (None, "completed") in tasks(tree), "the goal to complete")
    assert tree.rows("SELECT result, paused_until, paused_at FROM goals") == [
        ("easyJet, 60 euros.", None, None)]


def test_a_step_whose_model_fails_is_tried_again_after_a_while(start_tree: Any) -> None:
    """An LLM failure in a step is retried after goals.retry_backoff_s, not fatal."""
    one = [("s1", "Find the three cheapest flights to Lisbon in May", [])]
    provider = ScriptedProvider([ScriptStep(text=plan(one)), ScriptStep(fail="timed out"),
                                 answer("easyJet.")])
    tree = start_tree(provider, tools=TOOLS, paths=True, goals={"retry_backoff_s": 60.0})
    start_goal(tree)
    # The failed attempt's turn is stored once its retry is set up.
    tree.wait_until(lambda: tree.rows("SELECT outcome FROM turns") == [("error",)],
                    "the failed attempt")
    tree.clock.advance(59)
    run_until(tree, lambda: True, "nothing")
    assert len(provider.requests) == 2
    tree.clock.advance(1)
    run_until(tree, lambda: (None, "completed") in tasks(tree), "the retried step")
    assert tree.rows("SELECT attempts FROM goal_steps") == [(2,)]


def test_a_goal_that_uses_all_its_calls_fails_saying_so(start_tree: Any) -> None:
    """goals.max_iterations counts LLM calls over all steps: a plan that needs more fails."""
    provider = ScriptedProvider([ScriptStep(text=plan()), answer("one"), answer("two")])
    tree = start_tree(provider, tools=TOOLS, paths=True, goals={"max_iterations": 2})
    start_goal(tree)
    run_until(tree, lambda: (None, "failed") in tasks(tree), "the goal to fail")
    assert tree.rows("SELECT error, end_reason FROM goals") == [
        ("it used all 2 iterations before step s3", "out_of_iterations")]


def test_the_goal_tool_in_a_turn_starts_a_goal_once_the_turn_is_stored(
    start_tree: Any,
) -> None:
    """The person asks in chat; the goal starts after the turn that started it is stored."""
    one = [("s1", "Find the three cheapest flights to Lisbon in May", [])]
    provider = ScriptedProvider([
        calls(ScriptCall("goal", {"action": "start", "goal": "Find flights to Lisbon"})),
        answer("On it."), ScriptStep(text=plan(one)), answer("easyJet."),
    ])
    tree = start_tree(provider, tools=TOOLS, paths=True)
    tree.chat("find me flights to Lisbon in the background")
    tree.outbox.wait_for_type("done")
    run_until(tree, lambda: (None, "completed") in tasks(tree), "the goal to complete")
    [(source, turn_id)] = tree.rows("SELECT source, turn_id FROM goals")
    assert source == "tool"
    assert tree.rows("SELECT path FROM turns WHERE id = ?", turn_id) == [("user",)]


@pytest.mark.allow_error_logs
def test_a_goal_whose_actor_keeps_crashing_fails_alone(start_tree: Any, make_config: Any) -> None:
    """A goal that crashes its actor at every start is restarted a few times, then failed with
    the reason, and the person hears so; the server and its other paths go on."""
    config = make_config()
    conn = db.open_writer(config.store.path, busy_timeout_ms=5000, synchronous="FULL")
    try:
        with db.immediate(conn):
            goal_rows.insert(conn, "bad", "A goal with a broken plan", source="person",
                             turn_id=None, now=1_700_000_000.0)
            goal_rows.set_state(conn, "bad", "running", now=1_700_000_000.0)
            conn.execute("INSERT INTO goal_steps (goal_id, step_id, position, description, "
                          "depends_on, status) VALUES ('bad', 's1', 0, 'x', 'not json', "
                          "'pending')")
    finally:
        conn.close()
    tree = start_tree(ScriptedProvider([]), tools=TOOLS, paths=True)

    def failed() -> bool:
        tree.clock.advance(10)
        return tree.rows("SELECT state FROM goals") == [("failed",)]

    run_until(tree, failed, "the goal to fail")
    [(error, reason)] = tree.rows("SELECT error, end_reason FROM goals")
    assert error.startswith("it crashed 4 times")
    assert reason == "crashed"
    run_until(tree, lambda: len(of_type(tree, "notification")) == 1, "the notification")
    assert tree.restarts("goal") == 3
    assert tree.directory.get("goals") is not None
