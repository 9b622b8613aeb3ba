"""The person's consent at /brain: the tools they always allow, named with the program that
provides them, each revoked with one button; and the calls held for their approval that still
wait, listed (read-only: they are answered in the chat) until they are answered or expire."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import msgspec
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from chalie.store import approval_rows, db
from chalie.store.approval_rows import Allowance, HeldRow
from tests.browser.conftest import (
    Console,
    Servers,
    api,
    find,
    gone,
    into_view,
    login,
    text_of,
    visible,
    wait_text,
)
from tests.integration.harness import ServerProcess

Shot = Callable[[WebDriver, str], Path]
DAY_S = 86_400.0
POISON = {"action": "remember", "key": "bank", "value": "EvilBank account 99812"}
REASON = "its arguments carry what only another program said: 99812, account, bank, evilbank"


def seeded(serve: Servers, workdir: Path, *, allowances: tuple[Allowance, ...] = (),
           held: tuple[HeldRow, ...] = ()) -> ServerProcess:
    """The server, started on a store that already holds these rows, written as its
    StoreWriter writes them (chalie/store/approval_rows.py)."""
    conn = db.open_writer(workdir / "data", busy_timeout_ms=10_000, synchronous="NORMAL")
    try:
        with conn:
            for allowance in allowances:
                approval_rows.allow(conn, allowance)
            for row in held:
                approval_rows.hold(conn, row)
    finally:
        conn.close()
    return serve()


def held_row(row_id: str, *, status: str = "waiting", expires_in: float = 7 * DAY_S,
             path: str = "dmn") -> HeldRow:
    now = time.time()
    return HeldRow(id=row_id, channel="main", path=path, tool="memory",
                   args=msgspec.json.encode(POISON).decode(), reason=REASON, provider=None,
                   turn_id=f"turn-{row_id}", status=status, created_at=now - 120,
                   expires_at=now + expires_in)


def field_text(driver: WebDriver, item_css: str, name: str) -> str:
    return text_of(driver, f"{item_css} .field.{name} .field-value")


def test_always_allowed_tools_are_listed_and_revoked(
    browser: WebDriver, serve: Servers, tmp_path: Path, shot: Shot
) -> None:
    """Two allowances are listed with the tool's name and its program in words ("MCP server
    files", "Chalie"); Revoke takes one off the page and out of the store at once (the focus
    goes to the section's heading), the other stays; with both revoked the section says so in
    words. Nothing waits for approval."""
    now = time.time()
    server = seeded(serve, tmp_path, allowances=(
        Allowance("allow-mcp", "mcp:files", "delete_file", "files_delete_file", now - 3600),
        Allowance("allow-own", "chalie", "memory", "memory", now - 60)))
    login(browser, server, "/brain")
    mcp_item = '#allowances li.allowance[data-id="allow-mcp"]'
    own_item = '#allowances li.allowance[data-id="allow-own"]'
    into_view(browser, wait_text(browser, mcp_item, "files_delete_file"))
    assert field_text(browser, mcp_item, "allowance-program") == "MCP server files"
    assert "its own name: delete_file" in find(browser, mcp_item).text
    assert text_of(browser, f"{own_item} .allowance-tool") == "memory"
    assert field_text(browser, own_item, "allowance-program") == "Chalie"
    assert field_text(browser, own_item, "allowance-created") not in ("", "—")
    empty = wait_text(browser, "#approvals .empty", "Nothing waits for your approval.")
    assert empty.is_displayed()
    shot(browser, "allowances")

    revoke = find(browser, f"{mcp_item} button.revoke")
    assert revoke.text == "Revoke"
    assert "files_delete_file" in str(revoke.get_attribute("aria-label"))
    revoke.click()
    gone(browser, mcp_item)
    assert browser.switch_to.active_element.get_attribute("id") == "allowances-title"
    assert browser.find_elements(By.CSS_SELECTOR, own_item)
    with api(server) as http:
        items = http.get("/api/tools/allowances").json()["items"]
    assert [i["id"] for i in items] == ["allow-own"]

    find(browser, f"{own_item} button.revoke").click()
    gone(browser, own_item)
    note = wait_text(browser, "#allowances .empty", "No tool is always allowed")
    assert note.is_displayed()
    with api(server) as http:
        assert http.get("/api/tools/allowances").json()["items"] == []
    assert not find(browser, "#allowances .section-error").text.strip()
    shot(browser, "revoked")


def test_revoking_an_allowance_already_gone_says_so_in_the_section(
    browser: WebDriver, serve: Servers, tmp_path: Path, console: Console
) -> None:
    """An allowance revoked elsewhere (another tab, the API) since the page loaded: Revoke
    shows the server's words in the section's error line, and the list drops it."""
    console.allow(r"/api/tools/allowances/allow-own - Failed to load resource: the server "
                  r"responded with a status of 404")
    server = seeded(serve, tmp_path, allowances=(
        Allowance("allow-own", "chalie", "memory", "memory", time.time()),))
    login(browser, server, "/brain")
    item = '#allowances li.allowance[data-id="allow-own"]'
    wait_text(browser, item, "memory")
    with api(server) as http:
        assert http.delete("/api/tools/allowances/allow-own").status_code == 200
    find(browser, f"{item} button.revoke").click()
    error = wait_text(browser, "#allowances .section-error", "no allowance")
    assert error.is_displayed()
    gone(browser, item)


def test_calls_waiting_for_approval_are_listed_until_answered(
    browser: WebDriver, serve: Servers, tmp_path: Path, shot: Shot
) -> None:
    """Of three held calls only the one still waiting is listed (not the denied one, nor one
    past its expiry): its tool, why it waits, which path asked, and when it expires; its
    arguments wait under a collapsed Arguments. It has no buttons: it is answered in the
    chat. No tool is always allowed."""
    server = seeded(serve, tmp_path, held=(
        held_row("held-waiting"), held_row("held-denied", status="denied"),
        held_row("held-late", expires_in=-10, path="goal")))
    login(browser, server, "/brain")
    item = '#approvals li.held-call[data-id="held-waiting"]'
    into_view(browser, wait_text(browser, item, "memory"))
    assert len(browser.find_elements(By.CSS_SELECTOR, "#approvals li.held-call")) == 1
    assert text_of(browser, f"{item} .held-tool") == "memory"
    assert REASON in text_of(browser, f"{item} .held-reason")
    assert field_text(browser, item, "held-path") == "Chalie's own thinking"
    assert field_text(browser, item, "held-program") == "Chalie"
    assert "(in 7 days)" in field_text(browser, item, "held-expires")
    assert not browser.find_elements(By.CSS_SELECTOR, f"{item} button")
    assert find(browser, "#approvals a[href='/']").text == "chat"
    args = find(browser, f"{item} details.args-details")
    assert args.get_attribute("open") is None
    assert not find(browser, f"{item} .held-args").is_displayed()
    shot(browser, "waiting")

    visible(browser, f"{item} details.args-details summary").click()
    shown = visible(browser, f"{item} .held-args")
    assert msgspec.json.decode(shown.text) == POISON
    assert wait_text(browser, "#allowances .empty", "No tool is always allowed").is_displayed()
    shot(browser, "arguments")
