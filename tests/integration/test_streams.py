"""Broadcast streams end to end: the real server subscribes to a real WebSocket feed on
loopback, its signals reach the next prompt, and the subscription survives the feed's restart."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import tornado.web
import tornado.websocket

from tests.integration.harness import ServerProcess, StubLlm, wait_for
from tests.integration.stub_interface import cookie_client, user_prompt


class Feed:
    """A broadcast stream: a Tornado WebSocket server in its own thread; `send` goes to every
    subscriber. `stop()` closes the port, `start()` opens the same one again."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.clients: set[tornado.websocket.WebSocketHandler] = set()
        self.connects = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self.start()

    def start(self) -> None:
        ready = threading.Event()
        feed = self

        class Handler(tornado.websocket.WebSocketHandler):
            def open(self, *args: Any, **kwargs: Any) -> None:
                feed.clients.add(self)
                feed.connects += 1

            def on_close(self) -> None:
                feed.clients.discard(self)

        async def serve() -> None:
            app = tornado.web.Application([(r"/feed", Handler)])
            server = app.listen(self.port, "127.0.0.1")
            self._loop = asyncio.get_running_loop()
            ready.set()
            await asyncio.get_running_loop().run_in_executor(None, self._stopped.wait)
            for client in list(self.clients):
                client.close(1001, "feed restarting")
            server.stop()
            await server.close_all_connections()

        self._stopped.clear()
        self._thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
        self._thread.start()
        assert ready.wait(10)

    def send(self, frame: dict[str, Any]) -> None:
        assert self._loop is not None
        text = json.dumps(frame)
        self._loop.call_soon_threadsafe(
            lambda: [c.write_message(text) for c in list(self.clients)])

    def stop(self) -> None:
        self._stopped.set()
        assert self._thread is not None
        self._thread.join(10)
        self.clients.clear()

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/feed"


@pytest.fixture
def feed() -> Iterator[Feed]:
    f = Feed()
    yield f
    f.stop()


def state(server: ServerProcess, cookie: str) -> dict[str, Any]:
    with cookie_client(server.url, cookie) as http:
        r = http.get("/api/subscriptions")
    assert r.status_code == 200, r.text
    [item] = r.json()["items"]
    return dict(item)


def closed_signal(content: str, signal_type: str = "restaurant") -> dict[str, Any]:
    return {"type": "signal", "signal_type": signal_type, "content": content,
            "source": "luigis", "activation_energy": 0.8}


def test_a_stream_feeds_world_state_and_survives_its_restart(
    tmp_path: Any, llm: StubLlm, feed: Feed,
) -> None:
    """Signals of a subscribed stream reach the next prompt; undeclared types are rejected and
    counted; after the feed restarts Chalie reconnects and its signals flow again."""
    server = ServerProcess(tmp_path, llm, subscriptions={"reconnect_initial_s": 0.05,
                                                         "reconnect_max_s": 0.2}).start()
    try:
        cookie = server.login()
        with cookie_client(server.url, cookie) as http:
            r = http.post("/api/subscriptions", json={"name": "luigis", "url": feed.url,
                                                      "signals": ["restaurant"]})
        assert r.status_code == 201, r.text
        wait_for(lambda: state(server, cookie)["connected"])
        feed.send(closed_signal("Luigi's is closed tonight"))
        feed.send(closed_signal("stocks are up", signal_type="stock"))
        wait_for(lambda: state(server, cookie)["rejected"] == 1
                 and state(server, cookie)["accepted"] == 1)
        server.connect(cookie).turn("any plans tonight?")
        assert "Luigi's is closed tonight" in user_prompt(llm.requests[-1])
        assert "stocks are up" not in user_prompt(llm.requests[-1])

        feed.stop()
        wait_for(lambda: not state(server, cookie)["connected"])
        assert state(server, cookie)["last_error"]
        feed.start()
        wait_for(lambda: state(server, cookie)["connected"])
        feed.send(closed_signal("Luigi's reopens tomorrow"))
        wait_for(lambda: state(server, cookie)["accepted"] == 2)
        server.connect(cookie).turn("and tomorrow?")
        assert "Luigi's reopens tomorrow" in user_prompt(llm.requests[-1])
        metrics = httpx.get(f"{server.url}/metrics", timeout=10).text
        assert 'chalie_signals_total{result="accepted",via="stream"} 2.0' in metrics
        assert 'chalie_signals_total{result="forbidden",via="stream"} 1.0' in metrics
        assert "chalie_subscriptions_connected 1.0" in metrics
    finally:
        server.kill()
    assert not server.errors()


def test_a_deleted_subscription_stops_and_is_not_resumed_after_a_restart(
    tmp_path: Any, llm: StubLlm, feed: Feed,
) -> None:
    """DELETE closes the stream at once; a subscription kept is resumed at the next start."""
    server = ServerProcess(tmp_path, llm).start()
    cookie = server.login()
    with cookie_client(server.url, cookie) as http:
        kept = http.post("/api/subscriptions", json={"name": "kept", "url": feed.url,
                                                     "signals": ["*"]}).json()
        gone = http.post("/api/subscriptions", json={"name": "gone", "url": feed.url,
                                                     "signals": ["*"]}).json()
        wait_for(lambda: feed.connects == 2)
        assert http.delete(f"/api/subscriptions/{gone['id']}").status_code == 204
        wait_for(lambda: len(feed.clients) == 1)
    assert server.stop() == 0
    server.start()
    try:
        cookie = server.login()
        with cookie_client(server.url, cookie) as http:
            items = http.get("/api/subscriptions").json()["items"]
        assert [i["id"] for i in items] == [kept["id"]]
        wait_for(lambda: feed.connects == 3)
    finally:
        server.kill()
