"""/api/push on the real edge over a real socket, with a real StoreWriter and SQLite file and a
push service stand-in: a device subscribes, is listed, is sent a test push, and is removed;
what a browser must not send is a 400 naming the field."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pykka
import pytest
from tornado.ioloop import IOLoop

from chalie.actors.delivery_messages import TargetsChanged
from chalie.actors.store_writer import StoreWriter
from chalie.actors.supervisor import Directory
from chalie.clock import ManualClock
from chalie.config import Config
from chalie.delivery import vapid
from chalie.delivery.away import Away
from chalie.delivery.vapid import VapidKeys
from chalie.delivery.webpush import WebPushSender
from chalie.edge.auth import COOKIE, Authenticator, LoginThrottle
from chalie.edge.context import EdgeContext
from chalie.edge.hub import SocketHub
from chalie.edge.rest_push import device_name
from chalie.metrics import Metrics
from chalie.store import db
from tests.edge.test_rest_memory import EdgeThread
from tests.integration.harness import db_rows
from tests.push_service import PushService, make_subscription

WAIT_S = 10.0
PASSWORD = "secret"
T0 = 1_700_000_000.0
FIREFOX_ANDROID = "Mozilla/5.0 (Android 14; Mobile; rv:128.0) Gecko/128.0 Firefox/128.0"


class Recorder(pykka.ThreadingActor):
    """Stands in for the Delivery actor: keeps what it is told."""

    def __init__(self, told: list[Any], event: threading.Event) -> None:
        super().__init__()
        self.told, self.event = told, event

    def on_receive(self, message: Any) -> None:
        self.told.append(message)
        self.event.set()


@dataclass
class Edge:
    url: str
    client: httpx.Client  # logged in
    ctx: EdgeContext
    keys: VapidKeys
    db_file: Path
    told: list[Any]
    told_event: threading.Event

    def devices(self) -> list[tuple[Any, ...]]:
        return db_rows(self.db_file, "SELECT id, endpoint, p256dh, auth, name FROM "
                                     "push_subscriptions ORDER BY created_at, id")

    def targets_changed(self) -> int:
        """How many TargetsChanged the Delivery actor was told (after the one awaited)."""
        assert self.told_event.wait(WAIT_S)
        self.told_event.clear()
        return sum(isinstance(m, TargetsChanged) for m in self.told)


@pytest.fixture
def service() -> Iterator[PushService]:
    stand_in = PushService()
    yield stand_in
    stand_in.close()


@pytest.fixture
def edge(make_config: Callable[..., Config]) -> Iterator[Edge]:
    config = make_config(auth={"password": PASSWORD})
    store = config.store
    clock = ManualClock(start=100.0, wall=T0)
    conn = db.open_writer(store.path, busy_timeout_ms=store.busy_timeout_ms,
                          synchronous=store.synchronous)
    keys = vapid.ensure(conn, Path(store.path), clock.time())
    conn.close()
    readers = db.Readers(db.db_path(store.path), busy_timeout_ms=store.busy_timeout_ms)
    directory, metrics = Directory(), Metrics()
    sender = WebPushSender(readers.get, keys, lambda: config, clock=clock)

    def build(loop: IOLoop) -> EdgeContext:
        return EdgeContext(
            config=config, clock=clock,
            auth=Authenticator(configured=PASSWORD, read=readers.get, clock=clock),
            throttle=LoginThrottle(clock, max_failures=5, window_s=60.0),
            hub=SocketHub(loop), metrics=metrics, directory=directory, read=readers.get,
            healthy=lambda: True, away=Away([sender], keys.public_key))

    thread = EdgeThread(build)
    port, ctx = thread.start()
    writer = StoreWriter.start(None, config=store, outbox=ctx.hub, clock=clock,
                               directory=directory, metrics=metrics,
                               snapshots_kept=config.memory.snapshots_kept)
    directory.set("store_writer", writer)
    told: list[Any] = []
    event = threading.Event()
    directory.set("delivery", Recorder.start(told, event))
    url = f"http://127.0.0.1:{port}"
    login = httpx.post(f"{url}/auth/login", json={"password": PASSWORD})
    assert login.status_code == 200, login.text
    client = httpx.Client(base_url=url, cookies={COOKIE: login.cookies[COOKIE]},
                          timeout=WAIT_S, headers={"User-Agent": FIREFOX_ANDROID})
    try:
        yield Edge(url, client, ctx, keys, db.db_path(store.path), told, event)
    finally:
        client.close()
        thread.stop()


def subscribe(edge: Edge, service: PushService, name: str,
              **extra: Any) -> tuple[httpx.Response, dict[str, Any]]:
    body, _, _ = make_subscription(service, name, edge.keys.public_key)
    return edge.client.post("/api/push/subscriptions", json={**body, **extra}), body


ENDPOINTS = [("GET", "/api/push/key"), ("GET", "/api/push/subscriptions"),
             ("POST", "/api/push/subscriptions"), ("DELETE", "/api/push/subscriptions/x"),
             ("POST", "/api/push/subscriptions/x/test")]


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_every_push_endpoint_needs_the_login_cookie(edge: Edge, method: str,
                                                    path: str) -> None:
    r = httpx.request(method, edge.url + path, json={} if method == "POST" else None)
    assert r.status_code == 401
    assert edge.devices() == []


def test_the_page_gets_the_servers_public_key(edge: Edge) -> None:
    """GET /api/push/key: the VAPID public key the page subscribes with."""
    r = edge.client.get("/api/push/key")
    assert (r.status_code, r.json()) == (200, {"public_key": edge.keys.public_key})


def test_without_web_push_the_key_is_not_available(edge: Edge) -> None:
    """A server whose delivery is not running yet answers 503, not a made-up key."""
    away, edge.ctx.away = edge.ctx.away, None
    try:
        r = edge.client.get("/api/push/key")
    finally:
        edge.ctx.away = away
    assert r.status_code == 503
    assert "Web Push is not available" in r.json()["error"]


def test_a_device_subscribes_and_is_listed(edge: Edge, service: PushService) -> None:
    """201 with the device, named after its browser; GET lists it with no failures; the
    Delivery actor is told its targets changed."""
    r, body = subscribe(edge, service, "phone")
    assert r.status_code == 201, r.text
    made = r.json()
    assert made == {"id": made["id"], "name": "Firefox on Android",
                    "endpoint": body["endpoint"], "created_at": T0, "last_sent_at": None,
                    "failures": 0, "last_error": None, "retry_at": None}
    assert edge.targets_changed() == 1
    listed = edge.client.get("/api/push/subscriptions")
    assert (listed.status_code, listed.json()) == (200, {"items": [made]})
    assert edge.devices() == [(made["id"], body["endpoint"], body["keys"]["p256dh"],
                               body["keys"]["auth"], "Firefox on Android")]


def test_the_same_endpoint_again_takes_the_new_keys(edge: Edge, service: PushService) -> None:
    """A browser that subscribes again (new keys, same endpoint): 200, the same device, its
    keys replaced, and its name when one is given (kept when none is)."""
    first, body = subscribe(edge, service, "phone")
    fresh, _, _ = make_subscription(service, "phone", edge.keys.public_key)
    again = edge.client.post("/api/push/subscriptions", json={**fresh, "name": "My phone"})
    assert again.status_code == 200, again.text
    assert (again.json()["id"], again.json()["name"]) == (first.json()["id"], "My phone")
    assert edge.devices() == [(first.json()["id"], body["endpoint"], fresh["keys"]["p256dh"],
                               fresh["keys"]["auth"], "My phone")]
    renewed, _, _ = make_subscription(service, "phone", edge.keys.public_key)
    third = edge.client.post("/api/push/subscriptions", json=renewed)
    assert (third.status_code, third.json()["name"]) == (200, "My phone")  # kept: none given
    assert edge.devices()[0][2] == renewed["keys"]["p256dh"]


GOOD_P256DH = ("BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8Q"
               "cYP7DkM")
GOOD = {"endpoint": "https://push.example.org/wpush/v2/abc",
        "keys": {"p256dh": GOOD_P256DH, "auth": "tBHItJI5svbpez7KI4CCXg"}}


@pytest.mark.parametrize(("change", "field"), [
    ({"extra": 1}, "body: Object contains unknown field `extra`"),
    ({"endpoint": None}, "endpoint: Expected `str`, got `null`"),
    ({"endpoint": "ftp://push.example.org/x"}, "endpoint: an https:// URL"),
    ({"endpoint": "http://push.example.org/x"}, "endpoint: https:// (http:// only"),
    ({"endpoint": "https://push.example.org/" + "x" * 2048}, "endpoint: Expected `str` of "
                                                             "length <= 2048"),
    ({"keys": {"p256dh": GOOD_P256DH}}, "keys: Object missing required field `auth`"),
    ({"keys": {**GOOD["keys"], "p256dh": "BA" + "A" * 85}},
     "keys.p256dh: not a point of the P-256 curve"),
    ({"keys": {**GOOD["keys"], "p256dh": "not base64!"}}, "keys.p256dh: Expected `str` "
                                                          "matching regex"),
    ({"keys": {**GOOD["keys"], "auth": "c2hvcnQ"}}, "keys.auth: Expected `str` matching"),
    ({"name": ""}, "name: Expected `str` of length >= 1"),
    ({"name": "x" * 81}, "name: Expected `str` of length <= 80"),
    ({"name": "  \t "}, "name: must not be blank"),
])
def test_what_a_browser_would_not_send_is_a_400_naming_the_field(
        edge: Edge, change: dict[str, Any], field: str) -> None:
    r = edge.client.post("/api/push/subscriptions", json={**GOOD, **change})
    assert r.status_code == 400, r.text
    assert r.json()["error"].startswith(field), r.json()["error"]
    assert edge.devices() == []


def test_a_browsers_own_subscription_json_is_taken_as_it_is(edge: Edge) -> None:
    """PushSubscription.toJSON() with its expirationTime, padded base64: taken, and kept
    without the padding."""
    padded = {**GOOD, "expirationTime": None,
              "keys": {"p256dh": GOOD_P256DH + "=", "auth": "tBHItJI5svbpez7KI4CCXg=="}}
    r = edge.client.post("/api/push/subscriptions", json=padded)
    assert r.status_code == 201, r.text
    assert edge.devices()[0][2:4] == (GOOD_P256DH, "tBHItJI5svbpez7KI4CCXg")


def test_a_device_is_removed(edge: Edge, service: PushService) -> None:
    """DELETE: {"removed": id}, gone from the list and the store; again: 404."""
    made = subscribe(edge, service, "phone")[0].json()
    assert edge.targets_changed() == 1
    r = edge.client.delete(f"/api/push/subscriptions/{made['id']}")
    assert (r.status_code, r.json()) == (200, {"removed": made["id"]})
    assert edge.targets_changed() == 2
    assert edge.client.get("/api/push/subscriptions").json() == {"items": []}
    again = edge.client.delete(f"/api/push/subscriptions/{made['id']}")
    assert (again.status_code, again.json()["error"]) == (404, f"no device {made['id']!r}")


def test_the_test_button_pushes_to_the_device(edge: Edge, service: PushService) -> None:
    """POST .../test: the stand-in gets a push that verifies and decrypts, marked a test."""
    made = subscribe(edge, service, "phone")[0].json()
    r = edge.client.post(f"/api/push/subscriptions/{made['id']}/test")
    assert (r.status_code, r.json()) == (200, {"result": "sent", "error": None})
    (push,) = service.delivered("phone")
    assert (push.payload["test"], push.payload["title"], service.failures) == (True, "Chalie",
                                                                              [])


def test_a_test_push_to_a_device_that_is_gone_removes_it(edge: Edge,
                                                         service: PushService) -> None:
    made = subscribe(edge, service, "phone")[0].json()
    service.answer("phone", 410)
    r = edge.client.post(f"/api/push/subscriptions/{made['id']}/test")
    assert r.status_code == 200
    assert r.json()["result"] == "gone"
    assert r.json()["error"].startswith(f"{service.origin}/… answered 410")
    assert edge.devices() == []
    assert edge.client.get("/api/push/subscriptions").json() == {"items": []}


def test_a_test_push_that_fails_says_why(edge: Edge, service: PushService) -> None:
    made = subscribe(edge, service, "phone")[0].json()
    service.answer("phone", 500, body="down for maintenance")
    r = edge.client.post(f"/api/push/subscriptions/{made['id']}/test")
    assert r.json() == {"result": "failed", "error": f"{service.origin}/… answered 500 "
                                                     "Internal Server Error: down for "
                                                     "maintenance"}
    assert len(edge.devices()) == 1


def test_a_test_push_to_an_unknown_device_is_a_404(edge: Edge, service: PushService) -> None:
    r = edge.client.post("/api/push/subscriptions/nope/test")
    assert (r.status_code, r.json()["error"]) == (404, "no device 'nope'")
    assert service.pushes == []


@pytest.mark.parametrize(("agent", "name"), [
    (FIREFOX_ANDROID, "Firefox on Android"),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
     "Chrome/126.0.0.0 Safari/537.36 Edg/126.0.0.0", "Edge on Windows"),
    ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, "
     "like Gecko) Version/17.5 Mobile/15E148 Safari/604.1", "Safari on iPhone"),
    ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
     "Chrome/126.0.0.0 Safari/537.36", "Chrome on Linux"),
    ("curl/8.5.0", "a browser"),
])
def test_a_device_is_named_after_its_browser(agent: str, name: str) -> None:
    assert device_name(agent) == name
