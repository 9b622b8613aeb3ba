"""Connections and migrations.

Every connection loads sqlite-vec and runs in WAL mode. The writer connection (one, owned by
the StoreWriter actor) begins transactions IMMEDIATE; readers are one per thread and read-only.
Migrations are the numbered files in migrations/, applied in order, keyed on PRAGMA user_version.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

import apsw
import sqlite_vec

from chalie.errors import StoreError
from chalie.store import retention

DB_FILE = "chalie.db"


def _load_vec(conn: apsw.Connection) -> None:
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.enable_load_extension(False)


def _casefold(*values: apsw.SQLiteValue) -> apsw.SQLiteValue:
    (value,) = values
    return value.casefold() if isinstance(value, str) else value


# A read-only connection's page cache, in KiB. Every worker thread keeps a connection of its own
# (Readers), and at SQLite's default of 2 MiB each the server grew by 50 MiB over its first
# 600 turns, as the caches filled; the pages they hold are in the system's file cache anyway.
READER_CACHE_KIB = 512


def db_path(data_dir: str | Path) -> Path:
    return Path(data_dir) / DB_FILE


def connect(
    path: Path, *, busy_timeout_ms: int, synchronous: str = "FULL", readonly: bool = False
) -> apsw.Connection:
    """Open one connection with sqlite-vec loaded, WAL, foreign keys and a busy timeout."""
    flags = apsw.SQLITE_OPEN_READONLY if readonly else (
        apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    )
    try:
        conn = apsw.Connection(str(path), flags=flags)
        _load_vec(conn)
        conn.set_busy_timeout(busy_timeout_ms)
        # SQLite's lower() and LIKE fold ASCII only; casefold() is Python's full Unicode folding.
        conn.create_scalar_function("casefold", _casefold, 1, deterministic=True)
        if not readonly:
            conn.execute("PRAGMA journal_mode = WAL")
        else:
            conn.execute(f"PRAGMA cache_size = -{READER_CACHE_KIB}")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
    except apsw.Error as e:
        raise StoreError(f"cannot open {path}: {e}") from e
    return conn


def _migrations() -> list[tuple[int, str, str]]:
    found = []
    for entry in resources.files("chalie.store").joinpath("migrations").iterdir():
        name = entry.name
        if name.endswith(".sql"):
            found.append((int(name.split("_", 1)[0]), name, entry.read_text(encoding="utf-8")))
    return sorted(found)


def latest_version() -> int:
    """The schema version this code migrates a store to."""
    return _migrations()[-1][0]


def schema_version(conn: apsw.Connection) -> int:
    """The store's schema version; StoreError when it is newer than this code understands (a
    newer Chalie wrote it), before anything is written to it."""
    (version,) = conn.execute("PRAGMA user_version").fetchone()  # type: ignore[misc]
    latest = latest_version()
    if int(version) > latest:
        raise StoreError(
            f"{conn.filename} has schema version {version}, newer than this Chalie understands "
            f"({latest}): it was written by a newer Chalie; run that version, or restore a "
            "backup made by this one")
    return int(version)


def migrate(conn: apsw.Connection, upto: int | None = None) -> int:
    """Apply the migrations the database has not seen (those numbered up to `upto`, when
    given); returns the resulting version."""
    from chalie.values.keys import normalise_key  # noqa: PLC0415  (pure; only migrations use it)

    version = schema_version(conn)

    def chalie_key(*values: apsw.SQLiteValue) -> apsw.SQLiteValue:
        (value,) = values
        return normalise_key(value) if isinstance(value, str) else value

    conn.create_scalar_function("chalie_key", chalie_key, 1, deterministic=True)
    # As SQLite advises for migrations that rebuild a table: foreign keys off (it cannot be
    # changed inside a transaction), then checked before each migration commits.
    conn.execute("PRAGMA foreign_keys = OFF")
    try:
        for number, name, sql in _migrations():
            if number <= version or (upto is not None and number > upto):
                continue
            try:
                with conn:
                    conn.execute(sql)
                    if (step := _PYTHON_STEPS.get(number)) is not None:
                        step(conn)
                    broken = conn.execute("PRAGMA foreign_key_check").fetchall()
                    if broken:
                        raise StoreError(f"migration {name} left broken foreign keys: "
                                         f"{broken[:5]}")
                    conn.execute(f"PRAGMA user_version = {number}")
            except apsw.Error as e:
                raise StoreError(f"migration {name} failed: {e}") from e
            version = number
    finally:
        conn.execute("PRAGMA foreign_keys = ON")
    return int(version)


def _drop_bit_indexes(conn: apsw.Connection) -> None:
    """Migration 0014: the sqlite-vec bit indexes of every vector space go (their shadow
    tables with them)."""
    names = [str(r[0]) for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name GLOB 'vec_index_[0-9]*' "
        "AND sql LIKE 'CREATE VIRTUAL TABLE%'")]
    for name in names:
        conn.execute(f'DROP TABLE "{name}"')


# What a migration needs beyond SQL, run in its transaction after its SQL.
_PYTHON_STEPS: dict[int, Callable[[apsw.Connection], None]] = {14: _drop_bit_indexes}


def open_writer(data_dir: str | Path, *, busy_timeout_ms: int, synchronous: str) -> apsw.Connection:
    """Create the data directory and database if needed, migrate, and return the writer."""
    directory = Path(data_dir)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StoreError(f"cannot create data directory {directory}: {e}") from e
    conn = connect(db_path(directory), busy_timeout_ms=busy_timeout_ms, synchronous=synchronous)
    try:
        schema_version(conn)  # a newer Chalie's store is refused before anything writes to it
        # Before the first table of a new store; an older store is converted once (VACUUM).
        retention.ensure_incremental(conn, db_path(directory))
    except StoreError:
        conn.close()
        raise
    migrate(conn)
    return conn


class Readers:
    """Read-only connections, one per thread, opened on first use."""

    def __init__(self, path: Path, *, busy_timeout_ms: int) -> None:
        self._path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()

    def get(self) -> apsw.Connection:
        conn: apsw.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self._path, busy_timeout_ms=self._busy_timeout_ms, readonly=True)
            self._local.conn = conn
        return conn

    @contextmanager
    def transient(self) -> Iterator[apsw.Connection]:
        """A read-only connection of its own, closed after use (about 0.4 ms): for a thread
        that reads once, such as a Session starting, which would otherwise keep a connection
        with its schema and page cache for its whole life (a thousand Sessions, a thousand
        connections)."""
        conn = connect(self._path, busy_timeout_ms=self._busy_timeout_ms, readonly=True)
        try:
            yield conn
        finally:
            conn.close()



@contextmanager
def immediate(conn: apsw.Connection) -> Iterator[apsw.Connection]:
    """One write transaction, taking the write lock up front (BEGIN IMMEDIATE)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
