"""Helpers for tests of the background paths on the in-process tree and a ManualClock."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from chalie.actors.store_writer_messages import ApplyOps, OpsApplied
from chalie.store.background_ops import Op
from tests.actors.conftest import POLL_S, WAIT_S, Tree

NOW = 1_700_000_000.0  # the ManualClock's wall time at the start: 2023-11-14 22:13:20 UTC


def apply(tree: Tree, *ops: Op) -> tuple[Any, ...]:
    """Apply ops through the StoreWriter, as REST does; their values."""
    writer = tree.directory.get("store_writer")
    assert writer is not None
    result: OpsApplied = writer.ask(ApplyOps(tuple(ops)), timeout=WAIT_S)
    assert result.error is None, result.error
    return result.values


def run_until(tree: Tree, ready: Callable[[], bool], what: str) -> None:
    """Let every timer already due fire, again and again, until `ready`: actors that arm a
    timer a moment after the clock moved past its time still see it fire. Time itself does
    not move."""
    deadline = time.monotonic() + WAIT_S
    while True:
        tree.clock.advance(0)
        if ready():
            return
        if time.monotonic() > deadline:
            pytest.fail(f"gave up after {WAIT_S}s waiting for {what}")
        time.sleep(POLL_S)


def of_type(tree: Tree, kind: str, channel: str = "main") -> list[dict[str, Any]]:
    return [f for f in tree.outbox.frames(channel) if f["type"] == kind]
