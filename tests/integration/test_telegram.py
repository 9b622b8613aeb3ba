"""Telegram from outside: the real server (a subprocess, the stub LLM) with its bot pointed at a
stand-in for the Telegram Bot API on 127.0.0.1 (the library's base_url). The person pairs
their chat with the dashboard's code and holds a conversation there that is the one on /ws: an
answer that grows by edits, an approval answered with an inline button, an image in; a
scheduled prompt's result reaches the chat while no page is open; another chat is not heard.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.harness import (
    WAIT_S,
    Client,
    Reply,
    ServerProcess,
    StubLlm,
    completion,
    db_rows,
    wait_for,
)
from tests.telegram_api import TelegramApi

ADA, STRANGER = 4242, 6666
REMEMBER = json.dumps({"action": "remember", "key": "city", "value": "Lyon"})
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=")
PAIRED_PREFIX = "Paired"


@pytest.fixture
def api() -> Iterator[TelegramApi]:
    stand_in = TelegramApi()
    yield stand_in
    stand_in.close()


@pytest.fixture
def bot_server(tmp_path: Path, llm: StubLlm, api: TelegramApi) -> Iterator[ServerProcess]:
    server = ServerProcess(
        tmp_path, llm, telegram={**api.settings(), "edit_every_s": 0.05},
        tools={"confirm": ["memory"]}, cognition={"critic": False},
        notify={"kinds": ["notifications", "escalations", "goal_results",
                          "scheduled_results"]}).start()
    try:
        api.wait(api.polling)
        yield server
    finally:
        server.kill()
    assert not server.errors(), f"server logged errors: {server.errors()}"
    lines = "".join(server.lines)
    assert api.token not in lines
    assert api.token.partition(":")[2] not in lines


def rest(server: ServerProcess, cookie: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, cookies={"chalie_session": cookie}, timeout=WAIT_S)


def pair(server: ServerProcess, api: TelegramApi, http: httpx.Client) -> None:
    made = http.post("/api/telegram/pairing-code")
    assert made.status_code == 201, made.text
    assert made.json()["bot"] == "chalie_test_bot"
    api.text(ADA, f"/start {made.json()['code']}")
    api.wait(lambda: any(m.text.startswith(PAIRED_PREFIX) for m in api.chat(ADA)))


def images(request: dict[str, Any]) -> list[str]:
    """The images a chat-completions request sends the model (data URLs)."""
    return [part["image_url"]["url"] for m in request["messages"]
            if isinstance(m.get("content"), list) for part in m["content"]
            if isinstance(part, dict) and part.get("type") == "image_url"]


def frames_until(client: Client, kind: str) -> list[dict[str, Any]]:
    return client.recv_until(lambda f: f["type"] == kind)


def test_a_paired_chat_holds_the_same_conversation_as_the_page(
        bot_server: ServerProcess, api: TelegramApi, llm: StubLlm) -> None:
    """Paired with a code from the dashboard; a message there runs a turn on the person's
    channel that /ws sees (source telegram); the answer grows by edits and ends whole; an
    approval's Approve button runs the tool; a photo reaches the model; a stranger's chat
    gets nothing."""
    cookie = bot_server.login()
    with rest(bot_server, cookie) as http:
        state = http.get("/api/telegram").json()
        assert state == {"configured": True, "bot": "chalie_test_bot", "chats": []}
        api.text(STRANGER, "hello, who are you?")
        pair(bot_server, api, http)
        [chat] = http.get("/api/telegram").json()["chats"]
        assert (chat["chat_id"], chat["name"]) == (ADA, "Ada (@ada)")
        page = bot_server.connect(cookie)
        growing_answer(api, llm, page)
        turns = http.get("/api/turns").json()["items"]
        assert [(t["source"], t["channel"]) for t in turns] == [("telegram", "main")]
        approval_by_button(bot_server, api, llm, page)
        image_in(api, llm)
    assert api.chat(STRANGER) == []
    ignored = [e for e in bot_server.log_events() if e.get("event") == "telegram_chat_ignored"]
    assert [e["chat_id"] for e in ignored] == [STRANGER]
    assert "who are you" not in "".join(bot_server.lines)


def growing_answer(api: TelegramApi, llm: StubLlm, page: Client) -> None:
    """The turn shows on the page as Telegram's; its answer grows there by edits and ends with
    the whole text."""
    answer = "The quick brown fox jumps over the lazy dog, twice over."
    pause = threading.Event()
    streamed = Reply(completion(answer), pause=pause, pause_after=3)
    llm.queue(streamed)
    asked = api.text(ADA, "tell me about foxes")
    opening = frames_until(page, "status")[-1]
    assert (opening["text"], opening["client_id"]) == ("tell me about foxes",
                                                      f"tg-{ADA}-{asked}")
    assert opening.get("source") == "telegram"
    assert streamed.paused.wait(WAIT_S)
    api.wait(lambda: any(m.reply_to == asked for m in api.chat(ADA)))
    [reply] = [m for m in api.chat(ADA) if m.reply_to == asked]
    assert answer.startswith(reply.text)
    assert reply.text != answer
    pause.set()
    api.wait(lambda: api.messages[reply.message_id].text == answer)
    assert api.messages[reply.message_id].texts[-1] == answer
    assert frames_until(page, "done")[-2]["blocks"][0]["text"] == answer


def approval_by_button(server: ServerProcess, api: TelegramApi, llm: StubLlm,
                       page: Client) -> None:
    """The tool waits for approval; the inline Approve button answers it as the person, the
    question says so without its buttons, the tool runs and the answer follows."""
    llm.queue(completion(tool_calls=[("memory", REMEMBER)]), completion("Noted: Lyon."))
    api.text(ADA, "I live in Lyon")
    escalation = frames_until(page, "escalation")[-1]
    api.wait(lambda: any(m.buttons for m in api.chat(ADA)))
    [question] = [m for m in api.chat(ADA) if m.buttons]
    assert ("Approve", f"ap:{escalation['approval_id']}:y") in question.buttons
    api.press(ADA, question.message_id, f"ap:{escalation['approval_id']}:y")
    decision = frames_until(page, "decision")[-1]
    assert (decision["outcome"], decision["by"]) == ("approved", "page")
    api.wait(lambda: api.messages[question.message_id].text.endswith("✅ Approved"))
    assert api.messages[question.message_id].buttons == []
    api.wait(lambda: any(m.text == "Noted: Lyon." for m in api.chat(ADA)))
    wait_for(lambda: db_rows(server.db_path, "SELECT value FROM knowledge") == [("Lyon",)])


def image_in(api: TelegramApi, llm: StubLlm) -> None:
    """A photo with a caption reaches the model as an image beside the words."""
    llm.queue(completion("A single pixel."))
    api.photo(ADA, PNG, caption="what is this?")
    api.wait(lambda: any(m.text == "A single pixel." for m in api.chat(ADA)))
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert [images(r) for r in llm.requests if images(r)] == [[url]]


def test_a_scheduled_prompts_result_reaches_the_paired_chat(
        bot_server: ServerProcess, api: TelegramApi, llm: StubLlm) -> None:
    """No page is open: the scheduled prompt's answer is delivered to the paired chat as a
    message of its own."""
    cookie = bot_server.login()
    with rest(bot_server, cookie) as http:
        pair(bot_server, api, http)
        llm.queue(completion("Time to water the plants."))
        at = (datetime.now(UTC) + timedelta(seconds=1)).isoformat()
        made = http.post("/api/schedules", json={"prompt": "Remind me to water the plants",
                                                 "at": at})
        assert made.status_code == 201, made.text
    api.wait(lambda: any("Time to water the plants." in m.text for m in api.chat(ADA)))
    [sent] = [m for m in api.chat(ADA) if "Time to water the plants." in m.text]
    assert sent.text.startswith("Chalie · reminder")
    assert sent.buttons == []
    assert sent.reply_to is None
    wait_for(lambda: db_rows(
        bot_server.db_path, "SELECT service, target, status, ref FROM deliveries WHERE "
        "kind = 'scheduled_results' AND service = 'telegram'")
        == [("telegram", f"telegram:{ADA}", "sent", str(sent.message_id))])


def test_a_token_saved_in_the_settings_starts_the_bot_without_a_restart(
    tmp_path: Path, llm: StubLlm, api: TelegramApi,
) -> None:
    """A server that started without a bot: the token saved from the page (PATCH
    /api/settings) starts it at once, and GET /api/telegram names it; the token is never sent
    back or logged."""
    addresses = {k: v for k, v in api.settings().items() if k != "token"}
    server = ServerProcess(tmp_path, llm, telegram=addresses).start()
    try:
        with rest(server, server.login()) as http:
            assert http.get("/api/telegram").json()["configured"] is False
            saved = http.patch("/api/settings", json={"telegram.token": api.token})
            assert saved.status_code == 200, saved.text
            assert "telegram.token" in saved.json()["applied"]
            api.wait(api.polling)
            wait_for(lambda: http.get("/api/telegram").json().get("bot") == "chalie_test_bot")
            assert api.token not in http.get("/api/settings").text
    finally:
        server.kill()
    assert not server.errors()
    assert api.token not in "".join(server.lines)
