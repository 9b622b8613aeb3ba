"""Whether the store takes writes, and why not: what the StoreWriter learns from a failed write
and tells everyone else (/health, /metrics, the Sessions holding messages, the background paths
pausing). Thread-safe: the writer sets it, the edge, the sessions and the governor read it.

A write fails for a cause a person can act on, or for a reason of its own:
  full       the file system holding the data directory has no room (SQLITE_FULL, ENOSPC);
  read_only  it is mounted read-only, or the files cannot be written (SQLITE_READONLY, EROFS);
  damaged    the database file is corrupt (SQLITE_CORRUPT, SQLITE_NOTADB): nothing is written
             again until the server is restarted on a restored file;
  io_error   the disk failed the write otherwise (SQLITE_IOERR, EIO).
Anything else (a conflict, a constraint, a bug) is not the store's state: that one write fails
alone, as before. full, read_only and io_error come back by themselves: the writer tries a
small real write every store.fault_probe_s and the state is `ok` again once one is stored.
"""

from __future__ import annotations

import errno
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import apsw

State = Literal["ok", "full", "read_only", "damaged", "io_error"]
MIB = 1024 * 1024

_ERRNOS: dict[int, State] = {errno.ENOSPC: "full", errno.EDQUOT: "full", errno.EROFS: "read_only",
                             errno.EACCES: "read_only", errno.EPERM: "read_only",
                             errno.EIO: "io_error"}


def cause_of(error: BaseException, *, system_errno: int | None = None,
             free_bytes: int | None = None) -> State | None:
    """The store's state a failed write puts it in; None when the failure is not the store's
    (that write fails alone). SQLite reports a write the operating system refused as an I/O
    error whatever the reason: `system_errno` (the connection's, apsw's system_errno) tells a
    full disk (ENOSPC), a read-only file system or file (EROFS, EPERM, EACCES) and a failing
    disk (EIO) apart, and `free_bytes` (where the store lives) a full disk when it is unknown."""
    if isinstance(error, apsw.FullError):
        return "full"
    if isinstance(error, apsw.ReadOnlyError):
        return "read_only"
    if isinstance(error, apsw.CorruptError | apsw.NotADBError):
        return "damaged"
    if isinstance(error, apsw.IOError | apsw.CantOpenError):
        if system_errno in _ERRNOS:
            return _ERRNOS[system_errno]
        if free_bytes is not None and free_bytes < MIB:
            return "full"
        return "io_error"
    if isinstance(error, OSError) and error.errno in _ERRNOS:
        return _ERRNOS[error.errno]
    return None


@dataclass(frozen=True)
class Fault:
    state: State
    error: str
    since: float  # wall-clock time of the first failure of this run of them


class StoreHealth:
    """The store's state (one writer sets it) and the messages held until it takes writes."""

    def __init__(self, data_dir: str | Path, *, min_free_mb: float, hold_limit: int) -> None:
        self.data_dir = Path(data_dir)
        self.min_free_mb = min_free_mb
        self.hold_limit = hold_limit
        self._lock = threading.Lock()
        self._fault: Fault | None = None
        self._held = 0

    # -- the writer's side --

    def failed(self, state: State, error: str, now: float) -> bool:
        """A write failed for `state`; True when this starts a fault (or changes its cause).
        A damaged store stays damaged."""
        with self._lock:
            old = self._fault
            if old is not None and old.state in ("damaged", state):
                return False
            self._fault = Fault(state, error, old.since if old is not None else now)
            return True

    def recovered(self) -> Fault | None:
        """A write was stored: the fault (if any) is over; returns it."""
        with self._lock:
            old, self._fault = self._fault, None
            return old

    # -- everyone's --

    @property
    def fault(self) -> Fault | None:
        with self._lock:
            return self._fault

    @property
    def writable(self) -> bool:
        return self.fault is None

    def free_bytes(self) -> int | None:
        """Free space (for an unprivileged process) on the file system of the data directory."""
        try:
            st = os.statvfs(self.data_dir)
        except OSError:
            return None
        return st.f_bavail * st.f_frsize

    def space_low(self) -> bool:
        free = self.free_bytes()
        return free is not None and free < self.min_free_mb * MIB

    def words(self, fault: Fault | None = None) -> str:
        """The fault in words a person can act on ("" when the store takes writes)."""
        fault = fault or self.fault
        if fault is None:
            return ""
        where = str(self.data_dir)
        return {
            "full": f"the disk holding {where} is full; free some space",
            "read_only": f"the store in {where} cannot be written (read-only file system or "
                         "permissions); make it writable",
            "damaged": f"the database in {where} is damaged ({fault.error}); stop the server "
                       "and restore a backup with `chalie restore`",
            "io_error": f"the disk holding {where} failed a write ({fault.error}); check the "
                        "disk",
        }[fault.state]

    def recoverable(self) -> bool:
        """Whether the fault can end by itself (a damaged file needs a restore and a restart)."""
        fault = self.fault
        return fault is not None and fault.state != "damaged"

    # -- messages held while the store cannot write --

    def hold(self) -> bool:
        """Room for one more held message (store.hold_messages in all channels together)."""
        with self._lock:
            if self._held >= self.hold_limit:
                return False
            self._held += 1
            return True

    def release(self, count: int = 1) -> None:
        with self._lock:
            self._held = max(0, self._held - count)

    @property
    def held(self) -> int:
        with self._lock:
            return self._held

    def describe(self) -> dict[str, Any]:
        """What /health says of the store."""
        fault = self.fault
        free = self.free_bytes()
        return {
            "state": fault.state if fault else "ok",
            "error": fault.error if fault else None,
            "message": self.words(fault) or None,
            "since": fault.since if fault else None,
            "free_mb": None if free is None else round(free / MIB, 1),
            "free_bytes": free,
            "min_free_mb": self.min_free_mb,
            "space_low": free is not None and free < self.min_free_mb * MIB,
            "held_messages": self.held,
        }
