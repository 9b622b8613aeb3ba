"""Chalie as an installable web app in a real Chromium: the browser's own installability checks
pass on the chat page and the dashboard; the pages' policy is the old one plus the manifest and
the worker; the service worker starts the pages with the server gone and never keeps an API
answer; a notification's link (/#seq-<n>) shows that message, also when the worker asks the
open chat tab to; and the chat page tells the server whether it is visible (`presence`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.browser.conftest import (
    Console,
    Servers,
    api,
    connected,
    find,
    finished,
    login,
    say,
    until,
    visible,
)
from tests.browser.devtools import DevTools
from tests.integration.harness import ServerProcess, StubLlm, completion

Shot = Callable[[WebDriver, str], Path]
OLD_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
    "connect-src 'self'; frame-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
# Where the worker may keep answers: the pages, their files and the manifest; nothing else.
SHELL_PAGES = {"/", "/brain", "/manifest.webmanifest"}
NEVER_KEPT = ("/api/", "/ws", "/auth/", "/v1/", "/mcp", "/health", "/metrics", "/cards/", "/login")
# Every frame the chat page sends on its socket, kept in window.__sent (a test's wrapper).
RECORD_SENT = """
window.__sent = [];
const send = WebSocket.prototype.send;
WebSocket.prototype.send = function (data) {
  window.__sent.push(JSON.parse(String(data)));
  return send.call(this, data);
};
"""


def worker_ready(driver: WebDriver) -> str:
    """Wait until /sw.js controls the page; its script URL."""
    url: str = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "const container = navigator.serviceWorker;"
        "container.ready.then(() => {"
        "  if (container.controller) done(container.controller.scriptURL);"
        "  else container.addEventListener('controllerchange',"
        "    () => done(container.controller.scriptURL));"
        "});")
    return url


def kept(driver: WebDriver) -> dict[str, list[str]]:
    """Cache Storage as the page sees it: cache name -> the paths kept in it."""
    found: dict[str, list[str]] = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "(async () => {"
        "  const out = {};"
        "  for (const name of await caches.keys()) {"
        "    const cache = await caches.open(name);"
        "    out[name] = (await cache.keys()).map((r) => {"
        "      const url = new URL(r.url);"
        "      return url.pathname + url.search;"
        "    });"
        "  }"
        "  return out;"
        "})().then(done, (e) => done({error: [String(e)]}));")
    return found


def all_kept(driver: WebDriver) -> set[str]:
    return {path for paths in kept(driver).values() for path in paths}


def worker_shell() -> set[str]:
    """The paths sw.js precaches (its PAGES and FILES lists, as tests/edge/test_pages.py reads)."""
    from tests.edge.test_pages import shell_of_worker
    pages, files = shell_of_worker()
    return pages | {f"/static/{name}" for name in files} | {"/manifest.webmanifest"}


@pytest.fixture
def record_sent(driver: WebDriver) -> Iterator[None]:
    """Every page opened during the test records what it sends on its sockets."""
    script = driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument",
                                    {"source": RECORD_SENT})
    yield
    driver.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument",
                           {"identifier": script["identifier"]})


def presence(driver: WebDriver) -> list[bool]:
    """The `visible` of each presence frame the page sent, in order."""
    sent: list[dict[str, Any]] = driver.execute_script("return window.__sent || []")
    return [frame["visible"] for frame in sent if frame.get("type") == "presence"]


# --- installing ----------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/", "/brain"], ids=["chat", "brain"])
def test_chromium_finds_the_app_installable(
    browser: WebDriver, server: ServerProcess, shot: Shot, path: str
) -> None:
    """On the chat page and on the dashboard, the worker at /sw.js controls the page,
    Chromium's installability checks find nothing missing, and the manifest it parsed (with no
    error) is Chalie's: standalone at /, three icons, the page's theme colours."""
    login(browser, server, path)
    assert worker_ready(browser) == f"{server.url}/sw.js"
    assert browser.execute_cdp_cmd("Page.getInstallabilityErrors", {}) == {
        "installabilityErrors": []}
    answer = browser.execute_cdp_cmd("Page.getAppManifest", {})
    assert answer["url"] == f"{server.url}/manifest.webmanifest"
    assert answer["errors"] == []
    manifest = answer["manifest"]
    assert (manifest["name"], manifest["display"]) == ("Chalie", "kStandalone")
    assert manifest["startUrl"] == manifest["scope"] == f"{server.url}/"
    assert sorted((i["url"].removeprefix(server.url), i["sizes"]) for i in manifest["icons"]) == [
        ("/static/icon-192.png", "192x192"), ("/static/icon-512.png", "512x512"),
        ("/static/icon-maskable-512.png", "512x512")]
    themes = {m.get_attribute("media"): m.get_attribute("content")
              for m in browser.find_elements(By.CSS_SELECTOR, 'meta[name="theme-color"]')}
    assert set(themes) == {"(prefers-color-scheme: light)", "(prefers-color-scheme: dark)"}
    assert browser.find_element(By.CSS_SELECTOR, 'link[rel="apple-touch-icon"]')
    shot(browser, "installable")


def test_the_pages_policy_is_the_old_one_plus_the_manifest_and_the_worker(
    browser: WebDriver, server: ServerProcess
) -> None:
    """Every page, the manifest and the worker carry the policy of before with `manifest-src
    'self'; worker-src 'self'` added and nothing else; the pages load and register the worker
    under it with no violation (the console check)."""
    wanted = OLD_CSP + "; manifest-src 'self'; worker-src 'self'"
    with api(server) as http:
        for path in ("/", "/brain", "/login", "/manifest.webmanifest", "/sw.js",
                     "/static/chat.js"):
            assert http.get(path).headers["Content-Security-Policy"] == wanted, path
    login(browser, server, "/brain")
    worker_ready(browser)
    browser.get(server.url + "/")
    connected(browser)


# --- the offline shell ---------------------------------------------------------------------------

def test_the_shell_starts_offline_and_no_api_answer_is_ever_kept(
    browser: WebDriver, server: ServerProcess, console: Console, llm: StubLlm, shot: Shot
) -> None:
    """Once the worker is in, Cache Storage holds the pages and their files, and after a chat,
    the dashboard's every section and a few API calls of the page's own, still nothing else.
    Then the server goes away: the chat page and the dashboard open from the kept shell (the
    navigation says it came from Cache Storage), saying they cannot reach the server."""
    llm.queue(completion("Hello to you."))
    login(browser, server)
    connected(browser)
    worker_ready(browser)
    shell = worker_shell()
    until(browser, lambda d: all_kept(d) >= shell, "the worker to keep the whole shell")
    say(browser, "Hello")
    finished(browser)
    browser.get(server.url + "/brain")
    find(browser, "#settings-form")
    statuses = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "Promise.all(['/api/settings', '/health', '/auth/session', '/api/goals',"
        "  '/api/state?channel=main', '/login']"
        "  .map((p) => fetch(p, {credentials: 'same-origin'}).then((r) => r.status)))"
        ".then(done);")
    assert statuses == [200] * 6
    assert set(kept(browser)) == {"chalie-shell-v1"}
    paths = all_kept(browser)
    assert paths == shell
    assert [p for p in paths if p.startswith(NEVER_KEPT)] == []

    server.kill()
    console.allow(r"net::ERR_CONNECTION_REFUSED")
    browser.get(server.url + "/")
    visible(browser, "#input")
    until(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#connection").text
          in ("Reconnecting…", "Offline"), "the page to say it cannot connect")
    navigation = browser.execute_script(
        "return performance.getEntriesByType('navigation')[0].deliveryType")
    assert navigation == "cache-storage"
    shot(browser, "chat-offline")
    browser.get(server.url + "/brain")
    visible(browser, "#settings-title")
    assert browser.title == "Chalie · Brain"
    shot(browser, "brain-offline")


# --- a notification's link -----------------------------------------------------------------------

def answer_seqs(driver: WebDriver) -> list[int]:
    return [int(str(a.get_attribute("data-seq")))
            for a in driver.find_elements(By.CSS_SELECTOR, ".answer[data-seq]")]


def in_view(driver: WebDriver, css: str) -> bool:
    return bool(driver.execute_script(
        "const box = document.querySelector(arguments[0]).getBoundingClientRect();"
        "const log = document.getElementById('messages').getBoundingClientRect();"
        "return box.bottom > log.top && box.top < log.bottom;", css))


def test_a_notification_link_shows_that_message_marked(
    browser: WebDriver, server: ServerProcess, llm: StubLlm, shot: Shot
) -> None:
    """Opened at /#seq-<n>, the chat page scrolls the message with that seq into view, marks
    it and gives it the focus, although later messages fill the screen; the newest stays out
    of view until the person goes there."""
    words = ["First answer.", *(f"Answer {n}.\n\n" + "A long line.\n\n" * 8 for n in range(2, 7))]
    llm.queue(*(completion(text) for text in words))
    login(browser, server)
    connected(browser)
    for n in range(len(words)):
        say(browser, f"Question {n + 1}")
        finished(browser, n + 1)
    first = answer_seqs(browser)[0]
    target = f'.answer[data-seq="{first}"]'
    assert not in_view(browser, target)

    browser.get("about:blank")
    browser.get(f"{server.url}/#seq-{first}")
    connected(browser)
    marked = find(browser, f"{target}.highlight")
    until(browser, lambda d: in_view(d, target), "the message in view")
    assert marked.text == "First answer."
    assert browser.execute_script("return document.activeElement") == marked
    assert len(browser.find_elements(By.CSS_SELECTOR, ".highlight")) == 1
    visible(browser, "#jump")
    shot(browser, "marked")


def test_the_worker_shows_a_clicked_notification_in_the_open_chat_tab(
    browser: WebDriver, server: ServerProcess, llm: StubLlm, shot: Shot
) -> None:
    """A click on a notification (the worker's click function, run inside the worker) while the
    chat is open: the worker finds the chat tab and asks it to show the message, which the page
    scrolls to and marks, without a reload."""
    llm.queue(completion("The answer to find."), completion("Another."))
    login(browser, server)
    connected(browser)
    say(browser, "One")
    finished(browser)
    say(browser, "Two")
    finished(browser, 2)
    first = answer_seqs(browser)[0]
    worker_ready(browser)
    browser.execute_script("window.__sameDocument = true")
    with DevTools(browser) as devtools:
        worker = devtools.target(lambda t: t["type"] == "service_worker"
                                 and t["url"] == f"{server.url}/sw.js", "the service worker")
        session = devtools.attach(worker["targetId"])
        data = json.dumps({"kind": "notifications", "url": f"/#seq-{first}", "seq": first})
        result = devtools.evaluate(
            session, f"self.chalieNotificationClick({{data: {data}, close() {{}}}}, '')")
    assert result == {"opened": "shown"}
    find(browser, f'.answer[data-seq="{first}"].highlight')
    assert urlparse(browser.current_url).fragment == f"seq-{first}"
    assert browser.execute_script("return window.__sameDocument") is True
    shot(browser, "shown-by-the-worker")


# --- presence ------------------------------------------------------------------------------------

def test_the_chat_page_says_whether_it_is_visible(
    browser: WebDriver, serve: Servers, record_sent: None
) -> None:
    """After its socket opens the chat page says it is visible; another tab in front: not
    visible; back in front: visible again; a reloaded page's new socket says it again."""
    server = serve()
    login(browser, server)
    connected(browser)
    until(browser, lambda d: presence(d) == [True], "presence: visible")
    chat = browser.current_window_handle
    browser.switch_to.new_window("tab")
    browser.get(server.url + "/brain")
    browser.switch_to.window(chat)
    until(browser, lambda d: presence(d)[:2] == [True, False], "presence: hidden")
    until(browser, lambda d: presence(d) == [True, False, True], "presence: visible again")
    for handle in browser.window_handles:
        if handle != chat:
            browser.switch_to.window(handle)
            browser.close()
    browser.switch_to.window(chat)
    sent = browser.execute_script("return window.__sent")
    assert [f["type"] for f in sent[:2]] == ["resume", "presence"]
    browser.refresh()
    connected(browser)
    until(browser, lambda d: presence(d) == [True], "presence after a reload")
