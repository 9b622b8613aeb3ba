"""/api/memory and /api/turns/<id>/prompts on the real edge over a real socket: the person
browses, searches and forgets their memory, and reads the prompts a turn sent, with a real
StoreWriter and a real SQLite file behind it."""

from __future__ import annotations

import asyncio
import queue
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw
import httpx
import pykka
import pytest
import tornado.httpserver
import tornado.netutil
from tornado.ioloop import IOLoop

from chalie.act.snapshots import snapshot
from chalie.actors.store_writer import StoreWriter
from chalie.actors.supervisor import Directory
from chalie.clock import ManualClock
from chalie.config import Config
from chalie.edge.app import make_app
from chalie.edge.auth import COOKIE, Authenticator, LoginThrottle
from chalie.edge.context import EdgeContext
from chalie.edge.hub import SocketHub
from chalie.llm.types import ChatRequest, JsonSchemaFormat, Message, ToolSpec
from chalie.memory.recall import RRF_K, Recall
from chalie.metrics import Metrics
from chalie.store import db, memory_writes
from chalie.store.effects import RememberFact
from chalie.store.memory_writes import EpisodeRow
from chalie.values.memory import Kind, mkey

WAIT_S = 10.0
PASSWORD = "secret"
T0 = 1_700_000_000.0
DAY = 86400.0


@dataclass
class Edge:
    url: str
    client: httpx.Client  # logged in
    directory: Directory
    db_file: Path
    _conn: apsw.Connection

    @contextmanager
    def write(self) -> Iterator[apsw.Connection]:
        """One write transaction on the database file, beside the running StoreWriter."""
        with db.immediate(self._conn) as conn:
            yield conn

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        return list(self._conn.execute(sql, params))

    def get(self, path: str, **params: Any) -> httpx.Response:
        return self.client.get(path, params=params)


class EdgeThread:
    """The Tornado app on 127.0.0.1, port 0, served by an asyncio loop of its own thread."""

    def __init__(self, build: Callable[[IOLoop], EdgeContext]) -> None:
        self._build = build
        self._started: queue.Queue[tuple[int, EdgeContext] | BaseException] = queue.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)

    def start(self) -> tuple[int, EdgeContext]:
        self._thread.start()
        started = self._started.get(timeout=WAIT_S)
        if isinstance(started, BaseException):
            raise started
        return started

    async def _serve(self) -> None:
        try:
            self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
            ctx = self._build(IOLoop.current())
            sockets = tornado.netutil.bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
            server = tornado.httpserver.HTTPServer(make_app(ctx))
            server.add_sockets(sockets)
        except BaseException as e:
            self._started.put(e)
            raise
        self._started.put((sockets[0].getsockname()[1], ctx))
        await self._stop.wait()
        server.stop()
        await server.close_all_connections()

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive(), "the edge's loop did not stop"


@pytest.fixture
def edge(make_config: Callable[..., Config]) -> Iterator[Edge]:
    """The edge with recall (full text only: no embedder) and a StoreWriter, logged in."""
    config = make_config(auth={"password": PASSWORD})
    store = config.store
    clock = ManualClock(start=100.0, wall=T0 + 10 * DAY)
    conn = db.open_writer(store.path, busy_timeout_ms=store.busy_timeout_ms,
                          synchronous=store.synchronous)
    with db.immediate(conn):
        space_id = memory_writes.ensure_space(conn, "test", clock.time())
    readers = db.Readers(db.db_path(store.path), busy_timeout_ms=store.busy_timeout_ms)
    directory, metrics = Directory(), Metrics()

    def build(loop: IOLoop) -> EdgeContext:
        return EdgeContext(
            config=config, clock=clock,
            auth=Authenticator(configured=PASSWORD, read=readers.get, clock=clock),
            throttle=LoginThrottle(clock, max_failures=5, window_s=60.0),
            hub=SocketHub(loop), metrics=metrics, directory=directory, read=readers.get,
            healthy=lambda: True,
            recall=Recall(embedder=None, space_id=space_id, config=config.memory, clock=clock),
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
        yield Edge(url, client, directory, db.db_path(store.path), conn)
    finally:
        client.close()
        thread.stop()
        try:
            writer.stop(block=True, timeout=WAIT_S)
        except pykka.ActorDeadError:
            pass
        conn.close()


def remember(edge: Edge, key: str, value: str, at: float) -> int:
    with edge.write() as conn:
        item_id = memory_writes.remember(conn, RememberFact(key=key, value=value),
                                         turn_id=None, now=at)
    assert item_id is not None
    return item_id


def episode(edge: Edge, gist: str, at: float, entities: tuple[str, ...] = ()) -> int:
    row = EpisodeRow(gist=gist, intent="chat", outcome="noted", entities=entities,
                     open_loops=(), salience=0.5, valence=0.0, transcript_from=1,
                     transcript_to=2, happened_at=at)
    with edge.write() as conn:
        (item_id,) = memory_writes.insert_episodes(conn, "main", [row], upto_transcript_id=0,
                                                   encoding_id="encoding-1", now=at)
    return item_id


def error(status: int, message: str) -> dict[str, Any]:
    return {"error": message, "status": status}


# -- login --

ENDPOINTS = [
    ("GET", "/api/memory/knowledge"),
    ("GET", "/api/memory/episodes"),
    ("GET", "/api/memory/search?q=anything"),
    ("DELETE", "/api/memory/knowledge/{fact}"),
    ("DELETE", "/api/memory/episodes/{fact}"),
    ("GET", "/api/turns/turn-1/prompts"),
]


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_every_memory_endpoint_refuses_a_request_without_a_valid_login_cookie(
    edge: Edge, method: str, path: str,
) -> None:
    """Without the session cookie, or with a made-up one, each endpoint answers 401 and
    nothing is read or forgotten."""
    fact = remember(edge, "color", "green", T0)
    for cookies in ({}, {COOKIE: "not-a-session"}):
        with httpx.Client(base_url=edge.url, cookies=cookies) as anonymous:
            r = anonymous.request(method, path.format(fact=fact))
        assert r.status_code == 401
        assert r.json() == error(401, "not logged in: POST /auth/login first")
    assert edge.rows("SELECT value FROM knowledge") == [("green",)]


# -- knowledge --

def test_knowledge_lists_current_facts_and_history_adds_the_values_they_replaced(
    edge: Edge,
) -> None:
    """A fact whose value changed shows once, current; with history=1 the old value shows too,
    valid until the change and no longer current."""
    green = remember(edge, "color", "green", T0)
    city = remember(edge, "city", "Lisbon", T0 + 1)
    blue = remember(edge, "color", "blue", T0 + DAY)

    current = edge.get("/api/memory/knowledge").json()["items"]
    assert [(i["id"], i["key"], i["value"], i["current"]) for i in current] == [
        (city, "city", "Lisbon", True), (blue, "color", "blue", True)]
    assert current[1] == {
        "id": blue, "key": "color", "value": "blue", "kind": "fact", "source": "tool",
        "confidence": 0.9, "turn_id": None, "current": True, "valid_from": T0 + DAY,
        "valid_to": None, "superseded_by": None, "source_line": None,
    }

    history = edge.get("/api/memory/knowledge", history=1).json()["items"]
    assert [(i["id"], i["value"], i["current"], i["valid_from"], i["valid_to"],
             i["superseded_by"]) for i in history] == [
        (city, "Lisbon", True, T0 + 1, None, None),
        (blue, "blue", True, T0 + DAY, None, None),
        (green, "green", False, T0, T0 + DAY, blue),
    ]
    assert edge.get("/api/memory/knowledge", history="true").json()["items"] == history
    assert edge.get("/api/memory/knowledge", history="0").json()["items"] == current
    assert edge.get("/api/memory/knowledge", history="false").json()["items"] == current


def test_a_fact_read_from_the_conversation_shows_the_persons_line_it_came_from(
    edge: Edge,
) -> None:
    """A fact the encoder read carries the transcript id of the person's message it was stated
    on; one a tool stored has none."""
    with edge.write() as conn:
        said = memory_writes.add_transcript(conn, "main", None, role="user",
                                            text="I live in Porto", at=T0)
        memory_writes.remember(conn, RememberFact("home city", "Porto", source="encoder",
                                                  confidence=0.6, source_line=said),
                               turn_id=None, now=T0)
    remember(edge, "pet", "a cat", T0)
    items = edge.get("/api/memory/knowledge").json()["items"]
    assert [(i["key"], i["source"], i["source_line"]) for i in items] == [
        ("home city", "encoder", said), ("pet", "tool", None)]


def test_knowledge_q_keeps_the_facts_whose_key_or_value_contains_it(edge: Edge) -> None:
    """q matches inside keys and values whatever the case; no match is an empty list."""
    remember(edge, "color", "Blue", T0)
    remember(edge, "city", "Lisbon", T0)
    remember(edge, "pet", "a greyhound", T0)

    def keys(**params: Any) -> list[str]:
        return [i["key"] for i in edge.get("/api/memory/knowledge", **params).json()["items"]]

    assert keys(q="LISB") == ["city"]
    assert keys(q="blue") == ["color"]
    assert keys(q="pe") == ["pet"]
    assert keys(q="100%") == []
    assert keys(q="") == ["city", "color", "pet"]


def test_knowledge_pages_with_limit_and_offset(edge: Edge) -> None:
    """limit and offset walk the list in key order; past the end the page is empty."""
    for key in ("a", "b", "c"):
        remember(edge, key, f"value {key}", T0)

    def page(limit: int, offset: str | int) -> list[str]:
        response = edge.get("/api/memory/knowledge", limit=limit, offset=offset)
        return [i["key"] for i in response.json()["items"]]

    assert page(2, 0) == ["a", "b"]
    assert page(2, 2) == ["c"]
    assert page(1000, 3) == []
    assert page(1, "99999999999999999999999") == []


# -- strict query parameters --

@pytest.mark.parametrize(("path", "message"), [
    ("/api/memory/knowledge?limit=abc",
     "limit: must be a whole number from 1 to 1000, got 'abc'"),
    ("/api/memory/knowledge?limit=0", "limit: must be a whole number from 1 to 1000, got '0'"),
    ("/api/memory/knowledge?limit=1001",
     "limit: must be a whole number from 1 to 1000, got '1001'"),
    ("/api/memory/knowledge?limit=%2B5", "limit: must be a whole number from 1 to 1000, got '+5'"),
    ("/api/memory/episodes?limit=1.5", "limit: must be a whole number from 1 to 1000, got '1.5'"),
    ("/api/memory/episodes?offset=-1", "offset: must be a whole number of at least 0, got '-1'"),
    ("/api/memory/knowledge?history=yes", "history: must be 0, 1, true or false, got 'yes'"),
    ("/api/memory/knowledge?limit=%3Cb%3E%C3%A9",
     "limit: must be a whole number from 1 to 1000, got '<b>é'"),
    ("/api/memory/knowledge?limit=1&limit=2", "limit: given 2 times; give it once"),
    ("/api/memory/knowledge?colour=red",
     "unknown query parameter 'colour'; this endpoint accepts: q, history, limit, offset"),
    ("/api/memory/episodes?history=1",
     "unknown query parameter 'history'; this endpoint accepts: q, limit, offset"),
    ("/api/memory/search", "q: required, 1 to 1000 characters, not blank"),
    ("/api/memory/search?q=%20%20", "q: required, 1 to 1000 characters, not blank"),
    ("/api/memory/search?q=" + "x" * 1001, "q: at most 1000 characters, got 1001"),
    ("/api/memory/search?q=cat&k=51", "k: must be a whole number from 1 to 50, got '51'"),
    ("/api/turns/turn-1/prompts?call=1",
     "unknown query parameter 'call'; this endpoint accepts: none"),
    ("/api/turns/bad%20id!/prompts",
     "turn_id: must be 1 to 128 letters, digits, '_', '.', ':' or '-', got 'bad id!'"),
    ("/api/turns/" + "t" * 129 + "/prompts",
     "turn_id: must be 1 to 128 letters, digits, '_', '.', ':' or '-', got '"
     + "t" * 40 + "'..."),
])
def test_a_bad_query_gets_a_400_that_names_the_parameter_and_what_it_accepts(
    edge: Edge, path: str, message: str,
) -> None:
    """An unknown, repeated or out-of-range parameter is refused with a JSON body saying which
    one and what is allowed, quoting the value as sent."""
    r = edge.client.get(path)
    assert r.status_code == 400
    assert r.headers["content-type"] == "application/json"
    assert r.json() == error(400, message)


# -- episodes --

def test_episodes_list_newest_first_and_q_ranks_the_matching_ones_best_first(
    edge: Edge,
) -> None:
    """Without q the newest episode comes first; with q only episodes that match it, the
    best match first even when it is older."""
    many = episode(edge, "Tomatoes tomatoes tomatoes: picked the tomatoes", T0,
                   entities=("tomatoes",))
    once = episode(edge, "Planned the garden beds and the tomatoes for spring, the fence, "
                   "the shed and the compost heap behind the garage", T0 + 1)
    other = episode(edge, "Booked a flight to Lisbon", T0 + 2)

    listed = edge.get("/api/memory/episodes").json()["items"]
    assert [e["id"] for e in listed] == [other, once, many]
    assert listed[0] == {
        "id": other, "channel": "main", "gist": "Booked a flight to Lisbon", "intent": "chat",
        "outcome": "noted", "entities": [], "open_loops": [], "salience": 0.5, "valence": 0.0,
        "transcript_from": 1, "transcript_to": 2, "encoding_id": "encoding-1",
        "happened_at": T0 + 2, "created_at": T0 + 2,
    }
    found = edge.get("/api/memory/episodes", q="tomato").json()["items"]
    assert [e["id"] for e in found] == [many, once]
    assert found[0]["entities"] == ["tomatoes"]
    second = edge.get("/api/memory/episodes", q="tomato", limit=1, offset=1).json()["items"]
    assert [e["id"] for e in second] == [once]
    assert edge.get("/api/memory/episodes", q="the").json()["items"] == []
    assert [e["id"] for e in edge.get("/api/memory/episodes", limit=1, offset=2).json()[
        "items"]] == [many]


# -- search --

def test_search_returns_each_hit_with_the_scores_that_ranked_it(edge: Edge) -> None:
    """A stored message and a fact that share a word come back with their kind, text and
    full-text rank; with no embedder, degraded says why vectors were left out."""
    with edge.write() as conn:
        message = memory_writes.add_transcript(
            conn, "main", None, role="user", text="I adopted a greyhound called Biscuit", at=T0)
    fact = remember(edge, "pet", "Biscuit the greyhound", T0 + 5 * DAY)

    r = edge.get("/api/memory/search", q="my greyhound?", k=5)
    assert r.status_code == 200
    body = r.json()
    assert body["query"] == "my greyhound?"
    assert isinstance(body["degraded"], str)
    assert "embedder" in body["degraded"]
    results = {(hit["kind"], hit["id"]): hit for hit in body["results"]}
    assert set(results) == {("message", message), ("knowledge", fact)}
    said = results["message", message]
    assert {k: said[k] for k in ("text", "created_at", "channel", "role", "key",
                                 "vector_rank", "similarity")} == {
        "text": "I adopted a greyhound called Biscuit", "created_at": T0, "channel": "main",
        "role": "user", "key": None, "vector_rank": None, "similarity": None}
    known = results["knowledge", fact]
    assert (known["text"], known["key"], known["channel"]) == (
        "pet: Biscuit the greyhound", "pet", None)
    assert sorted([said["fts_rank"], known["fts_rank"]]) == [1, 2]
    for hit in (said, known):
        assert hit["rrf"] == pytest.approx(1 / (RRF_K + hit["fts_rank"]))
        assert 0 < hit["score"] <= hit["rrf"]
        assert 0 < hit["recency"] <= 1
        assert hit["strength"] > 0
    assert said["recency"] < known["recency"]  # ten days old against five
    assert [h["score"] for h in body["results"]] == sorted(
        (h["score"] for h in body["results"]), reverse=True)
    (best,) = edge.get("/api/memory/search", q="greyhound", k=1).json()["results"]
    assert (best["kind"], best["id"]) == (body["results"][0]["kind"], body["results"][0]["id"])
    # Browsing is not recalling: no memory grew stronger.
    assert edge.rows("SELECT count(*) FROM memory_strength") == [(0,)]


# -- forgetting --

def test_forgetting_a_fact_removes_it_from_listings_search_and_the_full_text_index(
    edge: Edge,
) -> None:
    """DELETE answers 200 naming the item, then 404 the second time; the fact is gone from the
    listing, from search and from memory_fts."""
    fact = remember(edge, "pet", "Biscuit the greyhound", T0)
    kept = remember(edge, "city", "Lisbon", T0)
    fts_rows = "SELECT count(*) FROM memory_fts WHERE rowid = ?"
    assert edge.rows(fts_rows, mkey(Kind.KNOWLEDGE, fact)) == [(1,)]
    assert [h["id"] for h in edge.get("/api/memory/search", q="greyhound").json()[
        "results"]] == [fact]

    r = edge.client.delete(f"/api/memory/knowledge/{fact}")
    assert r.status_code == 200
    assert r.json() == {"forgotten": {"kind": "knowledge", "id": fact}}
    again = edge.client.delete(f"/api/memory/knowledge/{fact}")
    assert again.status_code == 404
    assert again.json() == error(404, f"no knowledge item {fact}")

    listed = edge.get("/api/memory/knowledge", history=1).json()["items"]
    assert [i["id"] for i in listed] == [kept]
    assert edge.get("/api/memory/search", q="greyhound").json()["results"] == []
    assert edge.rows(fts_rows, mkey(Kind.KNOWLEDGE, fact)) == [(0,)]
    assert edge.rows(fts_rows, mkey(Kind.KNOWLEDGE, kept)) == [(1,)]
    metrics = edge.client.get("/metrics").text
    assert 'chalie_memory_forgotten_total{kind="knowledge"} 1.0' in metrics


def test_forgetting_an_episode_removes_it_from_listings_search_and_the_full_text_index(
    edge: Edge,
) -> None:
    """An episode forgotten by id is gone from the episode list, from q and from search; a
    second DELETE is a 404."""
    gone = episode(edge, "Talked about the greyhound adoption", T0)
    kept = episode(edge, "Booked a flight to Lisbon", T0 + 1)
    assert [e["id"] for e in edge.get("/api/memory/episodes", q="greyhound").json()[
        "items"]] == [gone]

    r = edge.client.delete(f"/api/memory/episodes/{gone}")
    assert r.status_code == 200
    assert r.json() == {"forgotten": {"kind": "episode", "id": gone}}
    again = edge.client.delete(f"/api/memory/episodes/{gone}")
    assert again.status_code == 404
    assert again.json() == error(404, f"no episode item {gone}")

    assert [e["id"] for e in edge.get("/api/memory/episodes").json()["items"]] == [kept]
    assert edge.get("/api/memory/episodes", q="greyhound").json()["items"] == []
    assert edge.get("/api/memory/search", q="greyhound").json()["results"] == []
    assert edge.rows("SELECT count(*) FROM memory_fts WHERE rowid = ?",
                     mkey(Kind.EPISODE, gone)) == [(0,)]


@pytest.mark.parametrize("raw", ["abc", "0", "-3", "1.5", "%2B7", "", "7/8", "%C3%A9"])
def test_forgetting_with_an_id_that_is_not_a_positive_whole_number_is_a_400(
    edge: Edge, raw: str,
) -> None:
    """A malformed id is a JSON 400 naming `id`, for both kinds, and nothing is forgotten."""
    fact = remember(edge, "color", "green", T0)
    for kind in ("knowledge", "episodes"):
        r = edge.client.delete(f"/api/memory/{kind}/{raw}")
        assert r.status_code == 400
        assert r.json()["error"].startswith("id: must be a positive whole number, got ")
    assert [i["id"] for i in edge.get("/api/memory/knowledge").json()["items"]] == [fact]


def test_forgetting_an_id_too_large_for_any_row_is_a_404(edge: Edge) -> None:
    """An id past what SQLite can hold names no item: 404, and the StoreWriter keeps running."""
    huge = "99999999999999999999999"
    r = edge.client.delete(f"/api/memory/knowledge/{huge}")
    assert r.status_code == 404
    assert r.json() == error(404, f"no knowledge item {huge}")
    fact = remember(edge, "color", "green", T0)
    assert edge.client.delete(f"/api/memory/knowledge/{fact}").status_code == 200


def test_forgetting_while_the_store_writer_is_not_running_is_a_503(edge: Edge) -> None:
    """With no StoreWriter (restarting) DELETE answers 503 and the item stays."""
    fact = remember(edge, "color", "green", T0)
    writer = edge.directory.get("store_writer")
    assert writer is not None
    edge.directory.set("store_writer", None)
    r = edge.client.delete(f"/api/memory/knowledge/{fact}")
    assert r.status_code == 503
    assert r.json() == error(503, "the store is restarting; try again shortly")
    writer.stop(block=True, timeout=WAIT_S)
    edge.directory.set("store_writer", writer)  # a dead ref, as just after a crash
    r = edge.client.delete(f"/api/memory/knowledge/{fact}")
    assert r.status_code == 503
    assert [i["id"] for i in edge.get("/api/memory/knowledge").json()["items"]] == [fact]


# -- prompt snapshots --

def store_turn_prompts(edge: Edge, turn_id: str) -> None:
    first = ChatRequest(
        system="You are Chalie.",
        messages=(Message("user", "What is my dog called?"),),
        tools=(ToolSpec("memory", "Remember or recall facts.\nMore detail.",
                        {"type": "object", "properties": {}}),),
    )
    second = ChatRequest(
        system="Summarise the trail.",
        messages=(Message("user", "trail"), Message("assistant", "so far")),
        response_format=JsonSchemaFormat("trail", {"type": "object"}),
    )
    with edge.write() as conn:
        memory_writes.insert_snapshots(conn, turn_id, [
            snapshot(first, call=1, purpose="act", now=T0),
            snapshot(second, call=2, purpose="compact_trail", now=T0 + 1),
        ])


def test_a_turns_prompts_come_back_exactly_as_sent_in_call_order(edge: Edge) -> None:
    """GET /api/turns/<id>/prompts gives each LLM request of the turn: system, messages,
    tools and response format."""
    store_turn_prompts(edge, "turn-1")
    store_turn_prompts(edge, "encoding-2")
    r = edge.get("/api/turns/turn-1/prompts")
    assert r.status_code == 200
    assert r.json() == {"turn_id": "turn-1", "prompts": [
        {"call": 1, "purpose": "act", "system": "You are Chalie.",
         "messages": [{"role": "user", "content": "What is my dog called?"}],
         "tools": [{"name": "memory", "description": "Remember or recall facts.\nMore detail.",
                    "parameters": {"type": "object", "properties": {}}}],
         "response_format": None, "created_at": T0},
        {"call": 2, "purpose": "compact_trail", "system": "Summarise the trail.",
         "messages": [{"role": "user", "content": "trail"},
                      {"role": "assistant", "content": "so far"}],
         "tools": [], "response_format": {"name": "trail", "schema": {"type": "object"}},
         "created_at": T0 + 1},
    ]}


def test_a_turn_without_stored_prompts_is_a_404_that_says_how_many_turns_are_kept(
    edge: Edge,
) -> None:
    """An unknown (or pruned) turn id is a 404 naming it and the number of turns kept."""
    store_turn_prompts(edge, "turn-1")
    r = edge.get("/api/turns/turn-2/prompts")
    assert r.status_code == 404
    assert r.json() == error(404, "no prompt snapshots for turn 'turn-2': unknown, or older "
                                  "than the last 50 turns (snapshots are kept for the last 50 "
                                  "turns only)")
