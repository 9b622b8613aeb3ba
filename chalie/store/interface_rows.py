"""Rows of other programs: pairing keys, paired interfaces, world state, broadcast streams.

Writes run on the StoreWriter's connection inside its transactions; reads on any reader.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw
import msgspec

from chalie.values.signals import Signal

USED_KEYS_KEPT_S = 86400.0  # used and expired pairing keys are deleted after a day

_encode = msgspec.json.encode
_decode_types = msgspec.json.Decoder(tuple[str, ...] | None).decode
_decode_meta = msgspec.json.Decoder(dict[str, Any] | None).decode


class InterfaceRow(msgspec.Struct, frozen=True):
    """A paired interface. The signal types it may emit: `signals`, as its pair request declared
    them, else `capability_signals`, as its /capabilities declared them, else any; None in either
    means none declared there, ("*",) any type."""

    id: str
    name: str
    host: str
    port: int
    signals: tuple[str, ...] | None
    token_hash: str
    version: str
    capabilities: str  # the JSON array of tools /capabilities answered, as checked
    paired_at: float
    refreshed_at: float
    capability_signals: tuple[str, ...] | None = None


class SubscriptionRow(msgspec.Struct, frozen=True):
    id: str
    name: str
    url: str
    signals: tuple[str, ...]
    created_at: float


# --- pairing keys -------------------------------------------------------------------------------

def insert_pairing_key(conn: apsw.Connection, key_hash: str, created_at: float,
                       expires_at: float) -> None:
    conn.execute("DELETE FROM pairing_keys WHERE expires_at < ?", (created_at - USED_KEYS_KEPT_S,))
    conn.execute("INSERT INTO pairing_keys (key_hash, created_at, expires_at) VALUES (?, ?, ?)",
                 (key_hash, created_at, expires_at))


def pairing_key_usable(conn: apsw.Connection, key_hash: str, now: float) -> bool:
    row = conn.execute(
        "SELECT 1 FROM pairing_keys WHERE key_hash = ? AND used_at IS NULL AND expires_at > ?",
        (key_hash, now),
    ).fetchone()
    return row is not None


def pair(conn: apsw.Connection, key_hash: str, now: float, row: InterfaceRow) -> bool:
    """Use up the key and store the interface; False (nothing written) when the key is not
    usable, so two pairings racing on one key cannot both succeed."""
    conn.execute(
        "UPDATE pairing_keys SET used_at = ? "
        "WHERE key_hash = ? AND used_at IS NULL AND expires_at > ?", (now, key_hash, now))
    if conn.changes() == 0:
        return False
    conn.execute(
        "INSERT INTO interfaces (id, name, host, port, signals, token_hash, version, "
        "capabilities, paired_at, refreshed_at, capability_signals) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (row.id, row.name, row.host, row.port, _types_text(row.signals), row.token_hash,
         row.version, row.capabilities, row.paired_at, row.refreshed_at,
         _types_text(row.capability_signals)),
    )
    return True


# --- interfaces ----------------------------------------------------------------------------------

_COLUMNS = ("id, name, host, port, signals, token_hash, version, capabilities, paired_at, "
            "refreshed_at, capability_signals")


def _interface(row: Any) -> InterfaceRow:
    (iid, name, host, port, signals, token_hash, version, capabilities, paired_at,
     refreshed_at, capability_signals) = row
    return InterfaceRow(
        id=str(iid), name=str(name), host=str(host), port=int(port),
        signals=_types(signals), token_hash=str(token_hash), version=str(version),
        capabilities=str(capabilities), paired_at=float(paired_at),
        refreshed_at=float(refreshed_at), capability_signals=_types(capability_signals),
    )


def _types_text(types: tuple[str, ...] | None) -> str | None:
    """Signal types as their stored JSON list; None (none declared) as NULL."""
    return None if types is None else _encode(types).decode()


def _types(text: Any) -> tuple[str, ...] | None:
    return None if text is None else _decode_types(str(text))


def interfaces(conn: apsw.Connection) -> list[InterfaceRow]:
    rows = conn.execute(f"SELECT {_COLUMNS} FROM interfaces ORDER BY paired_at, id")
    return [_interface(r) for r in rows]


def interface(conn: apsw.Connection, interface_id: str) -> InterfaceRow | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM interfaces WHERE id = ?",
                       (interface_id,)).fetchone()
    return None if row is None else _interface(row)


def update_capabilities(conn: apsw.Connection, interface_id: str, *, version: str,
                        capabilities: str, capability_signals: tuple[str, ...] | None,
                        refreshed_at: float) -> bool:
    """What /capabilities answers now: its tools and its declared signal types (the types the
    pair request declared stay as they were)."""
    conn.execute("UPDATE interfaces SET version = ?, capabilities = ?, capability_signals = ?, "
                 "refreshed_at = ? WHERE id = ?",
                 (version, capabilities, _types_text(capability_signals), refreshed_at,
                  interface_id))
    return conn.changes() > 0


def delete_interface(conn: apsw.Connection, interface_id: str) -> bool:
    conn.execute("DELETE FROM interfaces WHERE id = ?", (interface_id,))
    return conn.changes() > 0


# --- world state ---------------------------------------------------------------------------------

def save_world(conn: apsw.Connection, signals: Sequence[Signal]) -> None:
    conn.execute("DELETE FROM world_signals")
    conn.executemany(
        "INSERT INTO world_signals (id, sender, signal_type, content, source, topic, "
        "activation_energy, metadata, received_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(s.id, s.sender, s.signal_type, s.content, s.source, s.topic, s.activation_energy,
          None if s.metadata is None else _encode(s.metadata).decode(), s.received_at)
         for s in signals],
    )


def world(conn: apsw.Connection) -> list[Signal]:
    rows = conn.execute(
        "SELECT id, sender, signal_type, content, source, topic, activation_energy, metadata, "
        "received_at FROM world_signals ORDER BY received_at, id")
    return [
        Signal(id=str(i), sender=str(sender), signal_type=str(kind), content=str(content),
               source=str(source), topic=None if topic is None else str(topic),
               activation_energy=float(energy),
               metadata=None if meta is None else _decode_meta(str(meta)),
               received_at=float(at))
        for i, sender, kind, content, source, topic, energy, meta, at in rows
    ]


# --- broadcast streams ---------------------------------------------------------------------------

def save_subscription(conn: apsw.Connection, row: SubscriptionRow) -> bool:
    """False when another subscription has the name."""
    if conn.execute("SELECT 1 FROM subscriptions WHERE name = ?", (row.name,)).fetchone():
        return False
    conn.execute(
        "INSERT INTO subscriptions (id, name, url, signals, created_at) VALUES (?, ?, ?, ?, ?)",
        (row.id, row.name, row.url, _encode(row.signals).decode(), row.created_at))
    return True


def delete_subscription(conn: apsw.Connection, subscription_id: str) -> bool:
    conn.execute("DELETE FROM subscriptions WHERE id = ?", (subscription_id,))
    return conn.changes() > 0


def subscriptions(conn: apsw.Connection) -> list[SubscriptionRow]:
    rows = conn.execute(
        "SELECT id, name, url, signals, created_at FROM subscriptions ORDER BY created_at, id")
    return [
        SubscriptionRow(id=str(i), name=str(name), url=str(url),
                        signals=_decode_types(str(signals)) or (),
                        created_at=float(at))
        for i, name, url, signals, at in rows
    ]
