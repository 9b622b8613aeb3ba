"""A reload in the middle of a turn: the page resumes and shows the exchange exactly once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.browser.conftest import Holds, connected, find, finished, login, say, until
from tests.integration.harness import Reply, ServerProcess, StubLlm, completion

Shot = Callable[[WebDriver, str], Path]


def test_a_reload_mid_turn_shows_the_answer_exactly_once(
    browser: WebDriver, server: ServerProcess, llm: StubLlm, hold: Holds, shot: Shot
) -> None:
    """The model is held, the page reloads, the model answers: one article, one person's
    message, one answer; a later turn adds exactly one more of each."""
    held = hold()
    llm.queue(Reply(completion("Lyon, noted."), hold=held), completion("Still here."))
    login(browser, server)
    connected(browser)
    say(browser, "I live in Lyon")
    until(browser, lambda _: len(llm.requests) == 1, "the model's request")
    find(browser, "article.exchange[data-exchange-id] .msg.user")
    shot(browser, "before-reload")

    browser.refresh()
    connected(browser)
    find(browser, "article.exchange[data-exchange-id] .msg.user")
    shot(browser, "after-reload")
    held.set()
    finished(browser)
    shot(browser, "answered")
    assert_once(browser, ["I live in Lyon"], ["Lyon, noted."])

    # Anything doubled that was still on its way has arrived once this later turn is done.
    say(browser, "Are you there?")
    finished(browser, 2)
    assert_once(browser, ["I live in Lyon", "Are you there?"], ["Lyon, noted.", "Still here."])
    assert len(llm.requests) == 2  # the message was not sent again as a new turn
    shot(browser, "second-turn")


def assert_once(driver: WebDriver, said: list[str], answers: list[str]) -> None:
    """One article per exchange id, each with one person's message and one answer, in order."""
    articles = driver.find_elements(By.CSS_SELECTOR, "article.exchange")
    ids = [a.get_attribute("data-exchange-id") for a in articles]
    assert len(ids) == len(set(ids)) == len(said), ids
    for article, text, answer in zip(articles, said, answers, strict=True):
        users = article.find_elements(By.CSS_SELECTOR, ".msg.user")
        assert [u.text for u in users] == [text]
        finals = article.find_elements(By.CSS_SELECTOR, ".answer")
        assert len(finals) == 1
        assert finals[0].get_attribute("data-state") == "final"
        assert finals[0].text == answer
    page = driver.find_element(By.CSS_SELECTOR, "#messages").text
    for text in said + answers:
        assert page.count(text) == 1, (text, page)
