"""Write helpers for the StoreWriter; each runs inside the caller's transaction."""

from __future__ import annotations

import apsw

from chalie.store.effects import Effect, RememberFact
from chalie.store.records import TurnRecord


def insert_turn(conn: apsw.Connection, t: TurnRecord) -> None:
    conn.execute(
        "INSERT INTO turns (id, channel, client_id, source, user_text, response_text, outcome, "
        "error, iterations, llm_calls, tokens_total, response_time_s, started_at, finished_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (t.id, t.channel, t.client_id, t.source, t.user_text, t.response_text, t.outcome,
         t.error, t.iterations, t.llm_calls, t.tokens_total, t.response_time_s, t.started_at,
         t.finished_at),
    )
    conn.executemany(
        "INSERT INTO tool_calls (turn_id, position, iteration, call_id, name, args, result, "
        "is_error, duration_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(t.id, i, c.iteration, c.call_id, c.name, c.args, c.result, int(c.is_error),
          c.duration_ms) for i, c in enumerate(t.tool_calls)],
    )
    conn.execute(
        "INSERT INTO transcript (channel, turn_id, role, text, created_at) VALUES (?, ?, ?, ?, ?)",
        (t.channel, t.id, "user", t.user_text, t.started_at),
    )
    if t.response_text:
        conn.execute(
            "INSERT INTO transcript (channel, turn_id, role, text, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (t.channel, t.id, "assistant", t.response_text, t.finished_at),
        )
    for effect in t.effects:
        apply_effect(conn, effect, turn_id=t.id, now=t.finished_at)


def apply_effect(conn: apsw.Connection, effect: Effect, *, turn_id: str, now: float) -> None:
    match effect:
        case RememberFact(key=key, value=value):
            old = conn.execute(
                "SELECT id, value FROM knowledge WHERE key = ? AND superseded_at IS NULL", (key,)
            ).fetchone()
            if old is not None and old[1] == value:
                return
            if old is not None:
                conn.execute("UPDATE knowledge SET superseded_at = ? WHERE id = ?", (now, old[0]))
            conn.execute(
                "INSERT INTO knowledge (key, value, turn_id, created_at) VALUES (?, ?, ?, ?)",
                (key, value, turn_id, now),
            )
            if old is not None:
                conn.execute(
                    "UPDATE knowledge SET superseded_by = last_insert_rowid() WHERE id = ?",
                    (old[0],),
                )


def insert_events(
    conn: apsw.Connection, channel: str, rows: list[tuple[int, str, str | None, str]], now: float
) -> None:
    """rows: (seq, type, exchange_id, body)."""
    conn.executemany(
        "INSERT INTO events (channel, seq, type, exchange_id, body, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        [(channel, seq, kind, exchange, body, now) for seq, kind, exchange, body in rows],
    )
