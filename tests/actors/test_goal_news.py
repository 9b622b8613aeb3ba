"""What the person hears of a goal between its start and its end, and how it ends: progress
at most every goals.progress_every_s (skipped in quiet hours), expiry after goals.expire_days
paused, and the reason each ending leaves on the goal."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from chalie.llm.scripted import ScriptedProvider, ScriptStep, ScriptUsage
from tests.actors.background import NOW, of_type, run_until
from tests.actors.conftest import GatedProvider, answer
from tests.actors.test_goals import STEPS, TOOLS, plan, start_goal, tasks

DAY = 86_400.0
FOUR = [*STEPS[:2], ("s3", "Check the weather forecast in Lisbon for those days", ["s2"]),
        ("s4", "Write a short recommendation for the person with prices", ["s3"])]
ONE = STEPS[:1]
GOAL = "Find me a flight to Lisbon"


def notes(tree: Any) -> list[str]:
    return [n["content"] for n in of_type(tree, "notification")]


def step_taking(provider: GatedProvider, tree: Any, n: int, seconds: float) -> None:
    """LLM request `n` (a step's) is out for `seconds` of the tree's clock."""
    provider.wait_entered(n)
    tree.clock.advance(seconds)
    provider.release(n)


# --- progress -------------------------------------------------------------------------------

def test_progress_is_told_at_most_every_progress_every_s_and_the_result_ends_it(
    start_tree: Any,
) -> None:
    """Steps done 1800s, 2800s and 3600s after the goal started: the first and third are told
    (which step of how many, and what it found), the second is too soon after the first, and
    the last step's answer is the result, not a progress message."""
    provider = GatedProvider([ScriptStep(text=plan(FOUR)), answer("TAP 89, Ryanair 45"),
                              answer("Ryanair leaves at 6am"), answer("Sunny   all\nweek"),
                              answer("Take Ryanair.")], hold=(1, 2, 3))
    tree = start_tree(provider, tools=TOOLS, paths=True, paths_pool=ThreadPoolExecutor(2))
    start_goal(tree)
    step_taking(provider, tree, 1, 1800)
    step_taking(provider, tree, 2, 1000)
    step_taking(provider, tree, 3, 800)
    run_until(tree, lambda: (None, "completed") in tasks(tree), "the goal to complete")
    assert notes(tree) == [f'Goal "{GOAL}": step 1 of 4 done. TAP 89, Ryanair 45',
                           f'Goal "{GOAL}": step 3 of 4 done. Sunny all week', "Take Ryanair."]
    assert tree.rows("SELECT progress_at FROM goals") == [(NOW + 3600,)]
    assert tree.rows("SELECT status, capped FROM proactive ORDER BY id") == [
        ("sent", 0), ("sent", 0), ("sent", 1)]
    assert tree.rows("SELECT role, text FROM transcript ORDER BY id")[0] == (
        "assistant", f'Goal "{GOAL}": step 1 of 4 done. TAP 89, Ryanair 45')
    assert len(of_type(tree, "task")) == 11  # planning, running, 4 x 2 steps, completed


def test_the_time_since_the_last_progress_survives_a_restart(start_tree: Any) -> None:
    """Step 1 is told 1800s in; the server stops during step 2 and, started again, finishes
    step 2 at once: too soon after step 1's message to tell it."""
    first = GatedProvider([ScriptStep(text=plan()), answer("TAP 89"), answer("never")],
                          hold=(1, 2))
    tree = start_tree(first, tools=TOOLS, paths=True, paths_pool=ThreadPoolExecutor(2))
    start_goal(tree)
    step_taking(first, tree, 1, 1800)
    first.wait_entered(2)
    tree.wait_until(lambda: len(notes(tree)) == 1, "step 1's progress")
    tree.root.stop(block=True)

    again = start_tree(ScriptedProvider([answer("Ryanair at 6am"), answer("Take TAP.")]),
                       tools=TOOLS, paths=True)
    run_until(again, lambda: (None, "completed") in tasks(again), "the goal to complete")
    assert notes(again) == ["Take TAP."]
    assert again.rows("SELECT progress_at FROM goals") == [(NOW + 1800,)]


def test_progress_in_quiet_hours_is_skipped_not_deferred(start_tree: Any) -> None:
    """In quiet hours a progress message is recorded as suppressed and never sent, while the
    result waits for quiet hours to end."""
    two = STEPS[:2]
    provider = GatedProvider([ScriptStep(text=plan(two)), answer("TAP 89"),
                              answer("Take TAP.")], hold=(1,))
    tree = start_tree(provider, tools=TOOLS, paths=True, paths_pool=ThreadPoolExecutor(2),
                      dmn={"quiet_hours": "22:00-08:00"}, goals={"progress_every_s": 60.0})
    start_goal(tree)
    step_taking(provider, tree, 1, 60)
    run_until(tree, lambda: (None, "completed") in tasks(tree), "the goal to complete")
    assert notes(tree) == []
    assert tree.rows("SELECT content, status, reason, capped FROM proactive ORDER BY id") == [
        (f'Goal "{GOAL}": step 1 of 2 done. TAP 89', "suppressed", "quiet_hours", 0),
        ("Take TAP.", "deferred", "quiet_hours", 1)]
    assert tree.rows("SELECT progress_at FROM goals") == [(None,)]
    assert tree.metric("chalie_proactive_suppressed_total", reason="quiet_hours") == 1


# --- expiry ---------------------------------------------------------------------------------

def test_a_goal_paused_longer_than_expire_days_expires_and_the_person_hears_so(
    start_tree: Any,
) -> None:
    """Its plan uses the day's budget, so the goal pauses for a day; with goals.expire_days
    at half a day it expires first: an `expired` task frame, a notification, and the goal
    says why it ended."""
    usage = ScriptUsage(prompt_tokens=90, completion_tokens=10)
    provider = ScriptedProvider([ScriptStep(text=plan(ONE), usage=usage)])
    tree = start_tree(provider, tools=TOOLS, paths=True, governor={"goal_tokens_per_day": 100},
                      goals={"expire_days": 0.5})
    start_goal(tree)
    run_until(tree, lambda: (None, "paused") in tasks(tree), "the pause")
    tree.clock.advance(DAY / 2 - 1)
    run_until(tree, lambda: True, "nothing")
    assert tree.rows("SELECT state FROM goals") == [("running",)]
    tree.clock.advance(1)
    run_until(tree, lambda: (None, "expired") in tasks(tree), "the goal to expire")
    assert notes(tree) == [f'I gave up the goal "{GOAL}": it waited more than 0.5 days for '
                           "the background budget to free up."]
    assert tree.rows("SELECT state, end_reason, finished_at, paused_at FROM goals") == [
        ("expired", "expired", NOW + DAY / 2, NOW)]
    assert tree.metric("chalie_goals", state="expired") == 1
    tree.clock.advance(DAY)
    run_until(tree, lambda: True, "nothing")
    assert len(provider.requests) == 1


def test_a_goal_paused_past_expire_days_across_a_restart_expires_at_once(
    start_tree: Any,
) -> None:
    """With no goal budget at all the goal waits; started again 31 days later it expires as it
    starts, without planning."""
    tree = start_tree(ScriptedProvider([]), tools=TOOLS, paths=True,
                      governor={"goal_tokens_per_day": 0})
    start_goal(tree)
    tree.wait_until(lambda: tree.rows("SELECT paused_at FROM goals") == [(NOW,)], "the pause")
    tree.root.stop(block=True)
    tree.clock.advance(31 * DAY)
    provider = ScriptedProvider([])
    again = start_tree(provider, tools=TOOLS, paths=True, governor={"goal_tokens_per_day": 0})
    run_until(again, lambda: (None, "expired") in tasks(again), "the goal to expire")
    assert again.rows("SELECT state, end_reason FROM goals") == [("expired", "expired")]
    assert notes(again)[0].startswith(f'I gave up the goal "{GOAL}"')
    assert provider.requests == []


# --- how goals end --------------------------------------------------------------------------

@pytest.mark.parametrize(("steps", "reason", "error"), [
    ([ScriptStep(fail="model down")], "planning_error", "planning failed: model down"),
    ([ScriptStep(text=plan(ONE)), ScriptStep(fail="model down")], "step_failed",
     "step s1 failed: model down"),
])
def test_a_goal_that_fails_says_why_it_ended(start_tree: Any, steps: list[ScriptStep],
                                             reason: str, error: str) -> None:
    """With no retries left, a failed planning call or a failed step fails the goal, which
    keeps a stable reason beside its error, and the person hears the error."""
    tree = start_tree(ScriptedProvider(steps), tools=TOOLS, paths=True,
                      goals={"step_retries": 0})
    start_goal(tree)
    run_until(tree, lambda: (None, "failed") in tasks(tree), "the goal to fail")
    assert tree.rows("SELECT state, end_reason, error FROM goals") == [
        ("failed", reason, error)]
    assert notes(tree) == [f'I could not complete the goal "{GOAL}": {error}']


def test_a_step_that_outlasts_the_goal_s_time_ends_it_out_of_time(start_tree: Any) -> None:
    """A step still running when goals.timeout_s is used up is stopped, and the goal ends
    out_of_time."""
    provider = GatedProvider([ScriptStep(text=plan(ONE)), answer("too late")], hold=(1,))
    tree = start_tree(provider, tools=TOOLS, paths=True, paths_pool=ThreadPoolExecutor(2),
                      goals={"timeout_s": 100.0})
    start_goal(tree)
    provider.wait_entered(1)
    tree.clock.wait_for_timers()
    tree.clock.advance(100)
    run_until(tree, lambda: (None, "failed") in tasks(tree), "the goal to fail")
    provider.release(1)
    [(state, reason, error)] = tree.rows("SELECT state, end_reason, error FROM goals")
    assert (state, reason) == ("failed", "out_of_time")
    assert error.startswith("step s1 failed: the turn took longer than")
