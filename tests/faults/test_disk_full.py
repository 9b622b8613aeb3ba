"""The store's disk fills while the person chats: every message is answered by an error frame
at once, kept, and stored and answered once space is freed; nothing is lost or doubled, and
/health and /metrics say why meanwhile."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from tests.faults.conftest import fill, kept
from tests.integration.harness import Client, ServerProcess, StubLlm, db_rows, wait_for


def answers(client: Client, count: int) -> list[dict[str, Any]]:
    """Frames up to the `done` after the count-th `message`."""
    frames: list[dict[str, Any]] = []
    while sum(f["type"] == "message" for f in frames) < count:
        frames += client.recv_until(lambda f: f["type"] == "done")
    return frames


def assert_every_exchange_closed(server: ServerProcess) -> None:
    """The log holds every exchange closed: one that ran into the full disk, closed live then,
    is closed in the log too once it could be written (what a client reading it later sees)."""
    opened = {e for (e,) in db_rows(server.db_path, "SELECT DISTINCT exchange_id FROM events "
                                                      "WHERE exchange_id IS NOT NULL")}
    closed = {e for (e,) in db_rows(server.db_path, "SELECT exchange_id FROM events "
                                                      "WHERE type = 'done'")}
    assert opened == closed


def health(server: ServerProcess, cookie: str) -> httpx.Response:
    """/health as the person reads it (the store's state is theirs: the login cookie)."""
    return httpx.get(f"{server.url}/health", timeout=10, cookies={"chalie_session": cookie})


def test_a_full_disk_keeps_every_message_and_answers_it_when_space_is_freed(
    tmp_path: Path, small_disk: Path, llm: StubLlm
) -> None:
    server = ServerProcess(tmp_path, llm, store={"fault_probe_s": 0.2, "hold_messages": 2}
                           ).start()
    try:
        cookie = server.login()  # before the disk fills: a login is a write
        client = server.connect(cookie)
        assert client.turn("before the disk fills")[-2]["type"] == "message"
        filler = fill(small_disk)

        # The first message after the disk fills: an error frame (live: the log cannot take
        # it) says why and that the message is kept, whether its turn ran into the full disk
        # or the store already knew (the last turn's own writes may have found it full).
        started = time.monotonic()
        frames = kept(client, "first while full", "c-1")
        error = next(f for f in frames if f["type"] == "error")
        assert "full" in error["message"]
        assert "kept" in error["message"]
        assert str(small_disk) in error["message"]
        assert error["seq"] == 0  # sent live, as message_delta frames are: not in the log
        assert time.monotonic() - started < 10

        reply = health(server, cookie)
        assert reply.status_code == 503
        store = reply.json()["store"]
        assert store["state"] == "full"
        assert store["held_messages"] == 1
        metrics = httpx.get(f"{server.url}/metrics", timeout=10).text
        assert 'chalie_store_write_failures_total{cause="full"}' in metrics
        assert 'chalie_store_state{state="full"} 1.0' in metrics

        # While the store is known to be full, a message costs no LLM call: kept at once.
        calls = len(llm.requests)
        second = kept(client, "second while full", "c-2")
        assert "kept" in second[-1]["message"]
        # The same message sent again (a client that reconnected) is not kept twice.
        client.send({"type": "chat", "text": "second while full", "client_id": "c-2"})
        assert len(llm.requests) == calls
        assert health(server, cookie).json()["store"]["held_messages"] == 2
        # Past store.hold_messages, a message is refused, saying to send it again.
        client.send({"type": "chat", "text": "third while full", "client_id": "c-3"})
        refused = client.recv_until(lambda f: f["type"] == "error")[-1]
        assert "could not be kept; send it again" in refused["message"]
        assert health(server, cookie).json()["store"]["held_messages"] == 2

        filler.unlink()  # space again: both are stored and answered, in order, once each
        answered = answers(client, 2)
        texts = [f.get("text") for f in answered if f["type"] == "status" and f.get("text")]
        assert texts == ["first while full", "second while full"]
        wait_for(lambda: health(server, cookie).status_code == 200)
        assert health(server, cookie).json()["store"]["state"] == "ok"
        stored = db_rows(server.db_path, "SELECT user_text, client_id FROM turns "
                                         "ORDER BY started_at")
        assert [t for t, _ in stored] == ["before the disk fills", "first while full",
                                          "second while full"]
        assert [c for _, c in stored][1:] == ["c-1", "c-2"]
        assert client.turn("after")[-2]["type"] == "message"
        assert_every_exchange_closed(server)
        # Told once, when it began; nothing crashed on the way.
        errors = [e["event"] for e in server.errors()]
        assert errors == ["store_fault"], server.errors()
        events = [e["event"] for e in server.log_events()]
        assert events.count("store_writable_again") == 1
    finally:
        server.kill()
