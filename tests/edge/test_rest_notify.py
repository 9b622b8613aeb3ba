"""The notification URLs over REST, on the real edge over a real socket with a real JSON
webhook on 127.0.0.1: GET /api/settings shows notify.urls masked and PATCH keeps a masked entry
as the URL it stands for (the secret stays in settings.toml); POST /api/notify/test sends
"Chalie: a test" to one URL or to all; GET /api/notify/log lists every service's deliveries,
newest first, without a target's secret."""

from __future__ import annotations

import os
import stat
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw
import httpx
import msgspec
import pytest
from tornado.ioloop import IOLoop

from chalie.actors.store_writer import StoreWriter
from chalie.actors.supervisor import Directory
from chalie.clock import ManualClock
from chalie.config import Config
from chalie.config_load import load_config
from chalie.delivery.apprise_sender import key_of
from chalie.edge.auth import COOKIE, Authenticator, LoginThrottle
from chalie.edge.context import EdgeContext
from chalie.edge.hub import SocketHub
from chalie.metrics import Metrics
from chalie.settings import FILE_NAME
from chalie.store import db, delivery_rows
from chalie.store.delivery_rows import DeliveryRow
from tests.conftest import write_config
from tests.delivery.test_apprise_sender import Hook
from tests.edge.test_rest_memory import EdgeThread

WAIT_S = 10.0
PASSWORD = "secret"
T0 = 1_700_000_000.0
TOKEN = "Kx81zQ-hook-token-9931"


@dataclass
class Edge:
    url: str
    client: httpx.Client  # logged in
    ctx: EdgeContext
    settings_file: Path
    conn: apsw.Connection

    def saved(self) -> dict[str, Any]:
        with self.settings_file.open("rb") as f:
            return tomllib.load(f)


@pytest.fixture
def hook() -> Iterator[Hook]:
    found = Hook()
    yield found
    found.close()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Edge]]:
    """serve(urls): the edge (logged in) with notify.urls in its config file; a saved change
    is applied at once, as the server's reload applies a live key."""
    started: list[tuple[EdgeThread, httpx.Client, apsw.Connection, Any]] = []

    def start(urls: list[str]) -> Edge:
        path = write_config(tmp_path, {
            "store": {"path": str(tmp_path / "data")}, "memory": {"embedder": "hashed"},
            "auth": {"password": PASSWORD}, "notify": {"urls": urls, "timeout_s": 5.0}})
        config = load_config(path, env={})
        clock = ManualClock(start=100.0, wall=T0)
        conn = db.open_writer(config.store.path, busy_timeout_ms=5000, synchronous="NORMAL")
        readers = db.Readers(db.db_path(config.store.path), busy_timeout_ms=5000)
        directory, metrics = Directory(), Metrics()

        def build(loop: IOLoop) -> EdgeContext:
            ctx = EdgeContext(
                config=config, clock=clock,
                auth=Authenticator(configured=PASSWORD, read=readers.get, clock=clock),
                throttle=LoginThrottle(clock, max_failures=5, window_s=60.0),
                hub=SocketHub(loop), metrics=metrics, directory=directory,
                read=readers.get, healthy=lambda: True, config_file=path, env={})

            def apply(new: Config) -> tuple[list[str], list[str]]:
                ctx.config = new
                return ["notify.urls"], []

            ctx.apply_config = apply
            return ctx

        thread = EdgeThread(build)
        port, ctx = thread.start()
        writer = StoreWriter.start(None, config=config.store, outbox=ctx.hub, clock=clock,
                                   directory=directory, metrics=metrics,
                                   snapshots_kept=config.memory.snapshots_kept)
        directory.set("store_writer", writer)
        url = f"http://127.0.0.1:{port}"
        login = httpx.post(f"{url}/auth/login", json={"password": PASSWORD})
        assert login.status_code == 200, login.text
        client = httpx.Client(base_url=url, cookies={COOKIE: login.cookies[COOKIE]},
                              timeout=WAIT_S)
        started.append((thread, client, conn, writer))
        return Edge(url, client, ctx, Path(config.store.path) / FILE_NAME, conn)

    yield start
    for thread, client, conn, writer in started:
        client.close()
        thread.stop()
        writer.stop(block=True, timeout=WAIT_S)
        conn.close()


def urls_setting(edge: Edge) -> dict[str, Any]:
    settings = edge.client.get("/api/settings").json()["settings"]
    [found] = [s for s in settings if s["key"] == "notify.urls"]
    return dict(found)


def secret_url(hook: Hook, path: str = "/hook") -> str:
    return hook.url(path, auth=f"chalie:{TOKEN}@")


def masked_url(hook: Hook, path: str = "/hook") -> str:
    return f"json://chalie:****@127.0.0.1:{hook.port}{path}"


# -- notify.urls in the settings --

def test_the_settings_show_each_url_masked_and_never_its_secret(
    serve: Callable[..., Edge], hook: Hook,
) -> None:
    """GET /api/settings gives notify.urls as a secret that is set, each URL in its masked
    form; the token is nowhere in the answer."""
    edge = serve([secret_url(hook), hook.url("/plain")])
    answer = edge.client.get("/api/settings")
    assert TOKEN not in answer.text
    found = urls_setting(edge)
    assert (found["secret"], found["set"], found["source"]) == (True, True, "file")
    assert found["value"] == [masked_url(hook), hook.url("/plain")]


def test_no_urls_is_a_secret_that_is_not_set(serve: Callable[..., Edge]) -> None:
    """With no URLs the setting says it is not set, and shows an empty list."""
    edge = serve([])
    found = urls_setting(edge)
    assert (found["set"], found["value"]) == (False, [])


def test_a_masked_entry_keeps_its_url_and_a_new_one_is_added(
    serve: Callable[..., Edge], hook: Hook,
) -> None:
    """The page sends the list back with the masked form it was shown and a new URL: the
    saved list holds the real URL (in settings.toml, readable by the owner only) and the new
    one; the answer shows both masked. A list without it removes it."""
    edge = serve([secret_url(hook)])
    other = hook.url("/other", auth="chalie:other-Kx81zQ-secret@")
    saved = edge.client.patch("/api/settings", json={"notify.urls": [masked_url(hook), other]})
    assert saved.status_code == 200, saved.text
    assert TOKEN not in saved.text
    assert "other-Kx81zQ-secret" not in saved.text
    assert edge.saved()["notify"]["urls"] == [secret_url(hook), other]
    assert stat.S_IMODE(os.stat(edge.settings_file).st_mode) == 0o600
    assert urls_setting(edge)["value"] == [masked_url(hook), masked_url(hook, "/other")]
    assert edge.ctx.config.notify.urls == [secret_url(hook), other]
    removed = edge.client.patch("/api/settings", json={"notify.urls": [masked_url(hook,
                                                                                "/other")]})
    assert removed.status_code == 200, removed.text
    assert edge.saved()["notify"]["urls"] == [other]


def test_an_entry_apprise_cannot_use_is_refused_naming_it_masked(
    serve: Callable[..., Edge], hook: Hook,
) -> None:
    """An entry that is neither a masked form of a configured URL nor an Apprise URL is a
    400 naming notify.urls and which entry, with only its scheme shown; nothing is saved."""
    edge = serve([secret_url(hook)])
    bad = f"nosuchservice://me:{TOKEN}@example.org/"
    refused = edge.client.patch("/api/settings", json={"notify.urls": [masked_url(hook), bad]})
    assert refused.status_code == 400
    assert refused.json()["error"] == ("notify.urls: entry 2 (nosuchservice://…) is not an "
                                       "Apprise URL this server can use")
    assert not edge.settings_file.exists()


# -- POST /api/notify/test --

def test_a_test_goes_to_every_configured_url_and_says_how_each_went(
    serve: Callable[..., Edge], hook: Hook,
) -> None:
    """Without a URL the test goes to each configured URL once: one that takes it is sent,
    one that answers 500 failed with Apprise's words; each named masked."""
    edge = serve([secret_url(hook), hook.url("/broken"), secret_url(hook)])
    hook.by_path = {"/broken": 500}
    answer = edge.client.post("/api/notify/test")
    assert answer.status_code == 200, answer.text
    assert TOKEN not in answer.text
    results = answer.json()["results"]
    assert [(r["target"], r["service"], r["result"]) for r in results] == [
        (masked_url(hook), "json", "sent"), (hook.url("/broken"), "json", "failed")]
    assert results[0]["error"] is None
    assert "error=500" in results[1]["error"]
    got = hook.wait_for(2)
    assert sorted(g.path for g in got) == ["/broken", "/hook"]
    assert {g.body["title"] for g in got} == {"Chalie: a test"}


def test_a_test_goes_to_the_one_url_named_by_its_masked_form_or_a_new_url(
    serve: Callable[..., Edge], hook: Hook,
) -> None:
    """`url` as the settings show it tests that URL alone (with its real password); a URL not
    configured yet is tested as given; one Apprise cannot use is a 400."""
    edge = serve([secret_url(hook), hook.url("/second")])
    one = edge.client.post("/api/notify/test", json={"url": masked_url(hook)})
    assert one.json() == {"results": [{"target": masked_url(hook), "service": "json",
                                       "result": "sent", "error": None}]}
    [got] = hook.wait_for(1)
    assert (got.path, got.authorization is not None) == ("/hook", True)
    new = edge.client.post("/api/notify/test", json={"url": hook.url("/new")})
    assert new.json()["results"][0]["result"] == "sent"
    assert hook.wait_for(1, lambda r: r.path == "/new")
    bad = edge.client.post("/api/notify/test", json={"url": f"nope://{TOKEN}"})
    assert bad.status_code == 400
    assert TOKEN not in bad.text
    assert bad.json()["error"].startswith("url: nope://… is not an Apprise URL")


def test_a_test_with_no_url_configured_is_refused(serve: Callable[..., Edge]) -> None:
    """Nothing to test: a 400 naming notify.urls."""
    answer = serve([]).client.post("/api/notify/test", json={})
    assert answer.status_code == 400
    assert answer.json()["error"].startswith("notify.urls: no notification URL")


# -- GET /api/notify/log --

def delivery(n: int, service: str, target: str, name: str, status: str, **extra: Any,
             ) -> DeliveryRow:
    fields: dict[str, Any] = {
        "id": f"d{n}", "channel": "main", "seq": n, "kind": "notifications",
        "service": service, "target": target, "target_name": name, "title": f"Message {n}",
        "body": "body", "payload": "{}", "approval_id": None, "exchange_id": None,
        "status": status, "attempts": 1, "next_at": None, "expires_at": None,
        "last_error": None, "created_at": T0 + n, "updated_at": T0 + n, **extra}
    return msgspec.convert(fields, DeliveryRow)


def test_the_log_lists_every_services_deliveries_newest_first(
    serve: Callable[..., Edge], hook: Hook,
) -> None:
    """Web Push, an Apprise URL and Telegram deliveries, newest first, each with its outcome
    (a failure's error and next try); filtered by service or status; never a URL's secret."""
    edge = serve([secret_url(hook)])
    rows = [
        delivery(1, "webpush", "push:dev1", "Firefox on Android", "sent", sent_at=T0 + 2),
        delivery(2, "json", key_of(secret_url(hook)), masked_url(hook), "failed",
                 attempts=3, last_error="Failed to send JSON POST notification: error=500.",
                 next_at=T0 + 90, kind="escalations"),
        delivery(3, "telegram", "telegram:42", "Ana", "skipped"),
    ]
    with db.immediate(edge.conn):
        for row in rows:
            assert delivery_rows.insert(edge.conn, row)
    answer = edge.client.get("/api/notify/log")
    assert answer.status_code == 200
    assert TOKEN not in answer.text
    items = answer.json()["items"]
    assert [(i["id"], i["service"], i["target_name"], i["status"]) for i in items] == [
        ("d3", "telegram", "Ana", "skipped"),
        ("d2", "json", masked_url(hook), "failed"),
        ("d1", "webpush", "Firefox on Android", "sent")]
    assert items[1] == {
        "id": "d2", "channel": "main", "seq": 2, "kind": "escalations", "service": "json",
        "target_name": masked_url(hook), "title": "Message 2", "status": "failed",
        "attempts": 3, "last_error": "Failed to send JSON POST notification: error=500.",
        "created_at": T0 + 2, "sent_at": None, "next_at": T0 + 90}
    assert [i["id"] for i in edge.client.get(
        "/api/notify/log", params={"service": "webpush"}).json()["items"]] == ["d1"]
    assert [i["id"] for i in edge.client.get(
        "/api/notify/log", params={"status": "failed"}).json()["items"]] == ["d2"]
    assert [i["id"] for i in edge.client.get(
        "/api/notify/log", params={"limit": 1, "offset": 1}).json()["items"]] == ["d2"]
    bad = edge.client.get("/api/notify/log", params={"status": "lost"})
    assert bad.status_code == 400


@pytest.mark.parametrize(("method", "path"), [("GET", "/api/notify/log"),
                                              ("POST", "/api/notify/test")])
def test_both_need_the_login_cookie(serve: Callable[..., Edge], hook: Hook, method: str,
                                    path: str) -> None:
    """Without the cookie: 401, and no test is sent."""
    edge = serve([hook.url()])
    with httpx.Client(base_url=edge.url) as anonymous:
        assert anonymous.request(method, path).status_code == 401
    assert hook.received == []
