"""`chalie doctor`'s Telegram line, against a stand-in for the Bot API on 127.0.0.1: the token
accepted (with the bot's name), refused (naming telegram.token), or the Bot API unreachable;
no line without a token; never the token itself."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator

import pytest

from chalie import doctor, doctor_away
from chalie.config import Config
from tests.telegram_api import TOKEN, TelegramApi


@pytest.fixture
def api() -> Iterator[TelegramApi]:
    stand_in = TelegramApi()
    yield stand_in
    stand_in.close()


def telegram_lines(config: Config) -> list[str]:
    out = io.StringIO()
    report = doctor.Report(out, doctor._secrets(config))
    doctor_away._telegram(report, config)
    return out.getvalue().splitlines()


def test_an_accepted_token_names_the_bot(make_config: Callable[..., Config],
                                         api: TelegramApi) -> None:
    lines = telegram_lines(make_config(telegram=api.settings()))
    assert lines == ["ok    Telegram: the bot token is accepted (@chalie_test_bot)"]
    assert api.called("getMe") == [{}]


def test_a_refused_token_is_a_warning_naming_the_setting(make_config: Callable[..., Config],
                                                        api: TelegramApi) -> None:
    api.token = "999:the-token-the-bot-has-now"
    [line] = telegram_lines(make_config(telegram=api.settings() | {"token": TOKEN}))
    assert line.startswith("warn  Telegram: the bot token: the Bot API refused it")
    assert "telegram.token" in line
    assert TOKEN not in line


def test_an_unreachable_bot_api_is_a_warning_naming_its_address(
        make_config: Callable[..., Config], api: TelegramApi) -> None:
    settings = api.settings()
    api.close()
    [line] = telegram_lines(make_config(telegram=settings))
    assert line.startswith(f"warn  Telegram: the Bot API at {settings['base_url']}: cannot be "
                           "reached")
    assert TOKEN not in line


def test_no_token_no_line(make_config: Callable[..., Config]) -> None:
    assert telegram_lines(make_config()) == []
