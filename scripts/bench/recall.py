"""Recall: latency of one hybrid memory recall at 10k and 100k episodes, on a real SQLite file.

What is measured: `chalie.memory.recall.Recall.recall(conn, query, K)` with the `hashed`
embedder's vectors (declared fit for the bit pass, as the default semantic embedder is), the
call every turn makes before its first LLM request, on a read-only connection of its own (as a
Session's), against a store filled the way months of use leave it: --transcript messages over
several channels (sentences of 5-30 words: stop words and pronounceable made-up words with a
Zipf-Mandelbrot frequency), --facts knowledge items, and episodes at each of --sizes, written
with chalie.store.memory_writes (add_transcript, remember, insert_episodes) on a writer from
db.open_writer (synchronous NORMAL, --batch rows per transaction). Episodes cover the
transcript in windows of memory.encode_every_rows messages per channel, moving each channel's
encoding mark as the Encoder does, so only the tail of each channel (fewer than a window) is
left unencoded. Everything is embedded with HashedEmbedder and stored with store_vectors in the
space ensure_space gives, as the Encoder's indexing pass does. How recall finds things: BM25
over the FTS5 index of every item, and a vector ranking: the items nearest by the Hamming
distance of their vectors' sign bits (chalie.memory.bit_index: every item with a vector, in
memory), whose candidates plus the full-text ones are re-ranked by cosine similarity of their
float32 vectors; the two rankings are fused by RRF and weighted by recency, retrieval strength
and salience. Queries are questions a person would ask (4-12 words: stop words, question words,
and 1-3 words of a stored item), and a share (--no-match-share) with no stored word at all. The
query's embedding is not part of a recall: a turn starts it beforehand on a thread of its own.
Also reported: recall asking for 175 items (what a turn asks for when the history leaves memory
its budget, as in LoCoMo at 8k), the parts of a recall on their own (full-text search, query
embedding, bit KNN, float re-rank), the first read of the bit index (every vector of the space,
once a process), and the old knowledge-fact figure `chalie.store.queries.current_facts(conn,
word, 20)` at --fact-sizes facts on a store of its own.

    .venv/bin/python scripts/bench/recall.py [--sizes 10000 100000] [--transcript 100000]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import _common
from _common import emit, percentile, progress, summary

from chalie.clock import SystemClock
from chalie.config_load import load_config
from chalie.memory import fts
from chalie.memory.assembly import SECTIONS, budgets
from chalie.memory.bit_index import BitIndex
from chalie.memory.context import MEMORY_ITEM_TOKENS
from chalie.memory.embedders import Embedder, HashedEmbedder
from chalie.memory.recall import CANDIDATES, KNN_OVERSAMPLE, Recall
from chalie.store import db
from chalie.store import memory_queries as mq
from chalie.store.effects import RememberFact
from chalie.store.memory_writes import (
    EpisodeRow,
    add_transcript,
    ensure_space,
    insert_episodes,
    remember,
    store_vectors,
)
from chalie.store.queries import current_facts
from chalie.values.memory import Kind

_common.quiet_logging()

CONSONANTS = "bcdfghjklmnprstvwz"
VOWELS = "aeiou"
DAY_S = 86400.0
# What a turn asks for at the default 8k window when the history fills its budget: one item
# per MEMORY_ITEM_TOKENS of the memory section's share (a shorter history lends it more).
def _default_k() -> int:
    config = load_config(None, env={})
    primary = config.llm.job("primary")
    assert primary is not None
    shares = {name: float(getattr(config.context, name)) for name in SECTIONS}
    memory = budgets(primary.context_window, config.context.reply_reserve, shares).memory
    return min(config.memory.recall_k, memory // MEMORY_ITEM_TOKENS)


K = _default_k()
# What a turn asks for when the history leaves memory its budget (LoCoMo at 8k: ~3,500 tokens).
WIDE_K = 175


class KnnHashedEmbedder(HashedEmbedder):
    """The hashed embedder declared fit for the bit pass, as the default (semantic) one is, so
    that recall here runs every part a turn's does but the query's embedding (which a turn
    starts beforehand, on a thread of its own; measured apart as embed_query)."""

    binary_knn = True
# Words people say between the meaningful ones; all are stop words of the full-text search.
FUNCTION_WORDS = (
    "i", "you", "we", "the", "a", "to", "and", "of", "it", "that", "is", "was", "my", "your",
    "for", "on", "with", "about", "at", "in", "this", "have", "had", "do", "did", "not", "so",
    "but", "be", "just", "can", "will", "would", "there", "when", "what", "how", "our", "me",
    "or", "if",
)
FUNCTION_SHARE = 0.4  # of the words of a stored sentence
# Question openers and tails: never stored (and not stop words), so they match nothing.
OPENERS = ("what did i say about", "do you remember", "when did we talk about", "tell me about",
           "what was the", "remind me about", "how is my", "where did i put", "did i mention",
           "what do you know about", "can you find", "what happened with")
TAILS = ("again", "yesterday", "last week", "this morning", "at work", "for the trip", "today")
LINKS = ("and", "or", "with", "of", "for")
# Nouns of the questions that have no stored word at all.
UNSTORED = ("weather", "dentist", "passport", "birthday", "flight", "grandmother", "insurance",
            "printer", "charger", "concert", "thursday", "spreadsheet", "marathon", "plumber",
            "breakfast", "umbrella", "invoice", "mortgage", "shopping", "playlist", "laundry",
            "yoga", "tickets", "vaccine", "neighbour", "password", "receipt", "holiday",
            "restaurant", "printer", "garden", "battery", "parking", "homework", "wedding")
# What the Encoder's intent and outcome say around the window's words.
INTENTS = ("asked about", "wanted to sort out", "planned", "checked", "needed help with",
           "told Chalie about")
OUTCOMES = ("agreed on", "decided on", "Chalie explained", "left undecided", "found",
            "nothing settled about")
INDEX_ORDER = (Kind.KNOWLEDGE, Kind.EPISODE, Kind.TRANSCRIPT)  # as the Encoder indexes
_NEVER_STORED = frozenset(" ".join((*OPENERS, *TAILS, *UNSTORED)).split())


def vocabulary(rng: random.Random, size: int) -> list[str]:
    """`size` distinct pronounceable words of 4-7 letters, none of them a stop word or a word
    the questions use around stored words."""
    words: set[str] = set()
    while len(words) < size:
        syllables = rng.randint(2, 3)
        word = "".join(rng.choice(CONSONANTS) + rng.choice(VOWELS) for _ in range(syllables))
        if rng.random() < 0.5:
            word += rng.choice(CONSONANTS)
        if word not in fts.STOP_WORDS and word not in _NEVER_STORED:
            words.add(word)
    ordered = sorted(words)
    rng.shuffle(ordered)  # the frequency rank must not follow the alphabet
    return ordered


class Corpus:
    """Text in the style of a person's chat with their assistant. Content words are drawn with
    a Zipf-Mandelbrot frequency, weight 1 / (rank + 10): a few words are common (the commonest
    is about 1.3% of the content words, in one message of eight, like "work" or "mum"), most
    are rare."""

    def __init__(self, rng: random.Random, size: int) -> None:
        self.rng = rng
        self.words = vocabulary(rng, size)
        self.content = frozenset(self.words)
        self._cum = list(itertools.accumulate(1.0 / (rank + 10) for rank in range(size)))

    def zipf(self, n: int) -> list[str]:
        return self.rng.choices(self.words, cum_weights=self._cum, k=n)

    def phrase(self, n: int, function_share: float = FUNCTION_SHARE) -> list[str]:
        rng = self.rng
        return [rng.choice(FUNCTION_WORDS) if rng.random() < function_share else w
                for w in self.zipf(n)]

    def sentence(self, lo: int = 5, hi: int = 30) -> str:
        words = self.phrase(self.rng.randint(lo, hi))
        return " ".join(words).capitalize() + self.rng.choice(".....?!")

    def content_words(self, text: str) -> list[str]:
        return [w for w in (t.strip(".,?!:;|").casefold() for t in text.split())
                if w in self.content]

    def question(self, stored: Sequence[str]) -> str:
        """A question of 4-12 words around `stored` (1-3 words)."""
        rng = self.rng
        words = rng.choice(OPENERS).split()
        determiners = ("the", "my", "our", "that")
        for i, w in enumerate(dict.fromkeys(stored)):
            if i:
                words.append(rng.choice(LINKS))
            elif words[-1] not in determiners and rng.random() < 0.5:
                words.append(rng.choice(determiners))
            words.append(w)
        tail = rng.choice(TAILS).split()
        if len(words) < 4 or (rng.random() < 0.4 and len(words) + len(tail) <= 12):
            words += tail
        return " ".join(words).capitalize() + "?"


class MemoryFill:
    """Writes a person's memory into a store the way months of use would leave it; everything
    through chalie.store.memory_writes, each batch in one db.immediate transaction."""

    def __init__(self, conn: Any, corpus: Corpus, *, channels: int, window: int, days: float,
                 batch: int, now: float | None = None) -> None:
        self.conn = conn
        self.corpus = corpus
        self.rng = corpus.rng
        self.channels = ["main", *(f"device-{i}" for i in range(1, max(1, channels)))]
        self.window = window
        self.batch = batch
        self.now = time.time() if now is None else now
        self.start = self.now - days * DAY_S
        self.messages: list[tuple[int, str, str, float]] = []  # id, channel, text, created_at
        self.episode_texts: list[str] = []
        self.fact_texts: list[str] = []
        self.episodes = 0
        self._encoded: set[int] = set()  # windows whose encoding mark has been moved

    # -- writing --

    def add_messages(self, n: int) -> float:
        """`n` transcript messages: conversations of 2-20 messages, roles alternating, on a
        channel chosen at random ("main" half of the time), spread over the time span up to an
        hour ago. Returns the seconds it took."""
        rng, t0 = self.rng, time.perf_counter()
        weights = [len(self.channels) - 1 or 1, *([1] * (len(self.channels) - 1))]
        span = self.now - 3600 - self.start
        planned: list[tuple[str, str, str, float]] = []
        while len(planned) < n:
            channel = rng.choices(self.channels, weights=weights)[0]
            for j in range(min(rng.randint(2, 20), n - len(planned))):
                at = self.start + span * (len(planned) / max(1, n))
                role = "user" if j % 2 == 0 else "assistant"
                planned.append((channel, role, self.corpus.sentence(), at))
        for lo in range(0, n, self.batch):
            with db.immediate(self.conn):
                for channel, role, text, at in planned[lo:lo + self.batch]:
                    item_id = add_transcript(self.conn, channel, None, role=role, text=text,
                                             at=at)
                    self.messages.append((item_id, channel, text, at))
        return time.perf_counter() - t0

    def windows(self) -> list[tuple[str, list[int]]]:
        """Per channel, its messages (indexes into self.messages) in windows of `window`, in the
        order the Encoder would encode them (by the window's last message); each channel's
        tail of fewer than `window` messages is left unencoded."""
        by_channel: dict[str, list[int]] = {}
        for index, (_, channel, _, _) in enumerate(self.messages):
            by_channel.setdefault(channel, []).append(index)
        out = []
        for channel, indexes in by_channel.items():
            whole = len(indexes) - len(indexes) % self.window
            out += [(channel, indexes[i:i + self.window]) for i in range(0, whole, self.window)]
        out.sort(key=lambda w: w[1][-1])
        return out

    def add_episodes(self, n: int) -> float:
        """`n` more episodes, spread evenly over the encoded windows (a window's episodes
        cover consecutive parts of it); windows encoded for the first time move their
        channel's mark, so their messages leave the bit index. Returns the seconds."""
        rng, t0 = self.rng, time.perf_counter()
        windows = self.windows()
        if not windows:
            return 0.0
        share = [n // len(windows)] * len(windows)
        for j in rng.sample(range(len(windows)), n % len(windows)):
            share[j] += 1
        pending: list[tuple[int, str, list[EpisodeRow], int]] = []
        for j, ((channel, indexes), count) in enumerate(zip(windows, share, strict=True)):
            if count == 0 and j in self._encoded:
                continue
            rows = [self._episode(indexes, part, count) for part in range(count)]
            pending.append((j, channel, rows, self.messages[indexes[-1]][0]))
        writes = 0
        for lo in range(0, len(pending), max(1, self.batch // 10)):
            with db.immediate(self.conn):
                for j, channel, rows, upto in pending[lo:lo + max(1, self.batch // 10)]:
                    at = max(r.happened_at for r in rows) + 60 if rows else self.now
                    insert_episodes(self.conn, channel, rows, upto_transcript_id=upto,
                                    encoding_id=f"bench-{j}", now=at)
                    self._encoded.add(j)
                    writes += len(rows)
        self.episodes += writes
        return time.perf_counter() - t0

    def _episode(self, indexes: list[int], part: int, parts: int) -> EpisodeRow:
        rng, corpus = self.rng, self.corpus
        size = len(indexes)
        lo = part * size // parts
        hi = max(lo + 1, (part + 1) * size // parts)
        covered = [self.messages[i] for i in indexes[lo:hi]]
        said = [w for m in covered for w in corpus.content_words(m[2])] or corpus.zipf(5)
        gist_words = [rng.choice(FUNCTION_WORDS) if rng.random() < 0.35 else rng.choice(said)
                      for _ in range(rng.randint(10, 25))]
        gist = " ".join(gist_words).capitalize() + "."
        topic = " ".join(rng.choice(said) for _ in range(rng.randint(1, 3)))
        intent = f"{rng.choice(INTENTS)} {topic}"
        outcome = f"{rng.choice(OUTCOMES)} {' '.join(corpus.phrase(rng.randint(2, 5), 0.3))}"
        entities = tuple(dict.fromkeys(rng.choice(said).capitalize()
                                       for _ in range(rng.randint(1, 4))))
        loops = tuple(f"follow up on {' '.join(corpus.zipf(rng.randint(1, 3)))}"
                      for _ in range(rng.choice((0, 0, 1, 2))))
        self.episode_texts.append(gist)
        return EpisodeRow(gist=gist, intent=intent, outcome=outcome, entities=entities,
                          open_loops=loops, salience=round(rng.random(), 3),
                          valence=round(rng.uniform(-1, 1), 3),
                          transcript_from=covered[0][0], transcript_to=covered[-1][0],
                          happened_at=covered[-1][3])

    def add_facts(self, n: int) -> float:
        """`n` knowledge items (a few traits and preferences), learned over the time span; a
        key said again supersedes the old value. Returns the seconds it took."""
        rng, t0 = self.rng, time.perf_counter()
        span = self.now - 3600 - self.start
        for lo in range(0, n, self.batch):
            with db.immediate(self.conn):
                for i in range(lo, min(lo + self.batch, n)):
                    key = " ".join(self.corpus.zipf(rng.randint(2, 3)))
                    value = " ".join(self.corpus.phrase(rng.randint(2, 10), 0.3))
                    kind = rng.choices(("fact", "preference", "trait"), weights=(95, 3, 2))[0]
                    by_tool = rng.random() < 0.4
                    fact = RememberFact(key=key, value=value, kind=kind,
                                        source="tool" if by_tool else "encoder",
                                        confidence=0.9 if by_tool else 0.6)
                    remember(self.conn, fact, turn_id=None, now=self.start + span * i / max(1, n))
                    self.fact_texts.append(f"{key} {value}")
        return time.perf_counter() - t0

    def embed(self, space_id: int, embedder: Embedder) -> dict[str, float]:
        """Embed every item the space lacks, kind by kind in id order, and store the vectors
        (as the Encoder's indexing pass does, in batches of --batch). Returns the seconds spent
        embedding and storing, and the number of vectors."""
        embed_s = store_s = 0.0
        stored = 0
        done = mq.progress(self.conn, space_id)
        for kind in INDEX_ORDER:
            after = done[kind]
            while rows := mq.unembedded(self.conn, kind, after, self.batch):
                t0 = time.perf_counter()
                vectors = embedder.embed([text for _, text in rows], timeout_s=600.0)
                t1 = time.perf_counter()
                with db.immediate(self.conn):
                    stored += store_vectors(
                        self.conn, space_id, embedder.kind, kind,
                        [(i, v) for (i, _), v in zip(rows, vectors, strict=True)],
                        upto_id=rows[-1][0], now=self.now)
                store_s += time.perf_counter() - t1
                embed_s += t1 - t0
                after = rows[-1][0]
        return {"embed_s": round(embed_s, 2), "store_vectors_s": round(store_s, 2),
                "vectors": stored}

    # -- reading --

    def stored_words(self) -> list[str]:
        """1-3 content words of one stored item (a message, an episode or a fact)."""
        rng = self.rng
        pools: list[Sequence[Any]] = [p for p in (self.messages, self.episode_texts,
                                                  self.fact_texts) if p]
        while True:
            pool = rng.choices(pools, weights=[6, 3, 1][:len(pools)])[0]
            item = rng.choice(pool)
            words = self.corpus.content_words(item[2] if isinstance(item, tuple) else item)
            if words:
                distinct = list(dict.fromkeys(words))
                return rng.sample(distinct, min(len(distinct), rng.randint(1, 3)))

    def questions(self, n: int, no_match_share: float) -> list[tuple[str, bool]]:
        """(question, has a stored word) pairs; round(n * no_match_share) of them, at random
        places, have no stored word at all."""
        out = []
        unmatched = set(self.rng.sample(range(n), round(n * no_match_share)))
        for i in range(n):
            if i in unmatched:
                unstored = self.rng.sample(UNSTORED, self.rng.randint(1, 3))
                out.append((self.corpus.question(unstored), False))
            else:
                out.append((self.corpus.question(self.stored_words()), True))
        return out

    def counts(self) -> dict[str, int]:
        def one(sql: str) -> int:
            return int(self.conn.execute(sql).fetchone()[0])

        return {"transcript": one("SELECT count(*) FROM transcript"),
                "episodes": one("SELECT count(*) FROM episodes"),
                "knowledge_current": one(
                    "SELECT count(*) FROM knowledge WHERE superseded_at IS NULL"),
                "unencoded_messages": one(
                    "SELECT count(*) FROM transcript AS t LEFT JOIN encodings AS e ON "
                    "e.channel = t.channel WHERE t.id > coalesce(e.upto_transcript_id, 0)")}


def fill_store(conn: Any, corpus: Corpus, *, messages: int, episodes: int, facts: int,
               channels: int, days: float, batch: int, space: str,
               embedder: Embedder) -> tuple[MemoryFill, dict[str, Any]]:
    """A store with `messages`, `episodes` and `facts`, all embedded into the vector space
    named `space` (not necessarily the embedder's own); for other benches."""
    window = load_config().memory.encode_every_rows
    fill = MemoryFill(conn, corpus, channels=channels, window=window, days=days, batch=batch)
    seconds = {"transcript": fill.add_messages(messages), "knowledge": fill.add_facts(facts),
               "episodes": fill.add_episodes(episodes)}
    with db.immediate(conn):
        space_id = ensure_space(conn, space, fill.now)
    vectors = fill.embed(space_id, embedder)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return fill, {**fill.counts(), "space": space, "fill_s": {
        k: round(v, 2) for k, v in seconds.items()}, **vectors}


# -- the bench --

def timed(fn: Callable[[str], Any], inputs: Sequence[str]) -> tuple[list[float], list[Any]]:
    times, results = [], []
    for x in inputs:
        t0 = time.perf_counter()
        results.append(fn(x))
        times.append(time.perf_counter() - t0)
    return times, results


def p50(values: Sequence[float]) -> float:
    return round(percentile(values, 50), 6)


def measure_recall(reader: Any, recall: Recall, embedder: Embedder, space_id: int,
                   questions: list[tuple[str, bool]]) -> dict[str, Any]:
    texts = [q for q, _ in questions]
    # As the server does at start (off the turn path): read the bit index, clustered when
    # the space is large (chalie.memory.bit_index.CLUSTER_ROWS).
    recall.warm(lambda: contextlib.nullcontext(reader))
    timed(lambda q: recall.recall(reader, q, K), texts[:10])  # warm the page cache
    times, found = timed(lambda q: recall.recall(reader, q, K), texts)
    matched = [t for t, (_, stored) in zip(times, questions, strict=True) if stored]
    unmatched = [t for t, (_, stored) in zip(times, questions, strict=True) if not stored]
    hits = [len(r.hits) for r in found]
    kinds = Counter(h.item.kind for r in found for h in r.hits)
    vector_used = [r.degraded is None and any(h.vector_rank is not None for h in r.hits)
                   for r in found]
    text_used = [any(h.fts_rank is not None for h in r.hits) for r in found]
    # The parts on their own, on the same questions.
    fts_s, fts_keys = timed(lambda q: fts.search(reader, q, 2 * CANDIDATES), texts)
    embed_s, vectors = timed(lambda q: embedder.embed([q], timeout_s=2.0)[0], texts)
    bits = BitIndex(space_id)
    t0 = time.perf_counter()
    bits.catch_up(reader)  # reads every vector of the space once (or the copy saved beside)
    load_s = time.perf_counter() - t0
    knn_s, near = [], []
    for v in vectors:
        t0 = time.perf_counter()
        near.append(bits.nearest(reader, v, KNN_OVERSAMPLE * max(CANDIDATES, K)))
        knn_s.append(time.perf_counter() - t0)
    wide_s, _ = timed(lambda q: recall.recall(reader, q, WIDE_K), texts)
    rerank_s = []
    for v, n, f in zip(vectors, near, fts_keys, strict=True):
        candidates = list(dict.fromkeys((*n, *f[:CANDIDATES])))
        t0 = time.perf_counter()
        mq.similarities(reader, space_id, v, candidates)
        rerank_s.append(time.perf_counter() - t0)
    return {
        "recall_s": summary(times),
        "recall_s_with_stored_words": summary(matched),
        "recall_s_no_stored_word": summary(unmatched),
        f"recall_s_k{WIDE_K}": summary(wide_s),
        "bit_index_load_s": round(load_s, 3),
        "hits_p50": sorted(hits)[len(hits) // 2],
        "hits_by_kind": dict(kinds),
        "vector_ranking_used_share": round(sum(vector_used) / len(found), 3),
        "full_text_hit_share": round(sum(text_used) / len(found), 3),
        "parts_p50_s": {"fts_search": p50(fts_s), "embed_query": p50(embed_s),
                        "knn_bits": p50(knn_s), "rerank_float": p50(rerank_s)},
        "parts_p99_s": {"fts_search": round(percentile(fts_s, 99), 6),
                        "knn_bits": round(percentile(knn_s, 99), 6),
                        "rerank_float": round(percentile(rerank_s, 99), 6)},
        "sample_questions": texts[:3],
    }


def bench_episodes(args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    corpus = Corpus(rng, args.vocabulary)
    embedder = HashedEmbedder()
    memory = load_config().memory
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="chalie-bench-recall-") as tmp:
        writer = db.open_writer(Path(tmp), busy_timeout_ms=5000, synchronous="NORMAL")
        fill = MemoryFill(writer, corpus, channels=args.channels,
                          window=memory.encode_every_rows, days=args.days, batch=args.batch)
        seconds = {"transcript": fill.add_messages(args.transcript),
                   "knowledge": fill.add_facts(args.facts)}
        progress(f"{args.transcript} messages and {args.facts} facts stored in "
                 f"{sum(seconds.values()):.1f}s")
        with db.immediate(writer):
            space_id = ensure_space(writer, embedder.space, fill.now)
        for size in sorted(args.sizes):
            seconds["episodes"] = fill.add_episodes(size - fill.episodes)
            vectors = fill.embed(space_id, embedder)
            writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            counts = fill.counts()
            (bits,) = writer.execute("SELECT count(*) FROM vectors WHERE space_id = ?",
                                     (space_id,)).fetchone()
            progress(f"{counts['episodes']} episodes stored in {seconds['episodes']:.1f}s, "
                     f"{vectors['vectors']} vectors in "
                     f"{vectors['embed_s'] + vectors['store_vectors_s']:.1f}s; recalling")
            reader = db.connect(db.db_path(tmp), busy_timeout_ms=5000, readonly=True)
            recall = Recall(embedder=KnnHashedEmbedder(), space_id=space_id, config=memory,
                            clock=SystemClock())
            figures = measure_recall(reader, recall, embedder, space_id,
                                     fill.questions(args.queries, args.no_match_share))
            reader.close()
            results[str(size)] = {
                **figures,
                "stored": {**counts, "bit_index_rows": int(bits)},
                "fill_s": {**{k: round(v, 2) for k, v in seconds.items()},
                           "embed": vectors["embed_s"],
                           "store_vectors": vectors["store_vectors_s"],
                           "vectors_stored": vectors["vectors"]},
                "db_mib": round(db.db_path(tmp).stat().st_size / 2**20, 1),
            }
            seconds = {}
        writer.close()
    return results


def old_fact(rng: random.Random, words: list[str], i: int) -> RememberFact:
    """A fact as the first version of this bench made them (for comparable figures)."""
    key = f"{rng.choice(words)} {rng.choice(words)} {i}"
    value = " ".join(rng.choice(words) for _ in range(rng.randint(3, 8)))
    return RememberFact(key=key, value=value)


def bench_facts(args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    """current_facts(conn, word, 20) at each of --fact-sizes facts (uniform words of a 5000-word
    vocabulary, as the first version of this bench), on a store of its own."""
    words = vocabulary(rng, 5000)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="chalie-bench-facts-") as tmp:
        writer = db.open_writer(Path(tmp), busy_timeout_ms=5000, synchronous="NORMAL")
        reader = db.connect(db.db_path(tmp), busy_timeout_ms=5000, readonly=True)
        stored = 0
        now = time.time()
        for size in sorted(s for s in args.fact_sizes if s > 0):
            t0 = time.perf_counter()
            for lo in range(stored, size, args.batch):
                with db.immediate(writer):
                    for i in range(lo, min(lo + args.batch, size)):
                        remember(writer, old_fact(rng, words, i), turn_id=f"bench-{i}",
                                 now=now + i * 1e-3)
            fill_s = time.perf_counter() - t0
            stored = size
            progress(f"{size} facts stored in {fill_s:.1f}s; current_facts")
            query_words = [rng.choice(words) for _ in range(args.queries)]
            timed(lambda w: current_facts(reader, w, 20), query_words[:10])
            times, found = timed(lambda w: current_facts(reader, w, 20), query_words)
            hits = sorted(len(f) for f in found)
            results[str(size)] = {"fill_s": round(fill_s, 2), "current_facts_s": summary(times),
                                  "current_facts_hits_p50": hits[len(hits) // 2]}
        reader.close()
        writer.close()
    return results


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000],
                        help="episodes at which to measure, ascending (10000 100000)")
    parser.add_argument("--transcript", type=int, default=100_000,
                        help="transcript messages stored (100000)")
    parser.add_argument("--facts", type=int, default=5000,
                        help="knowledge items stored with the episodes (5000)")
    parser.add_argument("--queries", type=int, default=200, help="recalls per size (200)")
    parser.add_argument("--no-match-share", type=float, default=0.2,
                        help="share of questions without any stored word (0.2)")
    parser.add_argument("--channels", type=int, default=8, help="channels talked on (8)")
    parser.add_argument("--days", type=float, default=365.0,
                        help="days over which everything was said (365)")
    parser.add_argument("--vocabulary", type=int, default=10_000,
                        help="distinct made-up content words (10000)")
    parser.add_argument("--batch", type=int, default=5000, help="rows per transaction (5000)")
    parser.add_argument("--fact-sizes", type=int, nargs="*", default=[10_000, 100_000],
                        help="facts at which to time current_facts on a store of its own "
                             "(10000 100000; none or 0: skip)")
    parser.add_argument("--random-seed", type=int, default=1)
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    rng = random.Random(args.random_seed)
    episodes = bench_episodes(args, rng)
    facts = bench_facts(args, rng) if any(s > 0 for s in args.fact_sizes) else {}
    emit(
        "recall",
        {"sizes": sorted(args.sizes), "transcript": args.transcript, "facts": args.facts,
         "queries": args.queries, "no_match_share": args.no_match_share, "k": K,
         "channels": args.channels, "days": args.days, "vocabulary": args.vocabulary,
         "batch": args.batch, "embedder": HashedEmbedder.space, "synchronous": "NORMAL",
         "fact_sizes": sorted(s for s in args.fact_sizes if s > 0), "fact_limit": 20,
         "random_seed": args.random_seed},
        episode_recall=episodes,
        knowledge_current_facts=facts,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
