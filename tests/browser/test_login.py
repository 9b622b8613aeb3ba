"""Logging in through the login page; what the pages send without and with the login cookie."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import httpx
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

from tests.browser.conftest import connected, path_of, until, visible, wait_text
from tests.integration.harness import ServerProcess

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
       "connect-src 'self'; frame-src 'self'; form-action 'self'; base-uri 'none'; "
       "frame-ancestors 'none'; manifest-src 'self'; worker-src 'self'")
Shot = Callable[[WebDriver, str], Path]


def test_login_page_sends_a_wrong_password_back_and_the_right_one_to_the_chat(
    browser: WebDriver, server: ServerProcess, shot: Shot
) -> None:
    """`/` without a session goes to /login?next=/; a wrong password says so; the right one
    (submitted with Enter) opens the chat, whose socket connects."""
    browser.get(server.url + "/")
    until(browser, lambda d: path_of(d) == "/login", "the redirect to /login")
    assert parse_qs(urlparse(browser.current_url).query) == {"next": ["/"]}
    field = visible(browser, "form#login-form input#password")
    assert field.get_attribute("type") == "password"
    shot(browser, "login-page")

    field.send_keys("not the password")
    browser.find_element(By.CSS_SELECTOR, "button#login").click()
    error = wait_text(browser, "p#login-error", "Wrong password.")
    assert error.is_displayed()
    assert path_of(browser) == "/login"
    shot(browser, "wrong-password")

    field = visible(browser, "#password")
    field.clear()
    field.send_keys(server.password, Keys.ENTER)
    until(browser, lambda d: path_of(d) == "/", "the chat page")
    connected(browser)
    shot(browser, "chat-after-login")


def test_pages_carry_the_csp_and_need_the_cookie(server: ServerProcess) -> None:
    """Every page has the strict CSP; `/` and `/brain` send a stranger to the login page with
    `next`; static files need the cookie except the login page's own."""
    with httpx.Client(base_url=server.url) as stranger, httpx.Client(
            base_url=server.url, cookies={"chalie_session": server.login()}) as person:
        for path in ("/", "/brain"):
            sent = stranger.get(path)
            assert sent.status_code == 302, (path, sent.status_code)
            target = urlparse(sent.headers["location"])
            assert target.path == "/login", (path, sent.headers["location"])
            assert parse_qs(target.query) == {"next": [path]}, sent.headers["location"]
            page = person.get(path)
            assert page.status_code == 200, (path, page.status_code)
            assert page.headers["content-type"].startswith("text/html")
            assert page.headers["content-security-policy"] == CSP, path
        login_page = stranger.get("/login")
        assert login_page.status_code == 200
        assert login_page.headers["content-security-policy"] == CSP

        assert stranger.get("/auth/session").status_code == 401
        assert person.get("/auth/session").status_code == 200

        for name in ("chat.js", "socket.js", "markdown.js", "brain.js"):
            assert stranger.get(f"/static/{name}").status_code == 401, name
            mine = person.get(f"/static/{name}")
            assert mine.status_code == 200, name
            assert "javascript" in mine.headers["content-type"], name
        for name in ("base.css", "login.css", "login.js", "icon.svg"):
            assert stranger.get(f"/static/{name}").status_code == 200, name
        for sneaky in ("/static/%2e%2e/app.py", "/static/..%2fapp.py", "/static/nope.js"):
            assert person.get(sneaky).status_code in (400, 403, 404), sneaky


def test_log_out_button_ends_the_session_and_opens_the_login_page(
    browser: WebDriver, server: ServerProcess
) -> None:
    """The header's "Log out" ends this browser's session: the login page opens, the old
    cookie is refused, and the brain page asks for the password again."""
    browser.get(server.url + "/login")
    visible(browser, "#password").send_keys(server.password, Keys.ENTER)
    until(browser, lambda d: path_of(d) == "/", "the chat page")
    connected(browser)
    cookie = browser.get_cookie("chalie_session")
    assert cookie is not None

    browser.find_element(By.CSS_SELECTOR, "header button#logout").click()

    until(browser, lambda d: path_of(d) == "/login", "the login page after logging out")
    refused = httpx.get(f"{server.url}/auth/session", cookies={"chalie_session": cookie["value"]})
    assert refused.status_code == 401
    browser.get(server.url + "/brain")
    until(browser, lambda d: path_of(d) == "/login", "the login page instead of the brain")


def test_after_login_the_message_box_has_the_focus_and_a_username_is_offered(
    browser: WebDriver, server: ServerProcess
) -> None:
    """The login form has a username for password managers ("chalie", autocomplete username),
    present but not shown; once logged in, the person can type at once."""
    browser.get(server.url + "/login")
    user = browser.find_element(By.CSS_SELECTOR, "#login-form input[autocomplete=username]")
    assert user.get_attribute("value") == "chalie"
    assert user.get_attribute("type") == "text"
    size = user.size
    assert size["width"] <= 1, size  # visually hidden
    assert size["height"] <= 1, size
    assert user.get_attribute("tabindex") == "-1"
    field = visible(browser, "#password")
    field.send_keys(server.password, Keys.ENTER)
    until(browser, lambda d: path_of(d) == "/", "the chat")
    connected(browser)
    until(browser, lambda d: d.switch_to.active_element.get_attribute("id") == "input",
          "the message box to have the focus")
    browser.refresh()  # a plain reload does not take the focus again
    connected(browser)
