"""Rows of other programs: a pairing key is used once, interfaces and world state round-trip."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from chalie.store import db, interface_rows
from chalie.store.interface_rows import InterfaceRow, SubscriptionRow
from chalie.values.signals import Signal


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[apsw.Connection]:
    c = db.open_writer(tmp_path / "data", busy_timeout_ms=2000, synchronous="FULL")
    yield c
    c.close()


def row(iid: str = "i-1", *, token: str = "t-1", signals: tuple[str, ...] | None = ("*",),
        capability_signals: tuple[str, ...] | None = None) -> InterfaceRow:
    return InterfaceRow(id=iid, name="weather", host="127.0.0.1", port=9001, signals=signals,
                        token_hash=token, version="1.0", capabilities="[]", paired_at=5.0,
                        refreshed_at=5.0, capability_signals=capability_signals)


def test_a_pairing_key_pairs_once_before_it_expires(conn: apsw.Connection) -> None:
    """The first pairing uses the key up; a second with the same key stores nothing."""
    with db.immediate(conn):
        interface_rows.insert_pairing_key(conn, "k", 0.0, 600.0)
    assert interface_rows.pairing_key_usable(conn, "k", 10.0)
    with db.immediate(conn):
        assert interface_rows.pair(conn, "k", 10.0, row()) is True
        assert interface_rows.pair(conn, "k", 11.0, row("i-2", token="t-2")) is False
    assert not interface_rows.pairing_key_usable(conn, "k", 12.0)
    assert [r.id for r in interface_rows.interfaces(conn)] == ["i-1"]


def test_an_expired_or_unknown_key_pairs_nothing(conn: apsw.Connection) -> None:
    """Past expires_at, or never made, a key is refused and no interface is stored."""
    with db.immediate(conn):
        interface_rows.insert_pairing_key(conn, "k", 0.0, 600.0)
        assert interface_rows.pair(conn, "k", 600.0, row()) is False
        assert interface_rows.pair(conn, "nope", 1.0, row()) is False
    assert interface_rows.interfaces(conn) == []


def test_interfaces_round_trip_with_declared_signals_and_none(conn: apsw.Connection) -> None:
    """Types declared at pairing and in /capabilities come back as stored; where none were
    declared, None."""
    declared = [(("weather", "stock"), None), (None, ("rain",)), (None, None)]
    with db.immediate(conn):
        for n, (signals, capability_signals) in enumerate(declared):
            interface_rows.insert_pairing_key(conn, f"k{n}", 0.0, 600.0)
            interface_rows.pair(conn, f"k{n}", 1.0, row(
                f"i-{n}", token=f"t-{n}", signals=signals,
                capability_signals=capability_signals))
    assert [(r.id, r.signals, r.capability_signals)
            for r in interface_rows.interfaces(conn)] == [
        ("i-0", ("weather", "stock"), None), ("i-1", None, ("rain",)), ("i-2", None, None)]
    with db.immediate(conn):
        assert interface_rows.update_capabilities(
            conn, "i-0", version="2.0", capabilities='[{"x": 1}]',
            capability_signals=("wind", "*"), refreshed_at=9.0)
        assert interface_rows.update_capabilities(
            conn, "i-1", version="1.1", capabilities="[]", capability_signals=None,
            refreshed_at=9.0)
        assert interface_rows.delete_interface(conn, "i-2")
        assert not interface_rows.delete_interface(conn, "i-2")
    fresh = interface_rows.interface(conn, "i-0")
    assert fresh is not None
    assert (fresh.version, fresh.capabilities, fresh.refreshed_at) == ("2.0", '[{"x": 1}]', 9.0)
    assert (fresh.signals, fresh.capability_signals) == (("weather", "stock"), ("wind", "*"))
    withdrawn = interface_rows.interface(conn, "i-1")
    assert withdrawn is not None
    assert (withdrawn.signals, withdrawn.capability_signals) == (None, None)
    assert interface_rows.interface(conn, "i-2") is None


def test_world_state_is_replaced_as_a_whole(conn: apsw.Connection) -> None:
    """Saving world state replaces what was stored; metadata and topics survive."""
    first = Signal(id="a", sender="s", signal_type="t", content="one", source="src",
                   topic="weather", activation_energy=0.4, metadata={"n": 1}, received_at=1.0)
    second = Signal(id="b", sender="s", signal_type="t", content="two", source="src",
                    topic=None, activation_energy=0.9, metadata=None, received_at=2.0)
    with db.immediate(conn):
        interface_rows.save_world(conn, [first])
        interface_rows.save_world(conn, [first, second])
    assert interface_rows.world(conn) == [first, second]


def test_subscription_names_are_unique(conn: apsw.Connection) -> None:
    """A second stream under a taken name is refused."""
    sub = SubscriptionRow(id="s1", name="feed", url="ws://127.0.0.1:1/", signals=("*",),
                          created_at=1.0)
    with db.immediate(conn):
        assert interface_rows.save_subscription(conn, sub)
        assert not interface_rows.save_subscription(
            conn, SubscriptionRow(id="s2", name="feed", url="ws://x/", signals=("a",),
                                  created_at=2.0))
    assert interface_rows.subscriptions(conn) == [sub]
    with db.immediate(conn):
        assert interface_rows.delete_subscription(conn, "s1")
    assert interface_rows.subscriptions(conn) == []
