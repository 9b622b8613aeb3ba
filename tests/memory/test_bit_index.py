"""The in-memory sign-bit index recall's vector ranking starts from (chalie.memory.bit_index),
on a real SQLite store written with chalie.store.memory_writes."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import apsw
import pytest

from chalie.config import Config
from chalie.memory import bit_index
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
