"""GET /health on the real edge over a real socket: anyone learns whether the server is up and
its version; the person (login cookie or API token) the details; a paired interface its own
state and nothing else; a wrong credential is a stranger's, never a 401."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pykka
import pytest
from tornado.ioloop import IOLoop

from chalie import __version__
from chalie.actors.store_writer import StoreWriter
from chalie.actors.supervisor import Directory
from chalie.clock import ManualClock
from chalie.config import Config
from chalie.edge.auth import COOKIE, Authenticator, LoginThrottle
from chalie.edge.context import EdgeContext
from chalie.edge.hub import SocketHub
from chalie.edge.tokens import TokenBoard, token_hash
from chalie.interfaces.board import InterfaceBoard, InterfaceState
from chalie.metrics import Metrics
from chalie.store import db
from chalie.store.health import StoreHealth
from chalie.store.interface_rows import InterfaceRow
from chalie.store.token_rows import TokenRow
from tests.edge.test_rest_memory import EdgeThread

WAIT_S = 10.0
PASSWORD = "secret"
T0 = 1_700_000_000.0
API_TOKEN = "api-token-of-the-person"
WEATHER_TOKEN = "bearer-of-the-weather-interface"
CALENDAR_TOKEN = "bearer-of-the-calendar-interface"
LLM_ADDRESS = "http://10.0.0.7:11434/v1"
STRANGER = {"status", "version"}
DETAILS = {"status", "version", "name", "jobs", "llm", "store", "embedder"}


class Models:
    """Each job's model as chalie.llm.factory.Models describes it: one, down."""

    def describe(self) -> dict[str, Any]:
        return {"primary": {"provider": "openai", "model": "qwen3:8b", "address": LLM_ADDRESS,
                            "state": "unreachable", "error": "connection refused", "at": T0}}


class Embedder:
    kind = "hashed"
    space = "hashed-384"


@dataclass
class Edge:
    url: str
    store: StoreHealth
    cookie: str

    def health(self, *, cookie: str | None = None, bearer: str | None = None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {bearer}"} if bearer is not None else {}
        cookies = {COOKIE: cookie} if cookie is not None else {}
        return httpx.get(f"{self.url}/health", headers=headers, cookies=cookies, timeout=WAIT_S)


def interface(interface_id: str, name: str, token: str, **state: Any) -> InterfaceState:
    row = InterfaceRow(id=interface_id, name=name, host="192.168.1.20", port=9001, signals=None,
                       token_hash=token_hash(token), version="1.0", capabilities="[]",
                       paired_at=T0, refreshed_at=T0)
    return InterfaceState(row, **state)


@pytest.fixture
def edge(make_config: Callable[..., Config]) -> Iterator[Edge]:
    """The edge with a store, a model that is down, an API token and two paired interfaces
    (weather offline after two failed checks, calendar online); the person logged in."""
    config = make_config(auth={"password": PASSWORD})
    store = config.store
    clock = ManualClock(start=100.0, wall=T0)
    readers = db.Readers(db.db_path(store.path), busy_timeout_ms=store.busy_timeout_ms)
    directory, metrics = Directory(), Metrics()
    health = StoreHealth(store.path, min_free_mb=0.0, hold_limit=5)
    tokens = TokenBoard()
    tokens.add(TokenRow("t-1", "monitor", ("memory:read",), token_hash(API_TOKEN), T0))
    interfaces = InterfaceBoard()
    interfaces.publish({
        "i-1": interface("i-1", "weather", WEATHER_TOKEN, online=False, failures=2,
                         last_check_at=T0 + 60, last_error="GET http://192.168.1.20:9001/health:"
                                                          " connection refused",
                         changed_at=T0 + 30),
        "i-2": interface("i-2", "calendar", CALENDAR_TOKEN, last_check_at=T0 + 50),
    })

    def build(loop: IOLoop) -> EdgeContext:
        return EdgeContext(
            config=config, clock=clock,
            auth=Authenticator(configured=PASSWORD, read=readers.get, clock=clock),
            throttle=LoginThrottle(clock, max_failures=5, window_s=60.0),
            hub=SocketHub(loop), metrics=metrics, directory=directory, read=readers.get,
            healthy=lambda: True, store=health, models=Models(),  # type: ignore[arg-type]
            embedder=Embedder(), tokens=tokens, interfaces=interfaces,
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
    try:
        yield Edge(url, health, login.cookies[COOKIE])
    finally:
        thread.stop()
        try:
            writer.stop(block=True, timeout=WAIT_S)
        except pykka.ActorDeadError:
            pass


def test_a_stranger_learns_only_the_status_and_the_version(edge: Edge) -> None:
    """Without a credential the answer is {status, version}: no model address, data
    directory, error or interface."""
    r = edge.health()
    assert r.status_code == 200
    assert r.json() == {"status": "ok", "version": __version__}
    for secret in (LLM_ADDRESS, "connection refused", str(edge.store.data_dir), "weather"):
        assert secret not in r.text


def test_a_failing_server_answers_503_to_a_stranger_too(edge: Edge) -> None:
    """A monitor without credentials still sees the outage: 503 and status "failing", and
    not why (the disk's path stays unsaid)."""
    edge.store.failed("full", f"database or disk is full: {edge.store.data_dir}", T0)
    r = edge.health()
    assert r.status_code == 503
    assert r.json() == {"status": "failing", "version": __version__}


def test_the_persons_cookie_sees_every_detail(edge: Edge) -> None:
    """Logged in, the answer names the model and its address, the store, the embedder and
    the waiting jobs, and keeps the 503 while the store fails; no interface's state."""
    body = edge.health(cookie=edge.cookie).json()
    assert set(body) == DETAILS
    assert body["llm"]["primary"]["address"] == LLM_ADDRESS
    assert (body["store"]["state"], body["embedder"]["kind"], body["jobs"]) == (
        "ok", "hashed", [])

    edge.store.failed("full", "database or disk is full", T0)
    r = edge.health(cookie=edge.cookie)
    assert r.status_code == 503
    assert (r.json()["status"], r.json()["store"]["state"]) == ("failing", "full")


def test_an_api_token_of_the_person_sees_every_detail(edge: Edge) -> None:
    """A scoped API token, whatever its scopes, is the person's: the same details."""
    body = edge.health(bearer=API_TOKEN).json()
    assert set(body) == DETAILS
    assert body == edge.health(cookie=edge.cookie).json()


def test_a_paired_interface_sees_its_own_state_and_nothing_else(edge: Edge) -> None:
    """An interface's bearer token gets its own health as Chalie's checks see it (offline,
    two failures, the last error), nothing of the models, the store or the other interface."""
    r = edge.health(bearer=WEATHER_TOKEN)
    assert r.status_code == 200
    assert r.json() == {"status": "ok", "version": __version__, "interface": {
        "id": "i-1", "name": "weather", "online": False, "failures": 2,
        "last_check_at": T0 + 60,
        "last_error": "GET http://192.168.1.20:9001/health: connection refused",
        "changed_at": T0 + 30}}
    for other in (LLM_ADDRESS, "calendar", "i-2", str(edge.store.data_dir)):
        assert other not in r.text
    calendar = edge.health(bearer=CALENDAR_TOKEN).json()["interface"]
    assert (calendar["id"], calendar["online"], calendar["failures"]) == ("i-2", True, 0)


@pytest.mark.parametrize("credential", [
    pytest.param({"bearer": "not-a-token-anyone-holds"}, id="wrong-bearer"),
    pytest.param({"cookie": "not-a-session"}, id="wrong-cookie"),
    pytest.param({"bearer": "revoked-token", "cookie": "expired-session"}, id="both-wrong"),
])
def test_a_wrong_credential_is_answered_as_a_stranger_not_refused(
    edge: Edge, credential: dict[str, str],
) -> None:
    """A monitor sending a stale or wrong credential still gets its 200: {status, version}."""
    r = edge.health(**credential)
    assert r.status_code == 200
    assert r.json() == {"status": "ok", "version": __version__}
