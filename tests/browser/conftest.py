"""Browser tests: the pages in a real headless Chromium, driven through chromedriver by selenium,
against the real server (a subprocess) and the stub LLM of tests/integration/harness.py.

Without Debian's `chromium` and `chromium-driver` every browser test is skipped, with one line
saying how to install them. Each test gets a clean browser (no cookies, no storage, desktop
size), fails on a JavaScript error or a Content-Security-Policy violation in the console and on
an error in the server's log, and keeps a screenshot of each step under artifacts/browser/.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import (
    NoSuchElementException,
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from tests.integration.harness import WAIT_S, ServerProcess, StubLlm

# Every WebDriver command is a DEBUG line of these two: a failed test's report would drown in them.
logging.getLogger("selenium").setLevel(logging.INFO)
logging.getLogger("urllib3").setLevel(logging.INFO)
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts" / "browser"
SKIP_LINE = (
    "browser tests skipped: Chromium and ChromeDriver are not installed; run scripts/test as "
    "root (it installs them with apt-get) or `apt-get install chromium chromium-driver`"
)
DESKTOP = (1280, 900)
PHONE = (375, 740)
CHROME_ARGS = (
    "--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
    "--no-first-run", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--disable-quic",
)


def _program(name: str, fallback: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    return fallback if os.access(fallback, os.X_OK) else None


CHROMIUM = _program("chromium", "/usr/bin/chromium")
CHROMEDRIVER = _program("chromedriver", "/usr/bin/chromedriver")


# --- reporting ------------------------------------------------------------------------------------

_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep each phase's report on the item, so a fixture can tell that its test failed; give
    every "no browser" skip one location, so the skip summary folds them into one line."""
    report: pytest.TestReport = yield
    item.stash.setdefault(_REPORTS, {})[report.when] = report
    if report.skipped and isinstance(report.longrepr, tuple) \
            and report.longrepr[2].endswith(SKIP_LINE):
        report.longrepr = (__file__, None, report.longrepr[2])  # type: ignore[assignment]
    return report


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """The one line on how to install the browser, unless the skip summary (-rs, -ra) already
    printed it."""
    if CHROMIUM and CHROMEDRIVER:
        return
    skipped = terminalreporter.stats.get("skipped", [])
    ours = any(isinstance(r.longrepr, tuple) and r.longrepr[2].endswith(SKIP_LINE)
               for r in skipped)
    if ours and not set(config.option.reportchars or "") & set("saA"):
        terminalreporter.write_line(SKIP_LINE)


# --- the browser ----------------------------------------------------------------------------------

@pytest.fixture(scope="package")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    """One headless Chromium for the browser tests (a fresh profile), quit when they are done so
    that it does not idle beside the rest of the suite; `browser` resets it per test."""
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip(SKIP_LINE)
    chrome = start_chrome(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield chrome
    finally:
        chrome.quit()


def start_chrome(profile: Path) -> WebDriver:
    """A headless Chromium at desktop size with a profile of its own, its console logged."""
    assert CHROMIUM
    assert CHROMEDRIVER
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in CHROME_ARGS:
        options.add_argument(arg)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={DESKTOP[0]},{DESKTOP[1]}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


# Console lines that say nothing about the pages: the icon Chromium asks for on its own, and the
# 401s the login page gets on purpose (a session probe, a wrong password).
HARMLESS = (
    re.compile(r"/favicon\.ico\b"),
    re.compile(r"/auth/(session|login) - Failed to load resource: the server responded with a "
               r"status of 401"),
)


class Console:
    """The browser's console: JavaScript errors, console.error and CSP violations are failures;
    `allow(pattern)` lets a test accept a line it provokes on purpose."""

    def __init__(self, driver: WebDriver) -> None:
        self.driver = driver
        self.allowed: list[re.Pattern[str]] = list(HARMLESS)
        self.seen: list[dict[str, Any]] = []

    def allow(self, pattern: str) -> None:
        self.allowed.append(re.compile(pattern))

    def read(self) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = self.driver.get_log("browser")
        self.seen += entries
        return entries

    def problems(self) -> list[str]:
        """Every error line since the last look that is not allowed."""
        out = []
        for entry in self.read():
            bad = entry.get("level") == "SEVERE" or entry.get("source") == "security"
            message = str(entry.get("message", ""))
            if bad and not any(p.search(message) for p in self.allowed):
                out.append(f"[{entry.get('source')}] {message}")
        return out

    def check(self) -> None:
        problems = self.problems()
        assert not problems, "browser console:\n" + "\n".join(problems)


def reset(driver: WebDriver, origins: list[str]) -> None:
    """A clean browser: one blank tab at desktop size, no cookies, storage or cache."""
    for handle in driver.window_handles[1:]:
        driver.switch_to.window(handle)
        driver.close()
    driver.switch_to.window(driver.window_handles[0])
    driver.get("about:blank")
    driver.execute_cdp_cmd("Network.clearBrowserCookies", {})
    driver.execute_cdp_cmd("Network.clearBrowserCache", {})
    for origin in origins:
        driver.execute_cdp_cmd("Storage.clearDataForOrigin",
                               {"origin": origin, "storageTypes": "all"})
    desktop(driver)


def desktop(driver: WebDriver) -> None:
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    driver.set_window_size(*DESKTOP)


def phone(driver: WebDriver) -> None:
    """A phone's viewport (375x740 CSS pixels, 2 device pixels each, the meta viewport read as
    a mobile browser reads it)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": PHONE[0], "height": PHONE[1], "deviceScaleFactor": 2, "mobile": True})


@pytest.fixture
def console(driver: WebDriver) -> Console:
    return Console(driver)


@pytest.fixture
def shot(request: pytest.FixtureRequest) -> Callable[[WebDriver, str], Path]:
    """shot(driver, name): a PNG of the page, artifacts/browser/<test>/<nn>-<name>.png."""
    folder = ARTIFACTS / _safe(request.node.name)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    count = 0

    def take(driver: WebDriver, name: str) -> Path:
        nonlocal count
        count += 1
        path = folder / f"{count:02d}-{_safe(name)}.png"
        driver.save_screenshot(str(path))
        return path

    return take


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-")


@pytest.fixture
def browser(driver: WebDriver, serve: Servers, console: Console,
            shot: Callable[[WebDriver, str], Path],
            request: pytest.FixtureRequest) -> Iterator[WebDriver]:
    """The session's browser, clean, at desktop size. After the test: the console must hold no
    error; a failed test leaves a last screenshot and the page's HTML next to its steps."""
    reset(driver, [])
    console.read()  # whatever an earlier test left
    yield driver
    try:
        call = request.node.stash.get(_REPORTS, {}).get("call")
        if call is not None and call.failed:
            try:
                path = shot(driver, "failed")
                path.with_suffix(".html").write_text(driver.page_source)
            except WebDriverException:
                pass
        problems = console.problems()
    finally:
        reset(driver, serve.origins)
    if problems:
        pytest.fail("browser console:\n" + "\n".join(problems), pytrace=False)


# --- the server -----------------------------------------------------------------------------------

class Holds:
    """Events for Reply(hold=...) and Reply(pause=...), all set when the test ends."""

    def __init__(self) -> None:
        self.events: list[threading.Event] = []

    def __call__(self) -> threading.Event:
        event = threading.Event()
        self.events.append(event)
        return event

    def release(self) -> None:
        for event in self.events:
            event.set()


class Servers:
    """serve(**sections): the real server on an ephemeral port, with the stub LLM, password
    "secret", and the given config sections (e.g. tools={"confirm": ["memory"]})."""

    def __init__(self, workdir: Path, llm: StubLlm, holds: Holds) -> None:
        self.workdir, self.llm, self.holds = workdir, llm, holds
        self.started: list[ServerProcess] = []

    def __call__(self, **sections: dict[str, Any]) -> ServerProcess:
        server = ServerProcess(self.workdir, self.llm, **sections).start()
        self.started.append(server)
        return server

    @property
    def origins(self) -> list[str]:
        return [s.url for s in self.started if s.port]

    def close(self) -> list[dict[str, Any]]:
        """Release every hold, kill every server; the errors they logged."""
        self.holds.release()
        errors = []
        for server in self.started:
            server.kill()
            errors += server.errors()
        return errors


@pytest.fixture
def llm() -> Iterator[StubLlm]:
    stub = StubLlm()
    yield stub
    stub.close()


@pytest.fixture
def hold() -> Iterator[Holds]:
    """hold(): a threading.Event for the stub LLM to wait on; every one is set at the end."""
    holds = Holds()
    yield holds
    holds.release()


@pytest.fixture
def serve(tmp_path: Path, llm: StubLlm, hold: Holds) -> Iterator[Servers]:
    servers = Servers(tmp_path, llm, hold)
    yield servers
    errors = servers.close()
    assert not errors, f"server logged errors: {errors}"


@pytest.fixture
def server(serve: Servers) -> ServerProcess:
    """The server with the default test configuration."""
    return serve()


def api(server: ServerProcess) -> httpx.Client:
    """A REST client holding a fresh login cookie (use it in a `with`)."""
    return httpx.Client(base_url=server.url, cookies={"chalie_session": server.login()},
                        timeout=WAIT_S)


# --- waiting and finding --------------------------------------------------------------------------

def wait(driver: WebDriver, timeout: float = WAIT_S) -> WebDriverWait[WebDriver]:
    return WebDriverWait(driver, timeout, poll_frequency=0.05, ignored_exceptions=(
        NoSuchElementException, StaleElementReferenceException))


def until(driver: WebDriver, condition: Callable[[WebDriver], Any], what: str) -> Any:
    """Wait for `condition` to return something truthy (and return it); `what` names it."""
    return wait(driver).until(condition, f"timed out waiting for {what}")


def find(driver: WebDriver | WebElement, css: str) -> WebElement:
    """The first element matching `css` once there is one."""
    root = driver
    browser = driver if isinstance(driver, WebDriver) else driver.parent
    return until(browser, lambda _: root.find_element(By.CSS_SELECTOR, css), css)  # type: ignore[no-any-return]


def visible(driver: WebDriver, css: str) -> WebElement:
    """The first element matching `css` once it is displayed."""
    def shown(d: WebDriver) -> WebElement | None:
        element = d.find_element(By.CSS_SELECTOR, css)
        return element if element.is_displayed() else None
    return until(driver, shown, f"{css} to be visible")  # type: ignore[no-any-return]


def gone(driver: WebDriver, css: str) -> None:
    until(driver, lambda d: not d.find_elements(By.CSS_SELECTOR, css), f"{css} to go")


def hidden(driver: WebDriver, css: str) -> None:
    """No element matches `css`, or none that matches is displayed."""
    until(driver, lambda d: not any(e.is_displayed()
                                    for e in d.find_elements(By.CSS_SELECTOR, css)),
          f"{css} to be hidden")


def text_of(driver: WebDriver, css: str) -> str:
    """The textContent of the first match (also when it is not displayed)."""
    return str(find(driver, css).get_attribute("textContent") or "")


def wait_text(driver: WebDriver, css: str, expected: str) -> WebElement:
    """The first element matching `css` once its textContent holds `expected`."""
    def has(d: WebDriver) -> WebElement | None:
        for element in d.find_elements(By.CSS_SELECTOR, css):
            if expected in (element.get_attribute("textContent") or ""):
                return element
        return None
    return until(driver, has, f"{css} to read {expected!r}")  # type: ignore[no-any-return]


def into_view(driver: WebDriver, element: WebElement) -> WebElement:
    """Scroll `element` to the middle of the viewport (for a screenshot that shows it)."""
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    return element


def path_of(driver: WebDriver) -> str:
    return urlparse(driver.current_url).path


# --- pages ----------------------------------------------------------------------------------------

def login(driver: WebDriver, server: ServerProcess, path: str = "/") -> None:
    """Open `path`, be sent to the login page, log in there and land back on `path`."""
    driver.get(server.url + path)
    until(driver, lambda d: path_of(d) == "/login", "the login page")
    field = visible(driver, "#password")
    field.clear()
    field.send_keys(server.password)
    driver.find_element(By.CSS_SELECTOR, "#login").click()
    until(driver, lambda d: path_of(d) == path, f"{path} after logging in")


def connected(driver: WebDriver) -> None:
    """The chat page's socket is open."""
    find(driver, '#connection[data-state="open"]')


def say(driver: WebDriver, text: str) -> None:
    """Type `text` into the composer (newlines as Shift+Enter) and press Enter."""
    field = visible(driver, "#input")
    for n, line in enumerate(text.split("\n")):
        if n:
            field.send_keys(Keys.SHIFT, Keys.ENTER)
        field.send_keys(line)
    field.send_keys(Keys.ENTER)


def exchanges(driver: WebDriver) -> list[WebElement]:
    return driver.find_elements(By.CSS_SELECTOR, "article.exchange")


def last_exchange(driver: WebDriver) -> WebElement:
    find(driver, "article.exchange")
    return exchanges(driver)[-1]


def finished(driver: WebDriver, count: int = 1) -> list[WebElement]:
    """Wait until `count` exchanges have had their done frame; returns them."""
    css = 'article.exchange[data-done="true"]'
    until(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, css)) >= count,
          f"{count} finished exchange(s)")
    return driver.find_elements(By.CSS_SELECTOR, css)
