"""The login sessions' rows, as the StoreWriter changes them (each call inside its transaction).

Rotation is a compare-and-set on the old row: a row already replaced ends by `old_until`, so a
second request with the same old token replaces nothing.
"""

from __future__ import annotations

import apsw


def create_session(conn: apsw.Connection, hashed: str, *, created_at: float,
                   expires_at: float) -> None:
    conn.execute(
        "INSERT INTO auth_sessions (token_hash, created_at, expires_at) VALUES (?, ?, ?)",
        (hashed, created_at, expires_at),
    )


def rotate_session(conn: apsw.Connection, old_hash: str, new_hash: str, *, now: float,
                   old_until: float) -> float | None:
    """In the writer's transaction: the new row with the old one's expiry, the old row cut to
    `old_until`; None (nothing written) when the old row is gone or ends by then already."""
    row = conn.execute(
        "SELECT expires_at FROM auth_sessions WHERE token_hash = ?", (old_hash,)
    ).fetchone()
    if row is None or float(row[0]) <= old_until:
        return None
    expires_at = float(row[0])
    conn.execute("UPDATE auth_sessions SET expires_at = ? WHERE token_hash = ?",
                 (old_until, old_hash))
    conn.execute(
        "INSERT INTO auth_sessions (token_hash, created_at, expires_at) VALUES (?, ?, ?)",
        (new_hash, now, expires_at),
    )
    return expires_at


def end_session(conn: apsw.Connection, hashed: str) -> bool:
    """In the writer's transaction: delete one session; whether there was one."""
    conn.execute("DELETE FROM auth_sessions WHERE token_hash = ?", (hashed,))
    return bool(conn.changes())

