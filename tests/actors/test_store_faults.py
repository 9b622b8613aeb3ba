"""The StoreWriter when the store cannot take writes: a fault of the store is classed once and
its turns refused with the cause; a recoverable one is probed until a write is stored, and the
Sessions are told; a damaged database is not written again."""

from __future__ import annotations

from typing import Any

import apsw
import pytest

from chalie.actors.session_messages import Deliver, StoreWritable
from chalie.actors.store_writer_messages import ApplyOps, CreateAuthSession
from chalie.actors.turn_messages import TurnStored, TurnStoreFailed
from chalie.errors import StoreError
from chalie.store import writes
from tests.actors.test_store_writer import closing, record, start_writer  # noqa: F401

Writer = Any


def failing(monkeypatch: pytest.MonkeyPatch, error: BaseException, times: int) -> list[int]:
    """The next `times` turns fail to insert with `error` (the disk's answer); then they work."""
    calls = [0]
    real = writes.insert_turn

    def insert_turn(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] <= times:
            raise error
        return real(*args, **kwargs)

    monkeypatch.setattr(writes, "insert_turn", insert_turn)
    return calls


def sessions_heard(w: Writer, kind: type, count: int = 1) -> list[Any]:
    """What the Sessions were told of `kind`, once `count` of them have arrived."""
    def of_kind(items: list[Any]) -> list[Any]:
        return [m.message if isinstance(m, Deliver) else m for m in items
                if isinstance(m, kind) or (isinstance(m, Deliver) and isinstance(m.message, kind))]

    w.sessions.wait_for(lambda items: len(of_kind(items)) >= count, kind.__name__)
    return of_kind(w.sessions.items)


@pytest.mark.allow_error_logs  # store_fault: an operator must hear of it
def test_a_full_disk_refuses_the_turn_with_its_cause_then_a_probe_finds_it_writable(
    start_writer: Any, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    calls = failing(monkeypatch, apsw.FullError("database or disk is full"), times=1)
    w = start_writer()
    w.commit(record("t1"), closing("t1"))
    (refused,) = sessions_heard(w, TurnStoreFailed)
    assert refused.cause == "full"
    assert "is full; free some space" in refused.error
    assert w.metrics.registry.get_sample_value(
        "chalie_store_write_failures_total", {"cause": "full"}) == 1.0
    assert w.outbox.frames() == []  # nothing of it was logged, so nothing pushed
    # The probe (a timer) finds the store writable: the Sessions are told.
    w.clock.advance(60.0)
    sessions_heard(w, StoreWritable)
    w.commit(record("t2"), closing("t2"))
    assert [m.turn_id for m in sessions_heard(w, TurnStored)] == ["t2"]
    assert calls[0] == 2


@pytest.mark.allow_error_logs  # store_fault
def test_a_damaged_database_is_not_written_again(
    start_writer: Any, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    calls = failing(monkeypatch, apsw.CorruptError("database disk image is malformed"), times=1)
    w = start_writer()
    w.commit(record("t1"), closing("t1"))
    w.commit(record("t2"), closing("t2"))
    refused = sessions_heard(w, TurnStoreFailed, count=2)
    assert [(m.turn_id, m.cause) for m in refused] == [("t1", "damaged"), ("t2", "damaged")]
    assert "chalie restore" in refused[1].error
    assert calls[0] == 1  # the second was refused without touching the file
    assert w.ask(ApplyOps((), tag="x")).error is not None  # background writes too
    with pytest.raises(StoreError, match="damaged"):  # and an asker hears why
        w.ask(CreateAuthSession("hash", 1.0, 2.0))
    w.clock.advance(3600.0)  # no probe: it does not come back by itself
    assert not any(isinstance(m, StoreWritable) for m in w.sessions.items)
