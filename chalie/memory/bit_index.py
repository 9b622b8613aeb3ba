"""The sign bits of a vector space's vectors, in memory: the first pass of recall's vector
ranking.

A semantic embedder's vectors keep their neighbourhoods in their signs (one bit a dimension:
48 bytes for 384 dimensions), so the items nearest a query by Hamming distance over the bits
are, with a few times as many taken, the items a cosine ranking of the float vectors puts first;
recall re-ranks them by their float vectors (chalie.store.memory_queries.similarities). Every
item with a vector is here: transcript messages too, also those an episode covers, since a line
worded unlike the question is found by its meaning or not at all.

The bits are kept in numpy rather than in a sqlite-vec table: a scan of 205k items takes about
2 ms (XOR and popcount over 64-bit words, column by column, a cache-sized chunk of rows at a
time) where sqlite-vec's KNN took 5 ms for the 24 nearest and 45 ms for the 350 nearest of
105k, and the index costs 56 bytes an item of memory (the bits and the key). It follows the
`vectors` table by its rowid: each search first reads the rows stored since the last (a point
query when there are none), so it is never older than the connection's view of the store. Rows
deleted since (a forgetting, a superseded fact) stay here until a search finds their keys gone
from the table (`dead`), and then count as gone; when they are many, or when the table's rowids
were reused (its newest row deleted and the id given again), the index is read again in full.

Reading it in full means reading every float vector (1.5 KB each for 384 dimensions) for 48
bytes of signs: 3 GB and about a minute for five years of heavy use (2.1M items). So `catch_up`
(run once at start, on a thread of its own) saves the index beside the store
(`chalie.db.bits-<space>.npz`, 56 bytes an item) after it read many rows from the store, and
the next start reads that copy and only the vectors stored after it. The copy is trusted as far
as the live index is: the newest row it holds must still be in the store under the same key
(rowids given again: the store is read in full), and rows deleted since are found gone by the
searches that return them.

Past CLUSTER_ROWS items a whole scan is most of recall's time, so at start `catch_up` clusters
them (chalie.memory.bit_ivf: seconds, off the turn path; searches scan the whole index
meanwhile) and the main block gives way to the clusters; rows stored since join them
MERGE_TAIL at a time, and the copy saved beside the store keeps the clusters, trained anew at a
start once they hold RETRAIN_GROWTH times the items they were trained on.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, NamedTuple

import apsw
import numpy as np
import numpy.typing as npt
import structlog

from chalie.memory import bit_ivf, heap
from chalie.store import memory_queries as mq

log = structlog.get_logger("chalie.memory")


READ_BATCH = 8192  # vectors read and packed at a time when the index is (re)built
MERGE_TAIL = 4096  # rows stored since the last merge before they join the main block
REBUILD_DEAD = 0.2  # read the index again once this share of its rows is known to be gone
SAVE_AFTER = 65_536  # rows read from the store (not the saved copy) before it is saved anew
SAVED_FORMAT = 2  # 2: the clusters, when there are; 1 (still read): the bits only
CLUSTER_ROWS = 262_144  # items from which a search scans the nearest clusters, not every row
CHUNK = 16_384  # rows whose distances are computed at a time (their buffers: 176 KiB)
KEPT = 4  # rows kept per row wanted before the farthest of them are dropped


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
        the older first).

        The distances are computed CHUNK rows at a time into buffers that stay in the CPU's
        cache, and of each chunk only the rows no farther than the `want`-th nearest so far
        are kept: nothing as long as the block is allocated per search (at two million rows,
        arrays of a few MB each search, left resident in each thread's malloc arena: 250 MiB
        more after 20 turns), and whole columns at once were twice as slow."""
        n = self.words.shape[1]
        size = min(n, CHUNK)
        xor = np.empty(size, dtype=np.uint64)
        count = np.empty(size, dtype=np.uint8)
        distance = np.empty(size, dtype=np.uint16)
        far = np.iinfo(np.uint16).max  # rows farther than this cannot be among the nearest
        kept: list[tuple[npt.NDArray[np.uint16], npt.NDArray[np.int64]]] = []
        held = 0
        for lo in range(0, n, CHUNK):
            hi = min(n, lo + CHUNK)
            d, x, c = distance[:hi - lo], xor[:hi - lo], count[:hi - lo]
            for w in range(len(q)):
                np.bitwise_xor(self.words[w, lo:hi], q[w], out=x)
                np.bitwise_count(x, out=c)
                if w:
                    np.add(d, c, out=d)
                else:
                    d[...] = c
            rows = np.flatnonzero(d <= far)
            if len(rows):
                kept.append((d[rows], rows + lo))
                held += len(rows)
            if held >= KEPT * want:
                kept, held, far = _fewest(kept, want)
        if not kept:
            return np.empty(0, dtype=np.uint16), np.empty(0, dtype=np.int64)
        dist = np.concatenate([d for d, _ in kept])
        rows = np.concatenate([r for _, r in kept])
        order = np.lexsort((rows, dist))[:want]
        return dist[order], self.keys[rows[order]]


def _fewest(kept: list[tuple[npt.NDArray[np.uint16], npt.NDArray[np.int64]]], want: int,
            ) -> tuple[list[tuple[npt.NDArray[np.uint16], npt.NDArray[np.int64]]], int, int]:
    """Of the rows kept so far, those no farther than the `want`-th nearest (all of them at
    that distance: ties are decided by rowid at the end); and that distance."""
    dist = np.concatenate([d for d, _ in kept])
    rows = np.concatenate([r for _, r in kept])
    far = int(np.partition(dist, want - 1)[want - 1])
    near = dist <= far
    return [(dist[near], rows[near])], int(np.count_nonzero(near)), far


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
        self._may_load = True  # the saved copy may stand in for a first read of the store
        self._unsaved = 0  # rows read from the store since the saved copy was written
        self._clustered: bit_ivf.Clustered | None = None  # rows before the blocks, if many
        self._clustering = False  # clusters being made: blocks are not merged meanwhile
        self._generation = 0  # read again in full: clusters made from before are dropped

    def __len__(self) -> int:
        return self._rows

    def nearest(self, conn: apsw.Connection, query: bytes, k: int) -> list[int]:
        """Memory keys of the (at most) `k` items whose bits are nearest the query's, nearest
        first (ties: the older first), after catching up with the store."""
        if k <= 0:
            return []
        q = pack(query)
        parts = []
        with self._lock:
            self._catch_up(conn)
            blocks, dead = self._blocks, self._dead
            want = k + len(dead)
            if self._clustered is not None and self._clustered.words == len(q):
                parts.append(self._clustered.nearest(q, want))  # older than every block
        blocks = [b for b in blocks if b.words.shape[0] == len(q)]  # another dimension: none
        parts += [block.nearest(q, want) for block in blocks]
        if not parts:
            return []
        distance = np.concatenate([d for d, _ in parts])
        keys = np.concatenate([k_ for _, k_ in parts])
        order = np.argsort(distance, kind="stable")[:want]  # blocks are in rowid order
        found = (int(key) for key in keys[order])
        return list(dict.fromkeys(key for key in found if key not in dead))[:k]

    def catch_up(self, conn: apsw.Connection) -> None:
        """Read the vectors stored since the last search (at first, the copy saved beside the
        store and the vectors stored after it, or all of them); then, when many were read from
        the store, save the index beside it for the next start."""
        with self._lock:
            before = self._unsaved
            self._catch_up(conn)
            if self._unsaved - before >= SAVE_AFTER:
                # The vectors read went through the heap a batch at a time: hand what they
                # left free back (a first read of 2.1M left 400 MiB resident, not 275).
                heap.trim()
            job = self._cluster_job()
        if job is not None:  # outside the lock: seconds; searches scan every row meanwhile
            self._cluster(*job)
        with self._lock:
            saved = self._saved_now() if self._unsaved >= SAVE_AFTER else None
        if saved is not None:  # outside the lock: what is written is never changed in place
            _save(_saved_path(conn, self._space_id), self._space_id, saved)
            heap.trim()

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
        self._clustered = None
        self._generation += 1
        self._may_load = False  # what the saved copy holds is what is being thrown away

    def _catch_up(self, conn: apsw.Connection) -> None:
        if self._may_load:
            self._may_load = False
            self._load(conn)
        if self._upto and mq.vector_key(conn, self._upto) != self._upto_key:
            # The newest row read was deleted (ids after it may be given again) or its id
            # holds another item: read everything again.
            self._reset()
        keys: list[int] = []
        vectors: list[bytes] = []
        read: list[_Block] = []
        for rowid, key, vector in mq.vectors_after(conn, self._space_id, self._upto):
            keys.append(key)
            vectors.append(vector)
            self._upto, self._upto_key = rowid, key
            if len(vectors) == READ_BATCH:
                read.append(self._block(keys, vectors))
                keys, vectors = [], []
        if vectors:
            read.append(self._block(keys, vectors))
        if read:
            self._add(read)

    def _block(self, keys: list[int], vectors: list[bytes]) -> _Block:
        size = len(vectors[0])
        keys = [k for k, v in zip(keys, vectors, strict=True) if len(v) == size]
        vectors = [v for v in vectors if len(v) == size]  # a space has one dimension
        return _Block(np.array(keys, dtype=np.int64), _words(vectors))

    def _add(self, read: list[_Block]) -> None:
        """Blocks just read join the index; merged into the main block once the rows stored
        since it are MERGE_TAIL (merged once a catch-up: a first read of two million vectors
        copied the growing main block at each batch)."""
        rows = sum(len(b.keys) for b in read)
        if self._dead:
            self._dead = self._dead - {int(k) for b in read for k in b.keys}  # stored again
        self._blocks = [*self._blocks, *read]
        self._rows += rows
        self._unsaved += rows
        if self._clustering:
            return  # the main block is what the clusters are being made of
        if self._clustered is not None:
            self._merge_into_clusters(MERGE_TAIL)
        elif len(self._blocks) > 1 and self._rows - len(self._blocks[0].keys) >= MERGE_TAIL:
            dims = {b.words.shape[0] for b in self._blocks}
            if len(dims) == 1:
                self._blocks = [_Block(np.concatenate([b.keys for b in self._blocks]),
                                       np.concatenate([b.words for b in self._blocks], axis=1))]

    def _merge_into_clusters(self, at_least: int) -> None:
        """The blocks join the clusters, once they hold at least `at_least` rows."""
        assert self._clustered is not None
        size = self._clustered.words
        if sum(len(b.keys) for b in self._blocks) < max(1, at_least) or \
                any(b.words.shape[0] != size for b in self._blocks):
            return
        self._clustered.add(np.concatenate([b.keys for b in self._blocks]),
                            np.concatenate([b.words for b in self._blocks], axis=1))
        self._blocks = []

    def _cluster_job(self) -> tuple[int, _Block | None, _Block] | None:
        """What the clusters are to be made of, when it is time (under the lock): the main
        block, once it holds CLUSTER_ROWS rows; or the clusters' own rows, once they
        outgrew their training. None otherwise."""
        if self._clustering:
            return None
        if self._clustered is None:
            if not self._blocks or len(self._blocks[0].keys) < CLUSTER_ROWS:
                return None
            main = self._blocks[0]
            self._clustering = True
            return self._generation, main, main
        if not self._clustered.outgrown:
            return None
        self._clustering = True
        return self._generation, None, _Block(*self._clustered.contents())

    def _cluster(self, generation: int, main: _Block | None, rows: _Block) -> None:
        """Make the clusters of `rows` (outside the lock), then put them in place of the main
        block `main` (or of the clusters they were read from), unless the index was read again
        in full meanwhile; the rows read since join them."""
        try:
            made = bit_ivf.Clustered.build(rows.keys, rows.words)
        except Exception as e:  # faiss missing or failing: the whole scan still answers
            log.warning("bit_index_not_clustered", rows=len(rows.keys), error=str(e))
            made = None
        with self._lock:
            self._clustering = False
            if made is None or generation != self._generation:
                return
            if main is not None:
                if not self._blocks or self._blocks[0] is not main:
                    return
                self._blocks = self._blocks[1:]
            self._clustered = made
            self._merge_into_clusters(0)
            self._unsaved = max(self._unsaved, SAVE_AFTER)  # saved now, not clustered again
        log.info("bit_index_clustered", rows=len(made), lists=made.lists)
        heap.trim()

    def _saved_now(self) -> tuple[dict[str, npt.NDArray[Any]], int, int, int | None] | None:
        """What to save (under the lock), when the index is one piece: the main block, or
        the clusters with no block beside them (a copy of them, made here: they change in
        place); with the rows they were trained on, the newest rowid and its key."""
        if self._clustering:
            return None
        arrays: dict[str, npt.NDArray[Any]]
        if self._clustered is None and len(self._blocks) == 1:
            arrays, trained = {"keys": self._blocks[0].keys, "words": self._blocks[0].words}, 0
        elif self._clustered is not None and not self._blocks:
            arrays, trained = {"clusters": self._clustered.dump()}, self._clustered.trained_rows
        else:
            return None
        self._unsaved = 0
        return arrays, trained, self._upto, self._upto_key

    def _load(self, conn: apsw.Connection) -> None:
        """The copy saved beside the store, when it is of this space and the newest row it
        holds is still in the store under the same key (so no rowid it covers was given
        again); rows stored after it are read as usual, rows deleted since are found gone by
        the searches that return them."""
        path = _saved_path(conn, self._space_id)
        if path is None or not path.is_file():
            return
        try:
            with np.load(path) as saved:
                version, space_id, upto, upto_key, *trained = (int(v) for v in saved["meta"])
                if version not in (1, SAVED_FORMAT) or space_id != self._space_id or \
                        mq.vector_key(conn, upto) != upto_key:
                    return
                if "clusters" in saved.files:
                    self._clustered = bit_ivf.Clustered.load(saved["clusters"], trained[0])
                    self._rows = len(self._clustered)
                else:
                    block = _Block(saved["keys"], saved["words"])
                    self._blocks, self._rows = [block], len(block.keys)
        except Exception as e:  # unreadable, or faiss missing: read the store instead
            self._clustered, self._blocks, self._rows = None, [], 0
            log.warning("bit_index_copy_not_read", path=str(path), error=str(e))
            return  # read from the store instead, and saved anew
        self._upto, self._upto_key = upto, upto_key


def _saved_path(conn: apsw.Connection, space_id: int) -> Path | None:
    """Where the index of `space_id` is saved: beside the store's file (none in memory)."""
    name = conn.filename
    return Path(f"{name}.bits-{space_id}.npz") if name else None


def _save(path: Path | None, space_id: int, saved: tuple[dict[str, npt.NDArray[Any]], int, int,
                                                         int | None]) -> None:
    """Write the index to `path` (through a temporary file, renamed into place); a store that
    cannot be written beside is read in full at the next start instead."""
    arrays, trained, upto, upto_key = saved
    if path is None or upto_key is None:
        return
    tmp = path.with_name(path.name + ".tmp")
    meta = np.array([SAVED_FORMAT, space_id, upto, upto_key, trained], dtype=np.int64)
    try:
        with tmp.open("wb") as f:
            np.savez(f, meta=meta, **arrays)  # type: ignore[arg-type]  # names, not flags
        tmp.replace(path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        log.warning("bit_index_not_saved", path=str(path), error=str(e))
