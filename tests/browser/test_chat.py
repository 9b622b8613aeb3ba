"""A turn in the chat page: the person's message, stages, narration, the answer growing from
deltas and then rendered as Markdown with raw HTML as text, and the metrics on demand."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement

from tests.browser.conftest import (
    Holds,
    connected,
    find,
    finished,
    hidden,
    last_exchange,
    login,
    phone,
    say,
    until,
    visible,
    wait_text,
)
from tests.integration.harness import Reply, ServerProcess, StubLlm, completion

Shot = Callable[[WebDriver, str], Path]
REMEMBER = json.dumps({"action": "remember", "key": "favourite colour", "value": "teal"})
ANSWER = "Here is **bold** and <b>raw</b> text, with teal noted for later."


def test_a_turn_shows_narration_a_growing_answer_markdown_and_metrics(
    browser: WebDriver, server: ServerProcess, llm: StubLlm, hold: Holds, shot: Shot
) -> None:
    """The model calls `memory`, then streams its answer; the stream stops half-way until the
    test lets it go on, so the page is seen mid-answer."""
    go_on = hold()
    answer = Reply(completion(ANSWER, prompt_tokens=160, completion_tokens=6), pause=go_on,
                   pause_after=2)
    llm.queue(completion(tool_calls=[("memory", REMEMBER)], prompt_tokens=120,
                         completion_tokens=17), answer)
    login(browser, server)
    connected(browser)
    assert find(browser, "#messages").get_attribute("role") == "log"
    assert find(browser, "#announcer").get_attribute("aria-live") in ("polite", "assertive")
    assert visible(browser, "button#send").text == "Send"
    hidden(browser, "button#stop")
    shot(browser, "empty-chat")

    say(browser, "My favourite colour is teal.\nPlease remember it.")
    until(browser, lambda _: answer.paused.is_set(), "the stub to pause the answer")
    streaming = wait_text(browser, '.answer[data-state="streaming"]', "Here is")
    turn = last_exchange(browser)
    assert turn.get_attribute("data-exchange-id")
    user = turn.find_element(By.CSS_SELECTOR, ".msg.user")
    assert user.text == "My favourite colour is teal.\nPlease remember it."
    assert "My favourite colour is teal.\nPlease remember it." in (
        llm.requests[0]["messages"][-1]["content"])
    assert turn.find_elements(By.CSS_SELECTOR, ".stage"), "no stage shown while the turn runs"
    narrations = turn.find_elements(By.CSS_SELECTOR, "ol.narrations li.narration")
    assert len(narrations) == 1
    assert narrations[0].get_attribute("textContent").strip()  # type: ignore[union-attr]
    assert int(streaming.get_attribute("data-deltas") or 0) > 0
    assert "bold" not in (streaming.get_attribute("textContent") or "")
    assert visible(browser, "button#send").text == "Steer"
    visible(browser, "button#stop")
    shot(browser, "answer-half-written")

    go_on.set()
    finished(browser)
    turn = last_exchange(browser)
    final = turn.find_element(By.CSS_SELECTOR, '.answer[data-state="final"]')
    assert int(final.get_attribute("data-deltas") or 0) > 0
    assert [s.text for s in final.find_elements(By.CSS_SELECTOR, "strong")] == ["bold"]
    assert final.find_elements(By.CSS_SELECTOR, "b") == []
    text = final.get_attribute("textContent") or ""
    assert "<b>raw</b>" in text
    assert "**" not in text
    assert text.count("teal noted for later") == 1
    assert len(turn.find_elements(By.CSS_SELECTOR, ".answer")) == 1
    shot(browser, "answer-final")

    open_metrics(browser, turn, "303", "memory")  # 120 + 17 + 160 + 6 tokens
    assert visible(browser, "button#send").text == "Send"
    hidden(browser, "button#stop")
    shot(browser, "metrics-open")


def test_chat_at_phone_size(
    browser: WebDriver, server: ServerProcess, llm: StubLlm, shot: Shot
) -> None:
    """At 375x740 the login page and the chat fit the screen: nothing scrolls sideways, and the
    composer can be reached and used."""
    phone(browser)
    llm.queue(completion("A short answer, with a `code` word and a long unbroken "
                         "word_that_goes_on_and_on_and_on_and_on_and_on_and_on_and_on."))
    browser.get(server.url + "/")
    visible(browser, "#password")
    fits(browser)
    shot(browser, "login")
    login(browser, server)
    connected(browser)
    fits(browser)
    shot(browser, "empty-chat")

    say(browser, "Hello from a phone")
    finished(browser)
    final = find(browser, '.answer[data-state="final"]')
    assert "A short answer" in final.text
    fits(browser)
    for css in ("#input", "button#send"):
        box = find(browser, css).rect
        assert box["x"] >= 0, (css, box)
        assert box["x"] + box["width"] <= 375 + 0.5, (css, box)
    shot(browser, "answered")


def fits(driver: WebDriver) -> None:
    """Nothing on the page is wider than the viewport."""
    widths = driver.execute_script(
        "return [document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], f"the page scrolls sideways: {widths}"


def open_metrics(driver: WebDriver, turn: WebElement, *expected: str) -> None:
    """The turn's metrics are folded away; opened, they show each of `expected`."""
    metrics = turn.find_element(By.CSS_SELECTOR, "details.metrics")
    assert metrics.get_attribute("open") is None
    metrics.find_element(By.CSS_SELECTOR, "summary").click()
    until(driver, lambda _: metrics.get_attribute("open") is not None, "the metrics to open")
    shown = metrics.text
    for text in expected:
        assert text in shown, shown
