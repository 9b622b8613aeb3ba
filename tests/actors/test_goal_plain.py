"""A goal whose plans fail the checks twice (a weak model) still finishes: it runs as one plain
loop on the goal's text, says so on the goal, resumes after a restart without running a
finished loop again, retries a failed LLM call, and pauses for budget like any step."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from chalie.background import plans
from chalie.llm.scripted import ScriptCall, ScriptedProvider, ScriptStep, ScriptUsage
from tests.actors.background import NOW, of_type, run_until
from tests.actors.conftest import GatedProvider, answer, calls, prompt
from tests.actors.test_goals import TOOLS, plan, start_goal, tasks

CYCLIC = plan([("a", "Look up the opening hours of the museum", ["b"]),
               ("b", "Book two tickets for Saturday morning online", ["a"])])
VAGUE = plan([("x", "Do it", [])], confidence=0.3)
GOAL = "Get museum tickets"


def test_a_goal_whose_two_plans_fail_the_checks_runs_plain_and_completes(
    start_tree: Any,
) -> None:
    """The second plan is asked for with the first one's problems; when it fails too, the goal
    runs one loop on its own text, completes with that answer as its result and notifies it,
    and says it ran without a plan, and why."""
    provider = ScriptedProvider([ScriptStep(text=CYCLIC), ScriptStep(text=VAGUE),
                                 answer("Two tickets for Saturday 10am are booked.")])
    tree = start_tree(provider, tools=TOOLS, paths=True)
    start_goal(tree, goal=GOAL)
    run_until(tree, lambda: (None, "completed") in tasks(tree), "the goal to complete")
    assert "depend on each other in a cycle" in prompt(provider.requests[1])
    assert tasks(tree) == [(None, "planning"), (None, "running"), ("goal", "running"),
                           ("goal", "done"), (None, "completed")]
    [(state, mode, problems, result, reason, confidence)] = tree.rows(
        "SELECT state, mode, plan_problems, result, end_reason, confidence FROM goals")
    assert (state, mode, result, reason, confidence) == (
        "completed", "plain", "Two tickets for Saturday 10am are booked.", "completed", None)
    assert json.loads(problems) == plans.problems(plans.parse(VAGUE))
    [note] = of_type(tree, "notification")
    assert (note["content"], note["goal_id"]) == ("Two tickets for Saturday 10am are booked.",
                                                  "g1")
    loop = prompt(provider.requests[2])
    assert GOAL in loop
    assert "No step-by-step plan could be made" in loop
    assert "Step " not in loop
    assert [t.name for t in provider.requests[2].tools] == ["memory", "schedule"]
    assert tree.rows("SELECT step_id, description, status, attempts FROM goal_steps") == [
        ("goal", GOAL, "done", 1)]


def test_a_plain_run_stopped_by_a_restart_resumes_and_a_finished_one_never_runs_again(
    start_tree: Any,
) -> None:
    """The server stops while the plain loop's call is out: started again, the goal runs the
    loop again (no new planning) and completes; started once more, it does nothing."""
    first = GatedProvider([ScriptStep(text=CYCLIC), ScriptStep(text=CYCLIC),
                           answer("never stored")], hold=(2,))
    tree = start_tree(first, tools=TOOLS, paths=True, paths_pool=ThreadPoolExecutor(2))
    start_goal(tree, goal=GOAL)
    first.wait_entered(2)
    tree.wait_until(lambda: ("goal", "running") in tasks(tree), "the plain loop's task frame")
    tree.root.stop(block=True)

    second = ScriptedProvider([answer("Booked for Saturday.")])
    again = start_tree(second, tools=TOOLS, paths=True)
    run_until(again, lambda: again.rows("SELECT state FROM goals") == [("completed",)],
              "the goal to complete after the restart")
    assert len(second.requests) == 1
    assert "No step-by-step plan could be made" in prompt(second.requests[0])
    assert again.rows("SELECT mode, result FROM goals") == [("plain", "Booked for Saturday.")]
    assert again.rows("SELECT status, attempts FROM goal_steps") == [("done", 2)]
    again.root.stop(block=True)

    third = ScriptedProvider([])
    once_more = start_tree(third, tools=TOOLS, paths=True)
    run_until(once_more, lambda: once_more.directory.get("goals") is not None, "the goals")
    assert third.requests == []
    assert once_more.rows("SELECT count(*) FROM turns WHERE path = 'goal'") == [(1,)]


def test_a_plain_run_whose_model_fails_is_tried_again_after_a_while(start_tree: Any) -> None:
    """An LLM failure in the plain loop is retried after goals.retry_backoff_s, as a step's."""
    provider = ScriptedProvider([ScriptStep(text=CYCLIC), ScriptStep(text=CYCLIC),
                                 ScriptStep(fail="timed out"), answer("Booked.")])
    tree = start_tree(provider, tools=TOOLS, paths=True, goals={"retry_backoff_s": 60.0})
    start_goal(tree, goal=GOAL)
    tree.wait_until(lambda: tree.rows("SELECT outcome FROM turns") == [("error",)],
                    "the failed attempt")
    tree.clock.advance(60)
    run_until(tree, lambda: (None, "completed") in tasks(tree), "the retried loop")
    assert tree.rows("SELECT state, mode, result FROM goals") == [
        ("completed", "plain", "Booked.")]
    assert tree.rows("SELECT attempts FROM goal_steps") == [(2,)]


def test_a_plain_run_out_of_budget_pauses_and_goes_on_when_the_day_frees_room(
    start_tree: Any,
) -> None:
    """Two refused plans use the goal path's day: the plain loop waits (a `paused` frame) and
    runs once their tokens are a day old."""
    usage = ScriptUsage(prompt_tokens=45, completion_tokens=5)
    provider = ScriptedProvider([ScriptStep(text=CYCLIC, usage=usage),
                                 ScriptStep(text=CYCLIC, usage=usage), answer("Booked.")])
    tree = start_tree(provider, tools=TOOLS, paths=True, governor={"goal_tokens_per_day": 100})
    start_goal(tree, goal=GOAL)
    run_until(tree, lambda: (None, "paused") in tasks(tree), "the pause")
    assert tree.rows("SELECT state, mode, paused_at FROM goals") == [("running", "plain", NOW)]
    assert len(provider.requests) == 2
    tree.clock.advance(86_400)
    run_until(tree, lambda: (None, "completed") in tasks(tree), "the goal to complete")
    assert tree.rows("SELECT result, paused_at FROM goals") == [("Booked.", None)]


def test_a_plain_run_has_only_the_goal_s_iterations(start_tree: Any) -> None:
    """goals.max_iterations bounds the plain loop as it bounds a plan's steps: with one
    iteration, after a tool call the loop must answer, with no tools offered."""
    recall = ScriptCall("memory", {"action": "recall", "query": "museum"})
    provider = ScriptedProvider([ScriptStep(text=CYCLIC), ScriptStep(text=CYCLIC),
                                 calls(recall), answer("Booked.")])
    tree = start_tree(provider, tools=TOOLS, paths=True, goals={"max_iterations": 1})
    start_goal(tree, goal=GOAL)
    run_until(tree, lambda: (None, "completed") in tasks(tree), "the goal to complete")
    assert provider.requests[2].tools != ()
    assert provider.requests[3].tools == ()
    assert tree.rows("SELECT result FROM goals") == [("Booked.",)]
