"""Read helpers. Each takes a connection, so callers choose reader or writer."""

from __future__ import annotations

import apsw
import msgspec


class HistoryLine(msgspec.Struct, frozen=True):
    role: str  # user (the person), assistant (Chalie), program (a paired program's message)
    text: str
    created_at: float
    id: int = 0  # the transcript id
    speaker: str | None = None  # the program's name, for a program's line


class Fact(msgspec.Struct, frozen=True):
    key: str
    value: str
    created_at: float


def recent_transcript(
    conn: apsw.Connection, channel: str, limit: int, after_id: int = 0
) -> list[HistoryLine]:
    """The channel's last `limit` transcript lines with id > after_id, oldest first."""
    if limit <= 0:
        return []
    rows = conn.execute(
        "SELECT role, text, created_at, id, speaker FROM transcript WHERE channel = ? AND id > ? "
        "ORDER BY id DESC LIMIT ?",
        (channel, after_id, limit),
    ).fetchall()
    return [HistoryLine(r, t, c, i, s) for r, t, c, i, s in reversed(rows)]


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def search_text(key: str, value: str) -> str:
    """What fact search matches against: key and value, case-folded, kept apart by US (0x1f)."""
    return f"{key.casefold()}\x1f{value.casefold()}"


def current_facts(conn: apsw.Connection, query: str, limit: int) -> list[Fact]:
    """Current (not superseded) facts whose key or value contains `query`, newest first."""
    return facts_matching(conn, [query], limit)


def facts_matching(conn: apsw.Connection, words: list[str], limit: int) -> list[Fact]:
    """Current facts containing any of `words` (case-insensitively) in key or value; those
    matching more, and longer, words first, then the newest. One scan of the search index."""
    if not words:
        return []
    patterns = [f"%{_like_escape(w.strip().casefold())}%" for w in words]
    matches = [f"(search_text LIKE ?{i} ESCAPE '\\')" for i in range(1, len(words) + 1)]
    score = " + ".join(f"{m} * {len(w)}" for m, w in zip(matches, words, strict=True))
    rows = conn.execute(
        f"SELECT key, value, created_at, {score} AS score FROM knowledge "
        "INDEXED BY knowledge_search "
        f"WHERE superseded_at IS NULL AND ({' OR '.join(matches)}) "
        f"ORDER BY score DESC, created_at DESC, id DESC LIMIT {int(limit)}",
        patterns,
    ).fetchall()
    return [Fact(str(k), str(v), float(c)) for k, v, c, _ in rows]  # type: ignore[arg-type]


class Checkpoint(msgspec.Struct, frozen=True):
    text: str
    upto_transcript_id: int
    created_at: float = 0.0


def latest_checkpoint(conn: apsw.Connection, channel: str) -> Checkpoint | None:
    row = conn.execute(
        "SELECT text, upto_transcript_id, created_at FROM checkpoints WHERE channel = ? "
        "ORDER BY id DESC LIMIT 1",
        (channel,),
    ).fetchone()
    return None if row is None else Checkpoint(str(row[0]), int(row[1]), float(row[2]))


def last_transcript_id(conn: apsw.Connection, channel: str) -> int:
    row = conn.execute("SELECT max(id) FROM transcript WHERE channel = ?", (channel,)).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def turn_for_client_id(conn: apsw.Connection, channel: str, client_id: str) -> str | None:
    row = conn.execute(
        "SELECT id FROM turns WHERE channel = ? AND client_id = ?", (channel, client_id)
    ).fetchone()
    return None if row is None else str(row[0])


def has_current_fact(conn: apsw.Connection, key: str) -> bool:
    return conn.execute(
        "SELECT 1 FROM knowledge WHERE key = ? AND superseded_at IS NULL", (key,)
    ).fetchone() is not None


def current_value(conn: apsw.Connection, key: str) -> str | None:
    row = conn.execute(
        "SELECT value FROM knowledge WHERE key = ? AND superseded_at IS NULL", (key,)
    ).fetchone()
    return None if row is None else str(row[0])


def any_facts(conn: apsw.Connection) -> bool:
    return conn.execute("SELECT 1 FROM knowledge WHERE superseded_at IS NULL LIMIT 1").fetchone() \
        is not None


def last_seq(conn: apsw.Connection, channel: str) -> int:
    row = conn.execute("SELECT max(seq) FROM events WHERE channel = ?", (channel,)).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def events_after(conn: apsw.Connection, channel: str, after: int) -> list[tuple[int, str]]:
    """(seq, encoded frame) of the channel's logged frames with seq > `after`, in order."""
    rows = conn.execute(
        "SELECT seq, body FROM events WHERE channel = ? AND seq > ? ORDER BY seq",
        (channel, after),
    ).fetchall()
    return [(int(s), str(b)) for s, b in rows]  # type: ignore[arg-type]


def exchange_events(conn: apsw.Connection, channel: str, exchange_id: str) -> list[str]:
    """The encoded frames of one exchange (turn), in order."""
    rows = conn.execute(
        "SELECT body FROM events WHERE channel = ? AND exchange_id = ? ORDER BY seq",
        (channel, exchange_id),
    ).fetchall()
    return [str(b) for (b,) in rows]


def running_exchange(conn: apsw.Connection, channel: str,
                     client_id: str) -> tuple[str, list[str]] | None:
    """The channel's exchange still running for the message `client_id` (its opening `status`
    frame names it), with its frames so far; None when no such exchange is open."""
    exchange = open_exchange(conn, channel)
    if exchange is None:
        return None
    frames = exchange_events(conn, channel, exchange)
    if not frames or msgspec.json.decode(frames[0]).get("client_id") != client_id:
        return None
    return exchange, frames


def open_exchange(conn: apsw.Connection, channel: str) -> str | None:
    """The exchange whose frames stop short of `done` or `error`: a turn that was cut off."""
    row = conn.execute(
        "SELECT exchange_id, type FROM events WHERE channel = ? AND exchange_id IS NOT NULL "
        "ORDER BY seq DESC LIMIT 1",
        (channel,),
    ).fetchone()
    if row is None or row[1] in ("done", "error"):
        return None
    return str(row[0])


def escalation_channel(conn: apsw.Connection, approval_id: str) -> str | None:
    """The channel whose log holds the escalation `approval_id` (the newest, if ever two)."""
    row = conn.execute(
        "SELECT channel FROM events WHERE type = 'escalation' AND body LIKE ? ESCAPE '\\' "
        "ORDER BY created_at DESC LIMIT 1",
        (f'%"approval_id":"{_like_escape(approval_id)}"%',)).fetchone()
    return None if row is None else str(row[0])
