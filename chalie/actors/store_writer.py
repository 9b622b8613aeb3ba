"""The StoreWriter: the only actor that writes, and the only way frames reach the sockets.

Each message is one IMMEDIATE transaction. Frames get their channel's next `seq` inside the
transaction that logs them and are pushed to the Outbox only after it commits, so a frame the
client saw is always in the log, and a turn's `message` frame always follows its stored rows.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import structlog

from chalie.actors.messages import (
    AppendFrames,
    CloseOpenExchange,
    CommitTurn,
    CreateAuthSession,
    Deliver,
    RepushExchange,
    SaveCheckpoint,
    TurnStored,
    TurnStoreFailed,
)
from chalie.actors.supervisor import Directory, Link, SupervisedActor
from chalie.clock import Clock
from chalie.config import StoreConfig
from chalie.frames import Done, Error, Frame, encode_frame, frame_type
from chalie.metrics import Metrics
from chalie.outbox import Outbox
from chalie.store import db, queries, writes

log = structlog.get_logger("chalie.store_writer")

PRUNE_EVERY = 100  # prune a channel's event log each time its seq crosses a multiple of this
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
    ) -> None:
        super().__init__(link)
        self._config = config
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
            case AppendFrames(channel=channel, frames=frames):
                with structlog.contextvars.bound_contextvars(channel=channel):
                    try:
                        self._commit(channel, frames)
                    except apsw.Error as e:
                        log.error("frames_not_logged", error=str(e), count=len(frames))
            case CommitTurn(record=record, frames=frames):
                with structlog.contextvars.bound_contextvars(
                    channel=record.channel, turn_id=record.id
                ):
                    self._commit_turn(message)
            case CloseOpenExchange(channel=channel):
                self._close_open_exchange(channel)
            case RepushExchange(channel=channel, exchange_id=exchange_id):
                logged = queries.exchange_events(self.conn, channel, exchange_id)
                self._outbox.push(channel, logged, again=True)
            case SaveCheckpoint():
                self._save_checkpoint(message)
            case CreateAuthSession():
                with db.immediate(self.conn):
                    self.conn.execute(
                        "INSERT INTO auth_sessions (token_hash, created_at, expires_at) "
                        "VALUES (?, ?, ?)",
                        (message.token_hash, message.created_at, message.expires_at),
                    )
                return True
            case _:
                log.warning("unexpected_message", message=type(message).__name__)
        return None

    def _commit_turn(self, message: CommitTurn) -> None:
        record = message.record
        try:
            self._commit(
                record.channel, message.frames,
                also=lambda: writes.insert_turn(self.conn, record),
                committed=lambda: log.info("turn_stored", outcome=record.outcome,
                                           tools=len(record.tool_calls)),
            )
        except apsw.Error as e:
            log.error("turn_not_stored", error=str(e))
            reply: Any = TurnStoreFailed(record.id, str(e))
        else:
            reply = TurnStored(record.id)
        self._directory.tell("sessions", Deliver(record.channel, reply))

    def _save_checkpoint(self, message: SaveCheckpoint) -> None:
        now = self._clock.time()
        try:
            with db.immediate(self.conn):
                writes.insert_checkpoint(
                    self.conn, message.channel, message.text,
                    upto_transcript_id=message.upto_transcript_id, turn_id=message.turn_id,
                    now=now,
                )
                if message.compaction is not None and message.turn_id is not None:
                    writes.insert_compaction(self.conn, message.turn_id, message.channel,
                                             message.compaction)
        except apsw.Error as e:
            log.error("checkpoint_not_stored", channel=message.channel, error=str(e))
        else:
            log.info("checkpoint_stored", channel=message.channel,
                     upto_transcript_id=message.upto_transcript_id)

    def _close_open_exchange(self, channel: str) -> None:
        exchange = queries.open_exchange(self.conn, channel)
        if exchange is not None:
            log.warning("closing_interrupted_turn", channel=channel, exchange_id=exchange)
            self._commit(channel, interrupted_frames(exchange))

    def _commit(self, channel: str, frames: tuple[Frame, ...], *,
                also: Callable[[], None] | None = None,
                committed: Callable[[], None] | None = None) -> None:
        """Log `frames` (and run `also`) in one transaction; once it has committed, run
        `committed` and push the frames."""
        seq = self._seqs.get(channel)
        if seq is None:
            seq = queries.last_seq(self.conn, channel)
        rows = sequenced(frames, seq)
        kept = self._config.events_kept
        with db.immediate(self.conn):
            if also is not None:
                also()
            writes.insert_events(self.conn, channel, rows, self._clock.time())
            if (seq + len(rows)) // PRUNE_EVERY != seq // PRUNE_EVERY:
                writes.prune_events(self.conn, channel, keep_after=seq + len(rows) - kept)
        self._seqs[channel] = seq + len(rows)
        if committed is not None:
            committed()
        for _, kind, _, _ in rows:
            self._metrics.frames.labels(type=kind).inc()
        self._outbox.push(channel, [body for _, _, _, body in rows])


def sequenced(frames: tuple[Frame, ...], last: int) -> list[tuple[int, str, str | None, str]]:
    """Event-log rows (seq, type, exchange_id, body) for frames following seq `last`."""
    rows = []
    for seq, frame in enumerate(frames, last + 1):
        exchange = getattr(frame, "exchange_id", None)
        rows.append((seq, frame_type(frame), exchange, encode_frame(frame, seq)))
    return rows


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
