"""The topics and channel_state tables (migration 0008): what each channel's conversation is
about and where it stands. Written by the StoreWriter only."""

from __future__ import annotations

from typing import Any

import apsw

MAX_KEYWORDS = 40  # content words a topic keeps for matching without vectors


def topic_seen(conn: apsw.Connection, *, topic_id: str, channel: str, name: str, new: bool,
               keywords: tuple[str, ...], vector: bytes | None, space_id: int | None,
               fok: float, now: float) -> None:
    """A message joined the topic (or started it): its vector joins the centroid (the sum of
    unit vectors; a centroid of another embedder's space is started again), its words the
    keywords; `fok` is the topic's feeling of knowing after the turn."""
    if new:
        conn.execute(
            "INSERT INTO topics (id, channel, name, keywords, centroid, space_id, messages, fok, "
            "created_at, last_seen) VALUES (?, ?, ?, ?, "
            "CASE WHEN ? IS NULL THEN NULL ELSE vec_normalize(?) END, ?, 1, ?, ?, ?)",
            (topic_id, channel, name, merged_keywords("", keywords), vector, vector,
             space_id if vector is not None else None, fok, now, now),
        )
        return
    row = conn.execute("SELECT keywords FROM topics WHERE id = ?", (topic_id,)).fetchone()
    if row is None:  # forgotten meanwhile: nothing to add to
        return
    conn.execute(
        "UPDATE topics SET keywords = ?, messages = messages + 1, fok = ?, last_seen = ?, "
        "centroid = CASE WHEN ? IS NULL THEN centroid "
        "WHEN centroid IS NULL OR space_id IS NOT ? OR length(centroid) != length(?) "
        "THEN vec_normalize(?) ELSE vec_add(centroid, vec_normalize(?)) END, "
        "space_id = CASE WHEN ? IS NULL THEN space_id ELSE ? END WHERE id = ?",
        (merged_keywords(str(row[0]), keywords), fok, now, vector, space_id, vector, vector,
         vector, vector, space_id, topic_id),
    )


def merged_keywords(old: str, new: tuple[str, ...]) -> str:
    """The newest message's words first, then the topic's older ones, MAX_KEYWORDS in all."""
    words = list(dict.fromkeys((*new, *old.split())))
    return " ".join(words[:MAX_KEYWORDS])


STATE_FIELDS = ("topic_id", "streak", "focus_id", "phase", "exchanges", "confidence", "mode",
                "last_message_at", "situation")


def save_state(conn: apsw.Connection, channel: str, values: dict[str, Any], now: float) -> None:
    conn.execute(
        f"INSERT OR REPLACE INTO channel_state (channel, {', '.join(STATE_FIELDS)}, updated_at) "
        f"VALUES (?, {', '.join('?' * len(STATE_FIELDS))}, ?)",
        (channel, *(values[f] for f in STATE_FIELDS), now),
    )


def load_state(conn: apsw.Connection, channel: str) -> dict[str, Any] | None:
    row = conn.execute(f"SELECT {', '.join(STATE_FIELDS)} FROM channel_state WHERE channel = ?",
                       (channel,)).fetchone()
    return None if row is None else dict(zip(STATE_FIELDS, row, strict=True))


def topic_names(conn: apsw.Connection, ids: list[str]) -> dict[str, tuple[str, float]]:
    """(name, fok) of each topic in `ids` that exists."""
    if not ids:
        return {}
    rows = conn.execute(f"SELECT id, name, fok FROM topics WHERE id IN "
                        f"({', '.join('?' * len(ids))})", tuple(ids))
    return {str(i): (str(n), float(f)) for i, n, f in rows}


def recent_topics(conn: apsw.Connection, channel: str, limit: int) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT id, name, messages, fok, created_at, last_seen FROM topics WHERE channel = ? "
        "ORDER BY last_seen DESC LIMIT ?", (channel, limit)).fetchall()
    keys = ("id", "name", "messages", "fok", "created_at", "last_seen")
    return [dict(zip(keys, row, strict=True)) for row in rows]


def save_summary(conn: apsw.Connection, channel: str, summary: str, upto_transcript_id: int,
                 now: float) -> None:
    """The situation model's summarised part, from the encoder's call for a window."""
    conn.execute(
        "INSERT OR REPLACE INTO situation_summaries (channel, summary, upto_transcript_id, "
        "updated_at) VALUES (?, ?, ?, ?)", (channel, summary, upto_transcript_id, now))


def summary(conn: apsw.Connection, channel: str) -> str:
    row = conn.execute("SELECT summary FROM situation_summaries WHERE channel = ?",
                       (channel,)).fetchone()
    return "" if row is None else str(row[0])
