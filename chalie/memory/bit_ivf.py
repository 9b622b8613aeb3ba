"""The sign bits of a large vector space, clustered: the first pass of recall's vector ranking
once a store holds years of items (chalie.memory.bit_index keeps the rest).

A scan of every item's bits costs about 20 ms of CPU at two million items (5 years of heavy
use: 102 MB of bits read and counted each recall), the most of recall's time. Clustered, the
items' bits are grouped around `lists` centres (faiss's IndexBinaryIVF: k-means over the bits,
trained on a sample), and a search scans only the `probes` lists whose centres are nearest the
query: at two million items, 1,024 lists and 32 probes, 4 ms, with 99% of the items a whole
scan puts before the last one it returns (ties at that distance are interchangeable) found.
Recall re-ranks what comes back by the float vectors, as it does after a whole scan.

faiss is imported only when a store is this large (chalie.memory.bit_index.CLUSTER_ROWS): its
library and OpenMP stay out of every smaller server. It runs on one thread: a search is a few
milliseconds, and OpenMP's workers spin between runs (a second thread made a search ten times
slower on a busy two-core machine).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

MIN_LISTS = 256
MAX_LISTS = 4096
PROBE_SHARE = 32  # a search scans one list in this many (at least MIN_PROBES)
MIN_PROBES = 8
TRAIN_PER_LIST = 64  # the sample k-means is trained on: this many items a list (at most all)
RETRAIN_GROWTH = 4  # trained again (more lists) once it holds this many times the items


def _faiss() -> Any:
    import faiss  # noqa: PLC0415 - only for stores this large (see the module's docstring)

    faiss.omp_set_num_threads(1)
    return faiss


def lists_for(rows: int) -> int:
    """The number of lists for `rows` items: the power of two at or below their square root,
    within [MIN_LISTS, MAX_LISTS] (about 1,400 items a list at two million)."""
    return max(MIN_LISTS, min(MAX_LISTS, 1 << int(math.log2(max(1, math.isqrt(rows))))))


def _rows(words: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint8]:
    """bit_index's columns of 64-bit words (words, items) as faiss's rows of bytes."""
    return np.ascontiguousarray(words.T).view(np.uint8)


class Clustered:
    """Items' bits (keyed by memory key) in lists around trained centres. Not thread-safe:
    chalie.memory.bit_index.BitIndex searches and adds under its lock."""

    def __init__(self, index: Any, trained_rows: int) -> None:
        self._index = index
        self._index.nprobe = max(MIN_PROBES, index.nlist // PROBE_SHARE)
        self.trained_rows = trained_rows

    @classmethod
    def build(cls, keys: npt.NDArray[np.int64], words: npt.NDArray[np.uint64],
              *, seed: int = 0) -> Clustered:
        """Train centres on a sample of the items, then file every item under its nearest.
        Seconds at a million items: never on a turn's path."""
        faiss = _faiss()
        rows = _rows(words)
        lists = lists_for(len(keys))
        sample = min(len(keys), TRAIN_PER_LIST * lists)
        chosen = np.random.default_rng(seed).choice(len(keys), sample, replace=False)
        index = faiss.IndexBinaryIVF(faiss.IndexBinaryFlat(rows.shape[1] * 8),
                                     rows.shape[1] * 8, lists)
        index.train(rows[np.sort(chosen)])
        index.add_with_ids(rows, keys)
        return cls(index, len(keys))

    @classmethod
    def load(cls, saved: npt.NDArray[np.uint8], trained_rows: int) -> Clustered:
        return cls(_faiss().deserialize_index_binary(saved), trained_rows)

    def dump(self) -> npt.NDArray[np.uint8]:
        return _faiss().serialize_index_binary(self._index)  # type: ignore[no-any-return]

    def __len__(self) -> int:
        return int(self._index.ntotal)

    @property
    def lists(self) -> int:
        return int(self._index.nlist)

    @property
    def words(self) -> int:
        """64-bit words an item's bits take (its vectors' dimensions, rounded up)."""
        return int(self._index.code_size) // 8

    @property
    def outgrown(self) -> bool:
        """True once it holds so many more items than it was trained on that more lists are
        due (each list grew RETRAIN_GROWTH times: a search scans as many times more)."""
        return len(self) >= RETRAIN_GROWTH * self.trained_rows and \
            lists_for(len(self)) > self._index.nlist

    def add(self, keys: npt.NDArray[np.int64], words: npt.NDArray[np.uint64]) -> None:
        if len(keys):
            self._index.add_with_ids(_rows(words), keys)

    def nearest(self, q: npt.NDArray[np.uint64], want: int,
                ) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.int64]]:
        """The distances and keys of (at most) `want` items near the query's bits, nearest
        first, from the lists nearest it."""
        distance, keys = self._index.search(q.view(np.uint8)[None, :], want)
        found = keys[0] >= 0  # fewer than `want` in the lists probed: -1 fills the rest
        return distance[0][found].astype(np.uint16), keys[0][found]

    def contents(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint64]]:
        """Every item's key and bits (as bit_index's columns), in key order: to train anew."""
        faiss = _faiss()
        lists = self._index.invlists
        size = int(self._index.code_size)
        keys, rows = [], []
        for i in range(self._index.nlist):
            n = lists.list_size(i)
            if n:
                keys.append(faiss.rev_swig_ptr(lists.get_ids(i), n).copy())
                rows.append(faiss.rev_swig_ptr(lists.get_codes(i), n * size).copy()
                            .reshape(n, size))
        if not keys:
            return np.empty(0, dtype=np.int64), np.empty((self.words, 0), dtype=np.uint64)
        key = np.concatenate(keys)
        order = np.argsort(key, kind="stable")
        words = np.ascontiguousarray(np.concatenate(rows)[order].view(np.uint64).T)
        return key[order], words
