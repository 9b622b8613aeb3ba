"""The lock a running server holds on its data directory.

`<data dir>/chalie.lock` is locked with flock(LOCK_EX | LOCK_NB) on a descriptor kept open for
the server's life, and holds the holder's pid. The kernel drops the lock when the process exits,
however it exits (kill -9 included), so a lock is never stale: a file nobody holds locked says
nothing. `chalie restore` and `chalie import` take the same lock, so neither can run under a
server, and a second server cannot start on a directory the first one uses.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from chalie.errors import StoreError

LOCK_FILE = "chalie.lock"


def _open(directory: Path) -> int:
    path = directory / LOCK_FILE
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise StoreError(f"cannot open the lock file {path}: {e}") from e


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as e:
        raise StoreError(f"cannot lock {LOCK_FILE}: {e}") from e
    return True


def holder(directory: Path) -> int | None:
    """The pid of the live process holding the lock on `directory`, None when nobody holds it.

    A holder whose pid cannot be read (it is still writing it) is reported as pid 0.
    """
    if not (directory / LOCK_FILE).exists():
        return None
    fd = _open(directory)
    try:
        if _try_lock(fd):
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        return _read_pid(fd) or 0
    finally:
        os.close(fd)


class DataLock:
    """The exclusive lock on one data directory; `acquire` then, at the end, `release`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock, or raise StoreError naming the process that has it."""
        if self._fd is not None:
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"cannot create data directory {self.directory}: {e}") from e
        fd = _open(self.directory)
        try:
            if not _try_lock(fd):
                pid = _read_pid(fd)
                who = f"pid {pid}" if pid else "pid unknown"
                raise StoreError(
                    f"another Chalie server ({who}) is using {self.directory}; stop it first"
                )
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        """Give the lock up (closing the descriptor drops it); harmless when not held."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass  # the lock goes with the descriptor either way
        os.close(fd)

    def __enter__(self) -> DataLock:
        self.acquire()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()
