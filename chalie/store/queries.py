"""Read helpers. Each takes a connection, so callers choose reader or writer."""

from __future__ import annotations

import apsw
import msgspec


class HistoryLine(msgspec.Struct, frozen=True):
    role: str
    text: str
    created_at: float


class Fact(msgspec.Struct, frozen=True):
    key: str
    value: str
    created_at: float


def recent_transcript(conn: apsw.Connection, channel: str, limit: int) -> list[HistoryLine]:
    """The channel's last `limit` transcript lines, oldest first."""
    if limit <= 0:
        return []
    rows = conn.execute(
        "SELECT role, text, created_at FROM transcript WHERE channel = ? "
        "ORDER BY id DESC LIMIT ?",
        (channel, limit),
    ).fetchall()
    return [HistoryLine(r, t, c) for r, t, c in reversed(rows)]


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def current_facts(conn: apsw.Connection, query: str, limit: int) -> list[Fact]:
    """Current (not superseded) facts whose key or value contains `query`, newest first."""
    pattern = f"%{_like_escape(query.strip().casefold())}%"
    rows = conn.execute(
        "SELECT key, value, created_at FROM knowledge WHERE superseded_at IS NULL "
        "AND (casefold(key) LIKE ?1 ESCAPE '\\' OR casefold(value) LIKE ?1 ESCAPE '\\') "
        "ORDER BY created_at DESC, id DESC LIMIT ?2",
        (pattern, limit),
    ).fetchall()
    return [Fact(str(k), str(v), float(c)) for k, v, c in rows]  # type: ignore[arg-type]


def last_seq(conn: apsw.Connection, channel: str) -> int:
    row = conn.execute("SELECT max(seq) FROM events WHERE channel = ?", (channel,)).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


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
