"""Retention on real SQLite files: old covered messages go with everything that indexes them,
nothing else does, each step stays within its batch, and the file shrinks and is kept compact."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from chalie.memory import fts
from chalie.memory.bit_index import BitIndex
from chalie.memory.embedders import HashedEmbedder
from chalie.store import db, memory_writes, queries, retention, writes
from chalie.store.memory_writes import EpisodeRow
from chalie.store.records import StoredSteering, StoredToolCall, TurnRecord
from chalie.values.memory import Kind, mkey

TIMEOUT_MS = 2000
DAY = 86_400.0
NOW = 1_700_000_000.0
OLD = NOW - 100 * DAY  # older than a transcript_days of 90 keeps
CUTOFF = NOW - 90 * DAY


def turn(conn: apsw.Connection, turn_id: str, said: str, answered: str, *, at: float,
         channel: str = "main", tools: int = 0) -> None:
    """Store an answered turn as the StoreWriter does (turn row, tool calls, transcript)."""
    calls = tuple(StoredToolCall(iteration=1, call_id=f"c{n}", name="memory", args="{}",
                                 result="ok", is_error=False, duration_ms=1.0)
                  for n in range(tools))
    with db.immediate(conn):
        writes.insert_turn(conn, TurnRecord(
            id=turn_id, channel=channel, client_id=None, source="text", user_text=said,
            response_text=answered, outcome="answered", error=None, iterations=1, llm_calls=1,
            tokens_total=10, response_time_s=1.0, started_at=at, finished_at=at + 1,
            tool_calls=calls, steering=(StoredSteering("also this", 1),)))


def cover(conn: apsw.Connection, upto: int, channel: str = "main") -> None:
    """An episode covering the channel's transcript up to `upto`, as the Encoder stores it."""
    row = EpisodeRow(gist="gardening talk", intent="", outcome="", entities=(), open_loops=(),
                     salience=0.5, valence=0.0, transcript_from=1, transcript_to=upto,
                     happened_at=OLD)
    with db.immediate(conn):
        memory_writes.insert_episodes(conn, channel, [row], upto_transcript_id=upto,
                                      encoding_id=f"enc-{upto}", now=OLD)


def embed_transcript(conn: apsw.Connection) -> int:
    """Vectors for every message, in a space of their own (and their bit-index rows)."""
    with db.immediate(conn):
        space = memory_writes.ensure_space(conn, "hashed-v1-384", now=OLD)
    rows = [(int(i), HashedEmbedder().embed_one(str(t)))
            for i, t in conn.execute("SELECT id, text FROM transcript")]
    with db.immediate(conn):
        memory_writes.store_vectors(conn, space, "hashed", Kind.TRANSCRIPT, rows,
                                    upto_id=max(i for i, _ in rows), now=OLD)
    return space


def prune(conn: apsw.Connection, kind: str, before: float, batch: int = 500) -> int:
    with db.immediate(conn):
        return retention.prune(conn, kind, before, batch)


def prune_all(conn: apsw.Connection, kind: str, before: float, batch: int) -> list[int]:
    """Steps until one deletes fewer than a batch, as the Housekeeper asks for them."""
    counts = [prune(conn, kind, before, batch)]
    while counts[-1] == batch:
        counts.append(prune(conn, kind, before, batch))
    return counts


def ids(conn: apsw.Connection, sql: str) -> set[int]:
    return {int(r[0]) for r in conn.execute(sql)}


def test_old_covered_messages_go_with_their_fts_vector_and_strength_rows(
        writer: apsw.Connection) -> None:
    """A message older than transcript_days that an episode covers is deleted with its
    full-text row, its vectors (so the bit pass cannot find it) and its retrieval strength."""
    turn(writer, "old", "tomatoes need sun", "they do", at=OLD)
    turn(writer, "new", "peppers need water", "daily", at=NOW - DAY)
    space = embed_transcript(writer)
    with db.immediate(writer):
        memory_writes.record_recalls(writer, [mkey(Kind.TRANSCRIPT, 1)], OLD)
    cover(writer, upto=2)

    assert prune(writer, "transcript", CUTOFF) == 2

    gone = {mkey(Kind.TRANSCRIPT, 1), mkey(Kind.TRANSCRIPT, 2)}
    assert ids(writer, "SELECT id FROM transcript") == {3, 4}
    assert not gone & ids(writer, "SELECT rowid FROM memory_fts")
    assert not gone & ids(writer, "SELECT mkey FROM vectors")
    assert not gone & set(BitIndex(space).nearest(writer, HashedEmbedder().embed_one("x"), 100))
    assert ids(writer, "SELECT mkey FROM memory_strength") == set()
    assert fts.search(writer, "tomatoes", 10) == []
    assert fts.search(writer, "peppers", 10) == [mkey(Kind.TRANSCRIPT, 3)]
    assert fts.search(writer, "gardening", 10) == [mkey(Kind.EPISODE, 1)]


def test_old_messages_no_episode_covers_stay(writer: apsw.Connection) -> None:
    """However old, a message the encoder has not turned into episodes yet is kept."""
    turn(writer, "a", "first", "one", at=OLD)
    turn(writer, "b", "second", "two", at=OLD + 1)
    turn(writer, "c", "third", "three", at=OLD + 2)
    cover(writer, upto=2)  # turn a only

    assert prune(writer, "transcript", CUTOFF) == 2
    assert ids(writer, "SELECT id FROM transcript") == {3, 4, 5, 6}


def test_recent_covered_messages_stay(writer: apsw.Connection) -> None:
    """A covered message younger than transcript_days is kept."""
    turn(writer, "a", "first", "one", at=OLD)
    turn(writer, "b", "second", "two", at=NOW - DAY)
    turn(writer, "c", "third", "three", at=NOW)
    cover(writer, upto=6)

    assert prune(writer, "transcript", CUTOFF) == 2
    assert ids(writer, "SELECT id FROM transcript") == {3, 4, 5, 6}


def test_the_newest_message_stays_so_its_id_is_never_reused(writer: apsw.Connection) -> None:
    """When everything is old and covered, the store's newest message is kept, and the next
    message gets a new id the encoding mark has not passed."""
    turn(writer, "a", "first", "one", at=OLD)
    cover(writer, upto=2)

    assert prune(writer, "transcript", CUTOFF) == 1
    turn(writer, "b", "again", "hello", at=NOW)
    assert ids(writer, "SELECT id FROM transcript") == {2, 3, 4}


def test_a_step_deletes_at_most_a_batch(writer: apsw.Connection) -> None:
    """Each step deletes at most `batch` messages; steps go on until one deletes fewer."""
    for n in range(12):
        turn(writer, f"t{n}", f"message {n}", f"answer {n}", at=OLD + n)
    turn(writer, "last", "recent", "yes", at=NOW)
    cover(writer, upto=26)

    assert prune_all(writer, "transcript", CUTOFF, batch=5) == [5, 5, 5, 5, 4]
    assert ids(writer, "SELECT id FROM transcript") == {25, 26}


def test_history_and_recall_still_work_after_pruning(writer: apsw.Connection) -> None:
    """The channel's history reads the messages that are left, recall finds what is left,
    and the turns of pruned messages keep their row without their text."""
    turn(writer, "old", "my cat is called Tom", "noted", at=OLD, tools=2)
    turn(writer, "new", "what about the dog", "Rex", at=NOW)
    with db.immediate(writer):
        writes.insert_checkpoint(writer, "main", "the person has a cat", upto_transcript_id=2,
                                 turn_id="old", now=OLD)
    cover(writer, upto=2)

    assert prune(writer, "transcript", CUTOFF) == 2

    history = queries.recent_transcript(writer, "main", 10)
    assert [(h.role, h.text) for h in history] == [("user", "what about the dog"),
                                                   ("assistant", "Rex")]
    assert fts.search(writer, "dog", 10) == [mkey(Kind.TRANSCRIPT, 3)]
    checkpoint = queries.latest_checkpoint(writer, "main")
    assert checkpoint is not None
    assert checkpoint.text == "the person has a cat"
    assert writer.execute("SELECT user_text, response_text, tokens_total FROM turns WHERE "
                          "id = 'old'").fetchall() == [("", None, 10)]
    assert writer.execute("SELECT count(*) FROM steering WHERE turn_id = 'old'").fetchall() \
        == [(0,)]
    assert writer.execute("PRAGMA foreign_key_check").fetchall() == []


def test_tool_calls_go_by_their_turns_age(writer: apsw.Connection) -> None:
    """Tool-call records of turns older than tool_calls_days go, in batches; newer stay."""
    turn(writer, "old", "look it up", "found", at=OLD, tools=3)
    turn(writer, "new", "again", "found", at=NOW, tools=2)

    assert prune_all(writer, "tool_calls", NOW - 30 * DAY, batch=2) == [2, 1]
    assert writer.execute("SELECT turn_id, count(*) FROM tool_calls GROUP BY turn_id")\
        .fetchall() == [("new", 2)]


def test_old_events_go_but_each_channels_newest_stays(writer: apsw.Connection) -> None:
    """Frames older than events_days go; the channel's newest stays, so seq carries on."""
    with db.immediate(writer):
        writes.insert_events(writer, "main", [(s, "message", None, "{}") for s in (1, 2, 3)],
                             now=OLD)
        writes.insert_events(writer, "main", [(4, "message", None, "{}")], now=NOW)
        writes.insert_events(writer, "quiet", [(1, "message", None, "{}")], now=OLD)

    assert prune(writer, "events", NOW - 30 * DAY) == 3
    assert writer.execute("SELECT channel, seq FROM events ORDER BY channel, seq").fetchall() \
        == [("main", 4), ("quiet", 1)]
    assert queries.last_seq(writer, "quiet") == 1


def test_expired_sessions_and_pairing_keys_go(writer: apsw.Connection) -> None:
    """Login sessions and pairing keys past their expiry are deleted; live ones stay."""
    with db.immediate(writer):
        writer.executemany("INSERT INTO auth_sessions (token_hash, created_at, expires_at) "
                           "VALUES (?, ?, ?)", [("gone", OLD, NOW - 1), ("live", OLD, NOW + 1)])
        writer.executemany("INSERT INTO pairing_keys (key_hash, created_at, expires_at) "
                           "VALUES (?, ?, ?)", [("gone", OLD, NOW - 1), ("live", OLD, NOW + 1)])

    assert prune(writer, "auth_sessions", NOW) == 1
    assert prune(writer, "pairing_keys", NOW) == 1
    assert writer.execute("SELECT token_hash FROM auth_sessions").fetchall() == [("live",)]
    assert writer.execute("SELECT key_hash FROM pairing_keys").fetchall() == [("live",)]


def test_old_images_checkpoints_and_dmn_runs_go_keeping_what_is_read(
        writer: apsw.Connection) -> None:
    """Images and checkpoints older than transcript_days go, except each channel's newest
    checkpoint; old DMN runs go except the newest of each trigger and the last that thought."""
    with db.immediate(writer):
        for image_id, at in (("old", OLD), ("new", NOW)):
            writer.execute("INSERT INTO images (id, media_type, size, data, created_at) VALUES "
                           "(?, 'image/png', 1, x'00', ?)", (image_id, at))
        for n in range(3):
            writes.insert_checkpoint(writer, "main", f"state {n}", upto_transcript_id=n,
                                     turn_id=None, now=OLD + n)
        for trigger, at, turn_id in (("idle", OLD, "thought"), ("idle", OLD + 1, None),
                                     ("idle", OLD + 2, None), ("cadence", OLD, None),
                                     ("cadence", OLD + 1, None)):
            writer.execute("INSERT INTO dmn_runs (trigger, at, result, fingerprint, turn_id) "
                           "VALUES (?, ?, 'nothing', '', ?)", (trigger, at, turn_id))

    assert prune(writer, "images", CUTOFF) == 1
    assert prune(writer, "checkpoints", CUTOFF) == 2
    assert prune(writer, "dmn_runs", NOW - 30 * DAY) == 2
    assert writer.execute("SELECT id FROM images").fetchall() == [("new",)]
    assert writer.execute("SELECT text FROM checkpoints").fetchall() == [("state 2",)]
    assert writer.execute("SELECT trigger, at, turn_id FROM dmn_runs ORDER BY id").fetchall() \
        == [("idle", OLD, "thought"), ("idle", OLD + 2, None), ("cadence", OLD + 1, None)]


def test_an_unknown_kind_is_refused_by_name(writer: apsw.Connection) -> None:
    """A prune step of a kind retention does not know names it and the kinds it knows."""
    with pytest.raises(ValueError, match=r"unknown prune kind 'memories'.*transcript"):
        prune(writer, "memories", NOW)


def test_vacuum_shrinks_the_file_after_a_big_delete(writer: apsw.Connection,
                                                    data_dir: Path) -> None:
    """After many rows are deleted, incremental vacuum returns their pages and the file
    shrinks."""
    with db.immediate(writer):
        writer.executemany("INSERT INTO images (id, media_type, size, data, created_at) VALUES "
                           "(?, 'image/png', 50000, ?, ?)",
                           [(f"i{n}", b"\x89" * 50_000, OLD) for n in range(40)])
    writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db_file = db.db_path(data_dir)
    full = db_file.stat().st_size
    assert prune(writer, "images", CUTOFF) == 40

    with db.immediate(writer):
        freed = retention.incremental_vacuum(writer, 100_000)
    writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    assert freed > 400  # 40 images of 50 KB in 4 KB pages
    assert db_file.stat().st_size < full - 400 * 4096
    with db.immediate(writer):
        assert retention.incremental_vacuum(writer, 100) == 0


def test_a_new_store_vacuums_incrementally(writer: apsw.Connection) -> None:
    """A store created by this code has auto_vacuum = INCREMENTAL from the start."""
    assert writer.execute("PRAGMA auto_vacuum").fetchall() == [(2,)]


def test_an_old_store_is_converted_once_keeping_its_data(tmp_path: Path) -> None:
    """A store made without incremental vacuum is rebuilt once when opened, with its data."""
    old = db.connect(db.db_path(tmp_path), busy_timeout_ms=TIMEOUT_MS)
    db.migrate(old)
    turn(old, "a", "kept through the conversion", "yes", at=OLD)
    assert old.execute("PRAGMA auto_vacuum").fetchall() == [(0,)]
    old.close()

    conn = db.open_writer(tmp_path, busy_timeout_ms=TIMEOUT_MS, synchronous="FULL")
    try:
        assert conn.execute("PRAGMA auto_vacuum").fetchall() == [(2,)]
        assert conn.execute("SELECT rowid FROM memory_fts WHERE memory_fts MATCH 'conversion'")\
            .fetchall() == [(mkey(Kind.TRANSCRIPT, 1),)]
        assert conn.execute("SELECT count(*) FROM turns").fetchall() == [(1,)]
    finally:
        conn.close()
