"""Broadcast streams: Chalie connects out to a real WebSocket stream on 127.0.0.1 and its signal
frames reach world state, checked, type-scoped and rate-limited like REST signals; a stream that
goes away is reconnected; /api/subscriptions manages them through a real StoreWriter."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import httpx
import msgspec
import pytest
import tornado.httpserver
import tornado.netutil
import tornado.web
import tornado.websocket
from tornado.ioloop import IOLoop

from chalie.actors.store_writer import StoreWriter
from chalie.actors.store_writer_messages import CreateAuthSession
from chalie.actors.supervisor import Directory
from chalie.actors.world_state import SignalsIn
from chalie.clock import ManualClock
from chalie.config import Config
from chalie.edge.auth import COOKIE, Authenticator, LoginThrottle, token_hash
from chalie.edge.context import EdgeContext
from chalie.edge.hub import SocketHub
from chalie.edge.rest_subscriptions import SubscriptionHandler, SubscriptionsHandler
from chalie.edge.subscriptions import Subscriptions, backoff_delay, check
from chalie.metrics import Metrics
from chalie.store import db, interface_rows
from chalie.store.interface_rows import SubscriptionRow
from chalie.values.signals import Signal
from chalie.world.signals import SignalGate
from tests.actors.conftest import RecorderActor, Recording

WAIT_S = 10.0
RATE = 5  # signals a minute per sender, in these tests


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 3 * WAIT_S))


async def until(ready: Callable[[], bool], what: str, state: Callable[[], Any] = lambda: None,
                ) -> None:
    """Return once `ready()` holds, checking on every pass of the loop; fail after WAIT_S."""
    deadline = time.monotonic() + WAIT_S
    while not ready():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up after {WAIT_S}s waiting for {what}; have {state()!r}")
        await asyncio.sleep(0.002)


def signal(kind: str = "news", content: str = "hello", **fields: Any) -> str:
    return json.dumps({"type": "signal", "signal_type": kind, "content": content, **fields})


class FeedSocket(tornado.websocket.WebSocketHandler):
    def initialize(self, feed: Feed) -> None:
        self.feed = feed

    def open(self, *args: str, **kwargs: str) -> None:
        self.feed.clients.add(self)
        self.feed.connects += 1

    def on_close(self) -> None:
        self.feed.clients.discard(self)


class Feed:
    """A broadcast stream on 127.0.0.1: every frame sent goes to every connected client."""

    def __init__(self) -> None:
        self.clients: set[FeedSocket] = set()
        self.connects = 0
        self.port = 0
        self._server: tornado.httpserver.HTTPServer | None = None

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/stream?token=secret"

    def start(self) -> None:
        """Listen (again on the same port, after a stop)."""
        sockets = tornado.netutil.bind_sockets(self.port, "127.0.0.1", family=socket.AF_INET)
        self.port = sockets[0].getsockname()[1]
        app = tornado.web.Application([(r"/stream", FeedSocket, {"feed": self})])
        self._server = tornado.httpserver.HTTPServer(app)
        self._server.add_sockets(sockets)

    async def stop(self) -> None:
        assert self._server is not None
        self._server.stop()
        for client in list(self.clients):
            client.close(1001, "restarting")
        await until(lambda: not self.clients, "the feed's clients to go")
        await self._server.close_all_connections()
        self._server = None

    def send(self, *frames: str) -> None:
        for client in self.clients:
            for frame in frames:
                client.write_message(frame)


class World:
    """Stands in for WorldState: the signals told to "world", in order."""

    def __init__(self, directory: Directory) -> None:
        self.recording = Recording()
        directory.set("world", RecorderActor.start(self.recording))

    @property
    def signals(self) -> list[Signal]:
        return [s for m in self.recording.items if isinstance(m, SignalsIn) for s in m.signals]


class Rig:
    def __init__(self, make_config: Callable[..., Config], **subscriptions: float) -> None:
        config = make_config(subscriptions={"reconnect_initial_s": 0.01, "reconnect_max_s": 0.05,
                                            "connect_timeout_s": 5.0, **subscriptions})
        self.config = config
        self.clock = ManualClock()
        self.gate = SignalGate(self.clock, rate_per_min=RATE)
        self.directory, self.metrics = Directory(), Metrics()
        self.world = World(self.directory)
        self.subs = Subscriptions(gate=self.gate, directory=self.directory, metrics=self.metrics,
                                  config=config.subscriptions, clock=self.clock)

    def row(self, url: str, signals: tuple[str, ...] = ("*",), name: str = "news",
            sid: str = "sub-1") -> SubscriptionRow:
        return SubscriptionRow(id=sid, name=name, url=url, signals=signals,
                               created_at=self.clock.time())

    def state(self, sid: str = "sub-1") -> dict[str, Any]:
        found = [msgspec.to_builtins(s) for s in self.subs.states() if s.id == sid]
        return found[0] if found else {}

    def metric(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0

    def signals_counted(self, result: str) -> float:
        return self.metric("chalie_signals_total", result=result, via="stream")

    async def connected(self, feed: Feed, sid: str = "sub-1", connects: int = 1) -> None:
        await until(lambda: self.state(sid).get("connected") is True
                    and feed.connects >= connects and len(feed.clients) > 0,
                    "the subscription to connect", lambda: self.state(sid))


@asynccontextmanager
async def rig(make_config: Callable[..., Config], **subscriptions: float
              ) -> AsyncIterator[tuple[Rig, Feed]]:
    """A started feed and a Subscriptions object, both stopped at the end."""
    r, feed = Rig(make_config, **subscriptions), Feed()
    feed.start()
    try:
        yield r, feed
    finally:
        await r.subs.stop()
        if feed._server is not None:
            await feed.stop()


def test_signal_frames_from_a_stream_reach_world_state(make_config: Any) -> None:
    """Signal frames become world-state signals from "subscription:<name>"; a frame of another
    type is ignored; the state shows the connection and the count."""

    async def scenario() -> None:
        async with rig(make_config) as (r, feed):
            r.subs.start([r.row(feed.url)])
            await r.connected(feed)
            assert r.metric("chalie_subscriptions_connected") == 1
            feed.send(json.dumps({"type": "hello", "server": "feed"}),
                      signal("price_alert", "AAPL up 10%", topic="stocks"),
                      signal("weather", "Rain tonight", source="met", activation_energy=0.9))
            await until(lambda: len(r.world.signals) == 2, "two signals", lambda: r.world.signals)
            first, second = r.world.signals
            assert (first.sender, first.signal_type, first.content, first.source, first.topic) \
                == ("subscription:news", "price_alert", "AAPL up 10%", "subscription:news",
                    "stocks")
            assert (second.signal_type, second.source, second.activation_energy) == \
                ("weather", "met", 0.9)
            assert first.received_at == r.clock.time()
            assert r.state() == {
                "id": "sub-1", "name": "news", "url": feed.url, "signals": ["*"],
                "connected": True, "last_error": None, "accepted": 2, "rejected": 0,
                "connected_at": r.clock.time(), "created_at": r.clock.time(),
            }
            assert r.signals_counted("accepted") == 2

    run(scenario)


def test_a_signal_type_the_subscription_does_not_accept_is_rejected(make_config: Any) -> None:
    """Only the declared types get through; the other is counted rejected and named."""

    async def scenario() -> None:
        async with rig(make_config) as (r, feed):
            r.subs.start([r.row(feed.url, signals=("weather",))])
            await r.connected(feed)
            feed.send(signal("price_alert"), signal("weather", "Sun"))
            await until(lambda: r.state()["accepted"] == 1 and r.state()["rejected"] == 1,
                        "one accepted, one rejected", r.state)
            await until(lambda: [s.signal_type for s in r.world.signals] == ["weather"],
                        "the weather signal in world state", lambda: r.world.signals)
            assert r.state()["last_error"] == ("signal_type 'price_alert' is not one this "
                                               "subscription accepts (weather)")
            assert r.signals_counted("forbidden") == 1

    run(scenario)


def test_the_rate_limit_rejects_signals_past_it_until_time_passes(make_config: Any) -> None:
    """RATE signals a minute get through, the rest are rejected; a minute later more do."""

    async def scenario() -> None:
        async with rig(make_config) as (r, feed):
            r.subs.start([r.row(feed.url)])
            await r.connected(feed)
            feed.send(*[signal(content=f"n{i}") for i in range(RATE + 2)])
            await until(lambda: r.state()["rejected"] == 2, "two rejected", r.state)
            assert r.state()["accepted"] == RATE
            assert r.signals_counted("rate_limited") == 2
            assert "rate limit exceeded" in r.state()["last_error"]
            r.clock.advance(60.0)
            feed.send(signal(content="later"))
            await until(lambda: len(r.world.signals) == RATE + 1, "one more",
                        lambda: r.world.signals)
            assert r.state()["accepted"] == RATE + 1
            assert [s.content for s in r.world.signals] == [
                *(f"n{i}" for i in range(RATE)), "later"]

    run(scenario)


@pytest.mark.parametrize(("frame", "error"), [
    ("not json", "frame is not valid JSON: "),
    ("[1, 2]", "frame is a JSON list, not an object"),
    ('"text"', "frame is a JSON str, not an object"),
    (json.dumps({"type": "signal", "content": "x"}), "signal_type: required"),
    (signal(extra=1), "extra: unknown field; a signal has "),
    (signal(activation_energy=2), "activation_energy: must be from 0 to 1, got 2.0"),
])
def test_an_invalid_frame_is_counted_and_explained(make_config: Any, frame: str,
                                                   error: str) -> None:
    """A frame that is not a JSON object, or not a valid signal, is counted rejected with the
    reason in last_error; the stream stays connected and a good frame after it gets through."""

    async def scenario() -> None:
        async with rig(make_config) as (r, feed):
            r.subs.start([r.row(feed.url)])
            await r.connected(feed)
            feed.send(frame, json.dumps({"type": "ping"}), json.dumps({"no": "type"}))
            await until(lambda: r.state()["rejected"] == 1, "one rejected", r.state)
            assert r.state()["last_error"].startswith(error), r.state()["last_error"]
            feed.send(signal())
            await until(lambda: r.state()["accepted"] == 1, "one accepted", r.state)
            assert r.state()["rejected"] == 1  # the ping and the untyped frame were not counted
            assert r.state()["connected"] is True
            assert r.signals_counted("invalid") == 1

    run(scenario)


def test_a_stream_that_restarts_is_reconnected_and_signals_flow_again(make_config: Any) -> None:
    """The feed goes down: the subscription shows it disconnected and why, keeps trying, and
    once the feed listens again on the same port it reconnects and signals arrive again."""

    async def scenario() -> None:
        async with rig(make_config) as (r, feed):
            r.subs.start([r.row(feed.url)])
            await r.connected(feed)
            feed.send(signal(content="before"))
            await until(lambda: len(r.world.signals) == 1, "the first signal")
            await feed.stop()
            await until(lambda: r.state()["connected"] is False, "disconnected", r.state)
            assert r.state()["connected_at"] is None
            assert r.metric("chalie_subscriptions_connected") == 0
            await until(lambda: r.state()["last_error"].startswith("connect failed: "),
                        "a failed reconnect", r.state)
            feed.start()
            await r.connected(feed, connects=2)
            assert r.metric("chalie_subscriptions_connected") == 1
            feed.send(signal(content="after"))
            await until(lambda: len(r.world.signals) == 2, "the second signal")
            assert [s.content for s in r.world.signals] == ["before", "after"]

    run(scenario)


def test_a_stream_closed_by_its_server_says_so(make_config: Any, log_records: list[Any]) -> None:
    """The close code and reason the stream sent are the subscription's last_error, and the
    drop is logged by name, never with the URL's token."""

    def events(name: str) -> list[dict[str, Any]]:
        return [rec.msg for rec in log_records
                if isinstance(rec.msg, dict) and rec.msg.get("event") == name]

    async def scenario() -> None:
        async with rig(make_config, reconnect_initial_s=5.0, reconnect_max_s=5.0) as (r, feed):
            r.subs.start([r.row(feed.url)])
            await r.connected(feed)
            for client in list(feed.clients):
                client.close(4000, "maintenance")
            await until(lambda: r.state()["connected"] is False, "disconnected", r.state)
            assert r.state()["last_error"] == "stream closed (code 4000: maintenance)"
            await until(lambda: bool(events("subscription_down")), "the drop logged")

    run(scenario)
    (down,) = events("subscription_down")
    assert (down["subscription"], down["error"]) == ("news", "stream closed (code 4000: "
                                                             "maintenance)")
    assert not any("secret" in rec.getMessage() for rec in log_records)


def test_a_stream_that_cannot_be_reached_is_shown_disconnected(make_config: Any) -> None:
    """Nothing listens at the URL: the subscription stays, disconnected, with the reason."""

    async def scenario() -> None:
        async with rig(make_config) as (r, feed):
            await feed.stop()  # the port is free now
            r.subs.start([r.row(feed.url)])
            await until(lambda: (r.state()["last_error"] or "").startswith("connect failed: "),
                        "a failed connect", r.state)
            assert r.state()["connected"] is False
            assert r.state()["accepted"] == r.state()["rejected"] == 0

    run(scenario)


def _tasks(name: str) -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == f"subscription:{name}"]


def test_remove_stops_reading_the_stream(make_config: Any) -> None:
    """After remove the stream's connection is closed, nothing reconnects, the state is gone
    and a second remove finds nothing; the other subscription reads on."""

    async def scenario() -> None:
        async with rig(make_config) as (r, feed):
            r.subs.start([r.row(feed.url), r.row(feed.url, name="other", sid="sub-2")])
            await r.connected(feed)
            await r.connected(feed, "sub-2", connects=2)
            assert r.metric("chalie_subscriptions_connected") == 2
            assert r.subs.remove("sub-1") is True
            await until(lambda: len(feed.clients) == 1, "one client left")
            await until(lambda: not _tasks("news"), "the stream's task to end")
            assert [s.id for s in r.subs.states()] == ["sub-2"]
            assert r.metric("chalie_subscriptions_connected") == 1
            assert r.subs.remove("sub-1") is False
            feed.send(signal())
            await until(lambda: len(r.world.signals) == 1, "the other's signal")
            assert r.world.signals[0].sender == "subscription:other"
            assert feed.connects == 2

    run(scenario)


def test_stop_closes_every_stream_and_cancels_reconnects(make_config: Any) -> None:
    """At shutdown every connection closes and no stream task is left, even one waiting to
    reconnect to a stream that is down."""

    async def scenario() -> None:
        async with rig(make_config, reconnect_initial_s=30.0, reconnect_max_s=60.0) as (r, feed):
            r.subs.start([r.row(feed.url), r.row("ws://127.0.0.1:9/none", name="down",
                                                 sid="sub-2")])
            await r.connected(feed)
            await until(lambda: r.state("sub-2")["last_error"] is not None, "the failed one")
            await r.subs.stop()
            assert r.subs.states() == []
            assert not _tasks("news")
            assert not _tasks("down")
            assert r.metric("chalie_subscriptions_connected") == 0
            await until(lambda: not feed.clients, "the feed's client to go")

    run(scenario)


def test_reconnect_delays_double_up_to_the_most_with_twenty_percent_jitter() -> None:
    """1, 2, 4, ... seconds up to the most, each between 0.8 and 1.2 times that."""
    middle = [backoff_delay(n, 1.0, 60.0, lambda: 0.5) for n in range(1, 9)]
    assert middle == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    assert backoff_delay(3, 1.0, 60.0, lambda: 0.0) == pytest.approx(3.2)
    assert backoff_delay(3, 1.0, 60.0, lambda: 0.999999) == pytest.approx(4.8, abs=1e-4)
    assert backoff_delay(10_000, 1.0, 60.0, lambda: 0.5) == 60.0


@pytest.mark.parametrize(("name", "url", "signals", "error"), [
    ("", "ws://h/", ["*"], "name: 1-64 letters"),
    ("a b", "ws://h/", ["*"], "name: 1-64 letters"),
    ("x" * 65, "ws://h/", ["*"], "name: 1-64 letters"),
    ("n", "http://h/", ["*"], "url: must be ws://host/... or wss://host/..."),
    ("n", "WS://h/", ["*"], "url: must be ws://host/... or wss://host/..."),
    ("n", "ws:///path", ["*"], "url: must be ws://host/... or wss://host/..."),
    ("n", "ws://h:99999/", ["*"], "url: not a valid URL"),
    ("n", "ws://h/#frag", ["*"], "url: a WebSocket URL has no #fragment"),
    ("n", "ws://h/ x", ["*"], "url: must not contain spaces"),
    ("n", "ws://h/" + "a" * 2048, ["*"], "url: at most 2048 characters"),
    ("n", "ws://h/", [], "signals: list the signal types"),
    ("n", "ws://h/", ["*", "news"], 'signals: ["*"] accepts any type; give it alone'),
    ("n", "ws://h/", ["bad type"], "signals: each 1-64 letters"),
    ("n", "ws://h/", ["t"] * 101, "signals: at most 100 types"),
])
def test_a_subscription_with_a_bad_field_is_refused_naming_it(
        name: str, url: str, signals: list[str], error: str) -> None:
    """Each field is checked; the error starts with the field's name."""
    with pytest.raises(ValueError, match="^" + re.escape(error)):
        check(name, url, signals)


def test_a_good_subscription_passes_with_its_types_once_each() -> None:
    assert check("news.feed-1", "wss://user@example.org:8443/s?token=x", ["a", "b:c", "a"]) \
        == ("a", "b:c")
    assert check("n", "ws://[::1]/", ["*", "*"]) == ("*",)


# --- /api/subscriptions -------------------------------------------------------------------------

TOKEN = "good-session"


@asynccontextmanager
async def api(make_config: Callable[..., Config]) -> AsyncIterator[tuple[Rig, Feed, str]]:
    """The two handlers on 127.0.0.1 with a real StoreWriter; yields (rig, feed, base URL)."""
    async with rig(make_config) as (r, feed):
        store = r.config.store
        writer = StoreWriter.start(None, config=store, outbox=SocketHub(IOLoop.current()),
                                   clock=r.clock, directory=r.directory, metrics=r.metrics)
        r.directory.set("store_writer", writer)
        now = r.clock.time()
        writer.ask(CreateAuthSession(token_hash(TOKEN), now, now + 3600), timeout=WAIT_S)
        readers = db.Readers(db.db_path(store.path), busy_timeout_ms=store.busy_timeout_ms)
        ctx = EdgeContext(
            config=r.config, clock=r.clock,
            auth=Authenticator(configured="pw", read=readers.get, clock=r.clock),
            throttle=LoginThrottle(r.clock, max_failures=5, window_s=60.0),
            hub=SocketHub(IOLoop.current()), metrics=r.metrics, directory=r.directory,
            read=readers.get, healthy=lambda: True, gate=r.gate, subscriptions=r.subs,
        )
        app = tornado.web.Application([
            (r"/api/subscriptions", SubscriptionsHandler, {"ctx": ctx}),
            (r"/api/subscriptions/(.*)", SubscriptionHandler, {"ctx": ctx}),
        ])
        sockets = tornado.netutil.bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
        server = tornado.httpserver.HTTPServer(app)
        server.add_sockets(sockets)
        try:
            yield r, feed, f"http://127.0.0.1:{sockets[0].getsockname()[1]}"
        finally:
            server.stop()
            await server.close_all_connections()
            await asyncio.get_running_loop().run_in_executor(
                None, lambda: writer.stop(block=True, timeout=WAIT_S))


async def call(client: httpx.AsyncClient, method: str, path: str,
               body: Any = None) -> httpx.Response:
    return await client.request(method, path, json=body)


def stored(r: Rig) -> list[SubscriptionRow]:
    conn = db.connect(db.db_path(r.config.store.path), busy_timeout_ms=5000, readonly=True)
    try:
        return interface_rows.subscriptions(conn)
    finally:
        conn.close()


def test_the_person_adds_lists_and_deletes_a_subscription(make_config: Any) -> None:
    """POST stores and connects it (201 with its state), GET shows it connected, a second POST
    with the name is 409, DELETE stops and forgets it (204), a second DELETE is 404."""

    async def scenario() -> None:
        async with api(make_config) as (r, feed, base), httpx.AsyncClient(
                base_url=base, cookies={COOKIE: TOKEN}, timeout=WAIT_S) as client:
            body = {"name": "news", "url": feed.url, "signals": ["weather", "weather"]}
            created = await call(client, "POST", "/api/subscriptions", body)
            assert created.status_code == 201, created.text
            item = created.json()
            assert {k: item[k] for k in ("name", "url", "signals", "accepted", "rejected")} == \
                {"name": "news", "url": feed.url, "signals": ["weather"], "accepted": 0,
                 "rejected": 0}
            assert item["created_at"] == r.clock.time()
            assert [(s.id, s.name, s.signals) for s in stored(r)] == \
                [(item["id"], "news", ("weather",))]
            await r.connected(feed, item["id"])
            listed = (await call(client, "GET", "/api/subscriptions")).json()["items"]
            assert [(s["id"], s["connected"]) for s in listed] == [(item["id"], True)]
            again = await call(client, "POST", "/api/subscriptions", body)
            assert again.status_code == 409
            assert again.json()["error"].startswith("name: a subscription named 'news' exists")
            gone = await call(client, "DELETE", f"/api/subscriptions/{item['id']}")
            assert (gone.status_code, gone.content) == (204, b"")
            assert stored(r) == []
            assert r.subs.states() == []
            await until(lambda: not feed.clients, "the stream to close")
            missing = await call(client, "DELETE", f"/api/subscriptions/{item['id']}")
            assert missing.status_code == 404
            assert missing.json() == {"error": f"no subscription {item['id']!r}", "status": 404}

    run(scenario)


@pytest.mark.parametrize(("body", "error"), [
    ({"name": "n", "url": "ws://h/", "signals": ["*"], "token": "x"}, "token"),
    ({"name": "n", "signals": ["*"]}, "url"),
    ({"name": "n", "url": "http://h/", "signals": ["*"]}, "url: must be ws://"),
    ({"name": "n", "url": "ws://h/", "signals": "*"}, "signals"),
])
def test_a_bad_body_is_a_400_naming_the_field_and_stores_nothing(
        make_config: Any, body: dict[str, Any], error: str) -> None:
    async def scenario() -> None:
        async with api(make_config) as (r, _, base), httpx.AsyncClient(
                base_url=base, cookies={COOKIE: TOKEN}, timeout=WAIT_S) as client:
            response = await call(client, "POST", "/api/subscriptions", body)
            assert response.status_code == 400
            assert error in response.json()["error"]
            assert stored(r) == []
            assert r.subs.states() == []

    run(scenario)


def test_only_the_login_cookie_manages_subscriptions(make_config: Any) -> None:
    """Without the cookie (a bearer token is not enough) each endpoint is a 401."""

    async def scenario() -> None:
        async with api(make_config) as (r, feed, base), httpx.AsyncClient(
                base_url=base, headers={"Authorization": f"Bearer {TOKEN}"},
                timeout=WAIT_S) as client:
            body = {"name": "news", "url": feed.url, "signals": ["*"]}
            for method, path in (("GET", "/api/subscriptions"), ("POST", "/api/subscriptions"),
                                 ("DELETE", "/api/subscriptions/x")):
                response = await call(client, method, path, body if method == "POST" else None)
                assert response.status_code == 401, (method, response.text)
            assert stored(r) == []

    run(scenario)


def test_a_restart_resumes_the_stored_subscriptions(make_config: Any) -> None:
    """What POST stored is read back at the next start and connected again."""

    async def scenario() -> None:
        async with api(make_config) as (r, feed, base), httpx.AsyncClient(
                base_url=base, cookies={COOKIE: TOKEN}, timeout=WAIT_S) as client:
            body = {"name": "news", "url": feed.url, "signals": ["*"]}
            sid = (await call(client, "POST", "/api/subscriptions", body)).json()["id"]
            await r.connected(feed, sid)
            await r.subs.stop()  # the server stops
            await until(lambda: not feed.clients, "the stream to close")
            fresh = Subscriptions(gate=r.gate, directory=r.directory, metrics=r.metrics,
                                  config=r.config.subscriptions, clock=r.clock)
            fresh.start(stored(r))
            try:
                await until(lambda: [s.connected for s in fresh.states()] == [True]
                            and len(feed.clients) == 1, "the resumed stream", fresh.states)
                feed.send(signal(content="resumed"))
                await until(lambda: [s.content for s in r.world.signals] == ["resumed"],
                            "the signal")
            finally:
                await fresh.stop()

    run(scenario)

