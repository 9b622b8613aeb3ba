"""kill -9 at random points in a stream of turns. After every restart: each turn whose message
frame the client saw is stored whole, the database is intact, resume replays the log, and no
turn is half-stored. CHALIE_CRASH_KILLS sets the number of kills (20 by default; more by hand)."""

from __future__ import annotations

import json
import os
import random
import threading
from pathlib import Path
from typing import Any

import websocket

from tests.integration.harness import ServerProcess, StubLlm, completion, db_rows

KILLS = int(os.environ.get("CHALIE_CRASH_KILLS", "20"))
SEED = int(os.environ.get("CHALIE_CRASH_SEED", "20261122"))



def answer_with_tool(n: int) -> list[dict[str, Any]]:
    remember = json.dumps({"action": "remember", "key": f"fact {n}", "value": f"value {n}"})
    return [completion(tool_calls=[("memory", remember)]), completion(f"answer {n}")]


def stream_turns(server: ServerProcess, llm: StubLlm, start: int, seen: dict[str, str], *,
                 kill_after_s: float, kill_on_message: bool) -> int:
    """Chat turn after turn until the server is killed; record every message frame seen."""
    client = server.connect()
    n = start
    killer: threading.Timer | None = None
    if not kill_on_message:
        killer = threading.Timer(kill_after_s, server.kill)
        killer.start()
    try:
        while True:
            llm.queue(*answer_with_tool(n))
            client.send({"type": "chat", "text": f"turn {n}"})
            while True:
                frame = client.recv()
                if frame["type"] == "message":
                    seen[frame["exchange_id"]] = frame["blocks"][0]["text"]
                    if kill_on_message:
                        server.kill()  # right after the message frame, as the issue asks
                if frame["type"] == "done":
                    break
            n += 1
    except (websocket.WebSocketException, ConnectionError, json.JSONDecodeError, OSError):
        pass  # the server died under us
    finally:
        if killer is not None:
            killer.cancel()
        server.kill()
    return n


def assert_consistent(db: Path, seen: dict[str, str]) -> None:
    assert db_rows(db, "PRAGMA integrity_check") == [("ok",)]
    stored = dict(db_rows(db, "SELECT id, response_text FROM turns WHERE outcome = 'answered'"))
    for exchange, text in seen.items():
        assert stored.get(exchange) == text, f"turn {exchange} was answered but is not stored"
    for (turn_id, outcome, response) in db_rows(db, "SELECT id, outcome, response_text FROM turns"):
        roles = [r for (r,) in db_rows(db, "SELECT role FROM transcript WHERE turn_id = ? "
                                          "ORDER BY id", turn_id)]
        assert roles == (["user", "assistant"] if response else ["user"]), turn_id
        logged = [t for (t,) in db_rows(db, "SELECT type FROM events WHERE exchange_id = ? "
                                          "ORDER BY seq", turn_id)]
        if logged[:1] == ["status"]:  # older exchanges are pruned from the log, oldest first
            closing = [t for t in logged if t in ("message", "error", "done")]
            assert closing == (["message", "done"] if outcome == "answered" else
                               ["error", "done"])
        if outcome == "answered":
            n = int(str(response).split()[-1])
            assert db_rows(db, "SELECT value FROM knowledge WHERE key = ?", f"fact {n}") == [
                (f"value {n}",)
            ]
            assert db_rows(db, "SELECT count(*) FROM tool_calls WHERE turn_id = ?", turn_id) == [
                (1,)
            ]
    # A frame logged for an exchange with a message has its turn row: the two commit together.
    for (exchange,) in db_rows(db, "SELECT exchange_id FROM events WHERE type = 'message'"):
        assert exchange in stored


def test_kill_9_at_random_points_loses_no_answered_turn(tmp_path: Path, llm: StubLlm) -> None:
    """KILLS crashes, half right after a message frame, half at a random moment."""
    rng = random.Random(SEED)
    seen: dict[str, str] = {}
    n = 0
    for kill in range(KILLS):
        server = ServerProcess(tmp_path, llm).start()
        if kill:
            # Resume works after every crash: the whole log replays in order from seq 0.
            client = server.connect()
            client.send({"type": "resume", "last_seq": 0})
            last = db_rows(server.db_path, "SELECT max(seq) FROM events WHERE channel = 'main'")
            replay = client.recv_until(lambda f, end=last[0][0]: f["seq"] == end)
            assert [f["seq"] for f in replay] == list(range(replay[0]["seq"], last[0][0] + 1))
            client.close()
        n = stream_turns(server, llm, n, seen, kill_after_s=rng.uniform(0.05, 0.6),
                         kill_on_message=kill % 2 == 0)
        assert_consistent(server.db_path, seen)
        while not llm.replies.empty():
            llm.replies.get_nowait()
    assert len(seen) >= KILLS // 2  # each kill-on-message round saw at least one answer
