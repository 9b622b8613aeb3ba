"""Notifications away from the page at /brain, in a real Chromium against the real server and
a real JSON webhook on 127.0.0.1 (an Apprise json:// URL): the notification services shown
masked, tested, added and removed; the kinds they get saved with a click; the Web Push devices
with how their pushes went, removed with a button; the delivery log grouped by target with each
message's outcome. The URL's secret is never on the page."""

from __future__ import annotations

import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from chalie.delivery.apprise_sender import key_of
from chalie.store import db, delivery_rows
from chalie.store.delivery_rows import DeliveryRow, PushSubscription
from tests.browser.conftest import (
    Console,
    Servers,
    api,
    find,
    gone,
    into_view,
    login,
    text_of,
    until,
    wait_text,
)
from tests.delivery.test_apprise_sender import Hook
from tests.integration.harness import ServerProcess

Shot = Callable[[WebDriver, str], Path]
TOKEN = "Kx81zQ-browser-hook-secret"
DAY_S = 86_400.0
SECTION = "#delivery"
DEVICE = f'{SECTION} li.delivery-device[data-id="dev1"]'


@pytest.fixture
def hook() -> Iterator[Hook]:
    found = Hook()
    yield found
    found.close()


def delivery(n: int, target: str, name: str, service: str, status: str, *, now: float,
             **extra: Any) -> DeliveryRow:
    fields: dict[str, Any] = {
        "id": f"d{n}", "channel": "main", "seq": n, "kind": "notifications",
        "service": service, "target": target, "target_name": name, "title": f"Message {n}",
        "body": "body", "payload": "{}", "approval_id": None, "exchange_id": None,
        "status": status, "attempts": 1, "next_at": None, "expires_at": None,
        "last_error": None, "created_at": now - 600 + n, "updated_at": now - 600 + n, **extra}
    return msgspec.convert(fields, DeliveryRow)


def secret_url(hook: Hook) -> str:
    return hook.url(auth=f"chalie:{TOKEN}@")


def masked_url(hook: Hook) -> str:
    return f"json://chalie:****@127.0.0.1:{hook.port}/hook"


def seeded(serve: Servers, workdir: Path, hook: Hook) -> ServerProcess:
    """The server with the hook's URL (password and all) in notify.urls, started on a store
    that holds a device and deliveries as the Delivery actor and the push endpoints write them
    (chalie/store/delivery_rows.py). The one still open is due tomorrow: nothing sends it
    during the test."""
    now = time.time()
    url, masked = secret_url(hook), masked_url(hook)
    rows = [
        delivery(1, "push:dev1", "Firefox on Android", "webpush", "sent", now=now,
                 sent_at=now - 500),
        delivery(2, key_of(url), masked, "json", "pending", now=now, attempts=2,
                 last_error="Failed to send JSON POST notification: error=500.",
                 next_at=now + DAY_S),
        delivery(3, key_of(url), masked, "json", "failed", now=now, attempts=9,
                 last_error="A Connection error occurred sending JSON notification."),
        delivery(4, "push:dev1", "Firefox on Android", "webpush", "skipped", now=now),
    ]
    device = PushSubscription(
        id="dev1", endpoint="http://127.0.0.1:9/push/dev1", p256dh="p", auth="a",
        name="Firefox on Android", created_at=now - DAY_S, last_sent_at=now - 500, failures=2,
        last_error="HTTP 503 from the push service", retry_at=now + 300)
    conn = db.open_writer(workdir / "data", busy_timeout_ms=10_000, synchronous="NORMAL")
    try:
        with conn:
            for row in rows:
                delivery_rows.insert(conn, row)
            delivery_rows.subscribe(conn, device)
    finally:
        conn.close()
    return serve(notify={"urls": [url]})


def saved(workdir: Path) -> dict[str, Any]:
    with (workdir / "data" / "settings.toml").open("rb") as f:
        return tomllib.load(f)


def url_item(url: str) -> str:
    return f'{SECTION} li.delivery-url[data-name="{url}"]'


def test_the_log_the_device_and_the_services_are_shown(
    browser: WebDriver, serve: Servers, tmp_path: Path, hook: Hook, shot: Shot,
) -> None:
    """The URL listed masked; the device with its failures, last error and next try; the
    default kinds ticked; the log by target, newest first: sent, failing with its error and
    next try, given up, skipped. The secret is nowhere on the page."""
    server = seeded(serve, tmp_path, hook)
    login(browser, server, "/brain")
    masked = masked_url(hook)
    into_view(browser, wait_text(browser, url_item(masked), masked))
    assert text_of(browser, f"{DEVICE} .device-failures .field-value") == "2"
    assert text_of(browser, f"{DEVICE} .device-error") == "HTTP 503 from the push service"
    assert text_of(browser, f"{DEVICE} .device-retry .field-value") not in ("", "never")
    boxes = browser.find_elements(By.CSS_SELECTOR, f'{SECTION} input[name="kind"]')
    until(browser, lambda _: boxes[0].is_selected(), "the kinds to be shown")
    assert [b.get_attribute("value") for b in boxes if b.is_selected()] == [
        "notifications", "escalations", "goal_results"]
    shot(browser, "services")

    push = f'{SECTION} li.delivery-target[data-name="webpush Firefox on Android"]'
    json_target = f'{SECTION} li.delivery-target[data-name="json {masked}"]'
    into_view(browser, wait_text(browser, json_target, "Message 3"))
    assert [e.get_attribute("data-id") for e in browser.find_elements(
        By.CSS_SELECTOR, f"{json_target} li.delivery")] == ["d3", "d2"]
    retrying = f'{json_target} li.delivery[data-id="d2"]'
    assert text_of(browser, f"{retrying} .badge") == "retrying"
    assert "failed 2 times, next try" in text_of(browser, f"{retrying} .delivery-outcome")
    assert "error=500" in text_of(browser, f"{retrying} .delivery-error")
    assert text_of(browser, f'{json_target} li.delivery[data-id="d3"] .badge') == "failed"
    assert text_of(browser, f'{push} li.delivery[data-id="d4"] .badge') == "skipped"
    assert text_of(browser, f'{push} li.delivery[data-id="d1"] .badge') == "sent"
    assert text_of(browser, f"{push} .item-head .badge") == "Web Push"
    assert TOKEN not in browser.page_source
    shot(browser, "log")


def test_a_url_is_tested_added_and_removed_and_a_kind_is_added(
    browser: WebDriver, serve: Servers, tmp_path: Path, hook: Hook, shot: Shot,
) -> None:
    """"Send a test" reaches the hook (with the password the page never saw) and says so; a
    ticked kind is saved at once; a new URL is added and the first removed after a
    confirmation, settings.toml following each change; the device goes with Remove."""
    server = seeded(serve, tmp_path, hook)
    login(browser, server, "/brain")
    first = url_item(masked_url(hook))
    find(browser, f"{first} button.delivery-url-test").click()
    wait_text(browser, "#delivery-test-results", f"{masked_url(hook)} (json): sent")
    [got] = hook.wait_for(1)
    assert (got.body["title"], got.authorization is not None) == ("Chalie: a test", True)

    find(browser, f'{SECTION} input[name="kind"][value="scheduled_results"]').click()
    wait_text(browser, "#delivery-kinds-result", "Saved.")
    assert saved(tmp_path)["notify"]["kinds"] == [
        "notifications", "escalations", "goal_results", "scheduled_results"]

    second = hook.url("/second")
    find(browser, "#delivery-url").send_keys(second)
    find(browser, "#delivery-url-add").click()
    wait_text(browser, url_item(second), second)
    assert saved(tmp_path)["notify"]["urls"] == [secret_url(hook), second]
    assert find(browser, "#delivery-url").get_attribute("value") == ""
    find(browser, f"{first} button.delivery-url-remove").click()
    find(browser, "button#confirm-yes").click()
    gone(browser, first)
    assert saved(tmp_path)["notify"]["urls"] == [second]
    shot(browser, "changed")

    find(browser, f"{DEVICE} button.delivery-device-remove").click()
    find(browser, "button#confirm-yes").click()
    gone(browser, DEVICE)
    with api(server) as http:
        assert http.get("/api/push/subscriptions").json()["items"] == []
    assert not find(browser, f"{SECTION} .section-error").text.strip()
    assert TOKEN not in browser.page_source


def test_a_url_apprise_cannot_use_is_refused_beside_the_field(
    browser: WebDriver, serve: Servers, tmp_path: Path, console: Console,
) -> None:
    """With no URL yet the list says so and "Send a test to all" is off; a URL Apprise cannot
    use is refused with the server's words under the field, naming only its scheme, and
    nothing is saved."""
    console.allow(r"/api/settings - Failed to load resource: the server responded with a "
                  r"status of 400")
    server = serve()
    login(browser, server, "/brain")
    wait_text(browser, "#delivery-urls + .empty", "No notification service yet")
    assert not find(browser, "#delivery-test-all").is_enabled()
    find(browser, "#delivery-url").send_keys(f"nosuchservice://me:{TOKEN}@example.org/")
    find(browser, "#delivery-url-add").click()
    error = wait_text(browser, "#delivery-url-error",
                      "notify.urls: entry 1 (nosuchservice://…) is not an Apprise URL")
    assert TOKEN not in str(error.get_attribute("textContent"))
    assert find(browser, "#delivery-url").get_attribute("aria-invalid") == "true"
    assert not (tmp_path / "data" / "settings.toml").exists()
