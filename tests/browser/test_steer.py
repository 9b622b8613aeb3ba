"""Steering and stopping a running turn from the chat page's one input."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.browser.conftest import (
    Holds,
    connected,
    find,
    finished,
    hidden,
    last_exchange,
    login,
    say,
    until,
    visible,
    wait_text,
)
from tests.integration.harness import Reply, ServerProcess, StubLlm, completion

Shot = Callable[[WebDriver, str], Path]
REMEMBER = json.dumps({"action": "remember", "key": "city", "value": "Lyon"})
HINT = "A turn is running: what you send steers it."
STEER = "Actually it is Paris, not Lyon"


def test_what_is_sent_while_a_turn_runs_steers_it(
    browser: WebDriver, server: ServerProcess, llm: StubLlm, hold: Holds, shot: Shot
) -> None:
    """While the model's first request is out, the button reads Steer and the hint says so;
    Enter sends an act_steer, which the next request carries; then the answer arrives."""
    held = hold()
    llm.queue(Reply(completion(tool_calls=[("memory", REMEMBER)]), hold=held),
              completion("Paris it is."))
    login(browser, server)
    connected(browser)
    hidden(browser, "#mode-hint")
    say(browser, "Remember that I live in Lyon")
    until(browser, lambda _: len(llm.requests) == 1, "the model's first request")
    until(browser, lambda d: d.find_element(By.CSS_SELECTOR, "button#send").text == "Steer",
          "the send button to read Steer")
    assert HINT in visible(browser, "#mode-hint").text
    visible(browser, "button#stop")
    shot(browser, "turn-running")

    say(browser, STEER)
    steer = wait_text(browser, "article.exchange .steer", STEER)
    assert steer.is_displayed()
    until(browser, lambda _: any(e.get("event") == "steering_received"
                                 for e in server.log_events()), "the server to take the steer")
    assert find(browser, "#input").get_attribute("value") == ""
    shot(browser, "steer-sent")

    held.set()
    finished(browser)
    final = find(browser, '.answer[data-state="final"]')
    assert final.text == "Paris it is."
    steered = str(llm.requests[1]["messages"][-1]["content"])
    assert "MID-TURN STEERING" in steered
    assert STEER in steered
    assert len(browser.find_elements(By.CSS_SELECTOR, "article.exchange")) == 1
    assert visible(browser, "button#send").text == "Send"
    hidden(browser, "#mode-hint")
    hidden(browser, "button#stop")
    shot(browser, "answered")


def test_the_stop_button_ends_the_running_turn(
    browser: WebDriver, server: ServerProcess, llm: StubLlm, hold: Holds, shot: Shot
) -> None:
    """Stop while the model thinks: the turn ends at once, with no answer from the model."""
    held = hold()
    llm.queue(Reply(completion("never seen"), hold=held))
    login(browser, server)
    connected(browser)
    say(browser, "Write me a long story")
    until(browser, lambda _: len(llm.requests) == 1, "the model's request")
    stop = visible(browser, "button#stop")
    shot(browser, "turn-running")
    stop.click()
    finished(browser)
    turn = last_exchange(browser)
    assert "never seen" not in turn.text
    assert visible(browser, "button#send").text == "Send"
    hidden(browser, "button#stop")
    until(browser, lambda _: any(e.get("event") == "turn_cancelled_by_person"
                                 for e in server.log_events()), "the server to log the stop")
    shot(browser, "stopped")
