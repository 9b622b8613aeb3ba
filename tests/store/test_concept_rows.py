"""Concepts in the store (chalie/store/concept_rows.py), on a real SQLite file: merging by name
and by embedding similarity, strengths and link strengths that grow with each window and decay
with time, activation marks and drift gists."""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from chalie.store import background_ops, concept_rows, db
from chalie.store.background_ops import ConceptsActivated, DriftGist
from chalie.store.concept_rows import ConceptRow
from chalie.values.cognition import HALF_LIFE_S

NOW = 1_000_000.0
SPACE = 1


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[apsw.Connection]:
    conn = db.open_writer(tmp_path / "data", busy_timeout_ms=2000, synchronous="FULL")
    yield conn
    conn.close()


def unit(*values: float) -> bytes:
    norm = math.sqrt(sum(v * v for v in values))
    return struct.pack(f"<{len(values)}f", *(v / norm for v in values))


def store(conn: apsw.Connection, *rows: ConceptRow,
          relations: tuple[tuple[str, str, str], ...] = (), now: float = NOW,
          space_id: int | None = SPACE) -> dict[str, int]:
    with db.immediate(conn):
        return concept_rows.store_window(conn, rows, relations, space_id=space_id, now=now)


def concepts(conn: apsw.Connection) -> dict[str, tuple[float, int]]:
    return {str(r[0]): (float(r[1]), int(r[2])) for r in conn.execute(
        "SELECT name, strength, mentions FROM concepts")}


def links(conn: apsw.Connection) -> dict[tuple[str, str], tuple[str, float]]:
    return {(str(r[0]), str(r[1])): (str(r[2]), float(r[3])) for r in conn.execute(
        "SELECT ca.name, cb.name, l.relation, l.strength FROM concept_links AS l "
        "JOIN concepts AS ca ON ca.id = l.a JOIN concepts AS cb ON cb.id = l.b")}


def test_a_near_duplicate_merges_into_the_stored_concept(writer: apsw.Connection) -> None:
    """Cosine >= 0.9 in the same space is the same concept; below it, or in another space, a
    new one."""
    store(writer, ConceptRow("tomato garden", unit(1, 0, 0, 0)))
    ids = store(writer, ConceptRow("tomato patch", unit(1, 0.2, 0, 0)),  # cosine ~0.98
                ConceptRow("lisbon", unit(0, 1, 0, 0)))
    assert ids["tomato patch"] == store(writer, ConceptRow("tomato garden"))["tomato garden"]
    assert concepts(writer) == {"tomato garden": (3.0, 3), "lisbon": (1.0, 1)}
    store(writer, ConceptRow("tomato soup", unit(1, 0.6, 0, 0)))  # cosine ~0.86: its own
    store(writer, ConceptRow("tomatoes", unit(1, 0, 0, 0)), space_id=SPACE + 1)
    assert set(concepts(writer)) == {"tomato garden", "lisbon", "tomato soup", "tomatoes"}


def test_strength_is_the_decayed_strength_plus_one(writer: apsw.Connection) -> None:
    store(writer, ConceptRow("garden"))
    store(writer, ConceptRow("garden"), now=NOW + HALF_LIFE_S)
    assert concepts(writer)["garden"] == (pytest.approx(1.5), 2)


def test_every_pair_of_a_window_links_and_named_relations_stay(
    writer: apsw.Connection,
) -> None:
    store(writer, ConceptRow("garden"), ConceptRow("tomatoes"), ConceptRow("watering"),
          relations=(("tomatoes", "watering", "need"),))
    assert links(writer) == {("garden", "tomatoes"): ("co-occurs", 1.0),
                             ("garden", "watering"): ("co-occurs", 1.0),
                             ("tomatoes", "watering"): ("need", 1.0)}
    store(writer, ConceptRow("tomatoes"), ConceptRow("watering"), now=NOW + HALF_LIFE_S)
    assert links(writer)[("tomatoes", "watering")] == ("need", pytest.approx(1.5))
    assert links(writer)[("garden", "tomatoes")] == ("co-occurs", 1.0)


def test_two_names_of_one_concept_in_a_window_are_one_mention_and_no_link(
    writer: apsw.Connection,
) -> None:
    store(writer, ConceptRow("garden", unit(1, 0)), ConceptRow("the garden", unit(1, 0.01)))
    assert concepts(writer) == {"garden": (1.0, 1)}
    assert links(writer) == {}


def test_the_graph_and_activation_marks(writer: apsw.Connection) -> None:
    ids = store(writer, ConceptRow("a"), ConceptRow("b"))
    with db.immediate(writer):
        background_ops.apply(writer, (ConceptsActivated((ids["a"],), NOW + 5),), turn_id=None,
                             now=NOW + 5)
    nodes, edges = concept_rows.graph(writer)
    assert {(c.name, c.last_activated) for c in nodes} == {("a", NOW + 5), ("b", None)}
    assert [(e.a, e.b, e.strength) for e in edges] == [(ids["a"], ids["b"], 1.0)]


def test_drift_gists_are_read_per_channel_until_they_expire(writer: apsw.Connection) -> None:
    with db.immediate(writer):
        background_ops.apply(writer, (
            DriftGist("main", "the tomatoes may need water", ("tomatoes",), NOW + 100),
            DriftGist("other", "elsewhere", (), NOW + 100),
        ), turn_id=None, now=NOW)
    assert concept_rows.gists(writer, "main", NOW + 50) == ["the tomatoes may need water"]
    assert concept_rows.gists(writer, "main", NOW + 100) == []


def test_a_vector_with_no_direction_merges_with_nothing_and_breaks_nothing(
    writer: apsw.Connection,
) -> None:
    """A zero vector's cosine distance is NULL: a concept stored with one is nobody's
    near-duplicate, and a new one with one is stored on its own."""
    zero = struct.pack("<3f", 0.0, 0.0, 0.0)
    store(writer, ConceptRow("blank", zero))
    store(writer, ConceptRow("garden", unit(1, 0, 0)))
    store(writer, ConceptRow("void", zero))
    assert set(concepts(writer)) == {"blank", "garden", "void"}
