"""The Housekeeper: retention, incremental vacuum and the scheduled daily backup.

Soon after start, then every `store.prune_interval_s` seconds, it walks the kinds of
chalie/store/retention.py one step at a time (what was said, with its images and checkpoints,
only when `store.transcript_days` > 0; by default it is kept): each step is a PruneStep to the
StoreWriter (at most `store.prune_batch` rows in one short transaction), whose Pruned answer
comes back here as a message; a kind is done when a step deletes fewer than a batch. Turns
queued in the writer's mailbox wait for one step at most, never for a whole run. Then it asks
for up to `store.vacuum_pages` free pages to be returned to the file system, and, when
`store.backups_kept` > 0 and the newest backup is a day old (or there is none), takes a backup
and drops the oldest beyond `store.backups_kept`.

The backup runs on this actor's own thread: it takes seconds on a big store, but nothing waits
on this actor (its mailbox holds only its own steps' answers and timers), and SQLite's online
backup copies while the writer goes on. Settings are read through `settings()` at the start of
each run, so a configuration reload applies from the next run without a restart.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import structlog

from chalie.actors.store_writer_messages import Pruned, PruneStep, Vacuum, Vacuumed
from chalie.actors.supervisor import Directory, Link, SupervisedActor
from chalie.clock import Clock, Timer
from chalie.config import StoreConfig
from chalie.metrics import Metrics
from chalie.store import backup, db, retention
from chalie.store.retention import PruneKind

log = structlog.get_logger("chalie.housekeeper")

FIRST_RUN_S = 60.0  # the first run after start: not in the middle of start-up
DAY_S = 86_400.0
BACKUP_EVERY_S = DAY_S

Backup = Callable[[Path, Path, int, float], Path]


class _Run(msgspec.Struct, frozen=True, tag=True):
    """The Housekeeper's own: time for a run."""


def backup_directory(store: StoreConfig) -> Path:
    """Where scheduled backups go: `store.backup_dir`, or <store.path>/backups when empty."""
    return Path(store.backup_dir) if store.backup_dir else Path(store.path) / "backups"


def cutoff(kind: PruneKind, store: StoreConfig, now: float) -> float | None:
    """Rows of `kind` older than this (epoch seconds) are pruned; None: every row is kept
    (what was said, with `store.transcript_days` = 0)."""
    match kind:
        case "transcript" | "images" | "checkpoints":
            return now - store.transcript_days * DAY_S if store.transcript_days > 0 else None
        case "tool_calls":
            return now - store.tool_calls_days * DAY_S
        case "events" | "dmn_runs":
            return now - store.events_days * DAY_S
        case "auth_sessions" | "pairing_keys":
            return now


class Housekeeper(SupervisedActor):
    def __init__(self, link: Link | None, *, settings: Callable[[], StoreConfig], clock: Clock,
                 directory: Directory, metrics: Metrics, first_run_s: float = FIRST_RUN_S,
                 take_backup: Backup = backup.scheduled_backup) -> None:
        super().__init__(link)
        self._settings = settings
        self._clock = clock
        self._directory = directory
        self._metrics = metrics
        self._first_run_s = first_run_s
        self._take_backup = take_backup
        self._timer: Timer | None = None
        self._store: StoreConfig | None = None  # the settings of the run in progress
        self._now = 0.0  # the wall time it started
        self._kinds: list[PruneKind] = []  # kinds still to prune, the current one first
        self._counts: dict[str, int] = {}

    def started(self) -> None:
        self._arm(self._first_run_s)

    def on_stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def on_receive(self, message: Any) -> Any:
        with structlog.contextvars.bound_contextvars(actor="housekeeper"):
            match message:
                case _Run():
                    self._start_run()
                case Pruned():
                    self._pruned(message)
                case Vacuumed():
                    self._vacuumed(message)
                case _:
                    log.warning("unexpected_message", message=type(message).__name__)

    def _arm(self, delay: float) -> None:
        self._timer = self._clock.call_later(delay, lambda: self.tell_self(_Run()))

    # -- a run --

    def _start_run(self) -> None:
        store = self._settings()
        if self._store is not None:  # an answer never came (the writer was replaced meanwhile)
            log.warning("housekeeping_abandoned", kinds_left=list(self._kinds))
        self._arm(store.prune_interval_s)
        self._store, self._now = store, self._clock.time()
        self._kinds = [k for k in retention.KINDS if cutoff(k, store, self._now) is not None]
        self._counts = {}
        self._step()

    def _step(self) -> None:
        store = self._store
        assert store is not None
        if not self._kinds:
            self._send(Vacuum(store.vacuum_pages))
            return
        kind = self._kinds[0]
        before = cutoff(kind, store, self._now)
        assert before is not None  # kinds kept whole were left out of the run
        self._send(PruneStep(kind, before, store.prune_batch))

    def _send(self, message: PruneStep | Vacuum) -> None:
        if not self._directory.tell("store_writer", message):  # logged; tried at the next run
            self._store = None

    def _pruned(self, m: Pruned) -> None:
        if self._store is None or not self._kinds or m.kind != self._kinds[0]:
            return  # the answer to an abandoned run
        if m.deleted:
            self._metrics.pruned_rows.labels(kind=m.kind).inc(m.deleted)
            self._counts[m.kind] = self._counts.get(m.kind, 0) + m.deleted
        if m.error is not None or m.deleted < m.batch:
            self._kinds.pop(0)
        self._step()

    def _vacuumed(self, m: Vacuumed) -> None:
        store = self._store
        if store is None or self._kinds:
            return
        self._store = None
        self._metrics.vacuum_pages.inc(m.pages)
        if store.backups_kept > 0:
            self._backup_if_due(store)
        db_file = db.db_path(store.path)
        size = retention.file_bytes(db_file)
        self._metrics.db_bytes.set(size)
        log.info("housekeeping_done", pruned=self._counts, vacuum_pages=m.pages, db_bytes=size)

    def _backup_if_due(self, store: StoreConfig) -> None:
        directory = backup_directory(store)
        now = self._clock.time()
        try:
            newest = backup.newest_backup(directory)
            if newest is not None and now - newest < BACKUP_EVERY_S:
                return
            made = self._take_backup(db.db_path(store.path), directory, store.backups_kept, now)
        except Exception as e:  # the next run tries again; the server goes on
            self._metrics.backups.labels(outcome="failed").inc()
            log.error("backup_failed", directory=str(directory), error=repr(e))
            return
        self._metrics.backups.labels(outcome="ok").inc()
        log.info("backup_taken", file=str(made), kept=store.backups_kept)
