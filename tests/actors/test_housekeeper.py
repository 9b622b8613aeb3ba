"""The Housekeeper on a real StoreWriter and store, moved by a ManualClock: retention steps on
schedule, counted in metrics, then the daily backup, rotated; a failing backup changes
nothing else."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw
import pykka
import pytest

from chalie.actors.housekeeper import FIRST_RUN_S, Housekeeper
from chalie.actors.store_writer import StoreWriter
from chalie.actors.supervisor import ChildSpec, Directory, Link, Supervisor
from chalie.config import Config, StoreConfig
from chalie.metrics import Metrics
from chalie.store import db, writes
from tests.actors.conftest import WAIT_S, FakeOutbox, WatchedClock, query
from tests.store.test_retention import DAY, OLD, cover, turn

INTERVAL_S = DAY / 2  # two runs a day: a backup is due every other run


class House:
    """A root Supervisor with the StoreWriter and the Housekeeper under it."""

    def __init__(self, config: Config, clock: WatchedClock, metrics: Metrics,
                 logs: list[logging.LogRecord]) -> None:
        self.config = config
        self.store = config.store  # what the Housekeeper reads at each run
        self.clock = clock
        self.metrics = metrics
        self._logs = logs

    def metric(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0

    def runs(self) -> int:
        return sum(1 for r in list(self._logs)
                   if isinstance(r.msg, dict) and r.msg.get("event") == "housekeeping_done")

    def run(self, after_s: float) -> None:
        """Move the clock `after_s` on, to the next run, and wait until that run is done."""
        done = self.runs()
        self.clock.advance(after_s)
        deadline = time.monotonic() + WAIT_S
        while self.runs() <= done:
            if time.monotonic() > deadline:
                pytest.fail(f"no housekeeping run finished within {WAIT_S}s")
            time.sleep(0.002)

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        return query(Path(self.config.store.path), sql)

    def backups(self) -> list[str]:
        directory = Path(self.config.store.path) / "backups"
        return sorted(p.name for p in directory.glob("chalie-*.db"))


@pytest.fixture
def house(make_config: Any, clock: WatchedClock,
          log_records: list[logging.LogRecord]) -> Iterator[Callable[..., House]]:
    roots: list[pykka.ActorRef[Any]] = []

    def start(seed: Callable[[apsw.Connection], None] | None = None, **store: Any) -> House:
        config = make_config(store={"prune_interval_s": INTERVAL_S, **store},
                             supervisor={"backoff_initial_s": 1.0, "backoff_max_s": 8.0})
        conn = db.open_writer(config.store.path, busy_timeout_ms=5000, synchronous="FULL")
        try:
            if seed is not None:
                seed(conn)
        finally:
            conn.close()
        metrics, directory = Metrics(), Directory()
        built = House(config, clock, metrics, log_records)

        def start_writer(link: Link) -> pykka.ActorRef[Any]:
            return StoreWriter.start(link, config=config.store, outbox=FakeOutbox(), clock=clock,
                                     directory=directory, metrics=metrics)

        def start_housekeeper(link: Link) -> pykka.ActorRef[Any]:
            return Housekeeper.start(link, settings=lambda: built.store, clock=clock,
                                     directory=directory, metrics=metrics)

        root = Supervisor.start(None, name="root", config=config.supervisor, clock=clock,
                                directory=directory, metrics=metrics, children=(
                                    ChildSpec("store_writer", start_writer),
                                    ChildSpec("housekeeper", start_housekeeper)))
        roots.append(root)
        clock.wait_for_timers()  # the first run is armed
        # Answers find the Housekeeper by name: wait until its supervisor has published it.
        deadline = time.monotonic() + WAIT_S
        while directory.get("housekeeper") is None:
            assert time.monotonic() < deadline, "the housekeeper was never published"
            time.sleep(0.001)
        return built

    yield start
    for root in roots:
        try:
            root.stop(block=True, timeout=WAIT_S)
        except pykka.ActorDeadError:
            pass


def old_conversation(conn: apsw.Connection) -> None:
    """Nine old turns an episode covers (18 messages), each with a tool call, one recent
    turn, and an expired login session."""
    for n in range(9):
        turn(conn, f"old-{n}", f"message {n}", f"answer {n}", at=OLD + n, tools=1)
    turn(conn, "recent", "still here", "yes", at=1_700_000_000.0)
    cover(conn, upto=20)
    with db.immediate(conn):
        conn.execute("INSERT INTO auth_sessions (token_hash, created_at, expires_at) "
                     "VALUES ('expired', 1.0, 2.0)")


def test_retention_runs_soon_after_start_in_batches_and_is_counted(
        house: Callable[..., House]) -> None:
    """A minute after start, old covered messages, old tool calls and expired sessions are
    gone (in steps of prune_batch rows), counted by kind, and the store's size is reported."""
    h = house(old_conversation, prune_batch=4, transcript_days=90.0)

    h.run(FIRST_RUN_S)

    assert h.rows("SELECT text FROM transcript ORDER BY id") == [("still here",), ("yes",)]
    assert h.rows("SELECT turn_id FROM tool_calls") == []
    assert h.rows("SELECT count(*) FROM auth_sessions") == [(0,)]
    assert h.metric("chalie_pruned_rows_total", kind="transcript") == 18
    assert h.metric("chalie_pruned_rows_total", kind="tool_calls") == 9
    assert h.metric("chalie_pruned_rows_total", kind="auth_sessions") == 1
    assert h.metric("chalie_db_bytes") > 0
    assert h.backups() == []  # backups_kept = 0: none


def test_what_was_said_is_kept_by_default(house: Callable[..., House]) -> None:
    """With the shipped transcript_days (0), years-old messages that episodes cover stay, with
    the images sent and the checkpoints; old tool calls and expired sessions still go."""
    def with_images_and_checkpoints(conn: apsw.Connection) -> None:
        old_conversation(conn)
        with db.immediate(conn):
            conn.execute("INSERT INTO images (id, media_type, size, data, created_at) "
                         "VALUES ('photo', 'image/png', 1, x'00', ?)", (OLD,))
            for n in range(2):
                writes.insert_checkpoint(conn, "main", f"state {n}", upto_transcript_id=n,
                                         turn_id=None, now=OLD + n)

    h = house(with_images_and_checkpoints)
    assert h.store.transcript_days == 0

    h.run(FIRST_RUN_S)

    assert h.rows("SELECT count(*) FROM transcript") == [(20,)]
    assert h.rows("SELECT id FROM images") == [("photo",)]
    assert h.rows("SELECT text FROM checkpoints ORDER BY id") == [("state 0",), ("state 1",)]
    assert h.rows("SELECT count(*) FROM turns WHERE user_text = ''") == [(0,)]
    assert h.metric("chalie_pruned_rows_total", kind="transcript") == 0
    assert h.metric("chalie_pruned_rows_total", kind="tool_calls") == 9
    assert h.metric("chalie_pruned_rows_total", kind="auth_sessions") == 1


def test_each_run_reads_the_settings_anew(house: Callable[..., House]) -> None:
    """A run after the settings changed (a reload) prunes by the new limits, with no restart."""
    h = house(old_conversation, transcript_days=1000.0, tool_calls_days=1000.0)
    h.run(FIRST_RUN_S)
    assert h.metric("chalie_pruned_rows_total", kind="transcript") == 0

    h.store = StoreConfig(**{**{f: getattr(h.store, f) for f in h.store.__struct_fields__},
                             "transcript_days": 90.0})
    h.run(INTERVAL_S)

    assert h.metric("chalie_pruned_rows_total", kind="transcript") == 18
    assert h.metric("chalie_pruned_rows_total", kind="tool_calls") == 0


def test_vacuum_returns_free_pages_after_pruning(house: Callable[..., House]) -> None:
    """The pages old images took are returned to the file system, and counted."""
    def images(conn: apsw.Connection) -> None:
        with db.immediate(conn):
            conn.executemany("INSERT INTO images (id, media_type, size, data, created_at) "
                             "VALUES (?, 'image/png', 40000, ?, ?)",
                             [(f"i{n}", b"\x89" * 40_000, OLD) for n in range(20)])

    h = house(images, transcript_days=90.0)
    h.run(FIRST_RUN_S)

    assert h.metric("chalie_pruned_rows_total", kind="images") == 20
    assert h.metric("chalie_vacuum_pages_total") > 150  # 20 images of 40 KB, 4 KB pages


def test_backups_are_taken_daily_and_rotated(house: Callable[..., House]) -> None:
    """With backups_kept = 2, the first run takes a backup, the next one (half a day later)
    none, the one a day after the first another; the third day's leaves the newest two."""
    h = house(old_conversation, backups_kept=2, transcript_days=90.0)

    h.run(FIRST_RUN_S)
    assert len(h.backups()) == 1
    h.run(INTERVAL_S)
    assert len(h.backups()) == 1
    h.run(INTERVAL_S)
    second = h.backups()
    assert len(second) == 2
    h.run(INTERVAL_S)
    h.run(INTERVAL_S)

    third = h.backups()
    assert len(third) == 2
    assert third[0] == second[1]
    assert third[1] > second[1]
    assert h.metric("chalie_backups_total", outcome="ok") == 3
    assert h.metric("chalie_backups_total", outcome="failed") == 0
    newest = Path(h.config.store.path) / "backups" / third[1]
    assert query_file(newest, "SELECT text FROM transcript") == [("still here",), ("yes",)]


@pytest.mark.allow_error_logs
def test_a_failing_backup_is_counted_and_the_next_run_still_happens(
        house: Callable[..., House], tmp_path: Path) -> None:
    """A backup that cannot be written is counted as failed; retention went on, and the next
    run happens (and tries the backup again)."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the backup directory should be")
    h = house(old_conversation, backups_kept=2, backup_dir=str(blocker / "backups"),
              transcript_days=90.0)

    h.run(FIRST_RUN_S)
    assert h.metric("chalie_backups_total", outcome="failed") == 1
    assert h.metric("chalie_pruned_rows_total", kind="transcript") == 18
    h.run(INTERVAL_S)

    assert h.metric("chalie_backups_total", outcome="failed") == 2
    assert h.metric("chalie_backups_total", outcome="ok") == 0


def query_file(path: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = db.connect(path, busy_timeout_ms=5000, readonly=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()
