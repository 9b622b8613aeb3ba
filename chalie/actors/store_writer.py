"""The StoreWriter: the only actor that writes, and the only way frames reach the sockets.

Frames get their channel's next `seq` inside the IMMEDIATE transaction that logs them and are
pushed to the Outbox only after it commits, so a frame the client saw is always in the log, and
a turn's `message` frame always follows its stored rows. Frames and turns that queue up behind
each other share one transaction and one fsync (group commit); each turn sits in a savepoint
of its own, so a turn the store refuses fails alone.
"""

from __future__ import annotations

import queue
from pathlib import Path
from typing import Any

import apsw
import msgspec
import pykka
import structlog

from chalie.actors.messages import (
    AppendFrames,
    ApplyOps,
    CloseOpenExchange,
    CommitTurn,
    CreateAuthSession,
    CreatePairingKey,
    DeleteInterface,
    DeleteSubscription,
    Deliver,
    DropSpace,
    EncodeWindow,
    EndAuthSession,
    ForgetItem,
    IndexBatch,
    MemoryGrew,
    OpsApplied,
    PairInterface,
    Pruned,
    PruneStep,
    PushLive,
    RepushExchange,
    RotateAuthSession,
    RunGoal,
    SaveCheckpoint,
    SaveSnapshots,
    SaveSubscription,
    SaveWorld,
    SchedulesChanged,
    StopGoal,
    StoreEpisodes,
    StoreVectors,
    ToGoal,
    TurnStored,
    TurnStoreFailed,
    UpdateCapabilities,
    Vacuum,
    Vacuumed,
)
from chalie.actors.supervisor import Directory, Link, SupervisedActor
from chalie.clock import Clock
from chalie.config import StoreConfig
from chalie.errors import StoreConflict
from chalie.frames import Done, Error, Frame, Message, encode_frame, frame_type
from chalie.memory.items import Kind
from chalie.metrics import Metrics
from chalie.outbox import Outbox
from chalie.store import (
    auth_rows,
    background_ops,
    cognition_rows,
    concept_rows,
    db,
    interface_rows,
    memory_writes,
    queries,
    retention,
    writes,
)
from chalie.store.background_ops import Applied, Op, Spend
from chalie.store.records import TurnRecord

log = structlog.get_logger("chalie.store_writer")

Row = tuple[int, str, str | None, str]  # seq, type, exchange_id, encoded frame
MAX_BATCH = 256  # messages that may share one transaction
PRUNE_EVERY = 100  # prune a channel's event log each time its seq crosses a multiple of this
PRUNE_SNAPSHOTS_EVERY = 20  # prune prompt snapshots after this many stored turns
DROP_BATCH = 500  # vectors of an unused space removed per transaction (each a few ms)
INTERRUPTED = "this turn was interrupted by a server fault before it finished; please send it again"


class StoreWriter(SupervisedActor):
    def __init__(
        self,
        link: Link | None,
        *,
        config: StoreConfig,
        outbox: Outbox,
        clock: Clock,
        directory: Directory,
        metrics: Metrics,
        snapshots_kept: int = 50,
        notify_channel: str = "main",
    ) -> None:
        super().__init__(link)
        self._config = config
        self._notify_channel = notify_channel  # where goals' and schedules' frames go
        self._snapshots_kept = snapshots_kept
        self._turns_since_prune = 0
        self._outbox = outbox
        self._clock = clock
        self._directory = directory
        self._metrics = metrics
        self._conn: apsw.Connection | None = None
        self._seqs: dict[str, int] = {}

    def started(self) -> None:
        self._conn = db.open_writer(
            Path(self._config.path),
            busy_timeout_ms=self._config.busy_timeout_ms,
            synchronous=self._config.synchronous,
        )

    def on_stop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @property
    def conn(self) -> apsw.Connection:
        assert self._conn is not None, "StoreWriter used before start"
        return self._conn

    def on_receive(self, message: Any) -> Any:
        match message:
            case AppendFrames() | CommitTurn():
                self._write_batch([message, *self._take_batchable()])
            case PushLive(channel=channel, frame=frame):
                self._outbox.live(channel, frame)
            case CloseOpenExchange(channel=channel):
                self._close_open_exchange(channel)
            case RepushExchange(channel=channel, exchange_id=exchange_id):
                logged = queries.exchange_events(self.conn, channel, exchange_id)
                self._outbox.push(channel, logged, again=True)
            case SaveCheckpoint():
                self._save_checkpoint(message)
            case StoreEpisodes():
                self._store_episodes(message)
            case SaveSnapshots(turn_id=turn_id, snapshots=snapshots):
                spend = (Spend(message.path, message.tokens, message.llm_calls, turn_id),) \
                    if message.tokens else ()
                with db.immediate(self.conn):
                    memory_writes.insert_snapshots(self.conn, turn_id, snapshots)
                    background_ops.apply(self.conn, spend, turn_id=None,
                                         now=self._clock.time())
            case ApplyOps(ops=ops, reply_to=reply_to, tag=tag):
                result = self._apply_ops(ops, tag)
                if reply_to is not None:
                    self._reply(reply_to, None, result)
                return result
            case StoreVectors():
                self._store_vectors(message)
            case DropSpace(space_id=space_id):
                self._drop_space(space_id)
            case ForgetItem():
                return self._forget(message)
            case PruneStep() | Vacuum():
                self._housekeeping(message)
            case CreateAuthSession() | RotateAuthSession() | EndAuthSession():
                return self._auth_session(message)
            case SaveWorld(signals=signals):
                with db.immediate(self.conn):
                    interface_rows.save_world(self.conn, signals)
            case CreatePairingKey(key_hash=key_hash, created_at=created, expires_at=expires):
                with db.immediate(self.conn):
                    interface_rows.insert_pairing_key(self.conn, key_hash, created, expires)
                return True
            case PairInterface(key_hash=key_hash, now=now, row=row):
                with db.immediate(self.conn):
                    return interface_rows.pair(self.conn, key_hash, now, row)
            case UpdateCapabilities():
                with db.immediate(self.conn):
                    return interface_rows.update_capabilities(
                        self.conn, message.interface_id, message.version, message.capabilities,
                        message.refreshed_at)
            case DeleteInterface(interface_id=interface_id):
                with db.immediate(self.conn):
                    return interface_rows.delete_interface(self.conn, interface_id)
            case SaveSubscription(row=row):
                with db.immediate(self.conn):
                    return interface_rows.save_subscription(self.conn, row)
            case DeleteSubscription(subscription_id=subscription_id):
                with db.immediate(self.conn):
                    return interface_rows.delete_subscription(self.conn, subscription_id)
            case _:
                log.warning("unexpected_message", message=type(message).__name__)
        return None

    # -- group commit --

    def _take_batchable(self) -> list[AppendFrames | CommitTurn]:
        """The frames and turns queued right behind the current one, to share its transaction
        (and its fsync). Stops at the first message of another kind, so order is kept."""
        inbox: queue.Queue[Any] = self.actor_inbox  # type: ignore[assignment]
        taken: list[AppendFrames | CommitTurn] = []
        with inbox.mutex:
            waiting = inbox.queue
            while waiting and len(taken) < MAX_BATCH:
                envelope = waiting[0]
                if envelope.reply_to is not None or not isinstance(
                    envelope.message, AppendFrames | CommitTurn
                ):
                    break
                waiting.popleft()
                taken.append(envelope.message)
        return taken

    def _write_batch(self, batch: list[AppendFrames | CommitTurn]) -> None:
        """One transaction for the whole batch; each turn in a savepoint of its own, so a turn
        the store refuses fails alone. Frames are pushed, and sessions told, after the commit."""
        now = self._clock.monotonic()
        seqs = dict(self._seqs)
        stored: list[tuple[str, list[Row], CommitTurn | None]] = []
        refused: list[tuple[CommitTurn, str, bool]] = []  # (turn, why, a conflict)
        applied: list[Applied] = []
        try:
            with db.immediate(self.conn):
                for item in batch:
                    if isinstance(item, AppendFrames):
                        rows = self._append(seqs, item.channel, item.frames)
                        stored.append((item.channel, rows, None))
                        continue
                    record, frames = stamped(item, now)
                    notify = item.notify
                    try:
                        with self.conn:  # a savepoint
                            effects = writes.insert_turn(self.conn, record, item.extras,
                                                         channel=self._notify_channel)
                            rows = self._append(seqs, record.channel, frames)
                            also = [] if notify is None else [
                                (notify.channel, self._append(seqs, notify.channel,
                                                              notify.frames))]
                            also += self._append_pairs(seqs, effects.frames)
                    except Exception as e:  # rolled back to the savepoint; seqs not moved.
                        # Not only apsw.Error: a record that cannot be written for any reason
                        # must fail alone, not take the writer and the rest of the batch down.
                        why = str(e) if isinstance(e, apsw.Error | StoreConflict) else repr(e)
                        refused.append((item, why, isinstance(e, StoreConflict)))
                        continue
                    stored.append((record.channel, rows, msgspec.structs.replace(
                        item, record=record)))
                    stored += [(channel, more, None) for channel, more in also]
                    applied.append(effects)
                self._prune(seqs)
                self._prune_snapshots(sum(1 for _, _, t in stored if t is not None))
        except Exception as e:  # the transaction itself failed: nothing of the batch is stored
            log.exception("batch_not_stored", messages=len(batch))
            refused += [(i, f"the store failed: {e}", False) for i in batch
                        if isinstance(i, CommitTurn)]
            stored, applied = [], []
        else:
            self._seqs = seqs
            self._metrics.store_batch.observe(len(batch))
        grew = {c.record.channel for _, _, c in stored if c is not None}
        for channel, rows, commit in stored:
            if commit is not None:
                turn = commit.record
                log.info("turn_stored", channel=channel, turn_id=turn.id, outcome=turn.outcome,
                         path=turn.path, tools=len(turn.tool_calls),
                         response_time_s=round(turn.response_time_s, 6))
            self._push(channel, rows)
            if commit is not None:
                self._reply(commit.reply_to, commit.record.channel, TurnStored(commit.record.id))
        for commit, error, conflict in refused:
            record = commit.record
            (log.warning if conflict else log.error)(
                "turn_not_stored", channel=record.channel, turn_id=record.id, error=error)
            self._reply(commit.reply_to, record.channel, TurnStoreFailed(record.id, error))
        for effects in applied:
            self._after(effects)
        for channel in sorted(grew):
            self._tell_encoder(MemoryGrew(channel))

    def _push(self, channel: str, rows: list[Row]) -> None:
        for _, kind, _, _ in rows:
            self._metrics.frames.labels(type=kind).inc()
        if rows:
            self._outbox.push(channel, [body for _, _, _, body in rows])

    def _append_pairs(self, seqs: dict[str, int],
                      pairs: list[tuple[str, Frame]]) -> list[tuple[str, list[Row]]]:
        """Log (channel, frame) pairs in order, runs of one channel together."""
        out: list[tuple[str, list[Row]]] = []
        for channel, frame in pairs:
            rows = self._append(seqs, channel, (frame,))
            if out and out[-1][0] == channel:
                out[-1][1].extend(rows)
            else:
                out.append((channel, rows))
        return out

    def _reply(self, target: str, channel: str | None, message: Any) -> None:
        """Tell whoever waits for a write: the Session of `channel` ("sessions"), a goal's
        actor ("goal:<id>") or the actor of that directory name."""
        if target == "sessions" and channel is not None:
            self._directory.tell("sessions", Deliver(channel, message))
        elif target.startswith("goal:"):
            self._directory.tell("goals", ToGoal(target.removeprefix("goal:"), message))
        else:
            self._directory.tell(target, message)

    def _after(self, effects: Applied) -> None:
        """Tell the actors concerned about what a commit changed."""
        if effects.schedules_changed:
            self._directory.tell("scheduler", SchedulesChanged())
        for goal_id in effects.goals_started:
            self._directory.tell("goals", RunGoal(goal_id))
        for goal_id in effects.goals_stopped:
            self._directory.tell("goals", StopGoal(goal_id))
        for path, result in effects.delivered:
            self._metrics.proactive.labels(path=path, result=result).inc()

    def _apply_ops(self, ops: tuple[Op, ...], tag: str) -> OpsApplied:
        """Background ops in one transaction; their frames are pushed after the commit."""
        seqs = dict(self._seqs)
        try:
            with db.immediate(self.conn):
                effects = background_ops.apply(self.conn, ops, turn_id=None,
                                               now=self._clock.time())
                logged = self._append_pairs(seqs, effects.frames)
                self._prune(seqs)
        except Exception as e:  # nothing of it is stored; the sender decides what to do
            conflict = isinstance(e, StoreConflict)
            (log.warning if conflict else log.error)(
                "ops_not_stored", ops=[type(o).__name__ for o in ops], error=repr(e))
            return OpsApplied(tag, (), str(e) if conflict else repr(e))
        self._seqs = seqs
        for channel, rows in logged:
            self._push(channel, rows)
        self._after(effects)
        return OpsApplied(tag, tuple(effects.values))

    def _append(self, seqs: dict[str, int], channel: str, frames: tuple[Frame, ...]) -> list[Row]:
        """Insert frames after the channel's last seq in `seqs`, and move it on."""
        last = seqs.get(channel)
        if last is None:
            last = queries.last_seq(self.conn, channel)
        rows = sequenced(frames, last)
        writes.insert_events(self.conn, channel, rows, self._clock.time())
        seqs[channel] = last + len(rows)
        return rows

    def _prune(self, seqs: dict[str, int]) -> None:
        kept = self._config.events_kept
        for channel, seq in seqs.items():
            before = self._seqs.get(channel, seq)
            if seq // PRUNE_EVERY != before // PRUNE_EVERY:
                writes.prune_events(self.conn, channel, keep_after=seq - kept)

    def _save_checkpoint(self, message: SaveCheckpoint) -> None:
        now = self._clock.time()
        try:
            with db.immediate(self.conn):
                writes.insert_checkpoint(
                    self.conn, message.channel, message.text,
                    upto_transcript_id=message.upto_transcript_id, turn_id=message.turn_id,
                    now=now,
                )
                if message.turn_id is not None:
                    memory_writes.insert_snapshots(self.conn, message.turn_id, message.snapshots)
                if message.compaction is not None and message.turn_id is not None:
                    writes.insert_compaction(self.conn, message.turn_id, message.channel,
                                             message.compaction)
        except apsw.Error as e:
            log.error("checkpoint_not_stored", channel=message.channel, error=str(e))
        else:
            log.info("checkpoint_stored", channel=message.channel,
                     upto_transcript_id=message.upto_transcript_id)

    # -- memory --

    def _prune_snapshots(self, turns: int) -> None:
        self._turns_since_prune += turns
        if self._turns_since_prune >= PRUNE_SNAPSHOTS_EVERY:
            self._turns_since_prune = 0
            memory_writes.prune_snapshots(self.conn, self._snapshots_kept)

    def _tell_encoder(self, message: Any) -> None:
        """Nudge the Encoder, if one is running. One that is not (being restarted, or never
        started) misses nothing: its successor sweeps the store when it starts."""
        ref = self._directory.get("encoder")
        if ref is None:
            return
        try:
            ref.tell(message)
        except pykka.ActorDeadError:
            pass

    def _store_episodes(self, m: StoreEpisodes) -> None:
        now = self._clock.time()
        try:
            with db.immediate(self.conn):
                ids = memory_writes.insert_episodes(
                    self.conn, m.channel, m.episodes, upto_transcript_id=m.upto_transcript_id,
                    encoding_id=m.encoding_id, now=now, after_transcript_id=m.after_transcript_id)
                if ids is not None:
                    for fact in m.facts:
                        memory_writes.apply_fact(self.conn, fact, turn_id=m.fact_turn_id,
                                                 now=now)
                    if m.concepts:
                        concept_rows.store_window(self.conn, m.concepts, m.relations,
                                                  space_id=m.space_id, now=now)
                    if m.situation:
                        cognition_rows.save_summary(self.conn, m.channel, m.situation,
                                                    m.upto_transcript_id, now)
                memory_writes.insert_snapshots(self.conn, m.encoding_id, m.snapshots)
                if m.tokens:
                    background_ops.apply(self.conn, (Spend("encoder", m.tokens, m.llm_calls,
                                                           m.encoding_id),),
                                         turn_id=None, now=now)
        except Exception as e:  # the window is tried again at the next trigger
            log.error("episodes_not_stored", channel=m.channel, error=repr(e))
            self._tell_encoder(EncodeWindow(m.channel, stored=False))
            return
        if ids is None:  # a window another encoder instance stored first
            log.info("episodes_already_stored", channel=m.channel, encoding_id=m.encoding_id,
                     after_transcript_id=m.after_transcript_id)
            self._tell_encoder(EncodeWindow(m.channel, stored=True))
            return
        self._metrics.episodes.inc(len(ids))
        log.info("episodes_stored", channel=m.channel, episodes=len(ids), facts=len(m.facts),
                 upto_transcript_id=m.upto_transcript_id, encoding_id=m.encoding_id)
        self._tell_encoder(EncodeWindow(m.channel, stored=True))
        self._tell_encoder(MemoryGrew(None))

    def _store_vectors(self, m: StoreVectors) -> None:
        try:
            with db.immediate(self.conn):
                memory_writes.store_vectors(self.conn, m.space_id, m.embedder, Kind(m.kind),
                                            m.rows, upto_id=m.upto_id, now=self._clock.time())
        except Exception as e:
            log.error("vectors_not_stored", kind=Kind(m.kind).label, error=repr(e))
            self._tell_encoder(IndexBatch(more=True, error=f"the store refused them: {e!r}"))
            return
        self._tell_encoder(IndexBatch(more=m.more))

    def _drop_space(self, space_id: int) -> None:
        try:
            with db.immediate(self.conn):
                done = memory_writes.drop_space(self.conn, space_id, batch=DROP_BATCH)
        except apsw.Error as e:
            log.error("vector_space_not_dropped", space_id=space_id, error=str(e))
            return
        if done:
            log.info("vector_space_dropped", space_id=space_id)
        else:  # more to remove: after whatever else is waiting, so turns are not held up
            self.actor_ref.tell(DropSpace(space_id))

    def _auth_session(
        self, m: CreateAuthSession | RotateAuthSession | EndAuthSession,
    ) -> bool | float | None:
        with db.immediate(self.conn):
            match m:
                case CreateAuthSession():
                    auth_rows.create_session(self.conn, m.token_hash, created_at=m.created_at,
                                             expires_at=m.expires_at)
                    return True
                case RotateAuthSession():
                    return auth_rows.rotate_session(self.conn, m.old_hash, m.new_hash,
                                                    now=m.now, old_until=m.old_until)
                case EndAuthSession():
                    return auth_rows.end_session(self.conn, m.token_hash)

    def _forget(self, m: ForgetItem) -> bool:
        now = self._clock.time()
        with db.immediate(self.conn):
            if m.kind == "knowledge":
                found = memory_writes.forget_knowledge(self.conn, m.item_id, now)
            else:
                found = memory_writes.forget_episode(self.conn, m.item_id)
        if found:
            self._metrics.forgotten.labels(kind=m.kind).inc()
            log.info("memory_forgotten", kind=m.kind, item_id=m.item_id)
        return found

    def _housekeeping(self, m: PruneStep | Vacuum) -> None:
        """One retention step (at most a batch of rows) or incremental vacuum, answered."""
        try:
            with db.immediate(self.conn):
                if isinstance(m, PruneStep):
                    done = retention.prune(self.conn, m.kind, m.before, m.batch)
                else:
                    done = retention.incremental_vacuum(self.conn, m.pages)
        except Exception as e:  # nothing deleted; the Housekeeper counts it and goes on
            log.error("housekeeping_failed", step=type(m).__name__,
                      kind=getattr(m, "kind", None), error=repr(e))
            failed: Pruned | Vacuumed = (Pruned(m.kind, 0, m.batch, repr(e))
                                         if isinstance(m, PruneStep) else Vacuumed(0, repr(e)))
            self._directory.tell(m.reply_to, failed)
            return
        self._directory.tell(m.reply_to, Pruned(m.kind, done, m.batch)
                             if isinstance(m, PruneStep) else Vacuumed(done))

    def _close_open_exchange(self, channel: str) -> None:
        exchange = queries.open_exchange(self.conn, channel)
        if exchange is not None:
            log.warning("closing_interrupted_turn", channel=channel, exchange_id=exchange)
            self._write_batch([AppendFrames(channel, interrupted_frames(exchange))])


def sequenced(frames: tuple[Frame, ...], last: int) -> list[Row]:
    """Event-log rows (seq, type, exchange_id, body) for frames following seq `last`."""
    rows = []
    for seq, frame in enumerate(frames, last + 1):
        exchange = getattr(frame, "exchange_id", None)
        rows.append((seq, frame_type(frame), exchange, encode_frame(frame, seq)))
    return rows


def stamped(commit: CommitTurn, now: float) -> tuple[TurnRecord, tuple[Frame, ...]]:
    """The turn and its closing frames with the response time as of now, when it is stored:
    the person sees the answer only after this, so the time spent queued for the store counts."""
    elapsed = max(0.0, now - commit.received_at)
    frames: list[Frame] = []
    for frame in commit.frames:
        if isinstance(frame, Message | Error) and frame.metrics is not None:
            metrics = msgspec.structs.replace(frame.metrics, response_time_s=round(elapsed, 4))
            frames.append(msgspec.structs.replace(frame, metrics=metrics))
        elif isinstance(frame, Done):
            frames.append(msgspec.structs.replace(frame, duration_ms=round(elapsed * 1000)))
        else:
            frames.append(frame)
    return msgspec.structs.replace(commit.record, response_time_s=elapsed), tuple(frames)


def interrupted_frames(exchange_id: str) -> tuple[Frame, ...]:
    return (
        Error(message=INTERRUPTED, recoverable=True, exchange_id=exchange_id),
        Done(duration_ms=0, exchange_id=exchange_id),
    )


def close_interrupted_turns(conn: apsw.Connection, now: float) -> int:
    """At server start no turn is running: end every turn a crash cut off. Returns how many."""
    closed = 0
    channels = [str(c) for (c,) in conn.execute("SELECT DISTINCT channel FROM events")]
    with db.immediate(conn):
        for channel in channels:
            exchange = queries.open_exchange(conn, channel)
            if exchange is None:
                continue
            log.warning("closing_interrupted_turn", channel=channel, exchange_id=exchange)
            rows = sequenced(interrupted_frames(exchange), queries.last_seq(conn, channel))
            writes.insert_events(conn, channel, rows, now)
            closed += 1
    return closed
