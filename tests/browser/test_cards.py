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
    cookie, runs no script, and shows the interface's text, markup and all, as text. Its title
    is said once (the card's own heading; no caption over the frame), and the frame is as tall
    as the card, with no blank below it and no resize grip."""
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
        assert "allow-scripts" not in sandbox  # same-origin, so the page can measure it
        figure = frame.find_element(By.XPATH, "./ancestor::figure")
        assert figure.find_elements(By.CSS_SELECTOR, ".card-title") == []
        assert "Forecast" not in (figure.get_attribute("textContent") or "")
        until(browser, lambda _: frame.get_attribute("data-fitted") == "true", "the frame's fit")
        content, inner, resize = browser.execute_script(
            "const f = arguments[0];"
            "return [f.contentDocument.documentElement.getBoundingClientRect().height,"
            " f.clientHeight, getComputedStyle(f).resize];", frame)
        assert abs(inner - content) <= 2, (inner, content)
        assert 40 < inner < 200, inner  # two short lines, not the old fixed 256 px
        assert resize == "none"
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
