"""A half-written answer survives a reload and a network cut whole: the page shows the text so
far (the server's `reset` delta), never a piece of it twice or out of order, then the rest."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from selenium.webdriver.remote.webdriver import WebDriver

from tests.browser.conftest import Holds, connected, finished, login, say, until
from tests.browser.test_reconnect import cut_off, stored
from tests.integration.harness import Reply, ServerProcess, StubLlm, completion

Shot = Callable[[WebDriver, str], Path]
ANSWER = "Lisbon's old trams climb the hills slowly, bell ringing all the way."
SO_FAR = ANSWER[:12]  # three 4-character pieces: "Lisbon's old"

# Every text the answer shows, kept by the page from now on.
WATCH = """
window.__answers = [];
const note = () => {
  for (const a of document.querySelectorAll('.answer')) {
    const t = a.textContent;
    if (window.__answers[window.__answers.length - 1] !== t) window.__answers.push(t);
  }
};
new MutationObserver(note).observe(document.getElementById('messages'),
  {childList: true, subtree: true, characterData: true});
note();
"""


def answers(driver: WebDriver) -> list[str]:
    return list(driver.execute_script("return document.querySelectorAll('.answer').length "
                                      "? [...document.querySelectorAll('.answer')]"
                                      ".map((a) => a.textContent) : []"))


def paused_answer(browser: WebDriver, server: ServerProcess, llm: StubLlm,
                  hold: Holds) -> tuple[Reply, object]:
    go_on = hold()
    reply = Reply(completion(ANSWER), pause=go_on, pause_after=3)
    llm.queue(reply)
    login(browser, server)
    connected(browser)
    say(browser, "Tell me about Lisbon")
    until(browser, lambda _: reply.paused.is_set(), "the stub to pause the answer")
    until(browser, lambda d: answers(d) == [SO_FAR], "the text so far")
    return reply, go_on


def test_a_reload_mid_answer_shows_the_text_so_far_then_the_rest(
    browser: WebDriver, server: ServerProcess, llm: StubLlm, hold: Holds, shot: Shot
) -> None:
    _, go_on = paused_answer(browser, server, llm, hold)
    browser.refresh()
    connected(browser)
    until(browser, lambda d: answers(d) == [SO_FAR], "the text so far after the reload")
    browser.execute_script(WATCH)
    shot(browser, "reloaded-mid-answer")
    go_on.set()  # type: ignore[attr-defined]
    finished(browser)
    until(browser, lambda d: answers(d) == [ANSWER], "the whole answer")
    seen = browser.execute_script("return window.__answers")
    assert all(ANSWER.startswith(t) for t in seen), seen


def test_a_network_cut_mid_answer_keeps_the_answer_whole(
    browser: WebDriver, server: ServerProcess, llm: StubLlm, hold: Holds, shot: Shot
) -> None:
    _, go_on = paused_answer(browser, server, llm, hold)
    browser.execute_script(WATCH)
    with cut_off(browser):
        shot(browser, "offline-mid-answer")
        go_on.set()  # type: ignore[attr-defined]
        stored(browser, server)
    connected(browser)
    finished(browser)
    until(browser, lambda d: answers(d) == [ANSWER], "the whole answer, once")
    seen = browser.execute_script("return window.__answers")
    assert all(ANSWER.startswith(t) for t in seen), seen
    assert seen[-1] == ANSWER
