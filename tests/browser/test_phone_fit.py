"""The chat page on a phone (375x740, dark): the top bar stays one row whatever the connection
says, and while a turn runs the message box keeps most of the width, its placeholder whole."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from tests.browser.conftest import (
    Holds,
    connected,
    find,
    finished,
    login,
    phone,
    say,
    until,
    visible,
)
from tests.browser.test_reconnect import cut_off
from tests.integration.harness import Reply, ServerProcess, StubLlm, completion

Shot = Callable[[WebDriver, str], Path]


@pytest.fixture
def dark(browser: WebDriver) -> Iterator[None]:
    """The system's dark setting, for this test only (the browser is shared)."""
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {
        "features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    yield
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


def header_height(driver: WebDriver) -> float:
    return float(driver.execute_script(
        "return document.querySelector('header.topbar').getBoundingClientRect().height"))


def one_row(driver: WebDriver) -> bool:
    """Every item of the top bar shares one row (their vertical middles are within 4 px)."""
    middles: list[float] = driver.execute_script(
        "return [...document.querySelector('header.topbar').children].map((c) => {"
        " const r = c.getBoundingClientRect(); return r.top + r.height / 2; })")
    return max(middles) - min(middles) <= 4


@pytest.mark.usefixtures("dark")
def test_the_top_bar_is_one_row_on_a_phone_in_every_connection_state(
    browser: WebDriver, server: ServerProcess, shot: Shot
) -> None:
    login(browser, server)
    phone(browser)
    connected(browser)
    connected_height = header_height(browser)
    assert one_row(browser)
    assert connected_height < 60, connected_height
    shot(browser, "connected")
    with cut_off(browser):
        assert header_height(browser) == connected_height
        assert one_row(browser)
        shot(browser, "offline")
        # Each word the badge can say, the longest too, keeps the bar on one row.
        for word in ("Reconnecting…", "Offline", "Connected"):
            browser.execute_script(
                "document.getElementById('connection').textContent = arguments[0]", word)
            assert header_height(browser) == connected_height, word
            assert one_row(browser), word
    connected(browser)
    assert header_height(browser) == connected_height


@pytest.mark.usefixtures("dark")
def test_the_message_box_keeps_its_width_while_a_turn_runs_on_a_phone(
    browser: WebDriver, server: ServerProcess, llm: StubLlm, hold: Holds, shot: Shot
) -> None:
    go_on = hold()
    answer = Reply(completion("A slow answer, written bit by bit."), pause=go_on, pause_after=2)
    llm.queue(answer)
    login(browser, server)
    phone(browser)
    connected(browser)
    say(browser, "Take your time")
    until(browser, lambda _: answer.paused.is_set(), "the stub to pause the answer")
    visible(browser, "button#stop")
    until(browser, lambda d: d.find_element("css selector", "button#send").text == "Steer",
          "Steer")
    box, row, overflow = browser.execute_script(
        "const i = document.getElementById('input');"
        "return [i.getBoundingClientRect().width,"
        " document.querySelector('.composer-row').getBoundingClientRect().width,"
        " [i.scrollHeight, i.clientHeight, i.scrollWidth, i.clientWidth]];")
    assert box >= 0.7 * row, (box, row)
    scroll_h, client_h, scroll_w, client_w = overflow
    assert scroll_h <= client_h, overflow  # the placeholder is whole: no scrollbar
    assert scroll_w <= client_w, overflow
    assert find(browser, "#input").get_attribute("placeholder") == "Message Chalie…"
    shot(browser, "running")
    go_on.set()
    finished(browser)
