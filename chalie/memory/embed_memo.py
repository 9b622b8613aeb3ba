"""An embedder that remembers the vectors it made last: a turn's question is embedded for
recall before the turn, and the same words, stored as the person's message, are embedded
again for the index a second later. Remembered, the second costs nothing (with the shipped
`minilm`, a third of the embeddings a turn makes).

Only exact texts match; what is remembered is a few hundred vectors (a vector of 384
dimensions is 1.5 KB), the newest kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

from chalie.memory.embedders import Embedder

KEPT = 256  # texts whose vectors are remembered (about 400 KB at 384 dimensions)


class Remembering:
    """`inner`, remembering the vectors of the last KEPT texts it embedded. Thread-safe."""

    def __init__(self, inner: Embedder, *, kept: int = KEPT) -> None:
        self.inner = inner
        self.kind, self.space, self.origin = inner.kind, inner.space, inner.origin
        self.binary_knn, self.in_process = inner.binary_knn, inner.in_process
        self._kept = kept
        self._vectors: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self.reused = 0  # texts answered from memory, since the start

    def embed(self, texts: Sequence[str], *, timeout_s: float) -> list[bytes]:
        with self._lock:
            known = [self._vectors.get(t) for t in texts]
        missing = list(dict.fromkeys(t for t, v in zip(texts, known, strict=True) if v is None))
        made = dict(zip(missing, self.inner.embed(missing, timeout_s=timeout_s), strict=True)) \
            if missing else {}
        with self._lock:
            for text, vector in made.items():
                self._vectors[text] = vector
            for text in texts:
                if text in self._vectors:
                    self._vectors.move_to_end(text)
            while len(self._vectors) > self._kept:
                self._vectors.popitem(last=False)
            self.reused += sum(1 for v in known if v is not None)
        return [v if v is not None else made[t] for t, v in zip(texts, known, strict=True)]

    def close(self) -> None:
        self.inner.close()
