"""The brain dashboard says when a background job waits after failing: a light model that
cannot write the episode JSON is named, with why and until when; otherwise nothing shows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from selenium.webdriver.remote.webdriver import WebDriver

from tests.browser.conftest import Servers, api, find, hidden, login, visible, wait_text
from tests.integration.harness import Reply, StubLlm, completion, wait_for

Shot = Callable[[WebDriver, str], Path]


def test_a_job_that_cannot_write_its_json_is_shown_on_the_dashboard(
    browser: WebDriver, serve: Servers, llm: StubLlm, shot: Shot
) -> None:
    """No notice while every job works; after the encoder's two invalid answers the notice
    names it, the channel and the model's problem."""
    server = serve(memory={"embedder": "hashed", "encode_every_rows": 2})
    login(browser, server, "/brain")
    visible(browser, "#pairing")
    hidden(browser, "#notices")

    llm.queue_structured(Reply(completion("Sure! They talked.")),
                         Reply(completion("Sure! They talked.")))
    server.connect().turn("Hello there")
    with api(server) as client:
        wait_for(lambda: client.get("/health").json()["jobs"] != [])
    browser.refresh()
    notice = wait_text(browser, "#notices li.notice", "Episode encoding is paused")
    assert "(channel main): the light model cannot write the episode JSON: " in notice.text
    assert "Failed once; it makes no model call until " in find(browser, "#notices").text
    shot(browser, "notice")


def test_a_store_low_on_space_is_shown_on_the_dashboard(
    browser: WebDriver, serve: Servers, shot: Shot
) -> None:
    """Free space under store.min_free_mb (set past any disk here) is a notice naming the
    setting; /health says so too, and stays 200: the store still takes writes."""
    server = serve(store={"min_free_mb": 1e12})
    with api(server) as client:
        health = client.get("/health")
    assert health.status_code == 200
    assert health.json()["store"]["space_low"] is True
    login(browser, server, "/brain")
    notice = wait_text(browser, "#notices li.notice", "Disk space is low")
    assert "under store.min_free_mb" in notice.text
    shot(browser, "space-low")
