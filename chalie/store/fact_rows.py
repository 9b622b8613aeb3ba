"""Reads for knowledge that updates: the current facts near a new one, and what each current
fact replaced (chalie.memory.updates decides what to show; chalie.memory.context and the
`memory` tool show it)."""

from __future__ import annotations

from collections.abc import Sequence

import apsw
import msgspec

from chalie.values.memory import Kind


class StoredFact(msgspec.Struct, frozen=True):
    id: int
    key: str
    value: str
    since: float  # when it became true (created_at)
    similarity: float | None = None  # to what it was found for, when found by meaning


class Before(msgspec.Struct, frozen=True):
    """A value a current fact replaced, and when that value stopped being true."""

    key: str
    value: str
    since: float
    until: float


def _marks(n: int) -> str:
    return ", ".join("?" * n)


def nearest_current(conn: apsw.Connection, space_id: int, vector: bytes,
                    limit: int) -> list[StoredFact]:
    """The current facts whose vectors (`key: value`, in embedder space `space_id`) are the
    most similar to `vector`, most similar first. One pass over the current facts' vectors
    (a heavy user's 20k facts: a few milliseconds); facts not yet embedded are not seen."""
    rows = conn.execute(
        "SELECT k.id, k.key, k.value, k.created_at, 1 - vec_distance_cosine(v.embedding, ?) AS s "
        "FROM knowledge AS k JOIN vectors AS v ON v.space_id = ? AND v.mkey = k.id * 4 + ? "
        "WHERE k.superseded_at IS NULL AND v.dim * 4 = length(?) "
        "ORDER BY s DESC LIMIT ?",
        (vector, space_id, int(Kind.KNOWLEDGE), vector, limit),
    ).fetchall()
    return [StoredFact(int(i), str(k), str(v), float(at), float(s))  # type: ignore[arg-type]
            for i, k, v, at, s in rows]


def any_embedded(conn: apsw.Connection, space_id: int) -> bool:
    """Whether any current fact has a vector in space `space_id` (else none can be near)."""
    return conn.execute(
        "SELECT EXISTS (SELECT 1 FROM knowledge AS k JOIN vectors AS v ON v.space_id = ? "
        "AND v.mkey = k.id * 4 + ? WHERE k.superseded_at IS NULL)",
        (space_id, int(Kind.KNOWLEDGE)),
    ).fetchone() == (1,)


def line_vectors(conn: apsw.Connection, space_id: int,
                 transcript_ids: Sequence[int]) -> dict[int, bytes]:
    """transcript id -> its stored vector in space `space_id`, for the lines embedded yet."""
    if not transcript_ids:
        return {}
    keys = [i * 4 + int(Kind.TRANSCRIPT) for i in transcript_ids]
    rows = conn.execute(
        f"SELECT mkey, embedding FROM vectors WHERE space_id = ? AND mkey IN ({_marks(len(keys))})",
        (space_id, *keys),
    ).fetchall()
    return {int(k) >> 2: bytes(v) for k, v in rows}  # type: ignore[arg-type]


def current_with_keys(conn: apsw.Connection, keys: Sequence[str]) -> list[StoredFact]:
    """The current facts under any of `keys` (normalised keys)."""
    if not keys:
        return []
    rows = conn.execute(
        "SELECT id, key, value, created_at FROM knowledge "
        f"WHERE superseded_at IS NULL AND key IN ({_marks(len(keys))}) ORDER BY id",
        list(keys),
    ).fetchall()
    return [StoredFact(int(i), str(k), str(v), float(at))  # type: ignore[arg-type]
            for i, k, v, at in rows]


def sharing_key_words(conn: apsw.Connection, words: Sequence[str],
                      limit: int) -> list[StoredFact]:
    """Current facts whose key contains any of `words`, those containing more of them first,
    then the newest."""
    if not words:
        return []
    matches = [f"(instr(key, ?{n}) > 0)" for n in range(1, len(words) + 1)]
    rows = conn.execute(
        f"SELECT id, key, value, created_at, {' + '.join(matches)} AS shared FROM knowledge "
        f"WHERE superseded_at IS NULL AND shared > 0 ORDER BY shared DESC, created_at DESC, "
        f"id DESC LIMIT {int(limit)}",
        list(words),
    ).fetchall()
    return [StoredFact(int(i), str(k), str(v), float(at))  # type: ignore[arg-type]
            for i, k, v, at, _ in rows]


def current(conn: apsw.Connection, ids: Sequence[int]) -> dict[int, StoredFact]:
    """The current facts among `ids`, by id."""
    if not ids:
        return {}
    rows = conn.execute(
        "SELECT id, key, value, created_at FROM knowledge "
        f"WHERE superseded_at IS NULL AND id IN ({_marks(len(ids))})", list(ids),
    ).fetchall()
    return {int(i): StoredFact(int(i), str(k), str(v), float(at))  # type: ignore[arg-type]
            for i, k, v, at in rows}


def replaced(conn: apsw.Connection, ids: Sequence[int], per_fact: int = 2,
             ) -> dict[int, list[Before]]:
    """fact id -> the values it replaced directly (by key or by naming them), the most recent
    first, at most `per_fact` each."""
    if not ids:
        return {}
    out: dict[int, list[Before]] = {}
    for by, key, value, since, until in conn.execute(
        "SELECT superseded_by, key, value, created_at, superseded_at FROM knowledge "
        "INDEXED BY knowledge_superseded_by "
        f"WHERE superseded_by IN ({_marks(len(ids))}) ORDER BY superseded_at DESC, id DESC",
        list(ids),
    ):
        before = out.setdefault(int(by), [])
        if len(before) < per_fact:
            before.append(Before(str(key), str(value), float(since),
                                 float(until)))
    return out
