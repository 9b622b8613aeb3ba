"""StoreHealth: what a failed write means for the store, in words, and the room for messages
kept while it cannot take writes."""

from __future__ import annotations

import errno
from pathlib import Path

import apsw
import pytest

from chalie.store.health import StoreHealth, cause_of


@pytest.mark.parametrize(("error", "system_errno", "free", "cause"), [
    (apsw.FullError("database or disk is full"), None, None, "full"),
    (apsw.ReadOnlyError("attempt to write a readonly database"), None, None, "read_only"),
    (apsw.CorruptError("database disk image is malformed"), None, None, "damaged"),
    (apsw.NotADBError("file is not a database"), None, None, "damaged"),
    (apsw.IOError("disk I/O error"), errno.ENOSPC, None, "full"),
    (apsw.IOError("disk I/O error"), errno.EROFS, None, "read_only"),
    (apsw.IOError("disk I/O error"), errno.EPERM, None, "read_only"),
    (apsw.IOError("disk I/O error"), errno.EIO, None, "io_error"),
    (apsw.IOError("disk I/O error"), None, 1000, "full"),
    (apsw.IOError("disk I/O error"), None, 10 * 2**20, "io_error"),
    (OSError(errno.ENOSPC, "No space left on device"), None, None, "full"),
    (apsw.ConstraintError("UNIQUE constraint failed"), None, None, None),
    (ValueError("a bug"), None, None, None),
])
def test_a_failed_write_is_classed_by_what_a_person_can_do(
    error: BaseException, system_errno: int | None, free: int | None, cause: str | None
) -> None:
    assert cause_of(error, system_errno=system_errno, free_bytes=free) == cause


def test_a_fault_starts_once_changes_cause_and_ends_on_a_stored_write(tmp_path: Path) -> None:
    health = StoreHealth(tmp_path, min_free_mb=1, hold_limit=2)
    assert health.writable
    assert health.failed("full", "database or disk is full", now=10.0)
    assert not health.failed("full", "again", now=11.0)  # the same fault: told once
    assert health.failed("io_error", "disk I/O error", now=12.0)  # another cause
    fault = health.fault
    assert fault is not None
    assert (fault.state, fault.since) == ("io_error", 10.0)  # since the first failure
    assert health.describe()["state"] == "io_error"
    assert str(tmp_path) in health.words()
    assert health.recovered() == fault
    assert health.writable
    assert health.describe()["state"] == "ok"


def test_a_damaged_store_stays_damaged_and_does_not_recover_by_itself(tmp_path: Path) -> None:
    health = StoreHealth(tmp_path, min_free_mb=1, hold_limit=2)
    health.failed("damaged", "database disk image is malformed", now=1.0)
    assert not health.failed("full", "database or disk is full", now=2.0)
    assert not health.recoverable()
    assert "chalie restore" in health.words()


def test_messages_are_kept_up_to_the_limit_in_all_channels(tmp_path: Path) -> None:
    health = StoreHealth(tmp_path, min_free_mb=1, hold_limit=2)
    assert health.hold()
    assert health.hold()
    assert not health.hold()
    health.release(1)
    assert health.held == 1
    assert health.hold()
    health.release(5)
    assert health.held == 0


def test_free_space_under_min_free_mb_is_low(tmp_path: Path) -> None:
    assert not StoreHealth(tmp_path, min_free_mb=0, hold_limit=1).space_low()
    low = StoreHealth(tmp_path, min_free_mb=1e12, hold_limit=1)
    assert low.space_low()
    assert low.describe()["space_low"] is True
    assert low.describe()["free_mb"] > 0
