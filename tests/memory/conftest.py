"""Fixtures of the memory tests on a real store: each module gives its own `config`."""

from __future__ import annotations

from collections.abc import Iterator

import apsw
import pytest

from chalie.clock import ManualClock
from chalie.config import Config
from chalie.store import db


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def writer(config: Config) -> Iterator[apsw.Connection]:
    conn = db.open_writer(config.store.path, busy_timeout_ms=2000, synchronous="FULL")
    yield conn
    conn.close()
