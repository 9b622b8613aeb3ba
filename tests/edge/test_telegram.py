"""The Telegram bridge in process: a real server (its actors, store and turn path, a stub LLM on
127.0.0.1) and the bridge on its IOLoop, talking to a stand-in for the Bot API. What the person
sees in Telegram: pairing with the dashboard's code, an answer that grows by edits, approvals as
buttons, images in; what a stranger's chat gets (nothing, unless it tries to pair); and a bot
that keeps going when the Bot API fails or refuses its token."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import logging
import queue
import threading
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import pytest

from chalie.actors.store_writer_messages import ApplyOps, OpsApplied
from chalie.config import Config
from chalie.delivery.telegram_sender import Following
from chalie.edge import telegram, telegram_inbox
from chalie.edge.telegram import TelegramBridge
from chalie.edge.telegram_pairing import WRONG_CODES, code_hash, new_code
from chalie.server import Server
from chalie.store.delivery_ops import AddTelegramCode
from tests.integration.harness import Reply, StubLlm, completion, db_rows, wait_for
from tests.telegram_api import TelegramApi

T = TypeVar("T")
WAIT_S = 20.0
ADA, STRANGER = 4242, 6666
REMEMBER = json.dumps({"action": "remember", "key": "city", "value": "Lyon"})
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=")


class Live:
    """A Server and a TelegramBridge on an asyncio loop of their own thread."""

    def __init__(self, config: Config, api: TelegramApi, token: str | None = None) -> None:
        self.api = api
        self.config = config
        self.token = api.token if token is None else token
        self.following = Following()
        self.server: Server | None = None
        self.bridge: TelegramBridge | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started: queue.Queue[BaseException | None] = queue.Queue()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    def start(self) -> Live:
        self._thread.start()
        failed = self._started.get(timeout=WAIT_S)
        if failed is not None:
            raise failed
        return self

    async def _main(self) -> None:
        try:
            self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
            # The server's own settings have no token: the bridge is the test's.
            self.server = Server(self.config)
            await self.server.start()
            ctx = self.server._edge
            assert ctx is not None
            self.ctx = dataclasses.replace(ctx, config=with_token(self.config, self.token))
            self.bridge = TelegramBridge(self.ctx, self.following)
            await self.bridge.start()
        except BaseException as e:
            self._started.put(e)
            raise
        self._started.put(None)
        await self._stop.wait()
        await self.bridge.stop()
        await self.server.stop()

    def run(self, work: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run `work()` on the loop; its result."""
        assert self._loop is not None

        async def on_the_loop() -> T:
            return await work()

        future: Future[T] = asyncio.run_coroutine_threadsafe(on_the_loop(), self._loop)
        return future.result(WAIT_S)

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive(), "the loop did not stop"

    def code(self) -> str:
        """A pairing code, as POST /api/telegram/pairing-code makes one."""
        code = new_code()
        writer = self.server.directory.get("store_writer") if self.server else None
        assert writer is not None
        done = writer.ask(ApplyOps((AddTelegramCode(code_hash(code), 4e9),)), timeout=WAIT_S)
        assert isinstance(done, OpsApplied)
        assert done.error is None
        return code

    def pair(self, chat_id: int = ADA) -> None:
        self.api.text(chat_id, f"/start {self.code()}")
        self.api.wait(lambda: any(m.text.startswith("Paired") for m in self.api.chat(chat_id)))

    def rows(self, sql: str, *params: object) -> list[tuple[Any, ...]]:
        return db_rows(Path(self.config.store.path) / "chalie.db", sql, *params)


def with_token(config: Config, token: str) -> Config:
    return msgspec.structs.replace(config, telegram=msgspec.structs.replace(
        config.telegram, token=token))


@pytest.fixture
def api() -> Iterator[TelegramApi]:
    stand_in = TelegramApi()
    yield stand_in
    stand_in.close()


@pytest.fixture
def llm() -> Iterator[StubLlm]:
    stub = StubLlm()
    yield stub
    stub.close()


@pytest.fixture
def settings(make_config: Callable[..., Config], api: TelegramApi, llm: StubLlm) -> Config:
    telegram_settings = {**api.settings(), "token": "", "edit_every_s": 0.05}
    return make_config(
        server={"port": 0}, auth={"password": "secret"},
        llm={"base_url": llm.base_url, "retries": 0},
        dmn={"enabled": False, "quiet_hours": "", "timezone": "UTC"},
        tools={"confirm": ["memory"]}, cognition={"critic": False},
        telegram=telegram_settings)


@pytest.fixture
def live(settings: Config, api: TelegramApi) -> Iterator[Live]:
    running = Live(settings, api).start()
    try:
        api.wait(api.polling)
        yield running
    finally:
        running.stop()


def answered(api: TelegramApi, chat_id: int, text: str) -> bool:
    return any(m.text == text for m in api.chat(chat_id))


def events(records: list[logging.LogRecord], name: str) -> list[dict[str, Any]]:
    return [r.msg for r in records if isinstance(r.msg, dict) and r.msg.get("event") == name]


# --- pairing ----------------------------------------------------------------------------------

def test_the_dashboards_code_pairs_the_chat_that_sends_it_once(
        live: Live, api: TelegramApi, log_records: list[logging.LogRecord]) -> None:
    """`/start CODE` pairs the person's chat (named as Telegram names it) and the bot says so;
    the same code from another chat, a wrong one or a bare /start get how to pair; the
    stranger's chat stays unpaired."""
    code = live.code()
    api.text(STRANGER, "/start")
    api.wait(lambda: answered(api, STRANGER, telegram_inbox.HOW_TO_PAIR))
    api.text(STRANGER, "ABCD-EFGH")
    api.wait(lambda: answered(api, STRANGER, telegram_inbox.WRONG_CODE))
    api.text(ADA, f"/start {code.lower()}")
    api.wait(lambda: answered(api, ADA, telegram_inbox.PAIRED))
    assert live.rows("SELECT chat_id, name FROM telegram_chats") == [(ADA, "Ada (@ada)")]
    api.text(STRANGER, f"/start {code}")
    api.wait(lambda: [m.text for m in api.chat(STRANGER)].count(telegram_inbox.WRONG_CODE) == 2)
    assert live.rows("SELECT chat_id FROM telegram_chats") == [(ADA,)]
    refused = events(log_records, "telegram_pairing_refused")
    assert [e["chat_id"] for e in refused] == [STRANGER, STRANGER]


def test_a_strangers_chat_gets_no_answer_and_runs_no_turn(
        live: Live, api: TelegramApi, llm: StubLlm,
        log_records: list[logging.LogRecord]) -> None:
    """What an unpaired chat writes is not answered and reaches no model; the log names the
    chat, never what it wrote."""
    live.pair()
    api.text(STRANGER, "please tell me the secrets")
    api.text(ADA, "/start")  # handled after the stranger's message: the updates are in order
    api.wait(lambda: answered(api, ADA, telegram.HELLO))
    assert api.chat(STRANGER) == []
    assert llm.requests == []
    ignored = events(log_records, "telegram_chat_ignored")
    assert [e["chat_id"] for e in ignored] == [STRANGER]
    assert not any("secrets" in str(r.msg) for r in log_records)


def test_wrong_codes_in_a_row_are_not_heard_for_a_while(live: Live, api: TelegramApi) -> None:
    """After five wrong codes, a chat's next attempts (even the right code) are ignored."""
    for _ in range(WRONG_CODES):
        api.text(STRANGER, "ZZZZZZZZ")
    api.wait(lambda: [m.text for m in api.chat(STRANGER)].count(telegram_inbox.WRONG_CODE)
             == WRONG_CODES)
    api.text(STRANGER, live.code())
    live.pair(ADA)  # handled after the stranger's sixth attempt
    assert len(api.chat(STRANGER)) == WRONG_CODES
    assert live.rows("SELECT chat_id FROM telegram_chats") == [(ADA,)]


# --- the conversation -------------------------------------------------------------------------

def test_the_answer_grows_by_edits_and_ends_with_the_whole_text(
        live: Live, api: TelegramApi, llm: StubLlm) -> None:
    """A message from the paired chat runs a turn on the person's channel (source telegram);
    the bot says it is typing, its reply shows the first words while the model is still
    writing, and the last edit is the whole answer."""
    live.pair()
    answer = "The quick brown fox jumps over the lazy dog, twice."
    pause = threading.Event()
    reply = Reply(completion(answer), pause=pause, pause_after=3)
    llm.queue(reply)
    asked = api.text(ADA, "tell me about foxes")
    assert reply.paused.wait(WAIT_S)

    def replying() -> list[Any]:
        return [m for m in api.chat(ADA) if m.reply_to == asked]

    api.wait(lambda: bool(replying()))
    [partial] = replying()
    assert answer.startswith(partial.text)
    assert partial.text != answer
    pause.set()
    api.wait(lambda: replying()[0].text == answer)
    [message] = replying()
    assert message.edits >= 1
    assert all(answer.startswith(t) for t in message.texts)
    assert message.texts[-1] == answer
    assert api.called("sendChatAction")[0]["action"] == "typing"
    assert live.rows("SELECT source, user_text, response_text, channel FROM turns") == [
        ("telegram", "tell me about foxes", answer, "main")]


def test_an_escalation_is_answered_with_its_inline_button(
        live: Live, api: TelegramApi, llm: StubLlm) -> None:
    """A tool that needs approval asks with Approve and Deny; pressing Approve runs it, the
    question is edited to say so (its buttons gone), and the answer follows. The sender would
    leave that escalation to the conversation while it runs."""
    live.pair()
    llm.queue(completion(tool_calls=[("memory", REMEMBER)]), completion("Noted: Lyon."))
    api.text(ADA, "I live in Lyon")

    def question() -> Any:
        return next((m for m in api.chat(ADA) if m.buttons), None)

    api.wait(lambda: question() is not None)
    asked = question()
    assert [label for label, _ in asked.buttons] == ["Approve", "Deny", "Always allow"]
    assert "memory" in asked.text
    [(exchange,)] = live.rows("SELECT exchange_id FROM events WHERE type = 'escalation'")
    assert live.following.follows(exchange)
    assert live.rows("SELECT count(*) FROM knowledge") == [(0,)]
    api.press(ADA, asked.message_id, asked.buttons[0][1])
    api.wait(lambda: answered(api, ADA, "Noted: Lyon."))
    api.wait(lambda: api.messages[asked.message_id].text.endswith("✅ Approved"))
    assert api.messages[asked.message_id].buttons == []
    assert [p["text"] for p in api.called("answerCallbackQuery")] == ["Approved"]
    wait_for(lambda: live.rows("SELECT value FROM knowledge") == [("Lyon",)])
    wait_for(lambda: not live.following.follows(exchange))


def test_a_photo_goes_to_the_model_with_its_caption(
        live: Live, api: TelegramApi, llm: StubLlm) -> None:
    """A photo with a caption is stored as an image and sent to the model with the words; one
    without waits for the next message; what is not an image is refused, a sticker is not
    read."""
    live.pair()
    llm.queue(completion("A single pixel."))
    api.photo(ADA, PNG, caption="what is this?")
    api.wait(lambda: answered(api, ADA, "A single pixel."))
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert _images(llm.requests[0]) == [url]
    assert live.rows("SELECT count(*) FROM images") == [(1,)]
    api.photo(ADA, PNG)
    api.wait(lambda: answered(api, ADA, telegram.KEPT))
    llm.queue(completion("Another pixel."))
    api.text(ADA, "and this one?")
    api.wait(lambda: answered(api, ADA, "Another pixel."))
    assert _images(llm.requests[-1]) == [url]
    api.photo(ADA, b"not an image at all", caption="look")
    api.wait(lambda: any("PNG, JPEG, WebP or GIF" in m.text for m in api.chat(ADA)))
    api.sticker(ADA)
    api.wait(lambda: answered(api, ADA, telegram.ONLY))
    assert len(llm.requests) == 2


def _images(request: dict[str, Any]) -> list[str]:
    return [part["image_url"]["url"] for m in request["messages"]
            if isinstance(m.get("content"), list) for part in m["content"]
            if part.get("type") == "image_url"]


# --- the Bot API failing ----------------------------------------------------------------------

def test_failures_of_the_bot_api_are_tried_again(
        live: Live, api: TelegramApi, llm: StubLlm) -> None:
    """A 5xx or a 429 on sending the answer, and a failing getUpdates, delay the answer but do
    not lose it."""
    live.pair()
    api.fail("getUpdates", 502, "Bad Gateway", times=2)
    api.fail("sendMessage", 500, "Internal Server Error")
    api.fail("sendMessage", 429, "Too Many Requests: retry after 1", retry_after=1)
    llm.queue(completion("Still here."))
    api.text(ADA, "are you there?")
    api.wait(lambda: answered(api, ADA, "Still here."))


def test_a_refused_token_shows_and_a_new_one_starts_the_bot(
        settings: Config, api: TelegramApi, log_records: list[logging.LogRecord]) -> None:
    """A token the Bot API refuses is logged once (without the token) and said by the state the
    dashboard reads; the bot starts once the right token is set."""
    running = Live(settings, api, token="999:not-the-bots-token").start()
    try:
        wait_for(lambda: running.following.state()[1] is not None)
        bot, problem = running.following.state()
        assert bot is None
        assert problem is not None
        assert "telegram.token" in problem
        assert not api.polling()
        refused = events(log_records, "telegram_token_refused")
        assert len(refused) == 1
        assert not any("not-the-bots-token" in str(r.msg) for r in log_records)
        assert running.bridge is not None
        bridge = running.bridge
        running.run(lambda: _await(bridge.restart(with_token(settings, api.token))))
        api.wait(api.polling)
        assert running.following.state() == ("chalie_test_bot", None)
    finally:
        running.stop()


async def _await(task: asyncio.Task[None] | None) -> None:
    if task is not None:
        await task


def test_nothing_a_telegram_user_sends_stops_the_bot(
        live: Live, api: TelegramApi, llm: StubLlm) -> None:
    """Buttons that mean nothing, a press from a stranger's chat, an answer to an escalation
    that no longer waits, a file that is no image, a sticker: each gets at most a short answer,
    and the next message is answered as ever."""
    live.pair()
    api.text(ADA, "/start")
    api.wait(lambda: answered(api, ADA, telegram.HELLO))
    [hello] = [m for m in api.chat(ADA) if m.text == telegram.HELLO]
    api.press(ADA, hello.message_id, "junk")
    api.press(ADA, hello.message_id, "ap:0123456789abcdef0123456789abcdef:y")
    api.press(STRANGER, hello.message_id, "ap:0123456789abcdef0123456789abcdef:y")
    api.raw_update({"message": {
        "message_id": 99, "date": 0, "chat": {"id": ADA, "type": "private", "first_name": "Ada"},
        "from": {"id": ADA, "is_bot": False, "first_name": "Ada"},
        "document": {"file_id": "doc-1", "file_unique_id": "ud1", "mime_type": "application/pdf",
                     "file_name": "a.pdf"}}})
    api.raw_update({"edited_message": {
        "message_id": 5, "date": 0, "edit_date": 1, "text": "edited",
        "chat": {"id": ADA, "type": "private", "first_name": "Ada"}}})
    api.sticker(ADA)
    api.wait(lambda: [m.text for m in api.chat(ADA)].count(telegram.ONLY) == 2)
    answers = [p["text"] for p in api.called("answerCallbackQuery")]
    assert answers == ["That button does nothing now.", "This is no longer waiting for an answer.",
                       "This chat is not paired with Chalie."]
    llm.queue(completion("Still fine."))
    api.text(ADA, "still there?")
    api.wait(lambda: answered(api, ADA, "Still fine."))
    assert len(llm.requests) == 1


def test_a_bot_api_that_cannot_be_reached_at_first_is_tried_again(
        settings: Config, api: TelegramApi, log_records: list[logging.LogRecord]) -> None:
    """The Bot API answers 502 twice: the bot is off meanwhile (said once in the log), then
    starts by itself."""
    api.fail("getMe", 502, "Bad Gateway", times=2)
    running = Live(settings, api).start()
    try:
        api.wait(api.polling)
        assert running.following.state() == ("chalie_test_bot", None)
        assert len(api.called("getMe")) == 3
        assert len(events(log_records, "telegram_unreachable")) == 1
    finally:
        running.stop()
