"""What the StoreWriter does when the store cannot take writes (chalie/store/health.py says why).

A failed write is classed: a fault of the store (full, read-only, damaged, an I/O error) sets
the shared StoreHealth, counts on chalie_store_write_failures_total{cause} and is logged once
when it starts; anything else fails alone, as before. While a recoverable fault lasts, a small
real write (the store_probe row) is tried every store.fault_probe_s: once one is stored, or any
other write is, the store is `ok` again, it is logged, and the Sessions are told (StoreWritable)
so that the messages they hold are stored and answered. A damaged database is not written again
(no probe): every write is refused at once without touching the file, until a restart on a
restored file.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import apsw
import msgspec
import pykka
import structlog

from chalie.actors.encoder_messages import EncodeWindow, IndexBatch
from chalie.actors.session_messages import StoreWritable
from chalie.actors.store_writer_messages import (
    ApplyOps,
    CloseOpenExchange,
    DropSpace,
    OpsApplied,
    Pruned,
    PruneStep,
    SaveCheckpoint,
    SaveSnapshots,
    SaveWorld,
    StoreEpisodes,
    StoreVectors,
    Vacuum,
    Vacuumed,
)
from chalie.actors.supervisor import Directory
from chalie.clock import Clock, Timer
from chalie.errors import StoreError
from chalie.metrics import Metrics
from chalie.store import db
from chalie.store.health import State, StoreHealth, cause_of

log = structlog.get_logger("chalie.store_writer")

SPACE_CHECK_S = 10.0  # free space is looked at after a write at most this often


class Probe(msgspec.Struct, frozen=True):
    """The writer's timer: try the store again."""


class FaultWatch:
    def __init__(self, health: StoreHealth, *, conn: Callable[[], apsw.Connection],
                 clock: Clock, metrics: Metrics, directory: Directory, probe_s: float,
                 tell_self: Callable[[Any], None]) -> None:
        self.health = health
        self._conn = conn
        self._clock = clock
        self._metrics = metrics
        self._directory = directory
        self._probe_s = probe_s
        self._tell_self = tell_self
        self._timer: Timer | None = None
        self._next_space_check = 0.0  # monotonic
        self._space_low = False

    def noted(self, error: BaseException) -> State | None:
        """A write failed with `error`: the store's state it means (None: not the store's)."""
        cause = cause_of(error, system_errno=self._system_errno(),
                         free_bytes=self.health.free_bytes())
        if cause is None:
            return None
        self._metrics.store_write_failures.labels(cause=cause).inc()
        if self.health.failed(cause, str(error) or type(error).__name__, self._clock.time()):
            log.error("store_fault", state=cause, error=str(error),
                      message=self.health.words(), data_dir=str(self.health.data_dir))
        if cause != "damaged":
            self._probe_later()
        return cause

    def _system_errno(self) -> int | None:
        """The operating system's error behind the connection's last I/O error, if any."""
        try:
            return self._conn().system_errno or None
        except Exception:  # no connection (not started, or closed): nothing to tell
            return None

    def refusing(self) -> str | None:
        """Why a write is refused without being tried (a damaged database), else None."""
        fault = self.health.fault
        return self.health.words(fault) if fault is not None and fault.state == "damaged" \
            else None

    def stored(self) -> None:
        """A write was stored: a fault, if one was on, is over. Now and then, the free space."""
        now = self._clock.monotonic()
        if now >= self._next_space_check:
            self._next_space_check = now + SPACE_CHECK_S
            self._check_space()
        if self.health.fault is None:
            return
        fault = self.health.recovered()
        if fault is None:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        log.info("store_writable_again", was=fault.state,
                 after_s=round(self._clock.time() - fault.since, 1),
                 held_messages=self.health.held)
        self._directory.tell("sessions", StoreWritable())

    def _check_space(self) -> None:
        """Warn once when free space falls under store.min_free_mb, and say when it is back."""
        low, free = self.health.space_low(), self.health.free_bytes()
        if low == self._space_low:
            return
        self._space_low = low
        mib = None if free is None else round(free / 2**20, 1)
        if low:
            log.warning("store_space_low", free_mb=mib, min_free_mb=self.health.min_free_mb,
                        data_dir=str(self.health.data_dir))
        else:
            log.info("store_space_ok", free_mb=mib, min_free_mb=self.health.min_free_mb)

    def probe(self) -> None:
        """The timer's try: one small real write."""
        self._timer = None
        if not self.health.recoverable():
            return
        conn = self._conn()
        try:
            with db.immediate(conn):
                conn.execute("INSERT INTO store_probe (id, at) VALUES (1, ?) "
                             "ON CONFLICT (id) DO UPDATE SET at = excluded.at",
                             (self._clock.time(),))
        except Exception as e:  # still faulted (or faulted otherwise): try again later
            if self.noted(e) is None:
                log.warning("store_probe_failed", error=repr(e))
                self._probe_later()
            return
        self.stored()

    def _probe_later(self) -> None:
        if self._timer is None:
            self._timer = self._clock.call_later(self._probe_s, lambda: self._tell(Probe()))

    def _tell(self, message: Any) -> None:
        try:
            self._tell_self(message)
        except pykka.ActorDeadError:
            pass


def refuse(message: Any, why: str, *, directory: Directory,
           reply: Callable[[str, str | None, Any], None],
           tell_encoder: Callable[[Any], None]) -> Any:
    """A write to a damaged database, refused without touching the file; whoever waits for it
    is told as when a write fails (an asker gets StoreError)."""
    log.warning("write_refused", message=type(message).__name__, error=why)
    match message:
        case ApplyOps(reply_to=reply_to, tag=tag):
            result = OpsApplied(tag, (), why)
            if reply_to is not None:
                reply(reply_to, None, result)
            return result
        case PruneStep(kind=kind, batch=batch, reply_to=reply_to):
            directory.tell(reply_to, Pruned(kind, 0, batch, why))
        case Vacuum(reply_to=reply_to):
            directory.tell(reply_to, Vacuumed(0, why))
        case StoreEpisodes(channel=channel):
            tell_encoder(EncodeWindow(channel, stored=False))
        case StoreVectors():
            tell_encoder(IndexBatch(more=True, error=why))
        case SaveCheckpoint() | SaveSnapshots() | SaveWorld() | DropSpace() | CloseOpenExchange():
            pass  # told, not asked: nothing waits for them
        case _:  # asked: the asker gets the error
            raise StoreError(why)
    return None
