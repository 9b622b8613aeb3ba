"""Web Push in a real Chromium, against the local push-service stand-in (tests/push_service.py):
"Notify me on this device" in the dashboard's settings subscribes the browser and gives the
server its subscription, "Send a test" reaches the stand-in (which checks the VAPID JWT and
decrypts the payload with the keys the test made) and shows as a notification; a scheduled
prompt's result and an escalation are pushed while no page is open, shown by the service
worker (DevTools' `ServiceWorker.deliverPushMessage`), and the escalation's Approve answers it.

Headless Chromium reaches no real push service, so `PushManager.prototype.subscribe` is
replaced (before the page's scripts run) by one that answers a subscription whose endpoint is
the stand-in's and whose keys are the test's: everything else, the page, the worker, the
server, the encryption and the VAPID signature, is the real thing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.browser.conftest import (
    Servers,
    api,
    connected,
    find,
    into_view,
    login,
    text_of,
    until,
    visible,
    wait_text,
)
from tests.browser.devtools import DevTools
from tests.browser.test_pwa import worker_ready
from tests.integration.harness import ServerProcess, StubLlm, completion, db_rows, wait_for
from tests.integration.stub_interface import StubInterface, bearer_client, capability, pair
from tests.push_service import PushService, make_subscription

Shot = Callable[[WebDriver, str], Path]
DEVICE = "this-browser"
STORE = "chalie-test.push-subscription"
SWITCH = "#push-enabled"
BOOK = capability("book_table", "Book a table at the bistro", guest=("string", True),
                  party=("number", True))
CALL = {"guest": "Dupontel", "party": 4}

# A PushManager that answers the test's subscription (the stand-in's endpoint, the test's
# keys), remembering the applicationServerKey it was given, as the browser would.
FAKE_PUSH = """
(() => {
  const device = %s;
  const STORE = %s;
  const bytes = (text) => Uint8Array.from(
    atob(text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) %% 4)),
    (c) => c.charCodeAt(0));
  const base64url = (buffer) => btoa(String.fromCharCode(...new Uint8Array(buffer)))
    .replace(/\\+/g, "-").replace(/\\//g, "_").replace(/=+$/, "");
  function subscription(saved) {
    return {
      endpoint: device.endpoint,
      expirationTime: null,
      options: { userVisibleOnly: true, applicationServerKey: bytes(saved.serverKey).buffer },
      getKey: (name) => bytes(device.keys[name]).buffer,
      toJSON: () => ({ endpoint: device.endpoint, expirationTime: null, keys: { ...device.keys } }),
      unsubscribe: async () => { localStorage.removeItem(STORE); return true; },
    };
  }
  PushManager.prototype.subscribe = async function (options) {
    if (!options || options.userVisibleOnly !== true || !options.applicationServerKey) {
      throw new DOMException("userVisibleOnly and a key are needed", "NotAllowedError");
    }
    const key = options.applicationServerKey;
    const saved = { serverKey: typeof key === "string" ? key : base64url(key) };
    localStorage.setItem(STORE, JSON.stringify(saved));
    return subscription(saved);
  };
  PushManager.prototype.getSubscription = async function () {
    const saved = localStorage.getItem(STORE);
    return saved ? subscription(JSON.parse(saved)) : null;
  };
})();
"""


@pytest.fixture
def push_service() -> Iterator[PushService]:
    service = PushService()
    yield service
    service.close()


@pytest.fixture
def bistro() -> Iterator[StubInterface]:
    stub = StubInterface([BOOK], name="bistro")
    yield stub
    stub.stop()


class Device:
    """The browser as a push device: the stand-in's subscription with the test's keys, served
    to the page by the replaced PushManager; notification permission granted or denied."""

    def __init__(self, driver: WebDriver, server: ServerProcess, service: PushService) -> None:
        self.driver, self.server, self.service = driver, server, service
        self.body, self.private_key, self.auth = make_subscription(service, DEVICE)
        device = {"endpoint": self.body["endpoint"], "keys": self.body["keys"]}
        self.script = driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {
            "source": FAKE_PUSH % (json.dumps(device), json.dumps(STORE))})["identifier"]

    def server_key(self) -> str:
        """GET /api/push/key: the server's VAPID public key."""
        with api(self.server) as http:
            r = http.get("/api/push/key")
        assert r.status_code == 200, r.text
        return str(r.json()["public_key"])

    def permission(self, setting: str) -> None:
        self.driver.execute_cdp_cmd("Browser.setPermission", {
            "permission": {"name": "notifications"}, "setting": setting,
            "origin": self.server.url})

    def given_key(self) -> str | None:
        """The applicationServerKey the page subscribed with (None: not subscribed)."""
        saved = self.driver.execute_script("return localStorage.getItem(arguments[0])", STORE)
        return None if saved is None else str(json.loads(saved)["serverKey"])

    def close(self) -> None:
        self.driver.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument",
                                    {"identifier": self.script})
        self.driver.execute_cdp_cmd("Browser.resetPermissions", {})


@pytest.fixture
def device(browser: WebDriver, serve: Servers, push_service: PushService) -> Iterator[Device]:
    """A server, and this browser as a device of the stand-in (not subscribed yet)."""
    made = Device(browser, serve(), push_service)
    yield made
    made.close()


@pytest.fixture
def subscribed(browser: WebDriver, device: Device) -> Device:
    """The device, with notifications allowed, subscribed from the dashboard's settings."""
    device.permission("granted")
    login(browser, device.server, "/brain")
    switch_on(browser)
    worker_ready(browser)
    return device


def devices(server: ServerProcess) -> list[dict[str, Any]]:
    with api(server) as http:
        items: list[dict[str, Any]] = http.get("/api/push/subscriptions").json()["items"]
    return items


def switch_on(driver: WebDriver) -> None:
    """Turn "Notify me on this device" on, and wait until the page says it is."""
    toggle = find(driver, f"{SWITCH}:enabled")
    assert not toggle.is_selected()
    toggle.click()
    wait_text(driver, "#push-state", "On: this device")


# --- the worker, through DevTools ----------------------------------------------------------------

class Worker:
    """The service worker of the server's origin, through a DevTools connection of our own: a
    push delivered to it, and code run inside it."""

    def __init__(self, devtools: DevTools, driver: WebDriver, server: ServerProcess) -> None:
        self.devtools, self.driver, self.origin = devtools, driver, server.url
        page = devtools.target(lambda t: t["type"] == "page", "a page")
        self.page = devtools.attach(page["targetId"])
        devtools.send("ServiceWorker.enable", {}, self.page)
        scope = f"{server.url}/"
        updated = devtools.event(
            "ServiceWorker.workerRegistrationUpdated",
            lambda p: any(r["scopeURL"] == scope and not r["isDeleted"]
                          for r in p["registrations"]))
        self.registration = next(r["registrationId"] for r in updated["registrations"]
                                 if r["scopeURL"] == scope and not r["isDeleted"])
        self._session: str | None = None

    def push(self, text: str) -> None:
        """What the push service would hand the browser: the decrypted payload."""
        self.devtools.send("ServiceWorker.deliverPushMessage", {
            "origin": self.origin, "registrationId": self.registration, "data": text},
            self.page)

    def session(self) -> str:
        if self._session is None:
            worker = self.devtools.target(lambda t: t["type"] == "service_worker"
                                          and t["url"] == f"{self.origin}/sw.js", "the worker")
            self._session = self.devtools.attach(worker["targetId"])
        return self._session

    def run(self, expression: str) -> Any:
        return self.devtools.evaluate(self.session(), expression)

    def notifications(self) -> list[dict[str, Any]]:
        shown: list[dict[str, Any]] = self.run(
            "self.registration.getNotifications().then((list) => list.map((n) => ({"
            " title: n.title, body: n.body, tag: n.tag, data: n.data, icon: n.icon,"
            " actions: n.actions.map((a) => [a.action, a.title]) })))")
        return shown

    def shown(self, tag: str) -> dict[str, Any]:
        """The notification with `tag`, once the worker has shown it."""
        found: dict[str, Any] = until(
            self.driver, lambda _: next((n for n in self.notifications() if n["tag"] == tag), None),
            f"the notification {tag}")
        return found

    def click(self, tag: str, action: str) -> Any:
        """What a click on the notification `tag` (on `action`, "" for its body) does."""
        return self.run(
            "self.registration.getNotifications().then((list) => self.chalieNotificationClick("
            f"list.find((n) => n.tag === {json.dumps(tag)}), {json.dumps(action)}))")


# --- the settings --------------------------------------------------------------------------------

def test_the_page_subscribes_this_device_and_its_test_arrives(
    browser: WebDriver, device: Device, shot: Shot
) -> None:
    """"Notify me on this device": the page subscribes with the server's VAPID key and gives
    the server the subscription under the browser's name; "Send a test" reaches the stand-in
    signed with that key and decryptable with the device's keys, says so, and the worker shows
    it; switched off, the server forgets the device and the browser unsubscribes."""
    server, service = device.server, device.service
    device.permission("granted")
    login(browser, server, "/brain")
    wait_text(browser, "#push-state", "Off.")
    assert devices(server) == []
    into_view(browser, find(browser, "#settings-push"))
    shot(browser, "off")

    switch_on(browser)
    assert device.given_key() == device.server_key()
    [listed] = devices(server)
    assert listed["endpoint"] == device.body["endpoint"]
    assert listed["name"] == "Chrome on Linux"
    assert text_of(browser, "#push-state") == (
        "On: this device (Chrome on Linux) gets Chalie's notifications.")

    find(browser, "#push-test:enabled").click()
    wait_text(browser, "#push-result", "Sent: the notification should show on this device")
    [push] = service.delivered(DEVICE)
    assert service.failures == []
    assert push.vapid_key == device.server_key()
    assert push.claims["aud"] == service.origin
    assert push.payload["test"] is True
    shot(browser, "on-and-tested")

    with DevTools(browser) as devtools:
        worker = Worker(devtools, browser, server)
        worker.push(push.text)
        shown = worker.shown(push.payload["tag"])
    assert (shown["title"], shown["body"]) == (push.payload["title"], push.payload["body"])
    assert shown["icon"] == f"{server.url}/static/icon-192.png"
    assert shown["actions"] == []

    find(browser, f"{SWITCH}:enabled").click()
    wait_text(browser, "#push-state", "Off.")
    assert devices(server) == []
    assert device.given_key() is None


def test_a_device_that_blocked_notifications_says_how_to_allow_them(
    browser: WebDriver, device: Device, shot: Shot
) -> None:
    """Notifications blocked for the site: the switch is off and cannot be used, the page
    says they are blocked and where to allow them; no subscription is made."""
    device.permission("denied")
    login(browser, device.server, "/brain")
    state = wait_text(browser, "#push-state", "Notifications are blocked for Chalie")
    assert "allow them in the site's settings" in state.text
    toggle = find(browser, SWITCH)
    assert not toggle.is_enabled()
    assert not toggle.is_selected()
    assert not find(browser, "#push-test").is_enabled()
    assert "iOS 16.4 or later" in text_of(browser, "#settings-push")
    into_view(browser, state)
    shot(browser, "blocked")
    assert devices(device.server) == []
    assert device.given_key() is None


# --- away from the page --------------------------------------------------------------------------

def in_seconds(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat()


def schedule(server: ServerProcess, prompt: str) -> None:
    """A prompt scheduled a second from now."""
    with api(server) as http:
        r = http.post("/api/schedules", json={"prompt": prompt, "at": in_seconds(1)})
    assert r.status_code == 201, r.text


def program_asks(server: ServerProcess, bistro: StubInterface, llm: StubLlm) -> None:
    """The paired bistro's message has the turn call book_table: held for the person."""
    _, token = pair(server.url, server.login(), bistro, name="bistro")
    llm.queue(completion(tool_calls=[("book_table", json.dumps(CALL))]),
              completion("The bistro asked to book a table; that waits for you."))
    with bearer_client(server.url, token) as http:
        r = http.post("/api/messages", json={
            "text": "Table request from Mr Dupontel for 4 people tonight", "source": "bistro"})
    assert r.status_code == 202, r.text


def webpush_deliveries(server: ServerProcess) -> list[tuple[str, str]]:
    """(kind, status) of each Web Push delivery the server recorded, oldest first."""
    return [(str(kind), str(status)) for kind, status in db_rows(
        server.db_path, "SELECT kind, status FROM deliveries WHERE service = 'webpush' "
                        "ORDER BY created_at")]


def no_page_open(browser: WebDriver, server: ServerProcess) -> None:
    """Leave the page, and wait until the server has closed its socket (on a busy machine the
    close comes later: till then the page still counts as open and visible)."""
    browser.get("about:blank")

    def sockets() -> float:
        for line in httpx.get(f"{server.url}/metrics").text.splitlines():
            if line.startswith("chalie_ws_connections "):
                return float(line.split()[1])
        return 0.0

    wait_for(lambda: sockets() == 0)


def test_a_scheduled_result_is_pushed_while_no_page_is_open_and_links_to_its_message(
    browser: WebDriver, llm: StubLlm, subscribed: Device, shot: Shot
) -> None:
    """With the device subscribed and no page open, a scheduled prompt's result is pushed
    (VAPID-signed, encrypted for the device); delivered to the worker it shows as "Chalie ·
    reminder" with the answer; its link opens the chat at its message, marked."""
    server, service = subscribed.server, subscribed.service
    no_page_open(browser, server)
    llm.queue(completion("Time to water the plants."))
    schedule(server, "Remind me to water the plants")
    [reminder] = service.wait_pushes(DEVICE)
    assert service.failures == []
    assert reminder.vapid_key == subscribed.server_key()
    assert reminder.payload["kind"] == "scheduled_results"
    assert reminder.payload["body"] == "Time to water the plants."
    seq = reminder.payload["seq"]
    assert reminder.payload["url"] == f"/#seq-{seq}"
    assert "actions" not in reminder.payload
    assert webpush_deliveries(server) == [("scheduled_results", "sent")]

    with DevTools(browser) as devtools:
        worker = Worker(devtools, browser, server)
        worker.push(reminder.text)
        shown = worker.shown(reminder.payload["tag"])
    assert shown["title"] == reminder.payload["title"] == "Chalie · reminder"
    assert shown["body"] == "Time to water the plants."
    assert shown["data"]["url"] == f"/#seq-{seq}"

    browser.get(server.url + shown["data"]["url"])
    connected(browser)
    marked = find(browser, f'#messages [data-seq="{seq}"].highlight')
    assert "Time to water the plants." in marked.text
    shot(browser, "the-reminder-in-the-chat")


def test_an_escalation_is_pushed_with_approve_and_deny_and_approve_answers_it(
    browser: WebDriver, llm: StubLlm, subscribed: Device, bistro: StubInterface
) -> None:
    """With no page open, a program's message asks for a booking: the escalation is pushed
    with Approve and Deny; Approve, clicked in the worker, answers it as the person: the
    server records the approval, the call runs, and the notification is gone."""
    server, service = subscribed.server, subscribed.service
    no_page_open(browser, server)
    program_asks(server, bistro, llm)
    service.wait_for(lambda s: any(p.payload["kind"] == "escalations" for p in s.pushes))
    [asking] = [p for p in service.delivered(DEVICE) if p.payload["kind"] == "escalations"]
    assert service.failures == []
    assert asking.vapid_key == subscribed.server_key()
    assert asking.payload["actions"] == ["approve", "deny"]
    approval_id = asking.payload["approval_id"]

    with DevTools(browser) as devtools:
        worker = Worker(devtools, browser, server)
        worker.push(asking.text)
        shown = worker.shown(asking.payload["tag"])
        assert shown["actions"] == [["approve", "Approve"], ["deny", "Deny"]]
        assert "book_table" in shown["title"]
        assert worker.click(asking.payload["tag"], "approve") == {
            "action": "approve", "status": 202}
        until(browser, lambda _: bistro.executions() == [
            {"capability": "book_table", "params": CALL}], "the approved call on the interface")
        assert worker.notifications() == []
    with api(server) as http:
        items = http.get("/api/approvals").json()["items"]
    assert [(i["id"], i["status"]) for i in items] == [(approval_id, "approved")]
    assert ("escalations", "sent") in webpush_deliveries(server)


def test_nothing_is_pushed_while_the_chat_is_visible(
    browser: WebDriver, llm: StubLlm, subscribed: Device
) -> None:
    """notify.skip_when_visible (the default): a scheduled result that arrives while the chat
    page is in front is shown there and not pushed (its delivery is recorded as skipped); with
    another tab in front, the next one is pushed."""
    server, service = subscribed.server, subscribed.service
    browser.get(server.url + "/")
    connected(browser)
    llm.queue(completion("First reminder."), completion("Second reminder."))
    schedule(server, "Remind me once")
    visible(browser, "#messages > article.notification")
    until(browser, lambda _: webpush_deliveries(server) == [("scheduled_results", "skipped")],
          "the delivery recorded as skipped")
    assert service.pushes == []

    chat = browser.current_window_handle
    browser.switch_to.new_window("tab")
    browser.get("about:blank")
    schedule(server, "Remind me again")
    [push] = service.wait_pushes(DEVICE)
    assert push.payload["body"] == "Second reminder."
    assert service.failures == []
    browser.close()
    browser.switch_to.window(chat)
    until(browser, lambda d: len(d.find_elements(
        By.CSS_SELECTOR, "#messages > article.notification")) == 2, "both reminders in the chat")
