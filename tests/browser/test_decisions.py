"""What a turn does, in words: the status line while it waits for the person's approval, the
outcome of an approval as the server logged it (so a second browser and a reload show it too),
narration as a sentence with the call's arguments only under Details, and an approval card
that shows the arguments once."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.browser.conftest import (
    Console,
    Servers,
    connected,
    finished,
    login,
    say,
    start_chrome,
    text_of,
    until,
    visible,
    wait_text,
)
from tests.integration.harness import StubLlm, completion

Shot = Callable[[WebDriver, str], Path]
REMEMBER = json.dumps({"action": "remember", "key": "city", "value": "Lyon"})


@contextmanager
def second_browser(profile: Path) -> Iterator[WebDriver]:
    """Another Chromium with a profile of its own: another device, another login."""
    chrome = start_chrome(profile)
    try:
        yield chrome
        Console(chrome).check()
    finally:
        chrome.quit()


def stage_text(driver: WebDriver) -> str:
    stages = driver.find_elements(By.CSS_SELECTOR, "article.exchange .stage")
    return str(stages[-1].get_attribute("textContent")) if stages else ""


def test_an_approval_in_one_browser_shows_in_another_and_after_a_reload(
    browser: WebDriver, serve: Servers, llm: StubLlm, shot: Shot, tmp_path: Path
) -> None:
    """While the turn waits, both browsers' status lines say so (not "Remembering…"); the
    person approves in browser A; browser B, logged in on its own, shows "Approved" from the
    server's decision frame, and so does each after a reload."""
    server = serve(tools={"confirm": ["memory"]})
    llm.queue(completion(tool_calls=[("memory", REMEMBER)]), completion("Done."))
    login(browser, server)
    connected(browser)
    say(browser, "I live in Lyon")
    visible(browser, "article.exchange .escalation button.approve")
    until(browser, lambda d: stage_text(d) == "Waiting for your approval…", "the waiting status")
    shot(browser, "a-waiting")

    with second_browser(tmp_path / "profile-b") as other:
        login(other, server)
        connected(other)
        approve_b = visible(other, "article.exchange .escalation button.approve")
        assert approve_b.is_enabled()
        until(other, lambda d: stage_text(d) == "Waiting for your approval…", "B's status")

        browser.find_element(By.CSS_SELECTOR, ".escalation button.approve").click()
        wait_text(browser, ".escalation .decision", "Approved")
        finished(browser)
        decision_b = wait_text(other, ".escalation .decision", "Approved")
        assert decision_b.is_displayed()
        assert "by a program" not in decision_b.text
        finished(other)
        assert not other.find_elements(By.CSS_SELECTOR, ".escalation button:enabled")
        other.save_screenshot(str(tmp_path / "b.png"))

        other.refresh()
        connected(other)
        wait_text(other, ".escalation .decision", "Approved")
        assert "No longer waiting" not in text_of(other, ".escalation .decision")
        assert not other.find_elements(By.CSS_SELECTOR, ".escalation button:enabled")

    browser.refresh()
    connected(browser)
    decision = wait_text(browser, ".escalation .decision", "Approved")
    assert decision.text == "Approved"
    assert not browser.find_elements(By.CSS_SELECTOR, ".escalation button:enabled")
    shot(browser, "a-after-reload")


def test_a_denial_and_a_steer_away_are_shown_as_the_server_says(
    browser: WebDriver, serve: Servers, llm: StubLlm, shot: Shot
) -> None:
    """Deny shows "Denied"; a question the person steers away from reads "Withdrawn"; the
    status line goes back to what the turn does once nothing waits."""
    server = serve(tools={"confirm": ["memory"]})
    llm.queue(completion(tool_calls=[("memory", REMEMBER)]), completion("Left alone."))
    login(browser, server)
    connected(browser)
    say(browser, "I live in Lyon")
    visible(browser, ".escalation button.deny").click()
    wait_text(browser, ".escalation .decision", "Denied")
    finished(browser)

    llm.queue(completion(tool_calls=[("memory", REMEMBER)]),
              completion("All right, something else then."))
    say(browser, "Actually I live in Lyon")
    until(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".escalation")) == 2,
          "the second question")
    until(browser, lambda d: stage_text(d) == "Waiting for your approval…", "the waiting status")
    say(browser, "never mind, tell me a joke instead")
    decision = wait_text(browser, "article.exchange:last-of-type .escalation .decision",
                         "Withdrawn")
    assert decision.is_displayed()
    finished(browser, 2)
    shot(browser, "withdrawn")


def test_narration_is_a_sentence_with_the_arguments_under_details(
    browser: WebDriver, serve: Servers, llm: StubLlm, shot: Shot
) -> None:
    """recall reads "Looking through your memory for “Lisbon”…", with no tool badge and no
    JSON in sight; the arguments are under a collapsed Details and show when it opens."""
    server = serve()
    llm.queue(completion(tool_calls=[("recall", json.dumps({"query": "Lisbon"}))]),
              completion("Nothing about Lisbon yet."))
    login(browser, server)
    connected(browser)
    say(browser, "What do you know about Lisbon?")
    finished(browser)
    item = visible(browser, "article.exchange .narration")
    assert item.text == "Looking through your memory for “Lisbon”…\nDetails", item.text
    assert item.find_elements(By.CSS_SELECTOR, ".tool") == []
    details = item.find_element(By.CSS_SELECTOR, "details")
    assert details.get_attribute("open") is None
    args = details.find_element(By.CSS_SELECTOR, "pre.call-args")
    assert not args.is_displayed()
    details.find_element(By.CSS_SELECTOR, "summary").click()
    until(browser, lambda _: args.is_displayed(), "the arguments")
    assert json.loads(args.text) == {"query": "Lisbon"}
    assert "recall" in details.text
    shot(browser, "narration-details")


def test_the_approval_card_shows_the_arguments_once(
    browser: WebDriver, serve: Servers, llm: StubLlm, shot: Shot
) -> None:
    """The card asks in words; the arguments are there once, under Details."""
    server = serve(tools={"confirm": ["memory"]})
    llm.queue(completion(tool_calls=[("memory", REMEMBER)]), completion("Done."))
    login(browser, server)
    connected(browser)
    say(browser, "I live in Lyon")
    card = visible(browser, "article.exchange .escalation")
    whole = card.get_attribute("textContent") or ""
    assert whole.count('"value"') == 1, whole
    assert whole.count('"action"') == 1, whole
    assert '"value"' not in card.text  # collapsed until the person opens Details
    card.find_element(By.CSS_SELECTOR, "details summary").click()
    until(browser, lambda _: '"value": "Lyon"' in card.text, "the arguments")
    shot(browser, "approval-card")
    card.find_element(By.CSS_SELECTOR, "button.approve").click()
    wait_text(browser, ".escalation .decision", "Approved")
    finished(browser)
