from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from chalie.store import db


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[apsw.Connection]:
    """The writer connection of a fresh, migrated store in tmp_path/data."""
    conn = db.open_writer(tmp_path / "data", busy_timeout_ms=2000, synchronous="FULL")
    yield conn
    conn.close()
