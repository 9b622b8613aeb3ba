"""Handing memory back, and keeping the server's threads from each holding their own
(chalie.memory.heap)."""

from __future__ import annotations

import pytest

from chalie.memory import heap


def test_the_servers_threads_share_a_few_malloc_arenas(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(heap, "_MALLOPT", lambda p, v: calls.append((p, v)) or 1)
    heap.limit_arenas()
    assert calls == [(heap.M_ARENA_MAX, heap.ARENAS)]


def test_without_glibc_nothing_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "_MALLOPT", None)
    monkeypatch.setattr(heap, "_TRIM", None)
    heap.limit_arenas()
    heap.trim()
