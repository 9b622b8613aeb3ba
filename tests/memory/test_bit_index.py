"""The in-memory sign-bit index recall's vector ranking starts from (chalie.memory.bit_index),
on a real SQLite store written with chalie.store.memory_writes."""

from __future__ import annotations

import random
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import apsw
import pytest

from chalie.config import Config
from chalie.memory import bit_index, bit_ivf
from chalie.memory.bit_index import BitIndex
from chalie.store import db, memory_writes
from chalie.values.memory import Kind, mkey

DIM = 72  # not a multiple of 64: the last word is padded


def signs(*negative: int, dim: int = DIM) -> bytes:
    """A float32 vector of +1s, with -1 at the given dimensions: its Hamming distance to the
    all-positive vector is len(negative)."""
    return struct.pack(f"<{dim}f", *(-1.0 if d in negative else 1.0 for d in range(dim)))


def say(conn: apsw.Connection, text: str) -> int:
    with db.immediate(conn):
        return memory_writes.add_transcript(conn, "main", None, role="user", text=text, at=1.0)


def store(conn: apsw.Connection, space: int, rows: Sequence[tuple[int, bytes]]) -> None:
    with db.immediate(conn):
        memory_writes.store_vectors(conn, space, "test", Kind.TRANSCRIPT, list(rows),
                                    upto_id=max(i for i, _ in rows), now=1.0)


@pytest.fixture
def config(make_config: Any) -> Config:
    built: Config = make_config()
    return built


@pytest.fixture
def space(writer: apsw.Connection) -> int:
    with db.immediate(writer):
        return memory_writes.ensure_space(writer, "test-72", now=1.0)


@pytest.mark.parametrize("chunk", [16_384, 2])
def test_the_nearest_by_sign_bits_come_first_ties_the_older_first(
    writer: apsw.Connection, space: int, monkeypatch: pytest.MonkeyPatch, chunk: int,
) -> None:
    """Also when the rows are scanned a few at a time and the farthest dropped on the way."""
    monkeypatch.setattr(bit_index, "CHUNK", chunk)
    monkeypatch.setattr(bit_index, "KEPT", 1)
    ids = [say(writer, f"line {n}") for n in range(7)]
    store(writer, space, [(ids[0], signs(1, 2, 3)), (ids[1], signs(1)), (ids[2], signs(5, 70)),
                          (ids[3], signs(71)), (ids[4], signs(0, 1, 2, 3, 4, 5)),
                          (ids[5], signs(2)), (ids[6], signs(70))])
    index = BitIndex(space)
    keys = [mkey(Kind.TRANSCRIPT, i) for i in ids]
    assert index.nearest(writer, signs(), 7) == [keys[1], keys[3], keys[5], keys[6], keys[2],
                                                 keys[0], keys[4]]
    assert index.nearest(writer, signs(), 3) == [keys[1], keys[3], keys[5]]
    assert index.nearest(writer, signs(), 0) == []
    assert len(index) == 7


def test_vectors_stored_after_a_search_are_found_by_the_next(
    writer: apsw.Connection, space: int,
) -> None:
    first = say(writer, "first")
    store(writer, space, [(first, signs(1, 2))])
    index = BitIndex(space)
    assert index.nearest(writer, signs(), 3) == [mkey(Kind.TRANSCRIPT, first)]
    second = say(writer, "second")
    store(writer, space, [(second, signs())])
    assert index.nearest(writer, signs(), 3) == [mkey(Kind.TRANSCRIPT, second),
                                                 mkey(Kind.TRANSCRIPT, first)]


def test_only_the_spaces_own_vectors_are_read(writer: apsw.Connection, space: int) -> None:
    with db.immediate(writer):
        other = memory_writes.ensure_space(writer, "other-72", now=1.0)
    mine, theirs = say(writer, "mine"), say(writer, "theirs")
    store(writer, other, [(theirs, signs())])
    store(writer, space, [(mine, signs(1, 2, 3))])
    assert BitIndex(space).nearest(writer, signs(), 5) == [mkey(Kind.TRANSCRIPT, mine)]


def test_keys_found_gone_are_left_out(writer: apsw.Connection, space: int) -> None:
    """A key recall reports gone (its vector no longer in the store) is not returned again,
    while the index is not read anew."""
    ids = [say(writer, f"line {n}") for n in range(6)]
    store(writer, space, [(i, signs(n)) for n, i in enumerate(ids)])
    index = BitIndex(space)
    keys = [mkey(Kind.TRANSCRIPT, i) for i in ids]
    assert index.nearest(writer, signs(), 2) == keys[:2]
    index.gone([keys[0]])
    assert index.nearest(writer, signs(), 2) == keys[1:3]
    assert len(index) == 6  # still there, only left out


def test_the_index_is_read_anew_when_the_newest_row_it_read_is_gone(
    writer: apsw.Connection, space: int,
) -> None:
    """Deleting the newest vector lets SQLite give its rowid again: the index notices and reads
    everything again, so a vector stored under that rowid is found."""
    ids = [say(writer, f"line {n}") for n in range(3)]
    store(writer, space, [(i, signs(n + 1)) for n, i in enumerate(ids)])
    index = BitIndex(space)
    assert len(index.nearest(writer, signs(), 5)) == 3
    with db.immediate(writer):
        memory_writes.unindex(writer, mkey(Kind.TRANSCRIPT, ids[2]))
    newer = say(writer, "newer")
    store(writer, space, [(newer, signs())])
    assert writer.execute("SELECT count(*) FROM vectors").fetchone() == (3,)
    assert index.nearest(writer, signs(), 5) == [mkey(Kind.TRANSCRIPT, newer),
                                                 mkey(Kind.TRANSCRIPT, ids[0]),
                                                 mkey(Kind.TRANSCRIPT, ids[1])]


def test_many_keys_gone_make_the_index_read_anew(
    writer: apsw.Connection, space: int, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bit_index, "REBUILD_DEAD", 0.3)
    ids = [say(writer, f"line {n}") for n in range(5)]
    store(writer, space, [(i, signs(n)) for n, i in enumerate(ids)])
    index = BitIndex(space)
    keys = [mkey(Kind.TRANSCRIPT, i) for i in ids]
    assert index.nearest(writer, signs(), 5) == keys
    with db.immediate(writer):
        for key in keys[:2]:
            memory_writes.unindex(writer, key)
    index.gone(keys[:1])
    assert len(index) == 5
    index.gone(keys[1:2])  # 2 of 5 gone: over 0.3
    assert len(index) == 0
    assert index.nearest(writer, signs(), 5) == keys[2:]
    assert len(index) == 3


def test_a_query_of_another_dimension_finds_nothing(writer: apsw.Connection,
                                                    space: int) -> None:
    line = say(writer, "line")
    store(writer, space, [(line, signs())])
    assert BitIndex(space).nearest(writer, signs(dim=384), 5) == []


def test_the_bits_are_a_vectors_signs() -> None:
    words = bit_index.pack(signs(0, 9, 71))
    assert len(words) == 2  # 72 bits in two 64-bit words
    assert sum(int(w).bit_count() for w in words) == DIM - 3


def test_a_new_index_starts_from_the_copy_saved_beside_the_store(
    writer: apsw.Connection, space: int, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After a start read many vectors, the index is saved beside the store; the next start
    reads that copy (here: the bits as they were saved, though a vector was rewritten in the
    table behind its back) and the vectors stored after it."""
    monkeypatch.setattr(bit_index, "SAVE_AFTER", 3)
    ids = [say(writer, f"line {n}") for n in range(4)]
    store(writer, space, [(i, signs(n + 1)) for n, i in enumerate(ids)])
    keys = [mkey(Kind.TRANSCRIPT, i) for i in ids]
    BitIndex(space).catch_up(writer)
    assert Path(f"{writer.filename}.bits-{space}.npz").is_file()
    writer.execute("UPDATE vectors SET embedding = ? WHERE mkey = ?", (signs(), keys[3]))
    newer = say(writer, "newer")
    store(writer, space, [(newer, signs(0, 1, 2, 3, 4, 5, 6))])
    restarted = BitIndex(space)
    assert restarted.nearest(writer, signs(), 5) == [*keys, mkey(Kind.TRANSCRIPT, newer)]
    assert len(restarted) == 5


def test_a_saved_copy_whose_newest_row_was_given_again_is_not_used(
    writer: apsw.Connection, space: int, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When the newest vector the copy holds was deleted and its rowid given to another, the
    copy cannot tell which of its rows are still true: the store is read in full."""
    monkeypatch.setattr(bit_index, "SAVE_AFTER", 1)
    ids = [say(writer, f"line {n}") for n in range(3)]
    store(writer, space, [(i, signs(n + 1)) for n, i in enumerate(ids)])
    BitIndex(space).catch_up(writer)
    with db.immediate(writer):
        memory_writes.unindex(writer, mkey(Kind.TRANSCRIPT, ids[2]))
    newer = say(writer, "newer")
    store(writer, space, [(newer, signs())])
    restarted = BitIndex(space)
    assert restarted.nearest(writer, signs(), 5) == [mkey(Kind.TRANSCRIPT, newer),
                                                     mkey(Kind.TRANSCRIPT, ids[0]),
                                                     mkey(Kind.TRANSCRIPT, ids[1])]
    assert len(restarted) == 3


# -- clusters (chalie.memory.bit_ivf): past CLUSTER_ROWS, as in a store of years --

def _random_rows(writer: apsw.Connection, space: int, n: int, seed: int,
                 ) -> dict[int, bytes]:
    rng = random.Random(seed)
    ids = [say(writer, f"line {seed} {i}") for i in range(n)]
    vectors = {i: signs(*rng.sample(range(DIM), rng.randrange(DIM))) for i in ids}
    store(writer, space, list(vectors.items()))
    return {mkey(Kind.TRANSCRIPT, i): v for i, v in vectors.items()}


def _distance(a: bytes, b: bytes) -> int:
    return sum(int(x).bit_count() for x in bit_index.pack(a) ^ bit_index.pack(b))


@pytest.fixture
def small_clusters(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clusters from 300 rows, 4-32 lists, every list probed: a search finds what a whole
    scan finds (up to ties), so what is tested is the index around them."""
    monkeypatch.setattr(bit_index, "CLUSTER_ROWS", 300)
    monkeypatch.setattr(bit_index, "SAVE_AFTER", 1)
    monkeypatch.setattr(bit_index, "MERGE_TAIL", 8)
    monkeypatch.setattr(bit_ivf, "MIN_LISTS", 4)
    monkeypatch.setattr(bit_ivf, "PROBE_SHARE", 1)
    monkeypatch.setattr(bit_ivf, "TRAIN_PER_LIST", 16)


def _same_as_a_scan(found: list[int], vectors: dict[int, bytes], query: bytes, k: int) -> None:
    """`found` is a whole scan's answer: the k nearest, up to which of those tied at the
    farthest distance come back."""
    ranked = sorted(vectors, key=lambda key: _distance(vectors[key], query))
    farthest = _distance(vectors[ranked[k - 1]], query)
    assert len(found) == k == len(set(found))
    assert [_distance(vectors[key], query) for key in found] == \
        [_distance(vectors[key], query) for key in ranked[:k]]
    assert {key for key in ranked if _distance(vectors[key], query) < farthest} <= set(found)


@pytest.mark.usefixtures("small_clusters")
def test_a_large_index_is_clustered_at_start_and_finds_what_a_scan_finds(
    writer: apsw.Connection, space: int,
) -> None:
    vectors = _random_rows(writer, space, 320, seed=1)
    index = BitIndex(space)
    index.catch_up(writer)
    assert index._clustered is not None
    assert len(index._clustered) == 320
    assert not index._blocks  # the main block gave way to the clusters
    for seed in range(5):
        query = signs(*random.Random(seed).sample(range(DIM), 30))
        _same_as_a_scan(index.nearest(writer, query, 10), vectors, query, 10)
    # Rows stored since are searched beside the clusters, and join them MERGE_TAIL at a time.
    vectors |= _random_rows(writer, space, 5, seed=2)
    query = signs(3, 9)
    _same_as_a_scan(index.nearest(writer, query, 12), vectors, query, 12)
    assert len(index._blocks) == 1
    assert len(index._clustered) == 320
    vectors |= _random_rows(writer, space, 5, seed=3)
    _same_as_a_scan(index.nearest(writer, query, 12), vectors, query, 12)
    assert not index._blocks
    assert len(index._clustered) == 330 == len(index)


@pytest.mark.usefixtures("small_clusters")
def test_the_clusters_are_saved_and_the_next_start_reads_them_not_the_store(
    writer: apsw.Connection, space: int,
) -> None:
    vectors = _random_rows(writer, space, 320, seed=4)
    BitIndex(space).catch_up(writer)
    newer = _random_rows(writer, space, 3, seed=5)
    restarted = BitIndex(space)
    restarted.catch_up(writer)  # the copy, then the three stored after it
    assert restarted._clustered is not None
    assert len(restarted._clustered) == 320
    assert restarted._clustered.trained_rows == 320  # read, not trained again
    assert len(restarted) == 323
    query = signs(1, 2, 3)
    _same_as_a_scan(restarted.nearest(writer, query, 15), vectors | newer, query, 15)


@pytest.mark.usefixtures("small_clusters")
def test_clusters_that_outgrew_their_training_are_trained_anew_at_a_start(
    writer: apsw.Connection, space: int, monkeypatch: pytest.MonkeyPatch,
) -> None:
    vectors = _random_rows(writer, space, 320, seed=6)
    index = BitIndex(space)
    index.catch_up(writer)
    assert index._clustered is not None
    assert index._clustered.lists == 16
    vectors |= _random_rows(writer, space, 1000, seed=7)
    index.nearest(writer, signs(), 1)  # read, and merged into the clusters
    assert index._clustered.lists == 16
    assert len(index._clustered) == 1320
    index.catch_up(writer)  # as at the next start: 4 times the rows trained on
    assert index._clustered.lists == 32
    assert index._clustered.trained_rows == 1320
    query = signs(*range(20))
    _same_as_a_scan(index.nearest(writer, query, 20), vectors, query, 20)


@pytest.mark.usefixtures("small_clusters")
def test_without_faiss_a_large_index_is_scanned_whole(
    writer: apsw.Connection, space: int, monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing() -> None:
        raise ImportError("No module named 'faiss'")

    monkeypatch.setattr(bit_ivf, "_faiss", missing)
    vectors = _random_rows(writer, space, 320, seed=8)
    index = BitIndex(space)
    index.catch_up(writer)
    assert index._clustered is None
    assert len(index._blocks) == 1
    query = signs(5)
    _same_as_a_scan(index.nearest(writer, query, 10), vectors, query, 10)


def test_a_read_in_full_drops_clusters_being_made_from_before(
    writer: apsw.Connection, space: int, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A rowid given again while the clusters are made: they are of rows no longer true."""
    monkeypatch.setattr(bit_index, "CLUSTER_ROWS", 3)
    ids = [say(writer, f"line {n}") for n in range(4)]
    store(writer, space, [(i, signs(n + 1)) for n, i in enumerate(ids)])
    index = BitIndex(space)
    build = bit_ivf.Clustered.build

    def meanwhile(keys: Any, words: Any, **kwargs: Any) -> bit_ivf.Clustered:
        with index._lock:
            index._reset()
        return build(keys, words, **kwargs)

    monkeypatch.setattr(bit_ivf.Clustered, "build", staticmethod(meanwhile))
    monkeypatch.setattr(bit_ivf, "MIN_LISTS", 1)
    index.catch_up(writer)
    assert index._clustered is None
    assert index.nearest(writer, signs(), 2) == [mkey(Kind.TRANSCRIPT, ids[0]),
                                                 mkey(Kind.TRANSCRIPT, ids[1])]
