"""The Telegram section at /brain, and Telegram's turns on the chat page, in a real Chromium
against the real server whose bot talks to a stand-in for the Telegram Bot API on 127.0.0.1.
Without a token the section says how to get one and where to give it; with one it names the
bot, "Pair a chat" shows a one-time code and how to send it, the chat that sends it appears
(the page notices by itself) and Unpair takes it away; a refused token is said; a message sent
from Telegram shows on the chat page "via Telegram"."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from tests.browser.conftest import (
    Servers,
    api,
    connected,
    find,
    hidden,
    into_view,
    login,
    text_of,
    visible,
    wait_text,
)
from tests.integration.harness import ServerProcess, StubLlm, completion
from tests.telegram_api import TelegramApi

Shot = Callable[[WebDriver, str], Path]
ADA = 4242


@pytest.fixture
def telegram_api() -> Iterator[TelegramApi]:
    stand_in = TelegramApi()
    yield stand_in
    stand_in.close()


@pytest.fixture
def bot_server(serve: Servers, telegram_api: TelegramApi) -> ServerProcess:
    server = serve(telegram={**telegram_api.settings(), "edit_every_s": 0.05})
    telegram_api.wait(telegram_api.polling)
    return server


def section(driver: WebDriver, shot: Shot, name: str) -> None:
    into_view(driver, find(driver, "#telegram"))
    shot(driver, name)


def test_without_a_token_the_section_says_where_to_give_one(
        browser: WebDriver, server: ServerProcess, shot: Shot) -> None:
    """No token: how to make a bot and a link to the settings that take its token; nothing to
    pair yet."""
    login(browser, server, "/brain")
    state = wait_text(browser, "#telegram-state", "No bot yet")
    assert "telegram.token" in state.text
    link = find(browser, "#telegram-settings-link")
    assert (link.get_attribute("href") or "").split("#")[1] in ("settings",
                                                                "setting-telegram-token")
    hidden(browser, "#telegram-pairing")
    wait_text(browser, "#telegram .empty", "No chat paired.")
    section(browser, shot, "no-token")


def test_a_chat_pairs_with_the_shown_code_and_unpairs(
        browser: WebDriver, bot_server: ServerProcess, telegram_api: TelegramApi,
        shot: Shot) -> None:
    """The bot's name; "Pair a chat" shows an 8-character code, the bot to send it to and a
    t.me link that sends it; the chat that sends it is listed without a reload and the code
    goes away; Unpair, confirmed, removes it here and in the API."""
    login(browser, bot_server, "/brain")
    wait_text(browser, "#telegram-state", "@chalie_test_bot")
    wait_text(browser, "#telegram .empty", "No chat paired yet")
    visible(browser, "#telegram-pair").click()
    visible(browser, "#telegram-code-box")
    code = text_of(browser, "#telegram-code")
    assert len(code) == 8
    assert "@chalie_test_bot" in text_of(browser, "#telegram-code-how")
    link = visible(browser, "#telegram-code-link")
    assert link.get_attribute("href") == f"https://t.me/chalie_test_bot?start={code}"
    section(browser, shot, "code")

    telegram_api.text(ADA, code)
    row = wait_text(browser, "#telegram-chats .telegram-chat", "Ada (@ada)")
    assert row.get_attribute("data-id") == str(ADA)
    hidden(browser, "#telegram-code-box")
    section(browser, shot, "paired")

    visible(browser, 'button[aria-label="Unpair the Telegram chat Ada (@ada)"]').click()
    dialog = visible(browser, "#confirm")
    assert "Unpair Ada (@ada)?" in dialog.text
    visible(browser, "#confirm-yes").click()
    wait_text(browser, "#telegram .empty", "No chat paired yet")
    with api(bot_server) as client:
        assert client.get("/api/telegram").json()["chats"] == []


def test_a_refused_token_is_said_in_the_section(
        browser: WebDriver, serve: Servers, telegram_api: TelegramApi, shot: Shot) -> None:
    settings = {**telegram_api.settings(), "token": "999:not-this-bots-token"}
    server = serve(telegram=settings)
    login(browser, server, "/brain")
    problem = wait_text(browser, "#telegram-problem", "telegram.token")
    assert "refused" in problem.text
    wait_text(browser, "#telegram-state", "The bot is off.")
    section(browser, shot, "refused")


def test_a_message_from_telegram_shows_on_the_chat_page_as_telegrams(
        browser: WebDriver, bot_server: ServerProcess, telegram_api: TelegramApi,
        llm: StubLlm, shot: Shot) -> None:
    """The person writes in Telegram while the page is open: the page shows the turn, their
    words marked "via Telegram", and the answer."""
    with api(bot_server) as client:
        code = client.post("/api/telegram/pairing-code").json()["code"]
    telegram_api.text(ADA, f"/start {code}")
    telegram_api.wait(lambda: any(m.text.startswith("Paired")
                                  for m in telegram_api.chat(ADA)))
    login(browser, bot_server, "/")
    connected(browser)
    llm.queue(completion("Hello from Chalie."))
    telegram_api.text(ADA, "hello from my phone")
    mine = wait_text(browser, "article.exchange .msg.user", "hello from my phone")
    assert "via Telegram" in mine.text
    wait_text(browser, "article.exchange", "Hello from Chalie.")
    shot(browser, "via-telegram")
