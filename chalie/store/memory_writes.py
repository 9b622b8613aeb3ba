"""Memory writes for the StoreWriter; each runs inside the caller's transaction.

Every item that can be recalled has a full-text row written in the same transaction as the
item; its vector comes later (the Encoder embeds in the background) and goes into `vectors`
(float32; recall keeps their sign bits in memory for its first pass, chalie.memory.bit_index,
following the table by its rowid). Forgetting an item removes it and all of those rows in one
transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import apsw
import msgspec

from chalie.store.effects import ForgetFact, RememberFact
from chalie.store.queries import search_text
from chalie.values.keys import normalise_key
from chalie.values.memory import Kind, episode_text, knowledge_text, mkey, split

MIN_FORGOTTEN_CHARS = 3  # shorter values are not blanked out of text (they would hit anything)


class EpisodeRow(msgspec.Struct, frozen=True):
    gist: str
    intent: str
    outcome: str
    entities: tuple[str, ...]
    open_loops: tuple[str, ...]
    salience: float
    valence: float
    transcript_from: int
    transcript_to: int
    happened_at: float


class SnapshotRow(msgspec.Struct, frozen=True):
    """One LLM request exactly as sent, JSON-encoded where it is structured."""

    call: int
    purpose: str
    system: str
    messages: str
    tools: str
    response_format: str | None
    created_at: float


# -- the full-text and vector indexes --

def index_text(conn: apsw.Connection, key: int, text: str) -> None:
    conn.execute("INSERT INTO memory_fts (rowid, text) VALUES (?, ?)", (key, text))


def unindex(conn: apsw.Connection, key: int) -> None:
    """Remove an item's full-text row and vectors, in every space."""
    conn.execute("DELETE FROM memory_fts WHERE rowid = ?", (key,))
    conn.execute("DELETE FROM vectors WHERE mkey = ?", (key,))
    conn.execute("DELETE FROM memory_strength WHERE mkey = ?", (key,))


def add_transcript(conn: apsw.Connection, channel: str, turn_id: str | None, *, role: str,
                   text: str, at: float, speaker: str | None = None) -> int:
    """A line of the channel's transcript (`speaker`: the program's name, for role
    "program"), indexed for recall."""
    conn.execute(
        "INSERT INTO transcript (channel, turn_id, role, text, created_at, speaker) "
        "VALUES (?, ?, ?, ?, ?, ?)", (channel, turn_id, role, text, at, speaker),
    )
    item_id = conn.last_insert_rowid()
    index_text(conn, mkey(Kind.TRANSCRIPT, item_id), text)
    return item_id


# -- knowledge --

def remember(conn: apsw.Connection, fact: RememberFact, *, turn_id: str | None,
             now: float) -> int | None:
    """Store `fact`, superseding the current item with its key (normalised here too, so every
    way in meets) and the current items it names in `replaces`, with where it came from
    (`source`, and `source_line` for the encoder's). Returns the new id, or None when no new
    item was stored (same value: the facts it replaces are still superseded, by the item that
    holds that value; or the current item is newer than the fact)."""
    key = normalise_key(fact.key) or fact.key
    if key != fact.key:
        fact = msgspec.structs.replace(fact, key=key)
    old = conn.execute(
        "SELECT id, value, created_at FROM knowledge WHERE key = ? AND superseded_at IS NULL",
        (fact.key,),
    ).fetchone()
    # A fact is true from when it was said: now, or (read from older messages) then.
    since = now if fact.observed_at is None else min(now, fact.observed_at)
    if old is not None:
        old_id, old_value, old_at = int(old[0]), str(old[1]), float(old[2])
        if old_value == fact.value:
            _supersede(conn, fact.replaces, by=old_id, at=since)
            return None
        if fact.observed_at is not None and old_at > fact.observed_at:
            return None  # the encoder read older messages than what is known now
        conn.execute("UPDATE knowledge SET superseded_at = ? WHERE id = ?", (since, old_id))
        unindex(conn, mkey(Kind.KNOWLEDGE, old_id))
    conn.execute(
        "INSERT INTO knowledge (key, value, turn_id, created_at, search_text, kind, source, "
        "confidence, source_line) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (fact.key, fact.value, turn_id, since, search_text(fact.key, fact.value), fact.kind,
         fact.source, min(1.0, max(0.0, fact.confidence)), fact.source_line),
    )
    new_id = conn.last_insert_rowid()
    if old is not None:
        conn.execute("UPDATE knowledge SET superseded_by = ? WHERE id = ?", (new_id, old[0]))
    index_text(conn, mkey(Kind.KNOWLEDGE, new_id), knowledge_text(fact.key, fact.value))
    _supersede(conn, fact.replaces, by=new_id, at=since)
    return new_id


def _supersede(conn: apsw.Connection, ids: Sequence[int], *, by: int, at: float) -> None:
    """The current items `ids` (other keys) are no longer true as of `at`: superseded by item
    `by`, keeping their interval, and out of recall's indexes. One already superseded,
    forgotten, newer than `at`, or `by` itself, is left as it is."""
    for item_id in dict.fromkeys(ids):
        if item_id == by:
            continue
        row = conn.execute(
            "SELECT created_at FROM knowledge WHERE id = ? AND superseded_at IS NULL",
            (item_id,),
        ).fetchone()
        if row is None or float(row[0]) > at:
            continue
        conn.execute("UPDATE knowledge SET superseded_at = ?, superseded_by = ? WHERE id = ?",
                     (at, by, item_id))
        unindex(conn, mkey(Kind.KNOWLEDGE, item_id))


def forget_knowledge(conn: apsw.Connection, item_id: int, now: float) -> bool:
    """Delete one knowledge item (current or superseded); False when there is none."""
    row = conn.execute("SELECT value FROM knowledge WHERE id = ?", (item_id,)).fetchone()
    if row is None:
        return False
    conn.execute("UPDATE knowledge SET superseded_by = NULL WHERE superseded_by = ?", (item_id,))
    conn.execute("DELETE FROM knowledge WHERE id = ?", (item_id,))
    unindex(conn, mkey(Kind.KNOWLEDGE, item_id))
    _blank_out(conn, str(row[0]), now)
    return True


def forget_key(conn: apsw.Connection, key: str, now: float) -> bool:
    row = conn.execute(
        "SELECT id FROM knowledge WHERE key = ? AND superseded_at IS NULL",
        (normalise_key(key) or key,),
    ).fetchone()
    return row is not None and forget_knowledge(conn, int(row[0]), now)


def _blank_out(conn: apsw.Connection, value: str, now: float) -> None:
    value = " ".join(value.split())
    if len(value) >= MIN_FORGOTTEN_CHARS:
        conn.execute("INSERT INTO forgotten (value, forgotten_at) VALUES (?, ?)", (value, now))


def apply_fact(conn: apsw.Connection, effect: RememberFact | ForgetFact, *,
               turn_id: str | None, now: float) -> None:
    match effect:
        case ForgetFact(key=key):
            forget_key(conn, key, now)
        case RememberFact():
            remember(conn, effect, turn_id=turn_id, now=now)


# -- episodes --

def insert_episodes(conn: apsw.Connection, channel: str, episodes: Sequence[EpisodeRow], *,
                    upto_transcript_id: int, encoding_id: str, now: float,
                    after_transcript_id: int | None = None) -> list[int] | None:
    """Store a window's episodes and move the channel's encoding mark to `upto_transcript_id`
    (the messages covered keep their vectors, and their place in recall's bit index). With
    `after_transcript_id`, the window must start at the channel's mark: when the mark has
    moved meanwhile (another encoder instance stored this window), nothing is stored and the
    result is None."""
    if after_transcript_id is not None and \
            encoded_mark(conn, channel) != after_transcript_id:
        return None
    ids = []
    for e in episodes:
        conn.execute(
            "INSERT INTO episodes (channel, gist, intent, outcome, entities, open_loops, "
            "salience, valence, transcript_from, transcript_to, encoding_id, happened_at, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (channel, e.gist, e.intent, e.outcome, _json(e.entities), _json(e.open_loops),
             e.salience, e.valence, e.transcript_from, e.transcript_to, encoding_id,
             e.happened_at, now),
        )
        item_id = conn.last_insert_rowid()
        ids.append(item_id)
        text = episode_text(e.gist, e.intent, e.outcome, list(e.entities), list(e.open_loops),
                            labels=False)
        index_text(conn, mkey(Kind.EPISODE, item_id), text)
    before = encoded_mark(conn, channel)
    if upto_transcript_id > before:
        conn.execute(
            "INSERT INTO encodings (channel, upto_transcript_id, encoded_at) VALUES (?, ?, ?) "
            "ON CONFLICT (channel) DO UPDATE SET upto_transcript_id = excluded.upto_transcript_id,"
            " encoded_at = excluded.encoded_at",
            (channel, upto_transcript_id, now),
        )
    return ids


def encoded_mark(conn: apsw.Connection, channel: str) -> int:
    row = conn.execute("SELECT upto_transcript_id FROM encodings WHERE channel = ?",
                       (channel,)).fetchone()
    return int(row[0]) if row else 0


def forget_episode(conn: apsw.Connection, item_id: int) -> bool:
    if conn.execute("SELECT 1 FROM episodes WHERE id = ?", (item_id,)).fetchone() is None:
        return False
    conn.execute("DELETE FROM episodes WHERE id = ?", (item_id,))
    unindex(conn, mkey(Kind.EPISODE, item_id))
    return True


def _json(values: Sequence[str]) -> str:
    return msgspec.json.encode(list(values)).decode()


# -- vectors --

def store_vectors(conn: apsw.Connection, space_id: int, embedder: str, kind: Kind,
                  rows: Sequence[tuple[int, bytes]], *, upto_id: int, now: float) -> int:
    """Store the vectors of items of one kind (rows of (item id, float32 vector)) and move the
    space's progress for that kind to `upto_id`. Items forgotten or superseded since they were
    read are skipped. Returns how many vectors were stored."""
    dims = {len(v) // 4 for _, v in rows}
    if len(dims) > 1:
        raise ValueError(f"vectors of different dimensions {sorted(dims)} in one batch")
    stored = 0
    if rows:
        dim = dims.pop()
        _ensure_dim(conn, space_id, dim)
        for item_id, vector in rows:
            if not _exists(conn, kind, item_id):
                continue
            key = mkey(kind, item_id)
            conn.execute(
                "INSERT OR REPLACE INTO vectors (space_id, mkey, embedder, dim, embedding, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (space_id, key, embedder, dim, vector, now),
            )
            stored += 1
    conn.execute(
        "INSERT INTO vector_progress (space_id, kind, upto_id) VALUES (?, ?, ?) "
        "ON CONFLICT (space_id, kind) DO UPDATE SET upto_id = max(upto_id, excluded.upto_id)",
        (space_id, int(kind), upto_id),
    )
    return stored


def _ensure_dim(conn: apsw.Connection, space_id: int, dim: int) -> None:
    row = conn.execute("SELECT dim FROM vector_spaces WHERE id = ?", (space_id,)).fetchone()
    if row is None:
        raise ValueError(f"no vector space {space_id}")
    if row[0] is None:
        conn.execute("UPDATE vector_spaces SET dim = ? WHERE id = ?", (dim, space_id))
    elif int(row[0]) != dim:
        raise ValueError(f"vector space {space_id} holds {row[0]}-dimensional vectors, "
                         f"got {dim}")


def _exists(conn: apsw.Connection, kind: Kind, item_id: int) -> bool:
    """Whether the item is still there to get a vector (a fact: still current)."""
    match kind:
        case Kind.TRANSCRIPT:
            sql = "SELECT 1 FROM transcript WHERE id = ?"
        case Kind.EPISODE:
            sql = "SELECT 1 FROM episodes WHERE id = ?"
        case Kind.KNOWLEDGE:
            sql = "SELECT 1 FROM knowledge WHERE id = ? AND superseded_at IS NULL"
    return conn.execute(sql, (item_id,)).fetchone() is not None


def drop_space(conn: apsw.Connection, space_id: int, *, batch: int) -> bool:
    """Remove up to `batch` vectors of a space no longer in use; True once it is all gone."""
    conn.execute("DELETE FROM vectors WHERE id IN (SELECT id FROM vectors WHERE space_id = ? "
                 "LIMIT ?)", (space_id, batch))
    if conn.execute("SELECT 1 FROM vectors WHERE space_id = ? LIMIT 1",
                    (space_id,)).fetchone() is not None:
        return False
    conn.execute("DELETE FROM vector_progress WHERE space_id = ?", (space_id,))
    conn.execute("DELETE FROM vector_spaces WHERE id = ?", (space_id,))
    return True


def ensure_space(conn: apsw.Connection, name: str, now: float) -> int:
    """The id of the vector space `name`, created if new (at start-up, before the actors)."""
    row = conn.execute("SELECT id FROM vector_spaces WHERE name = ?", (name,)).fetchone()
    if row is not None:
        return int(row[0])
    conn.execute("INSERT INTO vector_spaces (name, created_at) VALUES (?, ?)", (name, now))
    return conn.last_insert_rowid()


# -- retrieval strength and snapshots --

def record_recalls(conn: apsw.Connection, keys: Sequence[int], now: float) -> None:
    """Each item recalled once more, now; items gone (or superseded) since are skipped."""
    conn.executemany(
        "INSERT INTO memory_strength (mkey, recalls, last_recalled_at) VALUES (?, 1, ?) "
        "ON CONFLICT (mkey) DO UPDATE SET recalls = recalls + 1, last_recalled_at = "
        "excluded.last_recalled_at",
        [(k, now) for k in _existing(conn, dict.fromkeys(keys))],
    )


_STILL_THERE = {
    Kind.TRANSCRIPT: "SELECT id FROM transcript WHERE id IN ({})",
    Kind.EPISODE: "SELECT id FROM episodes WHERE id IN ({})",
    Kind.KNOWLEDGE: "SELECT id FROM knowledge WHERE id IN ({}) AND superseded_at IS NULL",
}


def _existing(conn: apsw.Connection, keys: Iterable[int]) -> list[int]:
    """The keys whose items are still there to be recalled (knowledge: still current)."""
    by_kind: dict[Kind, list[int]] = {}
    for key in keys:
        kind, item_id = split(key)
        by_kind.setdefault(kind, []).append(item_id)
    found = []
    for kind, ids in by_kind.items():
        sql = _STILL_THERE[kind].format(",".join("?" * len(ids)))
        found += [mkey(kind, int(r[0])) for r in conn.execute(sql, ids)]
    return found


def insert_snapshots(conn: apsw.Connection, turn_id: str, snapshots: Sequence[SnapshotRow]) -> None:
    conn.executemany(
        "INSERT INTO prompt_snapshots (turn_id, call, purpose, system, messages, tools, "
        "response_format, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [(turn_id, s.call, s.purpose, s.system, s.messages, s.tools, s.response_format,
          s.created_at) for s in snapshots],
    )


def prune_snapshots(conn: apsw.Connection, keep_turns: int) -> None:
    """Keep the snapshots of the `keep_turns` turns (or jobs) that stored snapshots last."""
    conn.execute(
        "DELETE FROM prompt_snapshots WHERE id < (SELECT min(first) FROM (SELECT min(id) AS "
        "first FROM prompt_snapshots GROUP BY turn_id ORDER BY first DESC LIMIT ?))",
        (keep_turns,),
    )
