"""Hybrid recall: one ranked list of transcript messages, episodes and knowledge for a query.

Two rankings are fused by reciprocal rank fusion (RRF, k = 20), and a third seeded by them:
- full text: BM25 over the FTS5 index of every item (chalie.memory.fts);
- vectors: cosine similarity of float32 vectors of the current embedder, over a pre-filtered
  set of candidates, so the float re-rank reads a few hundred vectors at most, never all of
  them: the full-text candidates, the newest episodes and facts, and, for embedders whose
  vectors keep their neighbourhoods in sign bits (semantic ones; `Embedder.binary_knn`), the
  KNN_OVERSAMPLE * depth items nearest by the Hamming distance of those bits (every item with a
  vector: chalie.memory.bit_index);
- a second full-text pass: the question's words and those the best items of the first two
  share, its reciprocal ranks times memory.feedback_weight (chalie.memory.feedback): what
  takes two steps to find is worded like what the first step found.
Then each fused score is weighted by recency and by retrieval strength:
    recency  = 1 / (1 + age_days / memory.recency_days)            (0.5 after recency_days)
    strength = (1 + times_recalled) * (1 + days_since_last_recall) ** -memory.retrieval_decay
               (an item never recalled counts from when it was stored)
    score    = rrf * (0.7 + 0.3 * recency) * (0.8 + 0.4 * strength / (1 + strength)) * salience
where salience is 0.9 + 0.2 * an episode's salience (1 for other items). A question of the
person's counts in both rankings as if it ranked QUESTION_RANK times lower (see `_demoted`).
Beside the NEIGHBOURS_OF best messages come what surrounds each (the lines said before and after
it, the episode that covers it), at NEIGHBOUR_WEIGHT of its score. The weights move a
score by at most about 2.6 times, so relevance leads and they decide between near equals.
Strength is a power law of time that rises each time an item is among the best of a turn's
memory section (the turn records them: chalie.memory.context.REINFORCED). Time comes from the
injected clock. When the query cannot be embedded, recall goes on with full text alone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import apsw
import msgspec
import structlog

from chalie.clock import Clock
from chalie.config import MemoryConfig
from chalie.memory import feedback, fts
from chalie.memory.embedders import Embedder, HashedEmbedder
from chalie.metrics import Metrics
from chalie.store import memory_queries as mq
from chalie.values.memory import Item, Kind, split

if TYPE_CHECKING:
    from chalie.memory.bit_index import BitIndex

log = structlog.get_logger("chalie.memory")

RRF_K = 20
CANDIDATES = 24  # items each ranking contributes at least (more when more are asked for)
NEWEST = 6  # the newest episodes and facts, always among the vector candidates
RERANKED = 12  # the best full-text candidates, re-ranked by their vectors too (at least)
MIN_SIMILARITY = 0.2  # vector hits below this cosine similarity are noise, not memory
NEIGHBOURS_OF = 24  # the best recalled messages whose neighbours are recalled with them
NEIGHBOUR_WEIGHT = 0.5  # a neighbour's score: this share of the score of the hit it is beside
QUESTION_RANK = 4.0  # a question of the person's counts as if ranked this many times lower
# The bit KNN takes this many times the items the vector ranking keeps: sign bits order
# neighbours roughly, and the float re-rank puts the right ones first (LoCoMo: the same
# questions found as an exact cosine ranking of every line, where taking as many as kept lost
# 0.3 points).
KNN_OVERSAMPLE = 2
DAY_S = 86400.0


def _demoted(item: Item) -> float:
    """How far down its rankings an item counts: a message of the person's that asks a question
    tells nothing, and the questions a person asks are worded like the question asked now, so
    in a memory full of them they would crowd out what was said. They count QUESTION_RANK times
    as far down as they are."""
    if item.kind == "message" and item.role == "user" and item.text.rstrip().endswith("?"):
        return QUESTION_RANK
    return 1.0


class Hit(msgspec.Struct, frozen=True):
    """A recalled item and why it ranked where it did."""

    item: Item
    score: float
    rrf: float
    fts_rank: int | None  # 1-based rank in the full-text list, or None
    vector_rank: int | None
    similarity: float | None
    recency: float
    strength: float
    beside: int | None = None  # a neighbour: the memory key of the hit it was recalled beside


class Recalled(msgspec.Struct, frozen=True):
    hits: tuple[Hit, ...]
    degraded: str | None = None  # why the vector ranking was left out, when it was
    vector: bytes | None = None  # the query's own vector (float32), when it was embedded
    seconds: float = 0.0  # what the recall took
    embed_wait_s: float = 0.0  # of it, waiting for the query's embedding


class Recall:
    def __init__(self, *, embedder: Embedder | None, space_id: int, config: MemoryConfig,
                 clock: Clock, metrics: Metrics | None = None) -> None:
        self._embedder = embedder
        self._space_id = space_id
        self._config = config
        self._clock = clock
        self._metrics = metrics
        self._pool: ThreadPoolExecutor | None = None  # embeds queries (not with `hashed`)
        self._lock = threading.Lock()
        self._bits: BitIndex | None = None
        if embedder is not None and embedder.binary_knn:
            from chalie.memory.bit_index import BitIndex  # noqa: PLC0415  (numpy: only here)

            self._bits = BitIndex(space_id)

    @property
    def space_id(self) -> int:
        return self._space_id

    @property
    def embedder(self) -> Embedder | None:
        return self._embedder

    @property
    def config(self) -> MemoryConfig:
        return self._config

    @property
    def semantic(self) -> bool:
        """Whether it has an embedder whose vectors say what a text means: any but the lexical
        hashed one."""
        return self._embedder is not None and self._embedder.kind != HashedEmbedder.kind

    def recall(self, conn: apsw.Connection, query: str, k: int, *,
               before_transcript_id: int | None = None,
               exclude: Collection[int] = (),
               embedding: Future[list[bytes]] | None = None) -> Recalled:
        """The `k` best items for `query`. Transcript messages with an id of at least
        `before_transcript_id` (the ones already in the prompt's history) and the keys in
        `exclude` are left out. `embedding`: the query's embedding, started earlier with
        `embed_meanwhile` (otherwise it starts now)."""
        started = time.perf_counter()

        def eligible(key: int) -> bool:
            if key in exclude:
                return False
            kind, item_id = split(key)
            return not (kind is Kind.TRANSCRIPT and before_transcript_id is not None
                        and item_id >= before_transcript_id)

        if k <= 0 or not query.strip():
            return Recalled(())
        depth = max(CANDIDATES, k)
        if embedding is None:
            embedding = self.embed_meanwhile(query)
        text_ranked = [key for key in fts.search(conn, query, depth + 16) if eligible(key)]
        text_ranked = text_ranked[:depth]
        found = mq.items(conn, text_ranked)  # read while the query is being embedded
        vector_ranked, similarity, degraded, vector, waited = self._vector_ranking(
            conn, query, text_ranked, eligible, depth=depth, embedding=embedding)
        found.update(mq.items(conn, [key for key in vector_ranked if key not in found]))
        fused: dict[int, float] = {}
        self._fuse(fused, found, text_ranked, 1.0)
        self._fuse(fused, found, vector_ranked, 1.0)
        if self._config.feedback_weight > 0:
            seeds = [found[key] for key in sorted(fused, key=lambda key: -fused[key])
                     if _demoted(found[key]) == 1.0][:feedback.SEEDS]
            again = [key for key in feedback.search(conn, query, [i.text for i in seeds],
                                                    depth + 16) if eligible(key)][:depth]
            found.update(mq.items(conn, [key for key in again if key not in found]))
            self._fuse(fused, found, again, self._config.feedback_weight)
        # Weights cannot lift an item from far down the fused list: look at the top few only.
        top = sorted(fused, key=lambda key: -fused[key])[:max(3 * k, k + 12)]
        found = {key: found[key] for key in top}
        strengths = mq.strengths(conn, list(found))
        text_rank = {key: r for r, key in enumerate(text_ranked, 1)}
        vector_rank = {key: r for r, key in enumerate(vector_ranked, 1)}
        now = self._clock.time()
        hits = []
        for key, item in found.items():
            recency, strength = self._weights(item, strengths, now)
            salience = 1.0 if item.salience is None else 0.9 + 0.2 * item.salience
            score = fused[key] * (0.7 + 0.3 * recency) \
                * (0.8 + 0.4 * strength / (1 + strength)) * salience
            hits.append(Hit(item, score, fused[key], text_rank.get(key), vector_rank.get(key),
                            similarity.get(key), recency, strength))
        hits.sort(key=lambda h: (-h.score, -h.item.mkey))
        hits = self._with_neighbours(conn, hits[:k], eligible, now)
        seconds = time.perf_counter() - started
        if self._metrics is not None:
            self._metrics.recall_seconds.observe(seconds)
        return Recalled(tuple(hits[:k]), degraded, vector, seconds, waited)

    @staticmethod
    def _fuse(fused: dict[int, float], found: dict[int, Item], ranking: list[int],
              weight: float) -> None:
        """Add a ranking's reciprocal ranks, times `weight`, to the fused scores."""
        for rank, key in enumerate(ranking, 1):
            if key in found:
                fused[key] = fused.get(key, 0.0) + weight / (RRF_K + rank * _demoted(found[key]))

    def warm(self, connect: Callable[[], AbstractContextManager[apsw.Connection]]) -> None:
        """Read the bit index before the first turn needs it (every vector of the space: about
        0.4 s at 200k items), on a connection of its own; run on a background thread at start."""
        if self._bits is None:
            return
        started = time.perf_counter()
        try:
            with connect() as conn:
                self._bits.catch_up(conn)
        except Exception as e:  # the first turn will try again
            log.warning("bit_index_not_read", error=repr(e))
            return
        log.info("bit_index_read", items=len(self._bits),
                 s=round(time.perf_counter() - started, 3))

    def _weights(self, item: Item, strengths: dict[int, tuple[int, float]],
                 now: float) -> tuple[float, float]:
        """An item's recency and retrieval strength (see the module's docstring)."""
        recency = 1.0 / (1.0 + max(0.0, now - item.created_at) / DAY_S
                         / self._config.recency_days)
        recalls, last = strengths.get(item.mkey, (0, item.created_at))
        idle_days = max(0.0, now - last) / DAY_S
        return recency, (1 + recalls) * (1 + idle_days) ** -self._config.retrieval_decay

    def _with_neighbours(self, conn: apsw.Connection, hits: list[Hit],
                         eligible: Callable[[int], bool], now: float) -> list[Hit]:
        """The hits, and beside the best recalled messages what surrounds them: the line
        before and after (a question and its answer are two lines) and the episode that
        covers them, each scored NEIGHBOUR_WEIGHT of the hit it is beside (an item found on
        its own keeps the better of its two scores). Best first."""
        best = {h.item.mkey: h for h in hits}
        messages = [h for h in hits if h.item.kind == "message"][:NEIGHBOURS_OF]
        around = mq.neighbours(conn, [h.item.id for h in messages])
        wanted: dict[int, Hit] = {}  # neighbour -> the hit it is beside (the best: hits come first)
        for hit in messages:
            for key in around.get(hit.item.id, ()):
                if key not in wanted and eligible(key) \
                        and (key not in best or best[key].score < hit.score * NEIGHBOUR_WEIGHT):
                    wanted[key] = hit
        if wanted:
            found = mq.items(conn, list(wanted))
            strengths = mq.strengths(conn, list(found))
            for key, item in found.items():
                hit = wanted[key]
                recency, strength = self._weights(item, strengths, now)
                best[key] = Hit(item, hit.score * NEIGHBOUR_WEIGHT, 0.0, None, None, None,
                                recency, strength, beside=hit.item.mkey)
        return sorted(best.values(), key=lambda h: (-h.score, -h.item.mkey))

    def embed_meanwhile(self, query: str) -> Future[list[bytes]] | None:
        """The query's embedding, started on a thread of its own so that it runs while the
        rest of the turn's context is gathered and the full-text search runs (ONNX Runtime,
        like an HTTP request, releases the GIL); None for the hashed embedder, which takes less
        time than the hop to another thread, and for an empty query."""
        if self._embedder is None or not self.semantic or not query.strip():
            return None
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=4,
                                                thread_name_prefix="chalie-query-embed")
        return self._pool.submit(self._embedder.embed, [query],
                                 timeout_s=self._config.query_embed_timeout_s)

    def _vector_ranking(self, conn: apsw.Connection, query: str, text_ranked: list[int],
                        eligible: Callable[[int], bool], *, depth: int,
                        embedding: Future[list[bytes]] | None,
                        ) -> tuple[list[int], dict[int, float], str | None, bytes | None,
                                   float]:
        if self._embedder is None:
            return [], {}, "no embedder", None, 0.0
        dim = mq.space_dim(conn, self._space_id)
        if dim is None:
            return [], {}, None, None, 0.0  # nothing embedded yet in this space
        newest = mq.newest(conn, NEWEST)  # read while the query is being embedded
        waiting = time.perf_counter()
        try:
            if embedding is None:
                (vector,) = self._embedder.embed([query],
                                                 timeout_s=self._config.query_embed_timeout_s)
            else:
                (vector,) = embedding.result(timeout=self._config.query_embed_timeout_s)
        except Exception as e:  # EmbedError, or a broken embedder: recall must go on
            log.warning("query_not_embedded", error=str(e), embedder=self._embedder.kind)
            if self._metrics is not None:
                self._metrics.recall_degraded.inc()
            return [], {}, f"the query could not be embedded: {e}", None, \
                time.perf_counter() - waiting
        if len(vector) // 4 != dim:
            problem = f"the embedder gives {len(vector) // 4} dimensions, the index {dim}"
            log.warning("query_not_comparable", error=problem, embedder=self._embedder.kind)
            if self._metrics is not None:
                self._metrics.recall_degraded.inc()
            return [], {}, problem, None, time.perf_counter() - waiting
        waited = time.perf_counter() - waiting
        near = [k for k in self._bits.nearest(conn, vector, KNN_OVERSAMPLE * depth)
                if eligible(k)] if self._bits is not None else []
        reranked = text_ranked[:max(RERANKED, depth // 2)]
        candidates = list(dict.fromkeys((*near, *reranked, *(k for k in newest if eligible(k)))))
        similar = mq.similarities(conn, self._space_id, vector, candidates)
        if self._bits is not None and len(similar) < len(candidates):
            have = {key for key, _ in similar}
            self._bits.gone([key for key in near if key not in have])
        scored = [(key, s) for key, s in similar if s >= MIN_SIMILARITY][:depth]
        return [key for key, _ in scored], dict(scored), None, vector, waited
