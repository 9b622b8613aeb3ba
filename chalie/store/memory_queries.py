"""Memory reads: items by key, vectors, strengths, listings for the person, snapshots."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import apsw
import msgspec

from chalie.values.memory import Item, Kind, episode_text, knowledge_text, mkey, split

_decode_list = msgspec.json.Decoder(list[str]).decode


def _marks(n: int) -> str:
    return ",".join("?" * n)


def items(conn: apsw.Connection, keys: Iterable[int]) -> dict[int, Item]:
    """The items behind memory keys that still exist (knowledge: only current values)."""
    by_kind: dict[Kind, list[int]] = defaultdict(list)
    for key in keys:
        kind, item_id = split(key)
        by_kind[kind].append(item_id)
    found: dict[int, Item] = {}
    if ids := by_kind.get(Kind.TRANSCRIPT):
        for i, channel, role, text, at, speaker in conn.execute(
            f"SELECT id, channel, role, text, created_at, speaker FROM transcript "
            f"WHERE id IN ({_marks(len(ids))})", ids,
        ):
            k = mkey(Kind.TRANSCRIPT, int(i))
            found[k] = Item(k, "message", int(i), str(text), float(at),
                            channel=str(channel), role=str(role), speaker=speaker)
    if ids := by_kind.get(Kind.EPISODE):
        for row in conn.execute(
            f"SELECT id, channel, gist, intent, outcome, entities, open_loops, salience, "
            f"happened_at FROM episodes WHERE id IN ({_marks(len(ids))})", ids,
        ):
            i, channel, gist, intent, outcome, entities, loops, salience, at = row
            k = mkey(Kind.EPISODE, int(i))
            text = episode_text(str(gist), str(intent), str(outcome),
                                _decode_list(str(entities)), _decode_list(str(loops)))
            found[k] = Item(k, "episode", int(i), text, float(at),
                            channel=str(channel), salience=float(salience))
    if ids := by_kind.get(Kind.KNOWLEDGE):
        for i, key, value, kind, at in conn.execute(
            f"SELECT id, key, value, kind, created_at FROM knowledge "
            f"WHERE id IN ({_marks(len(ids))}) AND superseded_at IS NULL", ids,
        ):
            k = mkey(Kind.KNOWLEDGE, int(i))
            found[k] = Item(k, "knowledge", int(i), knowledge_text(str(key), str(value)),
                            float(at), key=str(key), knowledge_kind=kind)
    return found


def space_dim(conn: apsw.Connection, space_id: int) -> int | None:
    row = conn.execute("SELECT dim FROM vector_spaces WHERE id = ?", (space_id,)).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def newest(conn: apsw.Connection, limit: int) -> list[int]:
    """Memory keys of the newest `limit` episodes and the newest `limit` current facts."""
    episodes = conn.execute("SELECT id FROM episodes ORDER BY id DESC LIMIT ?", (limit,))
    facts = conn.execute("SELECT id FROM knowledge WHERE superseded_at IS NULL "
                         "ORDER BY id DESC LIMIT ?", (limit,))
    return [*(mkey(Kind.EPISODE, int(r[0])) for r in episodes.fetchall()),  # type: ignore[arg-type]
            *(mkey(Kind.KNOWLEDGE, int(r[0])) for r in facts.fetchall())]  # type: ignore[arg-type]


def vector_key(conn: apsw.Connection, rowid: int) -> int | None:
    """The memory key of the `vectors` row with this rowid, or None when it is gone."""
    row = conn.execute("SELECT mkey FROM vectors WHERE id = ?", (rowid,)).fetchone()
    return None if row is None else int(row[0])


def vectors_after(conn: apsw.Connection, space_id: int,
                  rowid: int) -> Iterator[tuple[int, int, bytes]]:
    """(rowid, memory key, float32 vector) of the space's vectors stored after `rowid`, in
    rowid order, read as they are iterated."""
    # `+space_id`: by rowid, not by the (space_id, mkey) index, which would read every vector
    # of the space to find the few new ones.
    for found, key, vector in conn.execute(
            "SELECT id, mkey, embedding FROM vectors WHERE id > ? AND +space_id = ? "
            "ORDER BY id", (rowid, space_id)):
        yield int(found), int(key), vector


def similarities(conn: apsw.Connection, space_id: int, query: bytes,
                 keys: Sequence[int]) -> list[tuple[int, float]]:
    """(memory key, cosine similarity of its float vector to `query`), most similar first."""
    if not keys:
        return []
    rows = conn.execute(
        f"SELECT mkey, 1 - vec_distance_cosine(embedding, ?) AS similarity FROM vectors "
        f"WHERE space_id = ? AND mkey IN ({_marks(len(keys))}) ORDER BY similarity DESC",
        (query, space_id, *keys),
    ).fetchall()
    return [(int(k), float(s)) for k, s in rows]  # type: ignore[arg-type]


def neighbours(conn: apsw.Connection, message_ids: Sequence[int]) -> dict[int, list[int]]:
    """message id -> memory keys of what surrounds it: the line said before it and the one
    after it on its channel, and the episode whose span covers it (each when there is one)."""
    if not message_ids:
        return {}
    rows = conn.execute(
        "SELECT t.id, t.channel, "
        "(SELECT max(b.id) FROM transcript AS b WHERE b.channel = t.channel AND b.id < t.id), "
        "(SELECT min(a.id) FROM transcript AS a WHERE a.channel = t.channel AND a.id > t.id) "
        f"FROM transcript AS t WHERE t.id IN ({_marks(len(message_ids))})", list(message_ids),
    ).fetchall()
    episodes = conn.execute("SELECT EXISTS (SELECT 1 FROM episodes)").fetchone()
    around: dict[int, list[int]] = {}
    for i, channel, before, after in rows:
        keys = [mkey(Kind.TRANSCRIPT, int(n)) for n in (before, after) if n is not None]
        if episodes and episodes[0]:
            episode = conn.execute(
                "SELECT id, transcript_from FROM episodes INDEXED BY episodes_by_span "
                "WHERE channel = ? AND transcript_to >= ? ORDER BY transcript_to LIMIT 1",
                (channel, i)).fetchone()
            if episode is not None and int(episode[1]) <= int(i):  # type: ignore[arg-type]
                keys.append(mkey(Kind.EPISODE, int(episode[0])))
        around[int(i)] = keys  # type: ignore[arg-type]
    return around


def strengths(conn: apsw.Connection, keys: Sequence[int]) -> dict[int, tuple[int, float]]:
    """mkey -> (times recalled, when last), for the keys that were ever recalled."""
    if not keys:
        return {}
    rows = conn.execute(
        f"SELECT mkey, recalls, last_recalled_at FROM memory_strength "
        f"WHERE mkey IN ({_marks(len(keys))})", list(keys),
    ).fetchall()
    return {int(k): (int(n), float(t)) for k, n, t in rows}  # type: ignore[arg-type]


def forgotten(conn: apsw.Connection) -> list[tuple[str, float]]:
    """(value, when forgotten) of everything the person asked to forget."""
    return [(str(v), float(t)) for v, t in conn.execute(
        "SELECT value, forgotten_at FROM forgotten ORDER BY id")]


def identity_items(conn: apsw.Connection, limit: int = 40) -> list[Item]:
    """Current traits and preferences (the person's name among them), most certain first."""
    rows = conn.execute(
        "SELECT id, key, value, kind, created_at FROM knowledge INDEXED BY knowledge_identity "
        "WHERE superseded_at IS NULL AND kind != 'fact' ORDER BY key = 'name' DESC, "
        "confidence DESC, created_at DESC LIMIT ?", (limit,),
    ).fetchall()
    return [Item(mkey(Kind.KNOWLEDGE, int(i)), "knowledge", int(i),  # type: ignore[arg-type]
                 knowledge_text(str(k), str(v)), float(at), key=str(k),  # type: ignore[arg-type]
                 knowledge_kind=kind)  # type: ignore[arg-type]
            for i, k, v, kind, at in rows]


# -- embedding backlog --

def unembedded(conn: apsw.Connection, kind: Kind, after_id: int,
               limit: int) -> list[tuple[int, str]]:
    """(id, text) of the next items of `kind` after `after_id`, in id order, to embed."""
    match kind:
        case Kind.TRANSCRIPT:
            sql = "SELECT id, text FROM transcript WHERE id > ? ORDER BY id LIMIT ?"
        case Kind.EPISODE:
            sql = ("SELECT id, gist, intent, outcome, entities, open_loops FROM episodes "
                   "WHERE id > ? ORDER BY id LIMIT ?")
        case Kind.KNOWLEDGE:
            sql = ("SELECT id, key, value FROM knowledge WHERE id > ? AND superseded_at IS NULL "
                   "ORDER BY id LIMIT ?")
    out: list[tuple[int, str]] = []
    for row in conn.execute(sql, (after_id, limit)):
        if kind is Kind.TRANSCRIPT:
            out.append((int(row[0]), str(row[1])))
        elif kind is Kind.EPISODE:
            _, gist, intent, outcome, entities, loops = row
            out.append((int(row[0]), episode_text(
                str(gist), str(intent), str(outcome), _decode_list(str(entities)),
                _decode_list(str(loops)), labels=False)))
        else:
            out.append((int(row[0]), knowledge_text(str(row[1]), str(row[2]))))
    return out


def progress(conn: apsw.Connection, space_id: int) -> dict[Kind, int]:
    rows = conn.execute("SELECT kind, upto_id FROM vector_progress WHERE space_id = ?",
                        (space_id,)).fetchall()
    done = {Kind(int(k)): int(u) for k, u in rows}  # type: ignore[arg-type]
    return {kind: done.get(kind, 0) for kind in Kind}


def pending_estimate(conn: apsw.Connection, done: dict[Kind, int]) -> int:
    """About how many items still lack a vector: ids beyond each kind's progress (superseded
    knowledge and forgotten items make it an upper bound)."""
    total = 0
    for kind, table in ((Kind.TRANSCRIPT, "transcript"), (Kind.EPISODE, "episodes"),
                        (Kind.KNOWLEDGE, "knowledge")):
        row = conn.execute(f"SELECT max(id) FROM {table}").fetchone()
        top = int(row[0]) if row and row[0] is not None else 0
        total += max(0, top - done.get(kind, 0))
    return total


def stale_spaces(conn: apsw.Connection, current: int) -> list[int]:
    return [int(r[0]) for r in conn.execute(
        "SELECT id FROM vector_spaces WHERE id != ? ORDER BY id", (current,))]


# -- encoding --

def encoded_upto(conn: apsw.Connection, channel: str) -> int:
    row = conn.execute("SELECT upto_transcript_id FROM encodings WHERE channel = ?",
                       (channel,)).fetchone()
    return int(row[0]) if row else 0


def unencoded_count(conn: apsw.Connection, channel: str, after_id: int) -> int:
    row = conn.execute("SELECT count(*) FROM transcript WHERE channel = ? AND id > ?",
                       (channel, after_id)).fetchone()
    return int(row[0]) if row else 0


class WindowLine(msgspec.Struct, frozen=True):
    id: int
    role: str
    text: str
    created_at: float
    turn_id: str | None
    speaker: str | None = None  # the program's name, for a program's message


def window(conn: apsw.Connection, channel: str, after_id: int, limit: int) -> list[WindowLine]:
    return [WindowLine(int(i), str(r), str(t), float(c), None if u is None else str(u), s)
            for i, r, t, c, u, s in conn.execute(
                "SELECT id, role, text, created_at, turn_id, speaker FROM transcript "
                "WHERE channel = ? AND id > ? ORDER BY id LIMIT ?", (channel, after_id, limit))]


def channels_to_encode(conn: apsw.Connection, every: int) -> list[str]:
    """Channels whose transcript has grown by at least `every` messages since last encoded."""
    rows = conn.execute(
        "SELECT t.channel FROM transcript AS t LEFT JOIN encodings AS e ON e.channel = t.channel "
        "WHERE t.id > coalesce(e.upto_transcript_id, 0) GROUP BY t.channel HAVING count(*) >= ?",
        (every,),
    ).fetchall()
    return [str(r[0]) for r in rows]


# -- what the person sees of their memory --

def knowledge_rows(conn: apsw.Connection, *, query: str | None, history: bool, limit: int,
                   offset: int) -> list[dict[str, Any]]:
    where = [] if history else ["superseded_at IS NULL"]
    params: list[Any] = []
    if query:
        where.append("search_text LIKE ? ESCAPE '\\'")
        params.append("%" + _like_escape(query.strip().casefold()) + "%")
    sql = ("SELECT id, key, value, kind, source, confidence, turn_id, created_at, superseded_at,"
           " superseded_by, source_line FROM knowledge"
           + (" WHERE " + " AND ".join(where) if where else "")
           + " ORDER BY key, created_at DESC, id DESC LIMIT ? OFFSET ?")
    out = []
    for i, k, v, kind, source, conf, turn, at, until, by, line in conn.execute(
            sql, (*params, limit, offset)):
        out.append({"id": i, "key": k, "value": v, "kind": kind, "source": source,
                    "confidence": conf, "turn_id": turn, "current": until is None,
                    "valid_from": at, "valid_to": until, "superseded_by": by,
                    "source_line": line})
    return out


def episode_rows(conn: apsw.Connection, *, ids: Sequence[int] | None, limit: int,
                 offset: int) -> list[dict[str, Any]]:
    sql = ("SELECT id, channel, gist, intent, outcome, entities, open_loops, salience, valence, "
           "transcript_from, transcript_to, encoding_id, happened_at, created_at FROM episodes")
    params: list[Any] = []
    if ids is not None:
        if not ids:
            return []
        sql += f" WHERE id IN ({_marks(len(ids))})"
        params += list(ids)
    sql += " ORDER BY id DESC LIMIT ? OFFSET ?"
    out = []
    for row in conn.execute(sql, (*params, limit, offset)):
        (i, channel, gist, intent, outcome, entities, loops, salience, valence, t_from, t_to,
         encoding, happened, created) = row
        out.append({"id": i, "channel": channel, "gist": gist, "intent": intent,
                    "outcome": outcome, "entities": _decode_list(str(entities)),
                    "open_loops": _decode_list(str(loops)), "salience": salience,
                    "valence": valence, "transcript_from": t_from, "transcript_to": t_to,
                    "encoding_id": encoding, "happened_at": happened, "created_at": created})
    return out


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def snapshots(conn: apsw.Connection, turn_id: str) -> list[dict[str, Any]]:
    """A turn's (or background job's) LLM requests, in call order, decoded."""
    out = []
    for call, purpose, system, messages, tools, fmt, at in conn.execute(
        "SELECT call, purpose, system, messages, tools, response_format, created_at "
        "FROM prompt_snapshots WHERE turn_id = ? ORDER BY call, id", (turn_id,),
    ):
        out.append({
            "call": call, "purpose": purpose, "system": system,
            "messages": msgspec.json.decode(str(messages)),
            "tools": msgspec.json.decode(str(tools)),
            "response_format": None if fmt is None else msgspec.json.decode(str(fmt)),
            "created_at": at,
        })
    return out
