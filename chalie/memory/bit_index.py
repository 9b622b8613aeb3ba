"""The sign bits of a vector space's vectors, in memory: the first pass of recall's vector
ranking.

A semantic embedder's vectors keep their neighbourhoods in their signs (one bit a dimension:
48 bytes for 384 dimensions), so the items nearest a query by Hamming distance over the bits
are, with a few times as many taken, the items a cosine ranking of the float vectors puts first;
recall re-ranks them by their float vectors (chalie.store.memory_queries.similarities). Every
item with a vector is here: transcript messages too, also those an episode covers, since a line
worded unlike the question is found by its meaning or not at all.

The bits are kept in numpy rather than in a sqlite-vec table: a scan of 205k items takes about
2 ms (XOR and popcount over 64-bit words, column by column) where sqlite-vec's KNN took 5 ms for
the 24 nearest and 45 ms for the 350 nearest of 105k, and the index costs 56 bytes an item of
memory (the bits and the key). It follows the `vectors` table by its rowid: each search first
reads the rows stored since the last (a point query when there are none), so it is never older
than the connection's view of the store. Rows deleted since (a forgetting, a superseded fact)
stay here until a search finds their keys gone from the table (`dead`), and then count as gone;
when they are many, or when the table's rowids were reused (its newest row deleted and the id
given again), the index is read again in full: about 1 s for 205k vectors, once.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import apsw
import numpy as np
import numpy.typing as npt

from chalie.store import memory_queries as mq

READ_BATCH = 8192  # vectors read and packed at a time when the index is (re)built
MERGE_TAIL = 4096  # rows stored since the last merge before they join the main block
REBUILD_DEAD = 0.2  # read the index again once this share of its rows is known to be gone


def pack(vector: bytes) -> npt.NDArray[np.uint64]:
    """A float32 vector's sign bits as 64-bit words (padded with zero bits to a whole word)."""
    return _words([vector])[:, 0]


def _words(vectors: list[bytes]) -> npt.NDArray[np.uint64]:
    """Float32 vectors of one dimension as the columns of their sign bits' 64-bit words: shape
    (words, vectors), contiguous by word, so a distance is a few whole-column operations."""
    floats = np.frombuffer(b"".join(vectors), dtype=np.float32).reshape(len(vectors), -1)
    bits = np.packbits(floats > 0, axis=1)
    if pad := (-bits.shape[1]) % 8:
        bits = np.pad(bits, ((0, 0), (0, pad)))
    return np.ascontiguousarray(bits.view(np.uint64).T)


class _Block(NamedTuple):
    keys: npt.NDArray[np.int64]
    words: npt.NDArray[np.uint64]  # (words, rows)

    def nearest(self, q: npt.NDArray[np.uint64], want: int,
                ) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.int64]]:
        """The distances and keys of this block's `want` nearest rows, nearest first (ties:
        the older first)."""
        distance = np.bitwise_count(self.words[0] ^ q[0]).astype(np.uint16)
        for w in range(1, len(q)):
            distance += np.bitwise_count(self.words[w] ^ q[w])
        rows = np.argpartition(distance, want - 1)[:want] if want < len(distance) \
            else np.arange(len(distance))
        rows = rows[np.lexsort((rows, distance[rows]))]
        return distance[rows], self.keys[rows]


class BitIndex:
    """The bits of one vector space, shared by the threads that recall: one lock guards the
    catching up; a search reads the blocks it was given, which are never changed in place."""

    def __init__(self, space_id: int) -> None:
        self._space_id = space_id
        self._lock = threading.Lock()
        self._blocks: list[_Block] = []  # the main block, then those stored since
        self._rows = 0
        self._upto = 0  # the rowid of the newest vector read
        self._upto_key: int | None = None  # and its memory key, to notice a rowid given again
        self._dead: frozenset[int] = frozenset()

    def __len__(self) -> int:
        return self._rows

    def nearest(self, conn: apsw.Connection, query: bytes, k: int) -> list[int]:
        """Memory keys of the (at most) `k` items whose bits are nearest the query's, nearest
        first (ties: the older first), after catching up with the store."""
        if k <= 0:
            return []
        with self._lock:
            self._catch_up(conn)
            blocks, dead = self._blocks, self._dead
        q = pack(query)
        blocks = [b for b in blocks if b.words.shape[0] == len(q)]  # another dimension: none
        if not blocks:
            return []
        want = k + len(dead)
        parts = [block.nearest(q, want) for block in blocks]
        distance = np.concatenate([d for d, _ in parts])
        keys = np.concatenate([k_ for _, k_ in parts])
        order = np.argsort(distance, kind="stable")[:want]  # blocks are in rowid order
        found = (int(key) for key in keys[order])
        return list(dict.fromkeys(key for key in found if key not in dead))[:k]

    def catch_up(self, conn: apsw.Connection) -> None:
        """Read the vectors stored since the last search (at first, all of them)."""
        with self._lock:
            self._catch_up(conn)

    def gone(self, keys: list[int]) -> None:
        """Keys a search returned whose vectors are no longer in the store: left out from now
        on, until so many are that the index is read again."""
        if not keys:
            return
        with self._lock:
            self._dead = self._dead | set(keys)
            if len(self._dead) > REBUILD_DEAD * max(1, self._rows):
                self._reset()

    def _reset(self) -> None:
        self._blocks, self._rows = [], 0
        self._upto, self._upto_key = 0, None
        self._dead = frozenset()

    def _catch_up(self, conn: apsw.Connection) -> None:
        if self._upto and mq.vector_key(conn, self._upto) != self._upto_key:
            # The newest row read was deleted (ids after it may be given again) or its id
            # holds another item: read everything again.
            self._reset()
        keys: list[int] = []
        vectors: list[bytes] = []
        for rowid, key, vector in mq.vectors_after(conn, self._space_id, self._upto):
            keys.append(key)
            vectors.append(vector)
            self._upto, self._upto_key = rowid, key
            if len(vectors) == READ_BATCH:
                self._add(keys, vectors)
                keys, vectors = [], []
        if vectors:
            self._add(keys, vectors)

    def _add(self, keys: list[int], vectors: list[bytes]) -> None:
        size = len(vectors[0])
        keys = [k for k, v in zip(keys, vectors, strict=True) if len(v) == size]
        vectors = [v for v in vectors if len(v) == size]  # a space has one dimension
        if self._dead:
            self._dead = self._dead - set(keys)  # stored again
        self._blocks = [*self._blocks, _Block(np.array(keys, dtype=np.int64), _words(vectors))]
        self._rows += len(keys)
        if len(self._blocks) > 1 and self._rows - len(self._blocks[0].keys) >= MERGE_TAIL:
            self._blocks = [_Block(np.concatenate([b.keys for b in self._blocks]),
                                   np.concatenate([b.words for b in self._blocks], axis=1))]
