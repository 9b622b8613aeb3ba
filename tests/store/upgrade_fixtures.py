"""Stores as an earlier Chalie left them: built from the migration files up to a version, and
seeded with rows written against the columns of that version (read from each migration).

`seed` writes the same person's data whatever the version, so that once upgraded every store
holds what `expected` says, plus the awkward cases the migrations transform: before 0004,
knowledge keys in several spellings ("Favourite colour" and "favorite color" both current, which
0004 merges), a key that normalises to nothing, and no full-text index (0004 builds it from the
rows); before 0006, turns without a path; before 0002/0003, tool calls without approvals and
facts without search text.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import apsw

from chalie.store import db

TIMEOUT_MS = 5000
KIWI = "my parrot is called Kiwi"  # the first thing the person said; FTS must find it
DIM = 8  # the seeded vector space's dimension (bit-indexable: a multiple of 8)


def versions() -> list[int]:
    """Every schema version the migration files define, oldest first."""
    return [number for number, _, _ in db._migrations()]


def build_store(path: Path, version: int) -> apsw.Connection:
    """A new database at `path` with migrations 1..version applied (and no later one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = db.connect(path, busy_timeout_ms=TIMEOUT_MS)
    assert db.migrate(conn, upto=version) == version
    return conn


def seed(conn: apsw.Connection, version: int) -> None:
    """Representative rows in every table a store of `version` has, as that version wrote them."""
    with conn:
        _conversation(conn, version)
        _knowledge(conn, version)
        if version >= 2:
            _steering(conn)
        if version >= 4:
            _memory(conn, version)
        if version >= 5:
            _interfaces(conn)
        if version >= 6:
            _background(conn)
        if version >= 7:
            conn.execute("INSERT INTO images (id, media_type, size, data, created_at) "
                         "VALUES ('img1', 'image/png', 4, x'89504e47', 40.0)")
        if version >= 8:
            _cognition(conn)
        if version >= 9:
            _concepts(conn)
        if version >= 10:
            conn.execute("INSERT INTO situation_summaries (channel, summary, upto_transcript_id, "
                         "updated_at) VALUES ('main', 'planning a spring trip', 3, 48.0)")


# --- version 1 (and the columns later versions added) --------------------------------------------

TURNS = [  # id, channel, client_id, outcome, error, user_text, response_text, path (0006)
    ("t1", "main", "c1", "answered", None, KIWI, "Kiwi is a lovely name", "user"),
    ("t2", "main", None, "error", "llm unreachable", "Lisbon trip in spring", None, "user"),
    ("t3", "other", None, "answered", None, "water the tomatoes", "done", "scheduled"),
]
TRANSCRIPT = [  # id, channel, turn_id, role, text
    (1, "main", "t1", "user", KIWI),
    (2, "main", "t1", "assistant", "Kiwi is a lovely name"),
    (3, "main", "t2", "user", "Lisbon trip in spring"),
    (4, "other", "t3", "assistant", "time to water the tomatoes"),
]


def _insert(conn: apsw.Connection, table: str, row: dict[str, Any]) -> None:
    """One row, by column name (the columns vary with the version)."""
    conn.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                 tuple(row.values()))


def _conversation(conn: apsw.Connection, version: int) -> None:
    for n, (turn_id, channel, client, outcome, error, text, reply, path) in enumerate(TURNS):
        turn = {"id": turn_id, "channel": channel, "client_id": client, "source": "ws",
                "user_text": text, "response_text": reply, "outcome": outcome, "error": error,
                "iterations": 1, "llm_calls": 2, "tokens_total": 120, "response_time_s": 0.5,
                "started_at": 10.0 * n + 1, "finished_at": 10.0 * n + 2}
        _insert(conn, "turns", turn | ({"path": path} if version >= 6 else {}))
    calls = [("t1", 0, "c-0", "memory", '{"key": "pet"}', "ok", 0, "approved", 1),
             ("t1", 1, "c-1", "shell", '{"cmd": "rm"}', "denied by the person", 1, "denied", 0)]
    for turn_id, position, call_id, name, args, result, is_error, approval, ran in calls:
        call = {"turn_id": turn_id, "position": position, "iteration": 1, "call_id": call_id,
                "name": name, "args": args, "result": result, "is_error": is_error,
                "duration_ms": 3.5}
        _insert(conn, "tool_calls",
                call | ({"approval": approval, "ran": ran} if version >= 2 else {}))
    for item_id, channel, turn_id, role, text in TRANSCRIPT:
        conn.execute("INSERT INTO transcript (id, channel, turn_id, role, text, created_at) "
                     "VALUES (?, ?, ?, ?, ?, ?)",
                     (item_id, channel, turn_id, role, text, float(item_id)))
        if version >= 4:
            conn.execute("INSERT INTO memory_fts (rowid, text) VALUES (?, ?)",
                         (item_id * 4 + 1, text))
    conn.executemany(
        "INSERT INTO events (channel, seq, type, exchange_id, body, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        [("main", 1, "message", "x1", '{"text": "Kiwi is a lovely name"}', 2.0),
         ("main", 2, "done", "x1", '{"outcome": "answered"}', 2.5),
         ("other", 1, "message", None, '{"text": "time to water the tomatoes"}', 4.0)])
    conn.execute("INSERT INTO auth_password (id, password_hash, created_at) "
                 "VALUES (1, 'scrypt$c2FsdA$aGFzaA', 0.5)")
    conn.execute("INSERT INTO auth_sessions (token_hash, created_at, expires_at) "
                 "VALUES ('ab12', 1.0, 9999999999.0)")


# Knowledge as the person told it: the pet changed (a superseded history), the colour was said
# in two spellings, a home town under a key with punctuation. Before 0004 the keys are stored as
# given and both colours are current; from 0004 on they are normalised and the colour superseded.
_OLD_FACTS = [  # id, key, value, created_at, superseded_at, superseded_by
    (1, "pet", "dog", 10.0, 15.0, 2),
    (2, "pet", "parrot", 15.0, None, None),
    (3, "Favourite colour", "teal", 20.0, None, None),
    (4, "favorite color", "green", 30.0, None, None),
    (5, "My Home-Town", "Porto", 35.0, None, None),
    (6, "???", "odd", 36.0, None, None),  # normalises to nothing: 0004 leaves it as it is
]
_NEW_FACTS = [*_OLD_FACTS[:2], (3, "favorite color", "teal", 20.0, 30.0, 4),
              (4, "favorite color", "green", 30.0, None, None),
              (5, "home town", "Porto", 35.0, None, None)]


def _knowledge(conn: apsw.Connection, version: int) -> None:
    facts = _OLD_FACTS if version < 4 else _NEW_FACTS
    for item_id, key, value, at, until, _ in facts:
        fact = {"id": item_id, "key": key, "value": value, "turn_id": "t1", "created_at": at,
                "superseded_at": until}
        if version >= 3:
            fact["search_text"] = f"{key.casefold()}\x1f{value.casefold()}"
        _insert(conn, "knowledge", fact)
    for item_id, *_, by in facts:  # once the newer row exists (a foreign key)
        if by is not None:
            conn.execute("UPDATE knowledge SET superseded_by = ? WHERE id = ?", (by, item_id))
    if version >= 4:
        conn.execute("INSERT INTO knowledge (id, key, value, turn_id, created_at, search_text, "
                     "kind, source, confidence) VALUES (6, 'tone', 'warm', NULL, 36.0, "
                     "'tone' || char(31) || 'warm', 'trait', 'encoder', 0.7)")
        for item_id, text in [(2, "pet: parrot"), (4, "favorite color: green"),
                              (5, "home town: Porto"), (6, "tone: warm")]:
            conn.execute("INSERT INTO memory_fts (rowid, text) VALUES (?, ?)",
                         (item_id * 4 + 3, text))


def expected_knowledge(version: int) -> list[tuple[Any, ...]]:
    """(id, key, value, created_at, superseded_at, superseded_by, kind, source) once upgraded."""
    last = (6, "???", "odd", 36.0, None, None, "fact", "tool") if version < 4 else (
        6, "tone", "warm", 36.0, None, None, "trait", "encoder")
    return [(1, "pet", "dog", 10.0, 15.0, 2, "fact", "tool"),
            (2, "pet", "parrot", 15.0, None, None, "fact", "tool"),
            (3, "favorite color", "teal", 20.0, 30.0, 4, "fact", "tool"),
            (4, "favorite color", "green", 30.0, None, None, "fact", "tool"),
            (5, "home town", "Porto", 35.0, None, None, "fact", "tool"),
            last]


# --- version 2: steering, compactions, checkpoints ------------------------------------------------

def _steering(conn: apsw.Connection) -> None:
    conn.execute("INSERT INTO steering (turn_id, position, text, after_iteration) "
                 "VALUES ('t1', 0, 'keep it short', 1)")
    conn.execute("INSERT INTO compactions (turn_id, channel, stage, tokens_before, tokens_after, "
                 "tokens_used, summary, created_at) VALUES ('t1', 'main', 'trail', 900, 300, "
                 "40, 'talked about the parrot', 2.0)")
    conn.execute("INSERT INTO checkpoints (channel, text, upto_transcript_id, turn_id, "
                 "created_at) VALUES ('main', 'The person has a parrot named Kiwi.', 2, 't1', "
                 "2.0)")


# --- version 4: episodes, vectors, strength, forgotten, snapshots ---------------------------------

def vector(seed_value: float) -> bytes:
    return struct.pack(f"{DIM}f", *(seed_value * (i + 1) for i in range(DIM)))


def _memory(conn: apsw.Connection, version: int) -> None:
    conn.execute(
        "INSERT INTO episodes (id, channel, gist, intent, outcome, entities, open_loops, "
        "salience, valence, transcript_from, transcript_to, encoding_id, happened_at, "
        "created_at) VALUES (1, 'main', 'planning a Lisbon trip', 'plan', 'undecided', ?, ?, "
        "0.6, 0.2, 1, 3, 'enc1', 3.0, 5.0)",
        (json.dumps(["Lisbon"]), json.dumps(["pick dates"])))
    conn.execute("INSERT INTO memory_fts (rowid, text) VALUES (?, ?)",
                 (1 * 4 + 2, "planning a Lisbon trip plan undecided Lisbon pick dates"))
    conn.execute("INSERT INTO encodings (channel, upto_transcript_id, encoded_at) "
                 "VALUES ('main', 3, 5.0)")
    conn.execute("INSERT INTO vector_spaces (id, name, dim, created_at) "
                 "VALUES (1, 'old-embedder', ?, 1.0)", (DIM,))
    bits = version < 14  # a sqlite-vec bit index per space until migration 0014
    if bits:
        conn.execute(f"CREATE VIRTUAL TABLE vec_index_1 USING vec0(bits bit[{DIM}])")
    for mkey, value in [(1 * 4 + 2, 0.5), (2 * 4 + 3, -0.25)]:  # the episode, the parrot fact
        conn.execute("INSERT INTO vectors (space_id, mkey, embedder, dim, embedding, "
                     "created_at) VALUES (1, ?, 'old-embedder', ?, ?, 6.0)",
                     (mkey, DIM, vector(value)))
        if bits:
            conn.execute("INSERT INTO vec_index_1 (rowid, bits) VALUES "
                         "(?, vec_quantize_binary(?))", (mkey, vector(value)))
    conn.executemany("INSERT INTO vector_progress (space_id, kind, upto_id) VALUES (1, ?, ?)",
                     [(2, 1), (3, 2)])
    conn.execute("INSERT INTO memory_strength (mkey, recalls, last_recalled_at) "
                 "VALUES (?, 3, 7.0)", (1 * 4 + 1,))
    conn.execute("INSERT INTO forgotten (value, forgotten_at) VALUES ('555-0100', 8.0)")
    conn.execute("INSERT INTO prompt_snapshots (turn_id, call, purpose, system, messages, tools, "
                 "response_format, created_at) VALUES ('t1', 0, 'turn', 'You are Chalie.', ?, "
                 "'[]', NULL, 1.5)", (json.dumps([{"role": "user", "content": KIWI}]),))


# --- version 5: other programs --------------------------------------------------------------------

def _interfaces(conn: apsw.Connection) -> None:
    conn.execute("INSERT INTO pairing_keys (key_hash, created_at, expires_at, used_at) "
                 "VALUES ('pk1', 20.0, 320.0, 25.0)")
    conn.execute("INSERT INTO interfaces (id, name, host, port, signals, token_hash, version, "
                 "capabilities, paired_at, refreshed_at) VALUES ('if1', 'weather', '127.0.0.1', "
                 "9, '[\"*\"]', 'th1', '1.0', '[]', 25.0, 26.0)")
    conn.execute("INSERT INTO world_signals (id, sender, signal_type, content, source, topic, "
                 "activation_energy, metadata, received_at) VALUES ('s1', 'if1', 'weather', "
                 "'rain at noon', 'weather', NULL, 0.4, NULL, 27.0)")
    conn.execute("INSERT INTO subscriptions (id, name, url, signals, created_at) "
                 "VALUES ('sub1', 'news', 'http://127.0.0.1:9/stream', '[\"news\"]', 28.0)")


# --- version 6: background paths ------------------------------------------------------------------

def _background(conn: apsw.Connection) -> None:
    conn.execute("INSERT INTO schedules (id, prompt, at, cron, timezone, next_run, last_run, "
                 "state, source, turn_id, created_at) VALUES ('sch1', 'water the tomatoes', "
                 "NULL, '0 8 * * *', 'Europe/Lisbon', NULL, 21.0, 'cancelled', 'person', NULL, "
                 "20.0)")
    conn.execute("INSERT INTO schedule_runs (schedule_id, due_at, outcome, turn_id, ran_at, "
                 "error) VALUES ('sch1', 21.0, 'done', 't3', 21.5, NULL)")
    conn.execute("INSERT INTO goals (id, goal, state, source, turn_id, confidence, result, "
                 "error, iterations, elapsed_s, tokens, paused_until, created_at, updated_at, "
                 "finished_at) VALUES ('g1', 'find a Lisbon hotel', 'completed', 'person', 't2', "
                 "0.8, 'Hotel Avenida', NULL, 4, 12.5, 900, NULL, 22.0, 24.0, 24.0)")
    conn.execute("INSERT INTO goal_steps (goal_id, step_id, position, description, depends_on, "
                 "status, result, turn_id, attempts, finished_at) VALUES ('g1', 's1', 0, "
                 "'search hotels', '[]', 'done', 'three found', NULL, 1, 23.0)")
    conn.execute("INSERT INTO proactive (path, ref, channel, content, topic, turn_id, status, "
                 "reason, capped, composed_at, delivered_at) VALUES ('goal', 'g1', 'main', "
                 "'I found a hotel', NULL, NULL, 'sent', NULL, 1, 24.0, 24.1)")
    conn.execute("INSERT INTO open_loops (text, source, turn_id, created_at, closed_at) "
                 "VALUES ('ask about the trip dates', 'dmn', NULL, 25.0, NULL)")
    conn.execute("INSERT INTO dmn_runs (trigger, at, result, fingerprint, turn_id) "
                 "VALUES ('idle', 26.0, 'nothing', 'fp1', NULL)")
    conn.execute("INSERT INTO spending (path, tokens, llm_calls, at, ref) "
                 "VALUES ('encoder', 300, 1, 27.0, 'enc1')")


# --- versions 8 and 9: cognition, concepts, traits ------------------------------------------------

def _cognition(conn: apsw.Connection) -> None:
    conn.execute("INSERT INTO topics (id, channel, name, keywords, centroid, space_id, messages, "
                 "fok, created_at, last_seen) VALUES ('tp1', 'main', 'Lisbon trip', "
                 "'[\"lisbon\", \"trip\"]', ?, 1, 2, 2.5, 3.0, 3.0)", (vector(0.1),))
    conn.execute("INSERT INTO channel_state (channel, topic_id, streak, focus_id, phase, "
                 "exchanges, confidence, mode, last_message_at, situation, updated_at) VALUES "
                 "('main', 'tp1', 2, NULL, 'exploring', 2, 0.7, 'plan', 3.0, '{}', 3.0)")


def _concepts(conn: apsw.Connection) -> None:
    conn.executemany("INSERT INTO concepts (id, name, vector, space_id, strength, mentions, "
                     "created_at, last_seen, last_activated) VALUES (?, ?, NULL, NULL, ?, ?, "
                     "3.0, 3.0, NULL)", [(1, "Lisbon", 0.8, 2), (2, "hotel", 0.4, 1)])
    conn.execute("INSERT INTO concept_links (a, b, relation, strength, updated_at) "
                 "VALUES (1, 2, 'co-occurs', 0.3, 3.0)")
    conn.execute("INSERT INTO drift_gists (channel, text, concepts, created_at, expires_at) "
                 "VALUES ('main', 'hotels near the river', '[1, 2]', 4.0, 9999999999.0)")
    conn.execute("INSERT INTO adaptive_traits (name, value, weight, updated_at) "
                 "VALUES ('answer_length', '\"short\"', 1.5, 4.0)")


# --- what an upgraded store holds -----------------------------------------------------------------

Check = tuple[str, list[tuple[Any, ...]]]  # a query, and the rows it must give


def expected(version: int) -> dict[str, Check]:
    """Per table seeded at `version`: a query on the latest schema and the rows it must give."""
    paths = {tid: (path if version >= 6 else "user") for tid, *_, path in TURNS}
    out: dict[str, Check] = {
        "turns": ("SELECT id, channel, client_id, outcome, error, user_text, response_text, path "
                  "FROM turns ORDER BY id",
                  [(*row[:7], paths[row[0]]) for row in TURNS]),
        "tool_calls": ("SELECT turn_id, position, name, is_error, approval, ran FROM tool_calls "
                       "ORDER BY turn_id, position",
                       [("t1", 0, "memory", 0, "approved" if version >= 2 else None, 1),
                        ("t1", 1, "shell", 1, "denied" if version >= 2 else None,
                         0 if version >= 2 else 1)]),
        "transcript": ("SELECT id, channel, turn_id, role, text FROM transcript ORDER BY id",
                       list(TRANSCRIPT)),
        "knowledge": ("SELECT id, key, value, created_at, superseded_at, superseded_by, kind, "
                      "source FROM knowledge ORDER BY id", expected_knowledge(version)),
        "events": ("SELECT channel, seq, type FROM events ORDER BY channel, seq",
                   [("main", 1, "message"), ("main", 2, "done"), ("other", 1, "message")]),
        "auth_password": ("SELECT id, password_hash FROM auth_password",
                          [(1, "scrypt$c2FsdA$aGFzaA")]),
        "auth_sessions": ("SELECT token_hash, expires_at FROM auth_sessions",
                          [("ab12", 9999999999.0)]),
    }
    tables: dict[int, dict[str, Check]] = {
        2: {"steering": ("SELECT turn_id, text FROM steering", [("t1", "keep it short")]),
            "compactions": ("SELECT turn_id, stage, summary FROM compactions",
                            [("t1", "trail", "talked about the parrot")]),
            "checkpoints": ("SELECT channel, upto_transcript_id, text FROM checkpoints",
                            [("main", 2, "The person has a parrot named Kiwi.")])},
        4: {"episodes": ("SELECT id, channel, gist, transcript_from, transcript_to FROM episodes",
                         [(1, "main", "planning a Lisbon trip", 1, 3)]),
            "encodings": ("SELECT channel, upto_transcript_id FROM encodings", [("main", 3)]),
            "vector_spaces": ("SELECT id, name, dim FROM vector_spaces",
                              [(1, "old-embedder", DIM)]),
            "vectors": ("SELECT space_id, mkey, embedding FROM vectors ORDER BY mkey",
                        [(1, 6, vector(0.5)), (1, 11, vector(-0.25))]),
            # migration 0014 drops the sqlite-vec bit index (with its shadow tables)
            "vec_index_1": ("SELECT name FROM sqlite_master WHERE name LIKE 'vec_index%'", []),
            "vector_progress": ("SELECT space_id, kind, upto_id FROM vector_progress "
                                "ORDER BY kind", [(1, 2, 1), (1, 3, 2)]),
            "memory_strength": ("SELECT mkey, recalls FROM memory_strength", [(5, 3)]),
            "forgotten": ("SELECT value FROM forgotten", [("555-0100",)]),
            "prompt_snapshots": ("SELECT turn_id, call, purpose FROM prompt_snapshots",
                                 [("t1", 0, "turn")])},
        5: {"pairing_keys": ("SELECT key_hash, used_at FROM pairing_keys", [("pk1", 25.0)]),
            "interfaces": ("SELECT id, name, port, token_hash FROM interfaces",
                           [("if1", "weather", 9, "th1")]),
            "world_signals": ("SELECT id, content FROM world_signals", [("s1", "rain at noon")]),
            "subscriptions": ("SELECT id, name FROM subscriptions", [("sub1", "news")])},
        6: {"schedules": ("SELECT id, cron, state FROM schedules",
                          [("sch1", "0 8 * * *", "cancelled")]),
            "schedule_runs": ("SELECT schedule_id, due_at, outcome FROM schedule_runs",
                              [("sch1", 21.0, "done")]),
            "goals": ("SELECT id, state, result FROM goals", [("g1", "completed",
                                                              "Hotel Avenida")]),
            "goal_steps": ("SELECT goal_id, step_id, status FROM goal_steps",
                           [("g1", "s1", "done")]),
            "proactive": ("SELECT path, ref, status FROM proactive", [("goal", "g1", "sent")]),
            "open_loops": ("SELECT text, closed_at FROM open_loops",
                           [("ask about the trip dates", None)]),
            "dmn_runs": ("SELECT trigger, result FROM dmn_runs", [("idle", "nothing")]),
            "spending": ("SELECT path, tokens FROM spending", [("encoder", 300)])},
        7: {"images": ("SELECT id, media_type, data FROM images",
                       [("img1", "image/png", b"\x89PNG")])},
        8: {"topics": ("SELECT id, name, centroid FROM topics",
                       [("tp1", "Lisbon trip", vector(0.1))]),
            "channel_state": ("SELECT channel, topic_id, phase FROM channel_state",
                              [("main", "tp1", "exploring")])},
        9: {"concepts": ("SELECT id, name FROM concepts ORDER BY id", [(1, "Lisbon"),
                                                                       (2, "hotel")]),
            "concept_links": ("SELECT a, b, relation FROM concept_links", [(1, 2, "co-occurs")]),
            "drift_gists": ("SELECT text FROM drift_gists", [("hotels near the river",)]),
            "adaptive_traits": ("SELECT name, value FROM adaptive_traits",
                                [("answer_length", '"short"')])},
        10: {"situation_summaries": ("SELECT channel, summary FROM situation_summaries",
                                     [("main", "planning a spring trip")])},
    }
    for since, checks in tables.items():
        if version >= since:
            out.update(checks)
    return out
