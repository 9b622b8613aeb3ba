"""Calls that wait for the person in the chat page: one held on a turn they did not watch (a
paired program's message asked for it) stands on its own in the conversation, stays there
across reloads, and runs once they approve it; "Always allow this tool" approves a call and
lets that tool run without asking from then on, until it is revoked at /brain."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement

from tests.browser.conftest import (
    Servers,
    api,
    connected,
    find,
    finished,
    gone,
    into_view,
    login,
    say,
    text_of,
    until,
    visible,
    wait_text,
)
from tests.integration.harness import ServerProcess, StubLlm, completion
from tests.integration.stub_interface import StubInterface, bearer_client, capability, pair

Shot = Callable[[WebDriver, str], Path]
# A capability that declares neither read_only nor danger: it needs the person's approval.
BOOK = capability("book_table", "Book a table at the bistro", guest=("string", True),
                  party=("number", True))
# The program's message, and a call whose arguments carry what only it said.
MESSAGE = {"text": "Table request from Mr Dupontel for 4 people tonight", "source": "bistro"}
CALL = {"guest": "Dupontel", "party": 4}
HELD = "#messages > section.escalation.held"
WEEK = r"Expires in (7 days|6 days 23 h)"  # act.held_approval_days, less what went by


@pytest.fixture
def bistro() -> Iterator[StubInterface]:
    stub = StubInterface([BOOK], name="bistro")
    yield stub
    stub.stop()


def program_asks(server: ServerProcess, stub: StubInterface, llm: StubLlm) -> str:
    """Pair the bistro, and have its message's turn call book_table: the call is held for the
    person. The interface's id."""
    interface_id, token = pair(server.url, server.login(), stub, name="bistro")
    llm.queue(completion(tool_calls=[("book_table", json.dumps(CALL))]),
              completion("The bistro asked to book a table; that waits for you."))
    with bearer_client(server.url, token) as http:
        r = http.post("/api/messages", json=MESSAGE)
    assert r.status_code == 202, r.text
    return interface_id


def buttons(driver: WebDriver, css: str) -> dict[str, WebElement]:
    """The displayed buttons under `css`, by their text."""
    return {b.text: b for b in driver.find_elements(By.CSS_SELECTOR, f"{css} button")
            if b.is_displayed()}


def approvals(server: ServerProcess) -> list[dict[str, Any]]:
    with api(server) as http:
        items: list[dict[str, Any]] = http.get("/api/approvals").json()["items"]
    return items


def test_a_held_call_stands_alone_survives_a_reload_and_runs_once_approved(
    browser: WebDriver, serve: Servers, llm: StubLlm, bistro: StubInterface, shot: Shot
) -> None:
    """A program's message asks for a booking: the page shows a held escalation on its own
    (in no exchange), saying that another program's words asked and that it waits, with the
    call under Details, days to answer, Approve and Deny; announced once. After a reload it is
    there once, still answerable; Approve runs the call on the interface, "Approved" shows,
    and after another reload it still says so, with no button left."""
    server = serve()
    login(browser, server)
    connected(browser)
    program_asks(server, bistro, llm)
    held = visible(browser, HELD)
    assert not browser.find_elements(By.CSS_SELECTOR, "article.exchange .escalation")
    assert text_of(browser, f"{HELD} .escalation-title") == "Another program's words asked for this"
    assert text_of(browser, f"{HELD} .escalation-held").startswith("Held for you")
    content = text_of(browser, f"{HELD} .escalation-content")
    assert "It came from another program's words" in content
    assert "dupontel" in content
    assert "Tool: book_table" in text_of(browser, f"{HELD} .escalation-details")
    assert json.loads(text_of(browser, f"{HELD} .call-args")) == CALL
    assert re.fullmatch(WEEK, text_of(browser, f"{HELD} .expires"))
    assert {"Approve", "Deny"} <= set(buttons(browser, HELD))
    assert held.get_attribute("aria-label") == "Approval needed, held for you"
    wait_text(browser, "#announcer", "Chalie asks before using book_table")
    assert [i["status"] for i in approvals(server)] == ["waiting"]
    into_view(browser, held)
    shot(browser, "held")

    browser.refresh()
    connected(browser)
    visible(browser, HELD)
    until(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".escalation")) == 1,
          "the held escalation, once")
    assert re.fullmatch(WEEK, text_of(browser, f"{HELD} .expires"))
    approve = buttons(browser, HELD)["Approve"]
    assert approve.is_enabled()
    assert bistro.executions() == []

    approve.click()
    wait_text(browser, f"{HELD} .decision", "Approved")
    until(browser, lambda _: bistro.executions() == [
        {"capability": "book_table", "params": CALL}], "the approved call on the interface")
    assert [i["status"] for i in approvals(server)] == ["approved"]
    assert not browser.find_elements(By.CSS_SELECTOR, f"{HELD} button:enabled")
    shot(browser, "approved")

    browser.refresh()
    connected(browser)
    wait_text(browser, f"{HELD} .decision", "Approved")
    assert len(browser.find_elements(By.CSS_SELECTOR, ".escalation")) == 1
    assert not browser.find_elements(By.CSS_SELECTOR, f"{HELD} button:enabled")
    assert len(bistro.executions()) == 1
    shot(browser, "approved-after-reload")


def test_a_held_call_that_expired_says_so_after_a_reload(
    browser: WebDriver, serve: Servers, llm: StubLlm, bistro: StubInterface
) -> None:
    """A held call waits 5 seconds here: once it is past, a reload replays the question, and
    the page, checking with the server rather than counting the 5 seconds again, says at once
    that no answer came in time; nothing ran."""
    server = serve(act={"held_approval_days": 5 / 86_400})
    login(browser, server)
    connected(browser)
    program_asks(server, bistro, llm)
    wait_text(browser, f"{HELD} .decision", "Expired")
    until(browser, lambda _: [i["status"] for i in approvals(server)] == ["expired"],
          "the server to count it expired")

    browser.refresh()
    connected(browser)
    wait_text(browser, f"{HELD} .decision", "Expired: no answer came in time")
    assert not browser.find_elements(By.CSS_SELECTOR, f"{HELD} button:enabled")
    assert bistro.executions() == []


def test_always_allow_approves_and_the_tool_asks_no_more_until_revoked(
    browser: WebDriver, serve: Servers, llm: StubLlm, bistro: StubInterface, shot: Shot
) -> None:
    """The person asks for a booking; book_table needs approval, and the escalation offers
    "Always allow this tool": it approves (the call runs), the next call runs without asking,
    and /brain lists the tool under the bistro's name; Revoke there takes it away."""
    server = serve()
    interface_id, _ = pair(server.url, server.login(), bistro, name="bistro")
    llm.queue(completion(tool_calls=[("book_table", json.dumps(CALL))]), completion("Booked."),
              completion(tool_calls=[("book_table", json.dumps(CALL))]),
              completion("Booked again."))
    login(browser, server)
    connected(browser)
    say(browser, "Book a table for Dupontel, 4 people")
    escalation = "article.exchange .escalation"
    visible(browser, f"{escalation} button.always")
    assert text_of(browser, f"{escalation} .escalation-title") == "Chalie asks before going on"
    offered = buttons(browser, escalation)
    assert list(offered) == ["Approve", "Deny", "Always allow this tool"]
    shot(browser, "always-offered")

    offered["Always allow this tool"].click()
    wait_text(browser, f"{escalation} .decision", "Approved")
    finished(browser)
    assert bistro.executions() == [{"capability": "book_table", "params": CALL}]
    with api(server) as http:
        allowed = http.get("/api/tools/allowances").json()["items"]
    assert [(a["provider"], a["tool"]) for a in allowed] == [
        (f"interface:{interface_id}", "book_table")]

    say(browser, "The same again tomorrow")
    finished(browser, 2)
    assert len(browser.find_elements(By.CSS_SELECTOR, ".escalation")) == 1
    assert len(bistro.executions()) == 2
    shot(browser, "asked-no-more")

    browser.get(server.url + "/brain")
    item = f'#allowances li.allowance[data-id="{allowed[0]["id"]}"]'
    into_view(browser, wait_text(browser, item, "book_table"))
    assert text_of(browser, f"{item} .allowance-program .field-value") == "bistro"
    shot(browser, "dashboard")
    find(browser, f"{item} button.revoke").click()
    gone(browser, item)
    with api(server) as http:
        assert http.get("/api/tools/allowances").json()["items"] == []


def test_a_held_call_offers_always_allow(
    browser: WebDriver, serve: Servers, llm: StubLlm, bistro: StubInterface
) -> None:
    """A held call of a tool that needs approval offers "Always allow this tool": it sends the
    approval with always, "Approved" shows, the interface gets the call, and the tool is
    listed as always allowed."""
    server = serve()
    login(browser, server)
    connected(browser)
    interface_id = program_asks(server, bistro, llm)
    visible(browser, HELD)
    offered = buttons(browser, HELD)
    assert list(offered) == ["Approve", "Deny", "Always allow this tool"]
    offered["Always allow this tool"].click()
    wait_text(browser, f"{HELD} .decision", "Approved")
    until(browser, lambda _: len(bistro.executions()) == 1, "the approved call")
    with api(server) as http:
        allowed = http.get("/api/tools/allowances").json()["items"]
    assert [(a["provider"], a["tool"]) for a in allowed] == [
        (f"interface:{interface_id}", "book_table")]
