"""Fixtures of the store's tests: a data directory and the writer connection on its store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from chalie.store import db

TIMEOUT_MS = 2000


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def writer(data_dir: Path) -> Iterator[apsw.Connection]:
    """The store's writer connection (migrated), closed after the test."""
    conn = db.open_writer(data_dir, busy_timeout_ms=TIMEOUT_MS, synchronous="FULL")
    yield conn
    conn.close()
