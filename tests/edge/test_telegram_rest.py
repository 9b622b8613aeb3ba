"""/api/telegram on the real edge over a real socket, with a real StoreWriter: what the dashboard's
Telegram section reads (the token set or not, the bot, what keeps it off, the paired chats),
the one-time pairing code it makes (only its hash kept, good for pairing_code_ttl_s), and
unpairing a chat."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec
import pykka
import pytest
from tornado.ioloop import IOLoop

from chalie.actors.store_writer import StoreWriter
from chalie.actors.supervisor import Directory
from chalie.clock import ManualClock
from chalie.config import Config
from chalie.delivery.away import Away
from chalie.delivery.telegram_sender import Following, TelegramSender
from chalie.edge.auth import COOKIE, Authenticator, LoginThrottle
from chalie.edge.context import EdgeContext
from chalie.edge.hub import SocketHub
from chalie.edge.telegram_pairing import ALPHABET, LENGTH, code_in
from chalie.metrics import Metrics
from chalie.store import db, delivery_rows
from chalie.store.delivery_rows import TelegramChat
from tests.edge.test_rest_memory import EdgeThread

WAIT_S = 10.0
PASSWORD = "secret"
T0 = 1_700_000_000.0
TOKEN = "123456:a-token-for-these-tests"


@dataclass
class Edge:
    client: httpx.Client  # logged in
    url: str
    ctx: EdgeContext
    following: Following
    clock: ManualClock
    readers: db.Readers

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with self.readers.transient() as conn:
            return list(conn.execute(sql, params))


@pytest.fixture
def edge(make_config: Callable[..., Config]) -> Iterator[Edge]:
    config = make_config(auth={"password": PASSWORD}, telegram={"token": TOKEN})
    store = config.store
    clock = ManualClock(start=100.0, wall=T0)
    db.open_writer(store.path, busy_timeout_ms=store.busy_timeout_ms,
                   synchronous=store.synchronous).close()
    readers = db.Readers(db.db_path(store.path), busy_timeout_ms=store.busy_timeout_ms)
    directory, metrics, following = Directory(), Metrics(), Following()

    def build(loop: IOLoop) -> EdgeContext:
        return EdgeContext(
            config=config, clock=clock,
            auth=Authenticator(configured=PASSWORD, read=readers.get, clock=clock),
            throttle=LoginThrottle(clock, max_failures=5, window_s=60.0),
            hub=SocketHub(loop), metrics=metrics, directory=directory, read=readers.get,
            healthy=lambda: True,
            away=Away([TelegramSender(readers.get, lambda: config, following)]),
        )

    thread = EdgeThread(build)
    port, ctx = thread.start()
    writer = StoreWriter.start(None, config=store, outbox=ctx.hub, clock=clock,
                               directory=directory, metrics=metrics,
                               snapshots_kept=config.memory.snapshots_kept)
    directory.set("store_writer", writer)
    url = f"http://127.0.0.1:{port}"
    login = httpx.post(f"{url}/auth/login", json={"password": PASSWORD})
    assert login.status_code == 200, login.text
    client = httpx.Client(base_url=url, cookies={COOKIE: login.cookies[COOKIE]}, timeout=WAIT_S)
    try:
        yield Edge(client, url, ctx, following, clock, readers)
    finally:
        client.close()
        thread.stop()
        try:
            writer.stop(block=True, timeout=WAIT_S)
        except pykka.ActorDeadError:
            pass


def pair(edge: Edge, chat_id: int, name: str, at: float) -> None:
    conn = db.open_writer(edge.ctx.config.store.path, busy_timeout_ms=5000,
                          synchronous="NORMAL")
    try:
        with db.immediate(conn):
            delivery_rows.pair_chat(conn, TelegramChat(chat_id, name, at))
    finally:
        conn.close()


ENDPOINTS = [("GET", "/api/telegram"), ("POST", "/api/telegram/pairing-code"),
             ("DELETE", "/api/telegram/chats/42")]


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_every_telegram_endpoint_needs_the_login_cookie(
        edge: Edge, method: str, path: str) -> None:
    for cookies in ({}, {COOKIE: "not-a-session"}):
        with httpx.Client(base_url=edge.url, cookies=cookies) as anonymous:
            r = anonymous.request(method, path)
        assert r.status_code == 401
    assert edge.rows("SELECT count(*) FROM telegram_codes") == [(0,)]


def test_the_state_shows_the_bot_what_keeps_it_off_and_the_paired_chats(edge: Edge) -> None:
    """The bot's name once the Bot API took the token, the problem while it refuses it, and
    the paired chats oldest first."""
    assert edge.client.get("/api/telegram").json() == {"configured": True, "chats": []}
    edge.following.connected("chalie_bot")
    pair(edge, 42, "Ada (@ada)", T0 + 1)
    pair(edge, -1001, "Family", T0 + 2)
    assert edge.client.get("/api/telegram").json() == {
        "configured": True, "bot": "chalie_bot", "chats": [
            {"chat_id": 42, "name": "Ada (@ada)", "paired_at": T0 + 1},
            {"chat_id": -1001, "name": "Family", "paired_at": T0 + 2}]}
    edge.following.failed("the Bot API refused the bot's token: check telegram.token")
    body = edge.client.get("/api/telegram").json()
    assert body["error"] == "the Bot API refused the bot's token: check telegram.token"
    assert "bot" not in body


def test_without_a_token_there_is_no_bot_and_no_code(edge: Edge) -> None:
    """configured false; making a code says to set telegram.token first (409)."""
    edge.following.connected("chalie_bot")
    edge.ctx.config = msgspec.structs.replace(edge.ctx.config, telegram=msgspec.structs.replace(
        edge.ctx.config.telegram, token=""))
    assert edge.client.get("/api/telegram").json() == {"configured": False, "chats": []}
    r = edge.client.post("/api/telegram/pairing-code")
    assert r.status_code == 409
    assert "telegram.token" in r.json()["error"]


def test_a_pairing_code_is_short_readable_and_only_its_hash_is_kept(edge: Edge) -> None:
    """201 with an 8-character code of unambiguous letters and digits, when it expires, the
    bot and the t.me link that sends it; the store keeps its SHA-256, not the code."""
    edge.following.connected("chalie_bot")
    r = edge.client.post("/api/telegram/pairing-code")
    assert r.status_code == 201
    body = r.json()
    code = body["code"]
    assert len(code) == LENGTH
    assert set(code) <= set(ALPHABET)
    assert body["expires_at"] == T0 + edge.ctx.config.telegram.pairing_code_ttl_s
    assert body["bot"] == "chalie_bot"
    assert body["link"] == f"https://t.me/chalie_bot?start={code}"
    stored = edge.rows("SELECT code_hash, expires_at, used_at FROM telegram_codes")
    assert stored == [(hashlib.sha256(code.encode()).hexdigest(), body["expires_at"], None)]
    assert code_in(f"/start {code}") == code
    assert code_in(f"{code[:4].lower()}-{code[4:]}") == code
    assert code_in(f"/start@chalie_bot  {code}") == code
    other = edge.client.post("/api/telegram/pairing-code").json()["code"]
    assert other != code


def test_unpairing_a_chat_removes_it_and_an_unknown_one_is_404(edge: Edge) -> None:
    pair(edge, 42, "Ada", T0)
    r = edge.client.delete("/api/telegram/chats/42")
    assert (r.status_code, r.json()) == (200, {"removed": 42})
    assert edge.client.get("/api/telegram").json()["chats"] == []
    r = edge.client.delete("/api/telegram/chats/42")
    assert r.status_code == 404
    r = edge.client.delete("/api/telegram/chats/ada")
    assert r.status_code == 400
    assert "chat_id" in r.json()["error"]


def test_the_operations_are_in_the_openapi_document(edge: Edge) -> None:
    paths = edge.client.get("/api/openapi.json").json()["paths"]
    assert set(paths["/api/telegram"]) == {"get"}
    assert set(paths["/api/telegram/pairing-code"]) == {"post"}
    assert set(paths["/api/telegram/chats/{chat_id}"]) == {"delete"}


def test_a_code_in_a_message_is_read_case_and_spacing_aside() -> None:
    for text in ("hello", "/start", "/start hello", "ABCDEFG", "ABCDEFGHI", "ABCD EFG0"):
        assert code_in(text) is None, text
    assert code_in(" abcd efgh ") == "ABCDEFGH"
