"""A card from an interface tool, shown in a sandboxed frame of its own."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.browser.conftest import Servers, connected, finished, login, say, until, visible
from tests.integration.harness import StubLlm, completion
from tests.integration.stub_interface import StubInterface, pair

Shot = Callable[[WebDriver, str], Path]


def test_a_card_renders_escaped_in_a_sandboxed_frame(
    browser: WebDriver, serve: Servers, llm: StubLlm, shot: Shot
) -> None:
    """The interface's blocks become a card: its frame loads from this server with the login
    cookie, runs no script, and shows the interface's text, markup and all, as text."""
    server = serve()
    iface = StubInterface()
    try:
        pair(server.url, server.login(), iface, name="weather")
        iface.answers["lookup"] = {"text": "shown", "blocks": [
            {"type": "heading", "text": "Forecast"},
            {"type": "text", "text": "<img src=x onerror=alert(1)> Rain & wind"}]}
        llm.queue(completion(tool_calls=[("lookup", json.dumps({"query": "rain"}))]),
                  completion("Here it is."))
        login(browser, server)
        connected(browser)
        say(browser, "forecast?")
        finished(browser)
        frame = visible(browser, "article.exchange iframe.card")
        sandbox = frame.get_attribute("sandbox") or ""
        assert "allow-scripts" not in sandbox
        assert "allow-same-origin" not in sandbox
        browser.execute_script("arguments[0].scrollIntoView()", frame)
        shot(browser, "card")
        browser.switch_to.frame(frame)
        try:
            body = until(browser, lambda d: d.find_element(By.TAG_NAME, "body").text
                         if "Forecast" in d.find_element(By.TAG_NAME, "body").text else None,
                         "the card's text")
            assert "<img src=x onerror=alert(1)> Rain & wind" in body
            assert browser.find_elements(By.TAG_NAME, "img") == []
        finally:
            browser.switch_to.default_content()
    finally:
        iface.stop()
