"""Recall: latency of memory look-ups at 10k and 100k stored items, on a real SQLite file.

Episodes (episodic memory, recalled before the ACT loop) do not exist yet: the bench checks the
migrated schema for an `episodes` table and reports "skipped" with the reason until it does.

What exists today is measured: the knowledge-fact recall query
`chalie.store.queries.current_facts(conn, word, 20)` (a LIKE scan over current facts, folded
with Python's casefold), and `chalie.memory.seed.relevant_facts(conn, text, 8)`, the pre-loop
seeding a turn does (one current_facts call per word of 4+ letters, up to 12 words, 5 facts
each). Facts are written the way a turn writes them: RememberFact effects applied with
`chalie.store.writes.apply_effect` inside `chalie.store.db.immediate` (--batch per
transaction) on a writer from `chalie.store.db.open_writer`; queries run on a separate
read-only connection, as a Session's do. Query words are words that occur in stored facts.

    .venv/bin/python scripts/bench/recall.py [--sizes 10000 100000] [--queries 200]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common
from _common import emit, progress, summary

from chalie.memory.seed import relevant_facts
from chalie.store import db
from chalie.store.effects import RememberFact
from chalie.store.queries import current_facts
from chalie.store.writes import apply_effect

_common.quiet_logging()

CONSONANTS = "bcdfghjklmnprstvwz"
VOWELS = "aeiou"


def vocabulary(rng: random.Random, size: int) -> list[str]:
    """`size` distinct pronounceable words of 4-9 letters (none is a seed stop word)."""
    words: set[str] = set()
    while len(words) < size:
        syllables = rng.randint(2, 3)
        word = "".join(rng.choice(CONSONANTS) + rng.choice(VOWELS) for _ in range(syllables))
        if rng.random() < 0.5:
            word += rng.choice(CONSONANTS)
        words.add(word)
    return sorted(words)


def make_fact(rng: random.Random, words: list[str], i: int) -> RememberFact:
    key = f"{rng.choice(words)} {rng.choice(words)} {i}"
    value = " ".join(rng.choice(words) for _ in range(rng.randint(3, 8)))
    return RememberFact(key=key, value=value)


def fill(writer: Any, rng: random.Random, words: list[str], start: int, stop: int, *,
         batch: int) -> float:
    """Store facts start..stop-1; returns the seconds it took."""
    t0 = time.perf_counter()
    now = time.time()
    for lo in range(start, stop, batch):
        with db.immediate(writer):
            for i in range(lo, min(lo + batch, stop)):
                apply_effect(writer, make_fact(rng, words, i), turn_id=f"bench-{i // batch}",
                             now=now + i * 1e-3)
    return time.perf_counter() - t0


def timed(fn: Any, inputs: list[str]) -> tuple[list[float], list[int]]:
    times, hits = [], []
    for x in inputs:
        t0 = time.perf_counter()
        found = fn(x)
        times.append(time.perf_counter() - t0)
        hits.append(len(found))
    return times, hits


def episodes_status(conn: Any) -> str:
    tables = {str(r[0]) for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    if not any(t.startswith("episode") for t in tables):
        return (f"skipped: the store has no episodes table (schema version {version}); "
                "episodic memory and the Encoder are not implemented yet")
    return (f"skipped: an episodes table exists (schema version {version}) but this bench does "
            "not fill it yet; extend scripts/bench/recall.py")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000],
                        help="stored facts at which to measure, ascending (10000 100000)")
    parser.add_argument("--queries", type=int, default=200,
                        help="current_facts queries per size (200)")
    parser.add_argument("--seed-queries", type=int, default=50,
                        help="relevant_facts (turn seeding) calls per size (50)")
    parser.add_argument("--vocabulary", type=int, default=5000, help="distinct words (5000)")
    parser.add_argument("--batch", type=int, default=5000, help="facts per transaction (5000)")
    parser.add_argument("--random-seed", type=int, default=1)
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    rng = random.Random(args.random_seed)
    words = vocabulary(rng, args.vocabulary)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="chalie-bench-recall-") as tmp:
        writer = db.open_writer(Path(tmp), busy_timeout_ms=5000, synchronous="NORMAL")
        reader = db.connect(db.db_path(tmp), busy_timeout_ms=5000, readonly=True)
        episodes = episodes_status(writer)
        stored = 0
        for size in sorted(args.sizes):
            fill_s = fill(writer, rng, words, stored, size, batch=args.batch)
            stored = size
            progress(f"{size} facts stored in {fill_s:.1f}s; querying")
            query_words = [rng.choice(words) for _ in range(args.queries)]
            texts = [" ".join(rng.choice(words) for _ in range(rng.randint(6, 14)))
                     for _ in range(args.seed_queries)]
            timed(lambda w: current_facts(reader, w, 20), query_words[:10])  # warm the cache
            q_times, q_hits = timed(lambda w: current_facts(reader, w, 20), query_words)
            s_times, s_hits = timed(lambda t: relevant_facts(reader, t, 8), texts)
            results[str(size)] = {
                "fill_s": round(fill_s, 2),
                "current_facts_s": summary(q_times),
                "current_facts_hits_p50": sorted(q_hits)[len(q_hits) // 2],
                "turn_seed_relevant_facts_s": summary(s_times),
                "turn_seed_hits_p50": sorted(s_hits)[len(s_hits) // 2],
            }
        db_mib = round(db.db_path(tmp).stat().st_size / 2**20, 1)
        reader.close()
        writer.close()
    emit(
        "recall",
        {"sizes": sorted(args.sizes), "queries": args.queries,
         "seed_queries": args.seed_queries, "vocabulary": args.vocabulary,
         "limit": 20, "seed_limit": 8},
        episodes=episodes,
        knowledge_recall=results,
        db_mib_at_largest=db_mib,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
