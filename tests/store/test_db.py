"""The store: connections, migrations, and the write and read helpers, on real SQLite files."""

from __future__ import annotations

import struct
import threading
from importlib import resources
from pathlib import Path
from typing import Any

import apsw
import pytest

from chalie.store import db, queries, writes
from chalie.store.effects import RememberFact
from chalie.store.records import StoredToolCall, TurnRecord

TIMEOUT_MS = 2000


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "nested" / "data"


def _latest_migration() -> int:
    names = resources.files("chalie.store").joinpath("migrations").iterdir()
    return max(int(e.name.split("_", 1)[0]) for e in names if e.name.endswith(".sql"))


def _turn(turn_id: str = "t1", **changes: Any) -> TurnRecord:
    fields: dict[str, Any] = {
        "id": turn_id, "channel": "default", "client_id": None, "source": "ws",
        "user_text": "hello", "response_text": "hi there", "outcome": "answered", "error": None,
        "iterations": 1, "llm_calls": 2, "tokens_total": 120, "response_time_s": 0.5,
        "started_at": 100.0, "finished_at": 101.0,
    }
    fields.update(changes)
    return TurnRecord(**fields)


def _remember(conn: apsw.Connection, key: str, value: str, now: float) -> None:
    with db.immediate(conn):
        writes.apply_effect(conn, RememberFact(key, value), turn_id="t", now=now)


def _events(conn: apsw.Connection, channel: str, rows: list[tuple[int, str, str | None]]) -> None:
    with db.immediate(conn):
        writes.insert_events(conn, channel, [(s, k, x, "{}") for s, k, x in rows], now=1.0)


# --- connections and migrations -------------------------------------------------------------------

def test_open_writer_creates_directory_and_migrated_database(
    writer: apsw.Connection, data_dir: Path
) -> None:
    """Opening the store in a missing directory creates it, the DB file and the latest schema."""
    assert (data_dir / "chalie.db").is_file()
    assert writer.execute("PRAGMA user_version").fetchall() == [(_latest_migration(),)]
    tables = {r[0] for r in writer.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"turns", "tool_calls", "transcript", "knowledge", "events"} <= tables


def test_migrating_again_changes_nothing(writer: apsw.Connection, data_dir: Path) -> None:
    """Re-running migrations, or reopening the store, keeps the version and the stored rows."""
    _remember(writer, "pet", "Rex", now=1.0)
    assert db.migrate(writer) == _latest_migration()
    writer.close()
    again = db.open_writer(data_dir, busy_timeout_ms=TIMEOUT_MS, synchronous="NORMAL")
    try:
        assert again.execute("PRAGMA user_version").fetchall() == [(_latest_migration(),)]
        assert again.execute("SELECT key, value FROM knowledge").fetchall() == [("pet", "Rex")]
    finally:
        again.close()


def test_writer_runs_in_wal_mode(writer: apsw.Connection) -> None:
    """The writer's journal mode is WAL so readers never block it."""
    assert writer.execute("PRAGMA journal_mode").fetchall() == [("wal",)]


def test_sqlite_vec_answers_knn_queries_on_the_writer(writer: apsw.Connection) -> None:
    """sqlite-vec is loaded: a vec0 table returns the nearest vectors first."""
    assert writer.execute("SELECT vec_version()").fetchone()[0].startswith("v")
    writer.execute("CREATE VIRTUAL TABLE vecs USING vec0(embedding float[2])")
    for rowid, vec in [(1, (0.0, 0.0)), (2, (1.0, 1.0)), (3, (5.0, 5.0))]:
        writer.execute("INSERT INTO vecs (rowid, embedding) VALUES (?, ?)",
                       (rowid, struct.pack("2f", *vec)))
    rows = writer.execute(
        "SELECT rowid FROM vecs WHERE embedding MATCH ? AND k = ? ORDER BY distance",
        (struct.pack("2f", 0.9, 0.9), 2),
    ).fetchall()
    assert rows == [(2,), (1,)]


def test_readers_load_sqlite_vec_and_see_committed_rows(
    writer: apsw.Connection, data_dir: Path
) -> None:
    """A reader connection has sqlite-vec and sees what the writer committed."""
    _remember(writer, "city", "Lyon", now=1.0)
    reader = db.Readers(db.db_path(data_dir), busy_timeout_ms=TIMEOUT_MS).get()
    assert reader.execute("SELECT vec_version()").fetchone()[0].startswith("v")
    assert reader.execute("SELECT value FROM knowledge").fetchall() == [("Lyon",)]


def test_a_reader_keeps_a_small_page_cache_the_writer_the_default(
    writer: apsw.Connection, data_dir: Path
) -> None:
    """Every worker thread has a reader: their caches, not the store, made the server grow."""
    reader = db.Readers(db.db_path(data_dir), busy_timeout_ms=TIMEOUT_MS).get()
    assert reader.execute("PRAGMA cache_size").fetchone()[0] == -db.READER_CACHE_KIB
    assert writer.execute("PRAGMA cache_size").fetchone()[0] == -2000  # SQLite's default


def test_readers_give_one_connection_per_thread(writer: apsw.Connection, data_dir: Path) -> None:
    """The same thread gets the same reader twice; another thread gets its own."""
    readers = db.Readers(db.db_path(data_dir), busy_timeout_ms=TIMEOUT_MS)
    mine = readers.get()
    assert readers.get() is mine
    theirs: list[apsw.Connection] = []
    thread = threading.Thread(target=lambda: theirs.append(readers.get()))
    thread.start()
    thread.join()
    assert len(theirs) == 1
    assert theirs[0] is not mine


def test_a_transient_reader_is_its_own_and_closed_after_use(
    writer: apsw.Connection, data_dir: Path
) -> None:
    """`transient()` reads what the writer committed on a connection that is not the thread's
    kept one and is closed on leaving: a thread that reads once keeps nothing open."""
    _remember(writer, "city", "Lyon", now=1.0)
    readers = db.Readers(db.db_path(data_dir), busy_timeout_ms=TIMEOUT_MS)
    with readers.transient() as conn:
        assert conn.execute("SELECT value FROM knowledge").fetchall() == [("Lyon",)]
        assert conn is not readers.get()
    with pytest.raises(apsw.ConnectionClosedError):
        conn.execute("SELECT 1")


def test_readers_refuse_writes(writer: apsw.Connection, data_dir: Path) -> None:
    """Writing through a reader fails with a read-only error and stores nothing."""
    reader = db.Readers(db.db_path(data_dir), busy_timeout_ms=TIMEOUT_MS).get()
    with pytest.raises(apsw.ReadOnlyError):
        reader.execute("INSERT INTO knowledge (key, value, created_at) VALUES ('a', 'b', 1)")
    assert writer.execute("SELECT count(*) FROM knowledge").fetchall() == [(0,)]


def test_immediate_rolls_back_when_the_block_raises(writer: apsw.Connection) -> None:
    """A write inside a failed transaction block is not stored, and the error reaches the caller."""
    def remember_then_fail() -> None:
        with db.immediate(writer):
            writes.apply_effect(writer, RememberFact("pet", "Rex"), turn_id="t", now=1.0)
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        remember_then_fail()
    assert writer.execute("SELECT count(*) FROM knowledge").fetchall() == [(0,)]
    _remember(writer, "pet", "Rex", now=2.0)  # the connection is usable again
    assert writer.execute("SELECT value FROM knowledge").fetchall() == [("Rex",)]


# --- writes ---------------------------------------------------------------------------------------

def test_insert_turn_stores_turn_tool_calls_and_both_transcript_lines(
    writer: apsw.Connection,
) -> None:
    """A stored turn has its row, its tool calls in order and a user and assistant line."""
    calls = (
        StoredToolCall(1, "call_0", "memory", '{"action":"recall"}', "no facts", False, 3.5),
        StoredToolCall(2, "call_0", "memory", "{bad", "error: not JSON", True, 0.0),
    )
    with db.immediate(writer):
        writes.insert_turn(writer, _turn(tool_calls=calls))
    assert writer.execute(
        "SELECT id, channel, user_text, response_text, outcome, llm_calls, tokens_total FROM turns"
    ).fetchall() == [("t1", "default", "hello", "hi there", "answered", 2, 120)]
    assert writer.execute(
        "SELECT position, iteration, name, args, result, is_error FROM tool_calls ORDER BY position"
    ).fetchall() == [
        (0, 1, "memory", '{"action":"recall"}', "no facts", 0),
        (1, 2, "memory", "{bad", "error: not JSON", 1),
    ]
    assert writer.execute(
        "SELECT turn_id, role, text, created_at FROM transcript ORDER BY id"
    ).fetchall() == [("t1", "user", "hello", 100.0), ("t1", "assistant", "hi there", 101.0)]


def test_insert_turn_without_answer_stores_only_the_user_line(writer: apsw.Connection) -> None:
    """A turn that ended in an error keeps the person's message but no assistant line."""
    with db.immediate(writer):
        writes.insert_turn(writer, _turn(response_text=None, outcome="error", error="LLM down"))
    assert writer.execute("SELECT role, text FROM transcript").fetchall() == [("user", "hello")]
    assert writer.execute("SELECT outcome, error FROM turns").fetchall() == [("error", "LLM down")]


def test_insert_turn_applies_its_effects(writer: apsw.Connection) -> None:
    """Facts a turn remembered are stored with the turn's id and finish time."""
    with db.immediate(writer):
        writes.insert_turn(writer, _turn(effects=(RememberFact("pet", "Rex"),)))
    assert writer.execute("SELECT key, value, turn_id, created_at FROM knowledge").fetchall() == [
        ("pet", "Rex", "t1", 101.0)
    ]


def test_remembering_a_new_value_supersedes_the_old_one(writer: apsw.Connection) -> None:
    """A new value for a key marks the old row superseded at that time, pointing to the new row."""
    _remember(writer, "pet", "Rex", now=1.0)
    _remember(writer, "pet", "Fido", now=2.0)
    rows = writer.execute(
        "SELECT id, value, superseded_at, superseded_by FROM knowledge ORDER BY id"
    ).fetchall()
    (old_id, _, _, _), (new_id, _, _, _) = rows
    assert rows == [(old_id, "Rex", 2.0, new_id), (new_id, "Fido", None, None)]


def test_remembering_the_same_value_twice_adds_no_row(writer: apsw.Connection) -> None:
    """Repeating a fact unchanged keeps the single current row."""
    _remember(writer, "pet", "Rex", now=1.0)
    _remember(writer, "pet", "Rex", now=2.0)
    assert writer.execute(
        "SELECT value, created_at, superseded_at FROM knowledge"
    ).fetchall() == [("Rex", 1.0, None)]


# --- reads ----------------------------------------------------------------------------------------

def test_recent_transcript_is_oldest_first_and_limited(writer: apsw.Connection) -> None:
    """The last N lines of a channel come back in the order they were said."""
    with db.immediate(writer):
        for n in range(3):
            writes.insert_turn(writer, _turn(f"t{n}", user_text=f"q{n}", response_text=f"a{n}",
                                             started_at=10.0 * n, finished_at=10.0 * n + 1))
        writes.insert_turn(writer, _turn("other", channel="elsewhere", user_text="x"))
    lines = queries.recent_transcript(writer, "default", 3)
    assert [(h.role, h.text) for h in lines] == [("assistant", "a1"), ("user", "q2"),
                                                 ("assistant", "a2")]
    assert len(queries.recent_transcript(writer, "default", 100)) == 6
    assert queries.recent_transcript(writer, "default", 0) == []


def test_current_facts_match_key_or_value_ignoring_case(writer: apsw.Connection) -> None:
    """A query finds current facts by key or value in any case, newest first, not old values."""
    _remember(writer, "pet", "Rex the Dog", now=1.0)
    _remember(writer, "favourite colour", "Green", now=2.0)
    _remember(writer, "car", "Dog-red van", now=3.0)
    _remember(writer, "car", "Blue bike", now=4.0)
    assert [(f.key, f.value) for f in queries.current_facts(writer, "DOG", 10)] == [
        ("pet", "Rex the Dog")
    ]
    assert [f.key for f in queries.current_facts(writer, "  Color ", 10)] == ["favorite color"]
    assert [f.key for f in queries.current_facts(writer, "", 2)] == ["car", "favorite color"]


def test_current_facts_treat_percent_and_underscore_literally(writer: apsw.Connection) -> None:
    """Searching for "50%" or "a_b" finds only facts containing those exact characters."""
    _remember(writer, "discount", "50% off", now=1.0)
    _remember(writer, "price", "500 euros", now=2.0)
    _remember(writer, "file", "a_b.txt", now=3.0)
    _remember(writer, "other", "axb.txt", now=4.0)
    assert [f.key for f in queries.current_facts(writer, "50%", 10)] == ["discount"]
    assert [f.key for f in queries.current_facts(writer, "a_b", 10)] == ["file"]
    assert [f.key for f in queries.current_facts(writer, "%", 10)] == ["discount"]


def test_current_facts_find_non_ascii_values(writer: apsw.Connection) -> None:
    """A fact "Émile" is found when the person searches for "Émile" or "émile"."""
    _remember(writer, "teacher", "Émile", now=1.0)
    assert [f.value for f in queries.current_facts(writer, "Émile", 10)] == ["Émile"]
    assert [f.value for f in queries.current_facts(writer, "émile", 10)] == ["Émile"]


def test_open_exchange_names_a_cut_off_exchange(writer: apsw.Connection) -> None:
    """A channel whose last exchange has no closing frame reports that exchange."""
    _events(writer, "default", [(1, "status", "ex1"), (2, "done", "ex1"),
                                (3, "status", "ex2"), (4, "text", "ex2"), (5, "hello", None)])
    assert queries.open_exchange(writer, "default") == "ex2"
    assert queries.last_seq(writer, "default") == 5


def test_open_exchange_is_none_when_the_last_exchange_finished(writer: apsw.Connection) -> None:
    """Channels whose last exchange ended in done or error, or that have none, report nothing."""
    _events(writer, "a", [(1, "status", "ex1"), (2, "done", "ex1"), (3, "hello", None)])
    _events(writer, "b", [(1, "status", "ex2"), (2, "error", "ex2")])
    assert queries.open_exchange(writer, "a") is None
    assert queries.open_exchange(writer, "b") is None
    assert queries.open_exchange(writer, "empty") is None
    assert queries.last_seq(writer, "empty") == 0
