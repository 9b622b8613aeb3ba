"""The chat page on a bad day: the network cut mid-turn, the server killed and started again.
It reconnects on its own, resumes, and shows every exchange exactly once."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.browser.conftest import (
    Console,
    Holds,
    Servers,
    connected,
    finished,
    login,
    say,
    until,
)
from tests.browser.test_reload import assert_once
from tests.integration.harness import Reply, ServerProcess, StubLlm, completion

Shot = Callable[[WebDriver, str], Path]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def connection_state(driver: WebDriver) -> str:
    return str(driver.find_element(By.CSS_SELECTOR, "#connection").get_attribute("data-state"))


def offline(driver: WebDriver, cut: bool) -> None:
    driver.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": cut, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})


@contextmanager
def cut_off(driver: WebDriver) -> Iterator[None]:
    """The page's network cut for the block, from the moment the page has noticed; back after
    it, however the block ends."""
    try:
        offline(driver, True)
        until(driver, lambda d: connection_state(d) != "open", "the page to notice")
        yield
    finally:
        offline(driver, False)


def stored(driver: WebDriver, server: ServerProcess) -> None:
    """Wait until the server has stored a turn (its `turn_stored` log line)."""
    until(driver, lambda _: any(e.get("event") == "turn_stored" for e in server.log_events()),
          "the answer to be stored")


def test_a_network_cut_mid_turn_loses_and_doubles_nothing(
    browser: WebDriver, server: ServerProcess, llm: StubLlm, hold: Holds, shot: Shot
) -> None:
    """The network goes while the model thinks and comes back after it answered: the page
    says it is offline, then resumes and shows the answer once."""
    held = hold()
    llm.queue(Reply(completion("Answered while you were away."), hold=held))
    login(browser, server)
    connected(browser)
    say(browser, "Think about this for a while")
    until(browser, lambda _: len(llm.requests) == 1, "the model's request")
    with cut_off(browser):
        shot(browser, "offline")
        held.set()
        stored(browser, server)
    connected(browser)
    finished(browser)
    assert_once(browser, ["Think about this for a while"], ["Answered while you were away."])
    shot(browser, "back-online")


def test_the_page_rides_out_a_server_restart(
    browser: WebDriver, serve: Servers, llm: StubLlm, console: Console, shot: Shot
) -> None:
    """Killed after one exchange; a message typed while it is down waits; once the server is
    back (same port, same data) the page reconnects by itself, sends it once and shows both
    exchanges once."""
    # While the server is down the page's attempts to reach it fail, as they should.
    console.allow(r"net::ERR_CONNECTION_REFUSED")
    console.allow(r"WebSocket connection to 'ws://127\.0\.0\.1:\d+/ws\?channel=main' failed")
    port = free_port()
    server = serve(server={"port": port})
    llm.queue(completion("First answer."))
    login(browser, server)
    connected(browser)
    say(browser, "Before the restart")
    finished(browser)

    server.kill()
    until(browser, lambda d: connection_state(d) != "open", "the page to notice")
    say(browser, "Typed while the server was down")
    shot(browser, "server-down")
    llm.queue(completion("Second answer."))
    serve(server={"port": port})
    connected(browser)
    finished(browser, 2)
    assert_once(browser, ["Before the restart", "Typed while the server was down"],
                ["First answer.", "Second answer."])
    assert len(llm.requests) == 2
    shot(browser, "after-restart")
