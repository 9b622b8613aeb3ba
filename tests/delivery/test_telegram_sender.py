"""The Telegram sender against a stand-in for the Bot API on 127.0.0.1: what the person's paired
chats receive from the Delivery actor, how an answered escalation's message changes, and how
each failure of the Bot API is classed (without ever quoting the bot's token)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import apsw
import msgspec
import pytest

from chalie.config import Config
from chalie.delivery import items
from chalie.delivery.senders import Chooses, Settles, Target
from chalie.delivery.telegram_sender import (
    Following,
    TelegramSender,
    buttons,
    callback_data,
    hide,
    read_callback,
)
from chalie.store import db, delivery_rows
from chalie.store.delivery_rows import TelegramChat
from tests.telegram_api import TOKEN, TelegramApi

CHAT = 4242
APPROVAL = "0123456789abcdef0123456789abcdef"  # as Chalie makes them: uuid4().hex


@pytest.fixture
def api() -> Iterator[TelegramApi]:
    stand_in = TelegramApi()
    yield stand_in
    stand_in.close()


@pytest.fixture
def setup(make_config: Callable[..., Config], api: TelegramApi) -> Iterator[
        tuple[TelegramSender, Callable[[], apsw.Connection], dict[str, Config]]]:
    config = make_config(telegram=api.settings(), notify={"timeout_s": 5.0})
    conn = db.open_writer(config.store.path, busy_timeout_ms=1000, synchronous="NORMAL")
    current = {"config": config}
    sender = TelegramSender(lambda: conn, lambda: current["config"], Following())
    try:
        yield sender, lambda: conn, current
    finally:
        conn.close()


def pair(conn: apsw.Connection, chat_id: int = CHAT, name: str = "Ada (@ada)",
         at: float = 1.0) -> None:
    with db.immediate(conn):
        delivery_rows.pair_chat(conn, TelegramChat(chat_id, name, at))


def frame(**fields: Any) -> str:
    return json.dumps(fields)


def escalation(exchange_id: str | None = "turn-1") -> items.Item:
    item = items.read("main", frame(
        type="escalation", seq=7, content="Chalie wants to forget your city.",
        approval_id=APPROVAL, tool="forget", args='{"key": "city"}', expires_in_s=120.0,
        exchange_id=exchange_id), now=1000.0)
    assert isinstance(item, items.Item)
    return item


def notification() -> items.Item:
    item = items.read("main", frame(type="notification", seq=3, content="Rain at 5 pm.",
                                    source="dmn"), now=1000.0)
    assert isinstance(item, items.Item)
    return item


def target(chat_id: int = CHAT) -> Target:
    return Target(f"telegram:{chat_id}", "telegram", "Ada")


def test_each_paired_chat_is_a_target_while_a_token_is_set(setup: Any) -> None:
    """The paired chats are the targets, with the kinds notify.kinds chooses; without a token
    there are none."""
    sender, read, current = setup
    assert sender.targets() == []
    pair(read())
    pair(read(), 77, "Bob", at=2.0)
    got = sender.targets()
    assert [(t.key, t.service, t.name) for t in got] == [
        ("telegram:4242", "telegram", "Ada (@ada)"), ("telegram:77", "telegram", "Bob")]
    assert got[0].kinds == frozenset(current["config"].notify.kinds)
    config = current["config"]
    current["config"] = msgspec.structs.replace(
        config, telegram=msgspec.structs.replace(config.telegram, token=""))
    assert sender.targets() == []


def test_a_notification_arrives_as_a_message_and_its_id_is_the_ref(
        setup: Any, api: TelegramApi) -> None:
    """A proactive message is one Telegram message in the chat, with the message's id kept."""
    sender, _, _ = setup
    sent = sender.send(target(), notification())
    assert sent.outcome == "sent"
    [message] = api.chat(CHAT)
    assert sent.ref == str(message.message_id)
    assert message.text == "Chalie\n\nRain at 5 pm."
    assert message.buttons == []


def test_an_escalation_has_approve_and_deny_and_its_answer_replaces_them(
        setup: Any, api: TelegramApi) -> None:
    """An escalation that waits shows Approve and Deny, whose callback data names the
    escalation; once answered, the same message says how and has no buttons left."""
    sender, _, _ = setup
    item = escalation()
    sent = sender.send(target(), item)
    assert sent.outcome == "sent"
    assert sent.ref is not None
    [message] = api.chat(CHAT)
    assert message.buttons == [("Approve", f"ap:{APPROVAL}:y"), ("Deny", f"ap:{APPROVAL}:n")]
    assert "Chalie wants to forget your city." in message.text
    settles: object = sender
    assert isinstance(settles, Settles)
    sender.settled(target(), item, sent.ref, "approved")
    [message] = api.chat(CHAT)
    assert message.buttons == []
    assert message.text.endswith("✅ Approved")
    assert message.text.startswith("Chalie asks: forget?")


def test_an_escalation_the_chat_is_already_showing_in_its_conversation_is_declined(
        setup: Any) -> None:
    """While the bridge follows the exchange in a Telegram conversation, its escalation is not
    sent again by the sender; a notification always is."""
    sender, _, _ = setup
    chooses: object = sender
    assert isinstance(chooses, Chooses)
    assert sender.wants(target(), escalation("turn-1"))
    sender.following.follow("turn-1")
    assert not sender.wants(target(), escalation("turn-1"))
    assert sender.wants(target(), escalation("turn-2"))
    assert sender.wants(target(), escalation(None))
    assert sender.wants(target(), notification())
    sender.following.forget("turn-1")
    assert sender.wants(target(), escalation("turn-1"))


@pytest.mark.parametrize(("status", "description", "outcome"), [
    (403, "Forbidden: bot was blocked by the user", "gone"),
    (400, "Bad Request: chat not found", "gone"),
    (500, "Internal Server Error", "failed"),
    (400, "Bad Request: message is too long", "failed"),
])
def test_each_refusal_of_the_bot_api_is_classed(
        setup: Any, api: TelegramApi, status: int, description: str, outcome: str) -> None:
    """A chat that blocked the bot (403) or no longer exists is gone; anything else failed
    (tried again later), with the Bot API's words."""
    sender, _, _ = setup
    api.fail("sendMessage", status, description)
    sent = sender.send(target(), notification())
    assert (sent.outcome, sent.error, sent.ref) == (outcome, description, None)


def test_flood_control_says_when_to_try_again(setup: Any, api: TelegramApi) -> None:
    """A 429 is a failure with the retry_after Telegram asked for."""
    sender, _, _ = setup
    api.fail("sendMessage", 429, "Too Many Requests: retry after 17", retry_after=17)
    sent = sender.send(target(), notification())
    assert (sent.outcome, sent.retry_after_s) == ("failed", 17.0)


def test_a_refused_token_or_an_unreachable_api_fails_without_quoting_the_token(
        setup: Any, api: TelegramApi) -> None:
    """The token is in every Bot API address: no failure's words hold it."""
    sender, _, current = setup
    api.token = "999:another-token-entirely"
    sent = sender.send(target(), notification())
    assert sent.outcome == "failed"
    assert sent.error is not None
    assert "telegram.token" in sent.error
    assert TOKEN not in sent.error
    api.close()
    config = current["config"]
    current["config"] = msgspec.structs.replace(config, telegram=msgspec.structs.replace(
        config.telegram, base_url=f"{api.base_url.rsplit(':', 1)[0]}:1/bot"))
    sent = sender.send(target(), notification())
    assert sent.outcome == "failed"
    assert sent.error is not None
    assert sent.error.startswith("the Bot API cannot be reached")
    assert TOKEN not in sent.error
    assert TOKEN.partition(":")[2] not in sent.error


def test_a_target_that_is_no_chat_is_gone(setup: Any) -> None:
    sender, _, _ = setup
    sent = sender.send(Target("telegram:not-a-number", "telegram", "?"), notification())
    assert sent.outcome == "gone"


def test_callback_data_fits_telegrams_64_bytes_and_reads_back() -> None:
    """An approval id of Chalie's fits with room to spare; one too long gets no buttons; the
    data reads back as (approval id, approve, always), and nothing else does."""
    assert read_callback(callback_data(APPROVAL, "y")) == (APPROVAL, True, False)
    assert read_callback(callback_data(APPROVAL, "n")) == (APPROVAL, False, False)
    assert read_callback(callback_data(APPROVAL, "a")) == (APPROVAL, True, True)
    assert callback_data("x" * 60, "y") is None
    assert buttons("x" * 60) is None
    markup = buttons(APPROVAL, always=True)
    assert markup is not None
    assert [b["text"] for b in markup["inline_keyboard"][0]] == ["Approve", "Deny",
                                                                "Always allow"]
    for junk in (None, "", "ap", "ap::y", f"ap:{APPROVAL}:z", f"xx:{APPROVAL}:y"):
        assert read_callback(junk) is None


def test_hide_blanks_the_token_and_its_secret_half() -> None:
    words = f"POST https://api.telegram.org/bot{TOKEN}/getMe and {TOKEN.partition(':')[2]}"
    shown = hide(words, TOKEN)
    assert TOKEN not in shown
    assert TOKEN.partition(":")[2] not in shown
    assert shown.count("***") == 2
