"""The dashboard's goals say how each one ran and why it ended, in words."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from selenium.webdriver.remote.webdriver import WebDriver

from tests.browser.conftest import api, find, into_view, login, wait_text
from tests.integration.harness import ServerProcess, StubLlm, completion, wait_for

Shot = Callable[[WebDriver, str], Path]


def test_a_goal_that_ran_without_a_plan_says_so_why_and_how_it_ended(
    browser: WebDriver, server: ServerProcess, llm: StubLlm, shot: Shot
) -> None:
    """The stub's plans fail the checks, so the goal runs plain and completes: its item says it
    ran without a plan, lists the checks that failed, and that it completed."""
    llm.queue(completion("Two tickets for Saturday morning are booked."))
    with api(server) as http:
        goal = http.post("/api/goals", json={"goal": "Get museum tickets"}).json()
        wait_for(lambda: http.get(f"/api/goals/{goal['id']}").json()["state"] == "completed")
    item = f'#goals li.goal[data-id="{goal["id"]}"]'
    login(browser, server, "/brain")
    into_view(browser, wait_text(browser, item, "Get museum tickets"))
    assert "Ran without a plan" in find(browser, f"{item} .plain-mode").text
    assert "confidence is 0" in find(browser, f"{item} .plan-problems").text
    assert find(browser, f"{item} .end-reason").text == \
        "Completed: its last step gave the result."
    assert find(browser, f"{item} .state").text.strip().lower() == "completed"
    shot(browser, "goal-plain")
