"""The StoreWriter: the only actor that writes, and the only way frames reach the sockets.

Frames get their channel's next `seq` inside the IMMEDIATE transaction that logs them and are
pushed to the Outbox only after it commits, so a frame the client saw is always in the log, and
a turn's `message` frame always follows its stored rows. Frames and turns that queue up behind
each other share one transaction and one fsync (group commit); each turn sits in a savepoint
of its own, so a turn the store refuses fails alone.

Here: the actor, its dispatch, and the group commit with what follows it (pushes, replies, the
actors told). Beside it, in parts the actor composes: memory writes (episodes, vectors,
snapshots, forgetting) in `store_writer_memory`; single writes (checkpoints, housekeeping,
login sessions, other programs' rows) in `store_writer_rows`; what a store that cannot take
writes changes in `store_writer_faults`. Event-log rows are numbered by `chalie.store.event_log`.
"""

from __future__ import annotations

import contextlib
import queue
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import msgspec
import pykka
import structlog

from chalie.actors.background_messages import RunGoal, SchedulesChanged, StopGoal, ToGoal
from chalie.actors.delivery_messages import AwayQueued
from chalie.actors.encoder_messages import MemoryGrew
from chalie.actors.session_messages import Deliver
from chalie.actors.store_writer_faults import FaultWatch, Probe, refuse
from chalie.actors.store_writer_memory import MemoryWrites
from chalie.actors.store_writer_messages import (
    AppendFrames,
    ApplyOps,
    CloseOpenExchange,
    CommitTurn,
    CreatePairingKey,
    DeleteInterface,
    DeleteSubscription,
    DropSpace,
    ForgetItem,
    OpsApplied,
    PairInterface,
    PruneStep,
    PushLive,
    RepushExchange,
    SaveCheckpoint,
    SaveSnapshots,
    SaveSubscription,
    SaveWorld,
    StoreEpisodes,
    StoreVectors,
    UpdateCapabilities,
    Vacuum,
    stamped,
)
from chalie.actors.store_writer_rows import AuthWrite, RowWrites
from chalie.actors.supervisor import Directory, Link, SupervisedActor
from chalie.actors.turn_messages import TurnStored, TurnStoreFailed
from chalie.clock import Clock
from chalie.config import StoreConfig
from chalie.errors import StoreConflict
from chalie.frames import Frame
from chalie.metrics import Metrics
from chalie.outbox import Outbox
from chalie.store import background_ops, db, delivery_rows, queries, writes
from chalie.store.background_ops import Applied, Op
from chalie.store.event_log import Row, interrupted_frames, sequenced
from chalie.store.health import StoreHealth, cause_of

log = structlog.get_logger("chalie.store_writer")

# Writes that are told, not asked: when the store cannot take one, it is logged and dropped.
TOLD = (SaveWorld, SaveSnapshots, SaveCheckpoint, StoreEpisodes, StoreVectors, DropSpace)
MAX_BATCH = 256  # messages that may share one transaction
PRUNE_EVERY = 100  # prune a channel's event log each time its seq crosses a multiple of this


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
        health: StoreHealth | None = None,
        allowed: Callable[[frozenset[tuple[str, str]]], None] | None = None,
    ) -> None:
        """`allowed`: told the tools the person always allows, whenever that changes."""
        super().__init__(link)
        self._faults = FaultWatch(
            health or StoreHealth(config.path, min_free_mb=config.min_free_mb,
                                  hold_limit=config.hold_messages),
            conn=lambda: self.conn, clock=clock, metrics=metrics, directory=directory,
            probe_s=config.fault_probe_s, tell_self=self.tell_self)
        self._config = config
        self._notify_channel = notify_channel  # where goals' and schedules' frames go
        self._allowed = allowed
        self._outbox = outbox
        self._clock = clock
        self._directory = directory
        self._metrics = metrics
        self._conn: apsw.Connection | None = None
        self._seqs: dict[str, int] = {}
        self._memory = MemoryWrites(lambda: self.conn, clock=clock, metrics=metrics,
                                    nudge=self._tell_encoder, snapshots_kept=snapshots_kept,
                                    noted=self._faults.noted)
        self._rows = RowWrites(lambda: self.conn, clock=clock, noted=self._faults.noted)

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
        try:
            return self._dispatch(message)
        except Exception as e:  # a write that raised: the store's state first
            if self._faults.noted(e) is not None and isinstance(message, TOLD):
                log.warning("write_not_stored", message=type(message).__name__, error=str(e))
                return None  # nothing waits for it; the writer must not crash for a full disk
            raise  # an asker gets it (pykka); anything else is a bug the supervisor restarts

    def _dispatch(self, message: Any) -> Any:
        damaged = self._faults.refusing()
        if damaged is not None and not isinstance(
                message, AppendFrames | CommitTurn | PushLive | RepushExchange | Probe):
            return refuse(message, damaged, directory=self._directory, reply=self._reply,
                          tell_encoder=self._tell_encoder)
        match message:
            case Probe():
                self._faults.probe()
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
                self._rows.save_checkpoint(message)
            case StoreEpisodes():
                self._memory.store_episodes(message)
            case SaveSnapshots():
                self._memory.save_snapshots(message)
            case ApplyOps(ops=ops, reply_to=reply_to, tag=tag):
                result = self._apply_ops(ops, tag)
                if reply_to is not None:
                    self._reply(reply_to, None, result)
                return result
            case StoreVectors():
                self._memory.store_vectors(message)
            case DropSpace(space_id=space_id):
                if self._memory.drop_space(space_id):  # more to remove: after what is waiting
                    self.actor_ref.tell(DropSpace(space_id))
            case ForgetItem():
                return self._memory.forget(message)
            case PruneStep() | Vacuum():
                self._directory.tell(message.reply_to, self._rows.housekeeping(message))
            case _ if isinstance(message, AuthWrite):
                return self._rows.auth_session(message)
            case (SaveWorld() | CreatePairingKey() | PairInterface() | UpdateCapabilities()
                  | DeleteInterface() | SaveSubscription() | DeleteSubscription()):
                return self._rows.interface_write(message)
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
        refused: list[tuple[CommitTurn, str, bool, str | None]] = []  # why, conflict, cause
        applied: list[Applied] = []
        damaged = self._faults.refusing()
        if damaged is not None:  # not written again: refused without touching the file
            self._refused([(i, damaged, False, "damaged") for i in batch
                           if isinstance(i, CommitTurn)])
            return
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
                        # The store's own fault (full, read-only...) fails the whole batch.
                        if cause_of(e) is not None:
                            raise
                        why = str(e) if isinstance(e, apsw.Error | StoreConflict) else repr(e)
                        refused.append((item, why, isinstance(e, StoreConflict), None))
                        continue
                    stored.append((record.channel, rows, msgspec.structs.replace(
                        item, record=record)))
                    stored += [(channel, more, None) for channel, more in also]
                    applied.append(effects)
                self._prune(seqs)
                self._memory.prune_snapshots(sum(1 for _, _, t in stored if t is not None))
        except Exception as e:  # the transaction itself failed: nothing of the batch is stored
            cause = self._faults.noted(e)
            if cause is None:
                log.exception("batch_not_stored", messages=len(batch))
            else:  # the fault is logged once, when it starts (store_fault)
                log.warning("batch_not_stored", messages=len(batch), cause=cause, error=str(e))
            why = self._faults.health.words() if cause is not None else f"the store failed: {e}"
            refused = [(i, why, False, cause) for i in batch if isinstance(i, CommitTurn)]
            stored, applied = [], []
        else:
            self._seqs = seqs
            self._metrics.store_batch.observe(len(batch))
            self._faults.stored()
        self._finish_batch(stored, refused, applied)

    def _finish_batch(self, stored: list[tuple[str, list[Row], CommitTurn | None]],
                      refused: list[tuple[CommitTurn, str, bool, str | None]],
                      applied: list[Applied]) -> None:
        """After the batch's transaction: push what was stored, tell who waits."""
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
        self._refused(refused)
        for effects in applied:
            self._after(effects)
        for channel in sorted(grew):
            self._tell_encoder(MemoryGrew(channel))

    def _refused(self, refused: list[tuple[CommitTurn, str, bool, str | None]]) -> None:
        """Tell each refused turn's sender why (the store's state as `cause`, when it is that)."""
        for commit, error, conflict, cause in refused:
            record = commit.record
            (log.warning if conflict or cause else log.error)(
                "turn_not_stored", channel=record.channel, turn_id=record.id, error=error,
                cause=cause)
            self._reply(commit.reply_to, record.channel,
                        TurnStoreFailed(record.id, error, cause=cause))

    def _push(self, channel: str, rows: list[Row]) -> None:
        for _, kind, _, _ in rows:
            self._metrics.frames.labels(type=kind).inc()
        if rows:
            self._outbox.push(channel, [body for _, _, _, body in rows])
            if delivery_rows.for_away(channel, (kind for _, kind, _, _ in rows)):
                self._nudge("delivery", AwayQueued())  # it reads the queue

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
        if effects.allowed is not None and self._allowed is not None:
            self._allowed(effects.allowed)

    def _tell_encoder(self, message: Any) -> None:
        self._nudge("encoder", message)

    def _nudge(self, name: str, message: Any) -> None:
        """Nudge the Encoder or the Delivery actor, if one is running. One that is not (being
        restarted, or never started) misses nothing: its successor reads the store when it
        starts."""
        ref = self._directory.get(name)
        if ref is not None:
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(message)

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
            cause = self._faults.noted(e)  # a fault of the store is told once (store_fault)
            conflict = isinstance(e, StoreConflict)
            (log.warning if conflict or cause else log.error)(
                "ops_not_stored", ops=[type(o).__name__ for o in ops], error=repr(e))
            return OpsApplied(tag, (), str(e) if conflict else repr(e))
        self._seqs = seqs
        self._faults.stored()
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

    def _close_open_exchange(self, channel: str) -> None:
        exchange = queries.open_exchange(self.conn, channel)
        if exchange is not None:
            log.warning("closing_interrupted_turn", channel=channel, exchange_id=exchange)
            self._write_batch([AppendFrames(channel, interrupted_frames(exchange))])

