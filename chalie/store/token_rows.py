"""Scoped API tokens' rows (table api_tokens): read by the edge at start, changed by the
StoreWriter (each write call runs inside its transaction)."""

from __future__ import annotations

from collections.abc import Iterable

import apsw
import msgspec


class TokenRow(msgspec.Struct, frozen=True):
    id: str
    name: str
    scopes: tuple[str, ...]
    token_hash: str
    created_at: float
    last_used_at: float | None = None


def all_tokens(conn: apsw.Connection) -> list[TokenRow]:
    rows = conn.execute(
        "SELECT id, name, scopes, token_hash, created_at, last_used_at FROM api_tokens "
        "ORDER BY created_at, id").fetchall()
    return [TokenRow(str(r[0]), str(r[1]), tuple(msgspec.json.decode(str(r[2]), type=list[str])),
                     str(r[3]), float(r[4]),  # type: ignore[arg-type]
                     None if r[5] is None else float(r[5]))
            for r in rows]


def insert(conn: apsw.Connection, row: TokenRow) -> bool:
    """The new token; False (nothing written) when a token of that name exists."""
    if conn.execute("SELECT 1 FROM api_tokens WHERE name = ?", (row.name,)).fetchone():
        return False
    conn.execute(
        "INSERT INTO api_tokens (id, name, scopes, token_hash, created_at, last_used_at) "
        "VALUES (?, ?, ?, ?, ?, NULL)",
        (row.id, row.name, msgspec.json.encode(list(row.scopes)).decode(), row.token_hash,
         row.created_at))
    return True


def delete(conn: apsw.Connection, token_id: str) -> bool:
    conn.execute("DELETE FROM api_tokens WHERE id = ?", (token_id,))
    return bool(conn.changes())


def touch(conn: apsw.Connection, used: Iterable[tuple[str, float]]) -> None:
    """When each token was last used (never moved back)."""
    conn.executemany(
        "UPDATE api_tokens SET last_used_at = max(coalesce(last_used_at, 0), ?) WHERE id = ?",
        [(at, token_id) for token_id, at in used])
