from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import apsw
import pytest

from chalie.clock import ManualClock
from chalie.store import db
from chalie.store.effects import Effect
from chalie.tools.base import ToolContext


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[apsw.Connection]:
    """The writer connection of a fresh, migrated store in tmp_path/data."""
    conn = db.open_writer(tmp_path / "data", busy_timeout_ms=2000, synchronous="FULL")
    yield conn
    conn.close()


@pytest.fixture
def context(writer: apsw.Connection, tmp_path: Path) -> Callable[..., ToolContext]:
    """Build a ToolContext on the real store (read-only connections), for a path, with this
    turn's pending effects."""
    readers = db.Readers(db.db_path(tmp_path / "data"), busy_timeout_ms=2000)

    def build(*pending: Effect, path: str = "user") -> ToolContext:
        return ToolContext(channel="main", turn_id="turn-1", read=readers.get,
                           clock=ManualClock(), pending=pending, path=path)

    return build

