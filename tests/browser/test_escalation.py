"""Approving or denying a tool call that waits for the person, from the chat page."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.browser.conftest import (
    Servers,
    api,
    connected,
    find,
    finished,
    login,
    say,
    visible,
    wait_text,
)
from tests.integration.harness import StubLlm, completion

Shot = Callable[[WebDriver, str], Path]
REMEMBER = json.dumps({"action": "remember", "key": "city", "value": "Lyon"})


@pytest.mark.parametrize("approve", [True, False], ids=["approve", "deny"])
def test_an_escalation_is_decided_from_the_page(
    browser: WebDriver, serve: Servers, llm: StubLlm, shot: Shot, approve: bool
) -> None:
    """`memory` needs confirming: the page shows what it wants to do; Approve runs it (Deny
    does not), the decision stays on the page, and the model's next request says which."""
    server = serve(tools={"confirm": ["memory"]})
    llm.queue(completion(tool_calls=[("memory", REMEMBER)]), completion("Done."))
    login(browser, server)
    connected(browser)
    say(browser, "I live in Lyon")
    escalation = visible(browser, "article.exchange .escalation")
    assert "Noting that city is “Lyon”" in escalation.text, escalation.text
    approve_button = escalation.find_element(By.CSS_SELECTOR, "button.approve")
    deny_button = escalation.find_element(By.CSS_SELECTOR, "button.deny")
    assert approve_button.is_displayed()
    assert deny_button.is_displayed()
    assert len(llm.requests) == 1
    shot(browser, "escalation")

    (approve_button if approve else deny_button).click()
    decision = wait_text(browser, "article.exchange .escalation .decision",
                         "Approved" if approve else "Denied")
    assert decision.is_displayed()
    finished(browser)
    assert find(browser, '.answer[data-state="final"]').text == "Done."
    told = llm.requests[1]["messages"][-1]["content"]
    assert ("remembered city: Lyon" if approve else "not run: the person denied it") in told
    for button in browser.find_elements(By.CSS_SELECTOR, ".escalation button"):
        assert not (button.is_displayed() and button.is_enabled()), "the buttons still work"
    with api(server) as http:
        facts = http.get("/api/memory/knowledge").json()["items"]
    assert [(f["key"], f["value"]) for f in facts] == ([("city", "Lyon")] if approve else [])
    shot(browser, "approved" if approve else "denied")
