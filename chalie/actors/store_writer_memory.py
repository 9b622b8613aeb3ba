"""The StoreWriter's memory writes: what the Encoder made of a conversation (episodes, facts,
concepts, the situation), vectors, dropping an unused vector space, forgetting an item, and
prompt snapshots (stored with a turn's spend, and pruned as turns are stored).

`MemoryWrites` is a part of the StoreWriter, not an actor: it runs on the writer's thread, on
the writer's connection, each write in a transaction of its own (except `prune_snapshots`, which
runs inside the group commit's). It tells the Encoder how a write went through the `nudge` it
is given, which drops the message when no Encoder is running.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import apsw
import structlog

from chalie.actors.encoder_messages import EncodeWindow, IndexBatch, MemoryGrew
from chalie.actors.store_writer_messages import (
    ForgetItem,
    SaveSnapshots,
    StoreEpisodes,
    StoreVectors,
)
from chalie.clock import Clock
from chalie.metrics import Metrics
from chalie.store import background_ops, cognition_rows, concept_rows, db, memory_writes
from chalie.store.background_ops import Spend
from chalie.values.memory import Kind

log = structlog.get_logger("chalie.store_writer")

PRUNE_SNAPSHOTS_EVERY = 20  # prune prompt snapshots after this many stored turns
DROP_BATCH = 500  # vectors of an unused space removed per transaction (each a few ms)


class MemoryWrites:
    def __init__(
        self,
        conn: Callable[[], apsw.Connection],
        *,
        clock: Clock,
        metrics: Metrics,
        nudge: Callable[[Any], None],
        snapshots_kept: int,
        noted: Callable[[BaseException], object] = lambda e: None,
    ) -> None:
        self._conn = conn  # the writer's connection, opened when the actor starts
        self._noted = noted  # a failed write, for the store's state (StoreWriter.noted)
        self._clock = clock
        self._metrics = metrics
        self._nudge = nudge  # tells the Encoder, if one is running
        self._snapshots_kept = snapshots_kept
        self._turns_since_prune = 0

    def save_snapshots(self, m: SaveSnapshots) -> None:
        """A turn's prompt snapshots, and its spend when it used any tokens."""
        conn = self._conn()
        spend = (Spend(m.path, m.tokens, m.llm_calls, m.turn_id),) if m.tokens else ()
        with db.immediate(conn):
            memory_writes.insert_snapshots(conn, m.turn_id, m.snapshots)
            background_ops.apply(conn, spend, turn_id=None, now=self._clock.time())

    def prune_snapshots(self, turns: int) -> None:
        """Count `turns` more stored turns; every PRUNE_SNAPSHOTS_EVERY, keep only the newest
        snapshots. Runs inside the caller's transaction."""
        self._turns_since_prune += turns
        if self._turns_since_prune >= PRUNE_SNAPSHOTS_EVERY:
            self._turns_since_prune = 0
            memory_writes.prune_snapshots(self._conn(), self._snapshots_kept)

    def store_episodes(self, m: StoreEpisodes) -> None:
        now = self._clock.time()
        try:
            conn = self._conn()
            with db.immediate(conn):
                ids = memory_writes.insert_episodes(
                    conn, m.channel, m.episodes, upto_transcript_id=m.upto_transcript_id,
                    encoding_id=m.encoding_id, now=now, after_transcript_id=m.after_transcript_id)
                if ids is not None:
                    for fact in m.facts:
                        memory_writes.apply_fact(conn, fact, turn_id=m.fact_turn_id, now=now)
                    if m.concepts:
                        concept_rows.store_window(conn, m.concepts, m.relations,
                                                  space_id=m.space_id, now=now)
                    if m.situation:
                        cognition_rows.save_summary(conn, m.channel, m.situation,
                                                    m.upto_transcript_id, now)
                memory_writes.insert_snapshots(conn, m.encoding_id, m.snapshots)
                if m.tokens:
                    background_ops.apply(conn, (Spend("encoder", m.tokens, m.llm_calls,
                                                      m.encoding_id),),
                                         turn_id=None, now=now)
        except Exception as e:  # the window is tried again at the next trigger
            (log.warning if self._noted(e) else log.error)(  # a store fault: told once
                "episodes_not_stored", channel=m.channel, error=repr(e))
            self._nudge(EncodeWindow(m.channel, stored=False))
            return
        if ids is None:  # a window another encoder instance stored first
            log.info("episodes_already_stored", channel=m.channel, encoding_id=m.encoding_id,
                     after_transcript_id=m.after_transcript_id)
            self._nudge(EncodeWindow(m.channel, stored=True))
            return
        self._metrics.episodes.inc(len(ids))
        log.info("episodes_stored", channel=m.channel, episodes=len(ids), facts=len(m.facts),
                 upto_transcript_id=m.upto_transcript_id, encoding_id=m.encoding_id)
        self._nudge(EncodeWindow(m.channel, stored=True))
        self._nudge(MemoryGrew(None))

    def store_vectors(self, m: StoreVectors) -> None:
        try:
            conn = self._conn()
            with db.immediate(conn):
                memory_writes.store_vectors(conn, m.space_id, m.embedder, Kind(m.kind),
                                            m.rows, upto_id=m.upto_id, now=self._clock.time())
        except Exception as e:
            (log.warning if self._noted(e) else log.error)(  # a store fault: told once
                "vectors_not_stored", kind=Kind(m.kind).label, error=repr(e))
            self._nudge(IndexBatch(more=True, error=f"the store refused them: {e!r}"))
            return
        self._nudge(IndexBatch(more=m.more))

    def drop_space(self, space_id: int) -> bool:
        """Remove a batch of an unused space's vectors. True when more remain: the caller
        sends itself another DropSpace, after whatever else is waiting, so turns are not held
        up. False when the space is gone, or the store refused (logged)."""
        conn = self._conn()
        try:
            with db.immediate(conn):
                done = memory_writes.drop_space(conn, space_id, batch=DROP_BATCH)
        except apsw.Error as e:
            (log.warning if self._noted(e) else log.error)(  # a store fault: told once
                "vector_space_not_dropped", space_id=space_id, error=str(e))
            return False
        if done:
            log.info("vector_space_dropped", space_id=space_id)
        return not done

    def forget(self, m: ForgetItem) -> bool:
        now = self._clock.time()
        conn = self._conn()
        with db.immediate(conn):
            if m.kind == "knowledge":
                found = memory_writes.forget_knowledge(conn, m.item_id, now)
            else:
                found = memory_writes.forget_episode(conn, m.item_id)
        if found:
            self._metrics.forgotten.labels(kind=m.kind).inc()
            log.info("memory_forgotten", kind=m.kind, item_id=m.item_id)
        return found
