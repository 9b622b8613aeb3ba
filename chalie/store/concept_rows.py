"""The concepts, concept_links and drift_gists tables (migration 0009). Written by the
StoreWriter only: concepts with the episodes of their encoding window, activation marks and
drift gists with the DMN's thought."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import apsw
import msgspec

from chalie.values.cognition import Concept, Link, decayed

MERGE_SIMILARITY = 0.9  # a new concept this close (cosine) to a stored one is that one
GRAPH_CONCEPTS = 500  # the strongest, most recent concepts spreading activation looks at
CO_OCCURS = "co-occurs"


class ConceptRow(msgspec.Struct, frozen=True):
    """A concept an encoding window named: its normalised name and unit vector (None when the
    embedder failed: it then merges by name only)."""

    name: str
    vector: bytes | None = None


def store_window(conn: apsw.Connection, concepts: Sequence[ConceptRow],
                 relations: Sequence[tuple[str, str, str]], *, space_id: int | None,
                 now: float) -> dict[str, int]:
    """Merge a window's concepts into the store (mentions + 1, strength decayed + 1) and link
    every pair of them (strength decayed + 1; the relation the encoder named, else
    "co-occurs"). Returns each name's concept id."""
    ids: dict[str, int] = {}
    seen: set[int] = set()
    for concept in concepts:
        concept_id = _merge(conn, concept, space_id, now, seen)
        ids[concept.name] = concept_id
        seen.add(concept_id)
    named: dict[tuple[int, int], str] = {}
    for first, second, relation in relations:
        if first in ids and second in ids and ids[first] != ids[second]:
            named[_pair(ids[first], ids[second])] = relation
    for a, b in combinations(sorted(seen), 2):
        _link(conn, a, b, named.get((a, b), CO_OCCURS), now)
    return ids


def _merge(conn: apsw.Connection, concept: ConceptRow, space_id: int | None, now: float,
           seen: set[int]) -> int:
    row = conn.execute("SELECT id FROM concepts WHERE name = ?", (concept.name,)).fetchone()
    found = int(row[0]) if row is not None else None
    if found is None and concept.vector is not None and space_id is not None:
        near = conn.execute(
            "SELECT id, vec_distance_cosine(vector, ?) AS d FROM concepts WHERE space_id = ? "
            "AND vector IS NOT NULL AND length(vector) = ? ORDER BY d IS NULL, d, id LIMIT 1",
            (concept.vector, space_id, len(concept.vector)),
        ).fetchone()
        # a zero vector has no direction: its distance is NULL, and it is nobody's twin
        if near is not None and near[1] is not None \
                and 1.0 - float(near[1]) >= MERGE_SIMILARITY:
            found = int(near[0])
    if found is None:
        conn.execute(
            "INSERT INTO concepts (name, vector, space_id, strength, mentions, created_at, "
            "last_seen) VALUES (?, ?, ?, 1.0, 1, ?, ?)",
            (concept.name, concept.vector,
             space_id if concept.vector is not None else None, now, now),
        )
        return conn.last_insert_rowid()
    if found in seen:  # two names of one window that are one concept: one mention
        return found
    old = conn.execute("SELECT strength, last_seen FROM concepts WHERE id = ?",
                       (found,)).fetchone()
    assert old is not None
    strength, last_seen = old
    conn.execute(
        "UPDATE concepts SET strength = ?, mentions = mentions + 1, last_seen = ?, "
        "vector = CASE WHEN vector IS NULL OR space_id IS NOT ? THEN coalesce(?, vector) "
        "ELSE vector END, "
        "space_id = CASE WHEN ? IS NOT NULL AND (vector IS NULL OR space_id IS NOT ?) THEN ? "
        "ELSE space_id END WHERE id = ?",
        (decayed(float(strength), float(last_seen), now) + 1.0, max(now, float(last_seen)),
         space_id, concept.vector, concept.vector, space_id, space_id, found),
    )
    return found


def _pair(a: int, b: int) -> tuple[int, int]:
    return (a, b) if a < b else (b, a)


def _link(conn: apsw.Connection, a: int, b: int, relation: str, now: float) -> None:
    row = conn.execute("SELECT relation, strength, updated_at FROM concept_links WHERE a = ? "
                       "AND b = ?", (a, b)).fetchone()
    if row is None:
        conn.execute("INSERT INTO concept_links (a, b, relation, strength, updated_at) "
                     "VALUES (?, ?, ?, 1.0, ?)", (a, b, relation, now))
        return
    kept = str(row[0]) if relation == CO_OCCURS else relation  # a named relation stays named
    conn.execute("UPDATE concept_links SET relation = ?, strength = ?, updated_at = ? "
                 "WHERE a = ? AND b = ?",
                 (kept, decayed(float(row[1]), float(row[2]), now) + 1.0,
                  max(now, float(row[2])), a, b))


def mark_activated(conn: apsw.Connection, ids: Sequence[int], at: float) -> None:
    conn.executemany("UPDATE concepts SET last_activated = ? WHERE id = ?",
                     [(at, i) for i in ids])


def graph(conn: apsw.Connection, *,
          limit: int = GRAPH_CONCEPTS) -> tuple[list[Concept], list[Link]]:
    """The concepts spreading activation looks at (the most recently seen `limit`) and the
    links among them."""
    concepts = [Concept(int(r[0]), str(r[1]), float(r[2]), float(r[3]),
                        None if r[4] is None else float(r[4]))
                for r in conn.execute(
                    "SELECT id, name, strength, last_seen, last_activated FROM concepts "
                    "ORDER BY last_seen DESC, id LIMIT ?", (limit,))]
    ids = {c.id for c in concepts}
    links = [Link(int(r[0]), int(r[1]), str(r[2]), float(r[3]), float(r[4]))
             for r in conn.execute("SELECT a, b, relation, strength, updated_at FROM "
                                   "concept_links ORDER BY a, b")
             if int(r[0]) in ids and int(r[1]) in ids]
    return concepts, links


# -- drift gists --

def add_gist(conn: apsw.Connection, channel: str, text: str, concepts: Sequence[str], *,
             now: float, expires_at: float) -> None:
    conn.execute("DELETE FROM drift_gists WHERE expires_at <= ?", (now,))
    conn.execute(
        "INSERT INTO drift_gists (channel, text, concepts, created_at, expires_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (channel, text, msgspec.json.encode(list(concepts)).decode(), now, expires_at),
    )


def gists(conn: apsw.Connection, channel: str, now: float, *, limit: int = 3) -> list[str]:
    """The channel's unexpired drift gists, newest first."""
    return [str(r[0]) for r in conn.execute(
        "SELECT text FROM drift_gists WHERE channel = ? AND expires_at > ? "
        "ORDER BY created_at DESC, id DESC LIMIT ?", (channel, now, limit))]
