"""The API tokens at /brain: a token made through the form is shown once, with settings to
paste built from the page's own origin, and listed with its scopes, channel and "never" used;
Revoke, after the confirmation, takes it away at once; a refused name or scope is said beside
the form, in the API's words."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement

from tests.browser.conftest import (
    Console,
    api,
    find,
    gone,
    hidden,
    into_view,
    login,
    phone,
    text_of,
    visible,
    wait_text,
)
from tests.integration.harness import WAIT_S, ServerProcess

Shot = Callable[[WebDriver, str], Path]


def make(driver: WebDriver, name: str, *scopes: str) -> None:
    """Fill the form (opening it if need be) and press Make token."""
    form = find(driver, "#token-add")
    if form.get_attribute("open") is None:
        visible(driver, "#token-add summary").click()
    field = visible(driver, "#token-name")
    field.clear()
    field.send_keys(name)
    for box in driver.find_elements(By.CSS_SELECTOR, '#token-form input[name="scope"]'):
        if box.is_selected() != (box.get_attribute("value") in scopes):
            box.click()
    visible(driver, "#token-make").click()


def shown_token(driver: WebDriver, origin: str) -> str:
    """The token the page shows once, after checking its note and its three snippets."""
    made = visible(driver, "#token-made")
    token = text_of(driver, "#token-value")
    assert token.startswith("chalie_")
    assert len(token) > 30
    assert "Shown only now." in made.text
    assert text_of(driver, "#token-made-name") == "laptop"
    http = json.loads(text_of(driver, "#token-snippet-mcp-http"))
    assert http == {"mcpServers": {"chalie": {
        "type": "http", "url": f"{origin}/mcp", "headers": {"Authorization": f"Bearer {token}"}}}}
    stdio = json.loads(text_of(driver, "#token-snippet-mcp-stdio"))
    assert stdio == {"mcpServers": {"chalie": {
        "command": "chalie", "args": ["mcp", "--url", origin], "env": {"CHALIE_TOKEN": token}}}}
    openai = text_of(driver, "#token-snippet-openai")
    assert f"base URL: {origin}/v1" in openai
    assert f"API key:  {token}" in openai
    assert "model:    chalie" in openai
    return token


def listed(driver: WebDriver) -> WebElement:
    """The list's row of "laptop", checked: its scopes, channel, never used, no calls."""
    row = wait_text(driver, "#tokens-list .token", "laptop")
    assert [b.text for b in row.find_elements(By.CSS_SELECTOR, ".badge.scope")] == \
        ["memory:read", "chat"]

    def value(css: str) -> str:
        return str(row.find_element(By.CSS_SELECTOR, f"{css} .field-value").text)

    assert value(".token-channel") == "token.laptop"
    assert value(".token-last-used") == "never"
    assert value(".token-calls") == "MCP 0 · OpenAI 0"
    assert value(".token-open") == "none"
    return row


def light_and_dark(driver: WebDriver, shot: Shot, name: str) -> None:
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", find(driver, "#tokens"))
    shot(driver, name)
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {
        "features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    try:
        shot(driver, f"{name}-dark")
    finally:
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


def test_a_token_is_made_shown_once_listed_and_revoked(
    browser: WebDriver, server: ServerProcess, shot: Shot
) -> None:
    """Made with memory:read and chat: the token is shown with a "shown only now" note and the
    MCP (HTTP, stdio) and OpenAI-compatible settings, each holding this origin and the token;
    the list shows it, never used; it fits a phone. Revoked: gone from the list and the API,
    and the token taken off the page."""
    login(browser, server, "/brain")
    wait_text(browser, "#tokens .empty", "No tokens yet")
    make(browser, "laptop", "memory:read", "chat")
    origin = server.url
    token = shown_token(browser, origin)
    assert find(browser, "#token-add").get_attribute("open") is None  # the form closes
    row = listed(browser)
    light_and_dark(browser, shot, "made")

    with api(server) as client:
        items = client.get("/api/tokens").json()["items"]
        assert [(i["name"], i["scopes"], i["last_used_at"]) for i in items] == \
            [("laptop", ["memory:read", "chat"], None)]
        token_id = items[0]["id"]
        assert row.get_attribute("data-id") == token_id
    # A token never manages tokens: only the login cookie does.
    bare = httpx.get(f"{origin}/api/tokens", headers={"Authorization": f"Bearer {token}"},
                     timeout=WAIT_S)
    assert bare.status_code == 401

    phone(browser)
    widths = browser.execute_script(
        "return [document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], f"the page scrolls sideways at phone size: {widths}"
    into_view(browser, find(browser, "#token-snippet-mcp-http"))
    shot(browser, "phone")

    visible(browser, 'button[aria-label="Revoke the token laptop"]').click()
    dialog = visible(browser, "#confirm")
    assert "Revoke the token laptop?" in dialog.text
    shot(browser, "confirm")
    visible(browser, "#confirm-yes").click()
    gone(browser, "#tokens-list .token")
    wait_text(browser, "#tokens .empty", "No tokens yet")
    hidden(browser, "#token-made")
    assert text_of(browser, "#token-value") == ""
    assert token not in browser.page_source
    with api(server) as client:
        assert client.get("/api/tokens").json() == {"items": []}
    shot(browser, "revoked")


def test_a_refused_token_says_why_beside_the_form(
    browser: WebDriver, server: ServerProcess, console: Console, shot: Shot
) -> None:
    """A bad name, no scope, a name in use: each refusal is the API's own words beside the
    form, the name marked invalid where it is the name; nothing is made."""
    console.allow(r"/api/tokens - Failed to load resource: .* status of (400|409)")
    login(browser, server, "/brain")
    wait_text(browser, "#tokens .empty", "No tokens yet")

    make(browser, "my laptop!", "chat")
    error = wait_text(browser, "#token-form-error", "name: 1-32 letters, digits")
    assert "'my laptop!'" in error.text or "my laptop!" in error.text
    assert find(browser, "#token-name").get_attribute("aria-invalid") == "true"
    hidden(browser, "#token-made")
    into_view(browser, error)
    shot(browser, "bad-name")

    make(browser, "laptop")
    wait_text(browser, "#token-form-error", "scopes: give at least one of memory:read")
    assert find(browser, "#token-name").get_attribute("aria-invalid") is None

    make(browser, "laptop", "signals")
    visible(browser, "#token-made")
    wait_text(browser, "#tokens-list .token", "laptop")
    assert text_of(browser, "#token-form-error") == ""
    make(browser, "laptop", "memory:write")
    wait_text(browser, "#token-form-error", "a token named 'laptop' exists")
    with api(server) as client:
        items = client.get("/api/tokens").json()["items"]
    assert [(i["name"], i["scopes"]) for i in items] == [("laptop", ["signals"])]
    shot(browser, "name-in-use")
