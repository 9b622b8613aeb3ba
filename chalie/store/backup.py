"""Backups of the store, and restoring one.

A backup is SQLite's online backup (through apsw) from a read-only connection, so it sees one
consistent snapshot (whole transactions only: whole turns) and never holds up the server's
writer. It is written to a temporary file beside its destination and renamed into place, so a
crash never leaves half a backup under the real name, and it is a standalone database in
rollback-journal mode: one file, no -wal beside it.

Scheduled backups are named `chalie-<UTC yyyymmddTHHMMSSZ>.db` in their directory; the name is
the time they were taken, which is how the newest is found and the oldest are rotated out.
"""

from __future__ import annotations

import calendar
import json
import os
import re
import time
from pathlib import Path
from urllib.parse import quote

import apsw

from chalie.errors import StoreError
from chalie.store import db
from chalie.store.lock import DataLock, holder

BUSY_TIMEOUT_MS = 5000
# Tables every Chalie store has from its first migration on; a file without them is not a store.
CHALIE_TABLES = ("turns", "transcript", "knowledge")
_SCHEDULED = re.compile(r"chalie-(\d{8}T\d{6}Z)\.db")
_STAMP = "%Y%m%dT%H%M%SZ"
SOUND_SUFFIX = ".sound"  # beside the store: its identity at the last clean stop (mark_sound)


def stamp(now: float) -> str:
    """`now` as the UTC stamp backup file names carry (yyyymmddTHHMMSSZ)."""
    return time.strftime(_STAMP, time.gmtime(now))


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _copy(source: apsw.Connection, dest: Path) -> None:
    """Copy `source` whole into `dest` (replaced, through a temporary file and a rename)."""
    tmp = dest.with_name(f".{dest.name}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        target = apsw.Connection(str(tmp))
        try:
            with target.backup("main", source, "main") as copying:
                copying.step(-1)
            # The pages copied say WAL; a backup is one standalone file instead.
            target.execute("PRAGMA journal_mode = DELETE")
        finally:
            target.close()
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        tmp.replace(dest)
        _fsync_dir(dest.parent)
    except apsw.Error as e:
        tmp.unlink(missing_ok=True)
        raise StoreError(f"cannot write the backup {dest}: {e}") from e
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise StoreError(f"cannot write the backup {dest}: {e}") from e


def backup(db_file: Path, dest: Path) -> None:
    """A consistent copy of the store at `db_file` into `dest`, safe while the server runs."""
    if not db_file.is_file():
        raise StoreError(f"no store at {db_file}")
    source = db.connect(db_file, busy_timeout_ms=BUSY_TIMEOUT_MS, readonly=True)
    try:
        _copy(source, dest)
    finally:
        source.close()


def verify(file: Path) -> int:
    """Check that `file` is a whole Chalie store this code can run; returns its schema version."""
    if not file.is_file():
        raise StoreError(f"{file}: no such file")
    try:
        conn = db.connect(file, busy_timeout_ms=BUSY_TIMEOUT_MS, readonly=True)
    except StoreError as e:
        raise StoreError(f"{file}: not a SQLite database ({e})") from e
    try:
        try:
            checks = [str(row[0]) for row in conn.execute("PRAGMA integrity_check")]
            (version,) = conn.execute("PRAGMA user_version").fetchone()  # type: ignore[misc]
            tables = {str(row[0]) for row in conn.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'table'")}
        except apsw.NotADBError as e:
            raise StoreError(f"{file}: not a SQLite database") from e
        except apsw.Error as e:
            raise StoreError(f"{file}: integrity check failed: {e}") from e
    finally:
        conn.close()
    if checks != ["ok"]:
        raise StoreError(f"{file}: integrity check failed: {'; '.join(checks[:3])}")
    latest = db.latest_version()
    if not isinstance(version, int) or version < 1:
        raise StoreError(f"{file}: not a Chalie store: schema version {version}")
    if version > latest:
        raise StoreError(f"{file}: schema version {version} is newer than this Chalie "
                         f"({latest}): upgrade Chalie first")
    for table in CHALIE_TABLES:
        if table not in tables:
            raise StoreError(f"{file}: not a Chalie store: no table {table}")
    return version


def restore(file: Path, data_dir: Path, *, now: float | None = None) -> Path | None:
    """Replace the store in `data_dir` by the backup `file`; returns where the old store is kept.

    Refused while a server runs on `data_dir`. The old store (if any) is kept beside the new one
    as `chalie.db.before-restore-<UTC stamp>`. A backup older than the code is fine: the next
    start migrates it.
    """
    pid = holder(data_dir)
    if pid is not None:
        raise StoreError(f"a Chalie server (pid {pid}) is running on {data_dir}; stop it first")
    verify(file)
    when = time.time() if now is None else now
    with DataLock(data_dir):
        current = db.db_path(data_dir)
        kept: Path | None = None
        if current.exists():
            kept = current.with_name(f"{current.name}.before-restore-{stamp(when)}")
            # Read-write (nobody else can have it now): folds in a WAL a crash left behind.
            old = db.connect(current, busy_timeout_ms=BUSY_TIMEOUT_MS)
            try:
                _copy(old, kept)
            finally:
                old.close()
        source = db.connect(file, busy_timeout_ms=BUSY_TIMEOUT_MS, readonly=True)
        try:
            staged = current.with_name(f"{current.name}.restoring")
            _copy(source, staged)
        finally:
            source.close()
        # A WAL left beside the old file must never be replayed onto the new one.
        for suffix in ("-wal", "-shm", "-journal"):
            current.with_name(current.name + suffix).unlink(missing_ok=True)
        staged.replace(current)
        _fsync_dir(data_dir)
    return kept


def _scheduled(directory: Path) -> list[tuple[str, Path]]:
    """The scheduled backups in `directory` as (stamp, path), oldest first."""
    if not directory.is_dir():
        return []
    found = []
    for path in directory.iterdir():
        match = _SCHEDULED.fullmatch(path.name)
        if match and path.is_file():
            found.append((match.group(1), path))
    return sorted(found)


def scheduled_backup(db_file: Path, directory: Path, kept: int, now: float) -> Path:
    """Write `directory/chalie-<UTC stamp>.db`, then delete the oldest beyond `kept` (at least
    the new one is kept); returns the new file."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StoreError(f"cannot create the backup directory {directory}: {e}") from e
    dest = directory / f"chalie-{stamp(now)}.db"
    backup(db_file, dest)
    backups = _scheduled(directory)
    for _, old in backups[: max(len(backups) - max(kept, 1), 0)]:
        if old != dest:
            old.unlink(missing_ok=True)
    return dest


def newest_backup(directory: Path) -> float | None:
    """When the newest scheduled backup in `directory` was taken; None when there is none."""
    backups = _scheduled(directory)
    if not backups:
        return None
    return float(calendar.timegm(time.strptime(backups[-1][0], _STAMP)))


def _identity(db_file: Path) -> dict[str, int]:
    """What changes when anything writes the file or puts another in its place."""
    st = db_file.stat()
    return {"ino": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "ctime_ns": st.st_ctime_ns}


def _sound_mark(db_file: Path) -> Path:
    return db_file.with_name(db_file.name + SOUND_SUFFIX)


def mark_sound(db_file: Path) -> bool:
    """At a clean stop, once nothing writes the store any more: fold the write-ahead log into
    the file (so the last connection to close has nothing left to write) and record the file's
    identity beside it, so that the next start need not read every page again to know that the
    file is as Chalie left it (`damage`). Whether it was recorded: not when the log could not
    be folded in whole (a reader still in a transaction)."""
    mark = _sound_mark(db_file)
    mark.unlink(missing_ok=True)
    try:
        conn = db.connect(db_file, busy_timeout_ms=BUSY_TIMEOUT_MS)
        try:
            (busy, _, _) = conn.execute(  # type: ignore[misc]
                "PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            conn.close()
        if busy:
            return False
        wal = db_file.with_name(db_file.name + "-wal")
        if wal.is_file() and wal.stat().st_size > 0:
            return False
        tmp = mark.with_name(mark.name + ".tmp")
        tmp.write_text(json.dumps(_identity(db_file)))
        tmp.replace(mark)
    except (StoreError, apsw.Error, OSError):
        return False
    return True


def _unchanged_since_clean_stop(db_file: Path) -> bool:
    mark = _sound_mark(db_file)
    try:
        recorded = json.loads(mark.read_text())
        return bool(recorded == _identity(db_file))
    except (OSError, ValueError):
        return False


def damage(db_file: Path) -> str | None:
    """What is wrong with the database file, read without writing anything (SQLite's
    quick_check: every page's structure, not the indexes' contents); None when it is sound or
    not there yet. A file that is, byte for byte as far as the file system tells (inode, size,
    modification and change times), as the last clean stop left it (`mark_sound`), with no
    write-ahead log to replay, is not read again: the check reads every page (about a minute
    for five years of heavy use, at each start). A write from outside (a stray program, a copy
    put in its place, a restore) changes what is compared; damage the file system does not see
    (a failing disk's bits) is found when SQLite reads the page, and the store then stops
    writing (chalie/store/health.py)."""
    if not db_file.is_file():
        return None
    wal = db_file.with_name(db_file.name + "-wal")
    wal_empty = not wal.is_file() or wal.stat().st_size == 0
    if wal_empty and _unchanged_since_clean_stop(db_file):
        return None
    try:
        if not wal_empty:  # pages in the WAL count: read them too
            conn = db.connect(db_file, busy_timeout_ms=BUSY_TIMEOUT_MS, readonly=True)
        else:  # immutable: not even an empty -wal or -shm file is made
            conn = apsw.Connection(f"file:{quote(str(db_file))}?immutable=1",
                                   flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    except (StoreError, apsw.Error) as e:
        return str(e.__cause__ or e)
    try:
        checks = [str(row[0]) for row in conn.execute("PRAGMA quick_check(3)")]
    except apsw.Error as e:  # NotADBError, CorruptError: unreadable before any page is checked
        return str(e)
    finally:
        conn.close()
    if checks == ["ok"]:
        return None
    found = [line.strip() for check in checks for line in check.splitlines()
             if line.strip() and not line.startswith("***")]  # "*** in database main ***"
    return "; ".join(found) or "quick_check failed"


def damage_line(db_file: Path, problem: str, backups: Path) -> str:
    """The one line `chalie serve` says before it refuses to start on a damaged database."""
    found = _scheduled(backups)
    newest = (f"the newest backup is {found[-1][1]}: stop here and run `chalie restore "
              f"{found[-1][1]}`" if found else
              f"there is no backup in {backups}: run `chalie restore FILE` with a copy of it "
              "if you have one")
    problem = " ".join(problem.split())  # one line, whatever SQLite said
    return f"the database {db_file} is damaged ({problem}); nothing was written; {newest}"
