"""Backups, their checks, restore, scheduled rotation and the data-directory lock, on real
SQLite files (and, for the lock, real processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

from chalie.errors import StoreError
from chalie.store import backup, db, memory_writes
from chalie.store.backup import newest_backup, restore, scheduled_backup, verify
from chalie.store.lock import DataLock, holder

TIMEOUT_MS = 2000
DAY = 86400.0


def open_store(directory: Path) -> apsw.Connection:
    return db.open_writer(directory, busy_timeout_ms=TIMEOUT_MS, synchronous="FULL")


def say(conn: apsw.Connection, text: str) -> None:
    with db.immediate(conn):
        memory_writes.add_transcript(conn, "main", None, role="user", text=text, at=1.0)


def said(path: Path) -> list[str]:
    conn = db.connect(path, busy_timeout_ms=TIMEOUT_MS, readonly=True)
    try:
        return [str(r[0]) for r in conn.execute("SELECT text FROM transcript ORDER BY id")]
    finally:
        conn.close()


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A data directory whose store says "one" and "two" (its writer closed)."""
    data = tmp_path / "data"
    conn = open_store(data)
    say(conn, "one")
    say(conn, "two")
    conn.close()
    return data


def test_a_backup_is_one_standalone_file_holding_the_store(store: Path, tmp_path: Path) -> None:
    """The copy is a single database file (no -wal beside it) that checks out as a store."""
    dest = tmp_path / "out" / "copy.db"
    dest.parent.mkdir()
    backup.backup(db.db_path(store), dest)
    assert sorted(p.name for p in dest.parent.iterdir()) == ["copy.db"]
    assert said(dest) == ["one", "two"]
    assert verify(dest) == db.latest_version()


def test_a_backup_while_a_write_is_open_neither_waits_for_it_nor_holds_half_of_it(
    store: Path, tmp_path: Path,
) -> None:
    """Taken while the writer is inside a transaction, the backup finishes and has what was
    committed, none of the open transaction; the writer then commits as usual."""
    writer = open_store(store)
    try:
        writer.execute("BEGIN IMMEDIATE")
        memory_writes.add_transcript(writer, "main", None, role="user", text="three", at=2.0)
        backup.backup(db.db_path(store), tmp_path / "copy.db")
        writer.execute("COMMIT")
    finally:
        writer.close()
    assert said(tmp_path / "copy.db") == ["one", "two"]
    assert said(db.db_path(store)) == ["one", "two", "three"]


def test_verify_names_what_is_wrong_with_a_file(store: Path, tmp_path: Path) -> None:
    """Not a database, a store from a newer Chalie, a database that is not a store and a
    damaged file are each refused with a line that says so."""
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database at all" * 200)
    with pytest.raises(StoreError, match=r"junk\.db: not a SQLite database"):
        verify(junk)

    newer = tmp_path / "newer.db"
    backup.backup(db.db_path(store), newer)
    conn = apsw.Connection(str(newer))
    conn.execute(f"PRAGMA user_version = {db.latest_version() + 2}")
    conn.close()
    with pytest.raises(StoreError, match=rf"schema version {db.latest_version() + 2} is newer "
                                         rf"than this Chalie \({db.latest_version()}\): "
                                         "upgrade Chalie first"):
        verify(newer)

    other = tmp_path / "other.db"
    conn = apsw.Connection(str(other))
    conn.execute("CREATE TABLE notes (text TEXT); PRAGMA user_version = 1")
    conn.close()
    with pytest.raises(StoreError, match="not a Chalie store: no table turns"):
        verify(other)

    with pytest.raises(StoreError, match=r"missing\.db: no such file"):
        verify(tmp_path / "missing.db")


def test_verify_refuses_a_damaged_store(store: Path, tmp_path: Path) -> None:
    """A store with pages overwritten fails its integrity check."""
    damaged = tmp_path / "damaged.db"
    backup.backup(db.db_path(store), damaged)
    data = bytearray(damaged.read_bytes())
    page = 4096
    for start in range(2 * page, len(data) - page, 3 * page):  # every third page past the root
        data[start + 8:start + 200] = b"\xff" * 192
    damaged.write_bytes(bytes(data))
    with pytest.raises(StoreError, match=r"damaged.db: (integrity check failed|not a SQLite)"):
        verify(damaged)


def test_restore_puts_the_backup_in_place_and_keeps_the_old_store(
    store: Path, tmp_path: Path,
) -> None:
    """After a restore the store holds the backup; what it held before is kept beside it,
    named with the time of the restore."""
    copy = tmp_path / "copy.db"
    backup.backup(db.db_path(store), copy)
    conn = open_store(store)
    say(conn, "after the backup")
    conn.close()
    kept = restore(copy, store, now=2 * DAY + 3661.0)
    assert kept == store / "chalie.db.before-restore-19700103T010101Z"
    assert said(db.db_path(store)) == ["one", "two"]
    assert said(kept) == ["one", "two", "after the backup"]
    assert not (store / "chalie.db-wal").exists()
    conn = open_store(store)  # the server's next start opens it as usual
    say(conn, "three")
    conn.close()
    assert said(db.db_path(store)) == ["one", "two", "three"]


def test_restore_into_an_empty_directory_keeps_nothing(store: Path, tmp_path: Path) -> None:
    """A restore into a new data directory has no old store to keep."""
    copy = tmp_path / "copy.db"
    backup.backup(db.db_path(store), copy)
    assert restore(copy, tmp_path / "fresh") is None
    assert said(db.db_path(tmp_path / "fresh")) == ["one", "two"]


def test_restore_is_refused_while_the_directory_is_locked(store: Path, tmp_path: Path) -> None:
    """With a server's lock on the data directory, restore names that server and touches
    nothing."""
    copy = tmp_path / "copy.db"
    backup.backup(db.db_path(store), copy)
    conn = open_store(store)
    say(conn, "three")
    conn.close()
    running = rf"server \(pid {os.getpid()}\) is running on"
    with DataLock(store), pytest.raises(StoreError, match=running):
        restore(copy, store)
    assert said(db.db_path(store)) == ["one", "two", "three"]
    assert [p.name for p in store.iterdir() if "before-restore" in p.name] == []


def test_a_bad_backup_is_refused_before_the_store_is_touched(store: Path, tmp_path: Path) -> None:
    """restore checks the file first: a junk file leaves the store as it was."""
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"\0" * 10)
    with pytest.raises(StoreError, match="not a SQLite database"):
        restore(junk, store)
    assert said(db.db_path(store)) == ["one", "two"]


def test_scheduled_backups_are_named_by_time_and_rotated(store: Path, tmp_path: Path) -> None:
    """Each scheduled backup is named by its UTC time; beyond `kept`, the oldest go."""
    directory = tmp_path / "backups"
    assert newest_backup(directory) is None
    made = [scheduled_backup(db.db_path(store), directory, 2, day * DAY) for day in (1, 2, 3)]
    assert made[0].name == "chalie-19700102T000000Z.db"
    (directory / "notes.txt").write_text("mine")
    assert sorted(p.name for p in directory.iterdir()) == [
        "chalie-19700103T000000Z.db", "chalie-19700104T000000Z.db", "notes.txt"]
    assert newest_backup(directory) == 3 * DAY
    assert said(made[2]) == ["one", "two"]


def test_the_lock_is_exclusive_and_names_its_holder(tmp_path: Path) -> None:
    """A second lock on a directory is refused with the holder's pid; once released, the
    directory is free again."""
    data = tmp_path / "data"
    assert holder(data) is None
    first = DataLock(data)
    first.acquire()
    assert holder(data) == os.getpid()
    with pytest.raises(StoreError, match=rf"another Chalie server \(pid {os.getpid()}\) "
                                         rf"is using {data}; stop it first"):
        DataLock(data).acquire()
    first.release()
    assert holder(data) is None
    with DataLock(data):
        assert holder(data) == os.getpid()


def test_the_lock_of_a_killed_process_is_free(tmp_path: Path) -> None:
    """kill -9 leaves no stale lock: the kernel drops it with the process."""
    data = tmp_path / "data"
    code = ("import sys, pathlib; from chalie.store.lock import DataLock; "
            "DataLock(pathlib.Path(sys.argv[1])).acquire(); print('held', flush=True); "
            "sys.stdin.read()")
    child = subprocess.Popen([sys.executable, "-c", code, str(data)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "held"
        assert holder(data) == child.pid
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        for stream in (child.stdin, child.stdout):
            if stream is not None:
                stream.close()
    assert holder(data) is None
    with DataLock(data):
        assert holder(data) == os.getpid()


def overwrite_middle(db_file: Path, pages: int = 3) -> None:
    """Pages in the middle of the file overwritten, as a failing disk or a stray write does."""
    size = db_file.stat().st_size
    with db_file.open("r+b") as f:
        f.seek(size // 4096 // 2 * 4096)
        f.write(b"\xa5" * 4096 * pages)


def big_store(data: Path) -> Path:
    conn = open_store(data)
    with db.immediate(conn):
        for n in range(400):
            memory_writes.add_transcript(conn, "main", None, role="user", at=1.0,
                                         text=f"line {n} about the garden and the boat " * 6)
    conn.close()
    return db.db_path(data)


def test_a_store_as_a_clean_stop_left_it_is_sound_and_found_damaged_once_written_over(
    tmp_path: Path,
) -> None:
    """After a clean stop the store is known sound without being read again; pages written
    over from outside afterwards are still found at the next start."""
    db_file = big_store(tmp_path / "data")
    assert backup.mark_sound(db_file)
    assert backup.damage(db_file) is None
    overwrite_middle(db_file)
    assert backup.damage(db_file) is not None


def test_marking_a_store_sound_folds_its_log_in_and_is_refused_while_a_reader_holds_it(
    tmp_path: Path,
) -> None:
    """The mark is taken only once every write is in the file itself; a reader still inside a
    transaction keeps the log, and then nothing is marked (the next start reads it all)."""
    data = tmp_path / "data"
    db_file = big_store(data)
    writer = open_store(data)
    reader = db.connect(db_file, busy_timeout_ms=TIMEOUT_MS, readonly=True)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM transcript").fetchall()
    say(writer, "three")
    writer.close()
    assert not backup.mark_sound(db_file)
    assert not db_file.with_name("chalie.db.sound").exists()
    reader.execute("COMMIT")
    assert backup.mark_sound(db_file)
    wal = db_file.with_name("chalie.db-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    assert said(db_file)[-1] == "three"
    reader.close()
    assert backup.damage(db_file) is None
