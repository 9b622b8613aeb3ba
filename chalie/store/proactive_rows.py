"""Proactive messages, the DMN's runs, open loops and background spending, in the store.

Writes run on the StoreWriter's connection inside its transactions; reads on any reader.
"""

from __future__ import annotations

from typing import Any

import apsw
import msgspec

from chalie.store import memory_writes


class ProactiveRow(msgspec.Struct, frozen=True):
    """A proactive message as composed, and what became of it (sent, deferred, suppressed)."""

    path: str  # dmn, goal, scheduled
    channel: str
    content: str
    status: str
    capped: bool
    composed_at: float
    ref: str | None = None  # the goal's or schedule's id
    topic: str | None = None
    reason: str | None = None


class Deferred(msgspec.Struct, frozen=True):
    id: int
    path: str
    ref: str | None
    content: str
    topic: str | None
    turn_id: str | None
    composed_at: float


def insert(conn: apsw.Connection, row: ProactiveRow, *, turn_id: str | None,
           now: float) -> int:
    conn.execute(
        "INSERT INTO proactive (path, ref, channel, content, topic, turn_id, status, reason, "
        "capped, composed_at, delivered_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (row.path, row.ref, row.channel, row.content, row.topic, turn_id, row.status,
         row.reason, int(row.capped), row.composed_at, now if row.status == "sent" else None),
    )
    return conn.last_insert_rowid()


def deferred(conn: apsw.Connection, channel: str) -> list[Deferred]:
    """Messages waiting for quiet hours to end (or the person to connect), oldest first."""
    return [Deferred(int(i), str(p), r, str(c), t, tid, float(at))
            for i, p, r, c, t, tid, at in conn.execute(
                "SELECT id, path, ref, content, topic, turn_id, composed_at FROM proactive "
                "WHERE status = 'deferred' AND channel = ? ORDER BY composed_at, id",
                (channel,))]


def mark(conn: apsw.Connection, item_id: int, status: str, *, now: float,
         reason: str | None = None) -> None:
    conn.execute(
        "UPDATE proactive SET status = ?, reason = coalesce(?, reason), delivered_at = "
        "CASE WHEN ? = 'sent' THEN ? ELSE delivered_at END WHERE id = ?",
        (status, reason, status, now, item_id))


def said(conn: apsw.Connection, channel: str, turn_id: str | None, text: str, at: float) -> None:
    """A delivered message enters the channel's transcript as the assistant's line."""
    memory_writes.add_transcript(conn, channel, turn_id, role="assistant", text=text, at=at)


def capped_since(conn: apsw.Connection, since: float) -> list[float]:
    """Composition times of the messages that count against the daily cap since `since`:
    every capped message that was not suppressed."""
    return [float(at) for (at,) in conn.execute(
        "SELECT composed_at FROM proactive WHERE capped = 1 AND status != 'suppressed' "
        "AND composed_at > ? ORDER BY composed_at", (since,))]


def summary(conn: apsw.Connection, since: float) -> dict[str, Any]:
    """Proactive messages since `since`: by path and status, and suppressed ones by reason."""
    by_status: dict[str, dict[str, int]] = {}
    reasons: dict[str, int] = {}
    for path, status, reason, n in conn.execute(
            "SELECT path, status, reason, count(*) FROM proactive WHERE composed_at > ? "
            "GROUP BY path, status, reason", (since,)):
        by_path = by_status.setdefault(str(path), {})
        by_path[str(status)] = by_path.get(str(status), 0) + int(n)
        if status in ("suppressed", "dropped", "deferred") and reason:
            reasons[str(reason)] = reasons.get(str(reason), 0) + int(n)
    return {"by_path": by_status, "held_back_by_reason": reasons}


def recent(conn: apsw.Connection, *, limit: int, offset: int) -> list[dict[str, Any]]:
    keys = ("id", "path", "ref", "channel", "content", "topic", "turn_id", "status", "reason",
            "capped", "composed_at", "delivered_at")
    rows = conn.execute(
        f"SELECT {', '.join(keys)} FROM proactive ORDER BY composed_at DESC, id DESC "
        "LIMIT ? OFFSET ?", (limit, offset))
    return [{**dict(zip(keys, r, strict=True)), "capped": bool(r[9])} for r in rows]


# --- the DMN --------------------------------------------------------------------------------

def insert_dmn_run(conn: apsw.Connection, *, trigger: str, at: float, result: str,
                   fingerprint: str, turn_id: str | None, signals: tuple[str, ...] = ()) -> None:
    conn.execute("INSERT INTO dmn_runs (trigger, at, result, fingerprint, turn_id, signals) "
                 "VALUES (?, ?, ?, ?, ?, ?)", (trigger, at, result, fingerprint, turn_id,
                                               msgspec.json.encode(signals).decode()
                                               if signals else None))


def last_thought(conn: apsw.Connection) -> tuple[float, str] | None:
    """(when, fingerprint) of the DMN's last run that called the model."""
    row = conn.execute("SELECT at, fingerprint FROM dmn_runs WHERE turn_id IS NOT NULL "
                       "ORDER BY id DESC LIMIT 1").fetchone()
    return None if row is None else (float(row[0]), str(row[1]))


def last_run(conn: apsw.Connection, trigger: str) -> float | None:
    row = conn.execute("SELECT max(at) FROM dmn_runs WHERE trigger = ?", (trigger,)).fetchone()
    return None if row is None or row[0] is None else float(row[0])


def last_person_activity(conn: apsw.Connection) -> float | None:
    """When the person last sent something (a chat or an action on any channel)."""
    row = conn.execute(
        "SELECT finished_at FROM turns INDEXED BY turns_by_path WHERE path = 'user' AND "
        "source IN ('text', 'voice', 'action') ORDER BY finished_at DESC LIMIT 1").fetchone()
    return None if row is None else float(row[0])


# --- open loops -----------------------------------------------------------------------------

def open_loop(conn: apsw.Connection, text: str, *, source: str, turn_id: str | None,
              now: float) -> int:
    conn.execute("INSERT INTO open_loops (text, source, turn_id, created_at) VALUES (?, ?, ?, ?)",
                 (text, source, turn_id, now))
    return conn.last_insert_rowid()


def close_loop(conn: apsw.Connection, loop_id: int, now: float) -> bool:
    conn.execute("UPDATE open_loops SET closed_at = ? WHERE id = ? AND closed_at IS NULL",
                 (now, loop_id))
    return conn.changes() > 0


def open_loops(conn: apsw.Connection, limit: int) -> list[tuple[int, str, float]]:
    """(id, text, created_at) of the open loops, oldest first."""
    return [(int(i), str(t), float(c)) for i, t, c in conn.execute(
        "SELECT id, text, created_at FROM open_loops WHERE closed_at IS NULL ORDER BY id "
        "LIMIT ?", (limit,))]


def loop_marks(conn: apsw.Connection) -> tuple[int, int, float]:
    """Open loops, the newest id, and the last closing: what changes when a loop opens or
    closes (all of them, not only those a prompt shows)."""
    row = conn.execute(
        "SELECT count(*) FILTER (WHERE closed_at IS NULL), coalesce(max(id), 0), "
        "coalesce(max(closed_at), 0) FROM open_loops").fetchone()
    return (int(row[0]), int(row[1]), float(row[2])) if row else (0, 0, 0.0)


def is_open(conn: apsw.Connection, loop_id: int) -> bool:
    return conn.execute("SELECT 1 FROM open_loops WHERE id = ? AND closed_at IS NULL",
                        (loop_id,)).fetchone() is not None


# --- spending -------------------------------------------------------------------------------

def insert_spending(conn: apsw.Connection, *, path: str, tokens: int, llm_calls: int,
                    at: float, ref: str | None) -> None:
    conn.execute("INSERT INTO spending (path, tokens, llm_calls, at, ref) VALUES (?, ?, ?, ?, ?)",
                 (path, tokens, llm_calls, at, ref))


def spent_since(conn: apsw.Connection, since: float) -> list[tuple[str, float, int]]:
    """(path, at, tokens) of every LLM use since `since`: turns of every path (as they
    finished), and the spending rows of background jobs that are not turns."""
    rows = conn.execute(
        "SELECT path, finished_at, tokens_total FROM turns "
        "WHERE finished_at > ? AND tokens_total > 0 "
        "UNION ALL SELECT path, at, tokens FROM spending WHERE at > ?", (since, since))
    return [(str(p), float(a), int(t)) for p, a, t in rows]


def spending_by_day(conn: apsw.Connection, since: float) -> list[dict[str, Any]]:
    """Tokens and LLM calls per UTC day and path since `since`, oldest first."""
    rows = conn.execute(
        "SELECT date(finished_at, 'unixepoch') AS day, path, sum(tokens_total), sum(llm_calls) "
        "FROM turns WHERE finished_at > ? GROUP BY day, path "
        "UNION ALL SELECT date(at, 'unixepoch') AS day, path, sum(tokens), sum(llm_calls) "
        "FROM spending WHERE at > ? GROUP BY day, path ORDER BY day, path", (since, since))
    merged: dict[tuple[str, str], list[int]] = {}
    for day, path, tokens, calls in rows:
        entry = merged.setdefault((str(day), str(path)), [0, 0])
        entry[0] += int(tokens or 0)
        entry[1] += int(calls or 0)
    return [{"day": day, "path": path, "tokens": t, "llm_calls": c}
            for (day, path), (t, c) in sorted(merged.items())]
