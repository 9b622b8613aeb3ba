"""The adaptive_traits table (migration 0009): the person's traits (chalie/cognition/traits.py),
one set for every channel. Written by the StoreWriter only."""

from __future__ import annotations

from collections.abc import Mapping

import apsw
import msgspec

from chalie.values.cognition import Trait

_values = msgspec.json.Decoder(dict[str, float])


def save(conn: apsw.Connection, traits: Mapping[str, Trait]) -> None:
    conn.executemany(
        "INSERT OR REPLACE INTO adaptive_traits (name, value, weight, updated_at) "
        "VALUES (?, ?, ?, ?)",
        [(name, msgspec.json.encode(t.value).decode(), t.weight, t.updated_at)
         for name, t in traits.items()],
    )


def load(conn: apsw.Connection) -> dict[str, Trait]:
    """Every stored trait; one whose value is not a table of scores is left out."""
    out = {}
    for name, value, weight, updated_at in conn.execute(
            "SELECT name, value, weight, updated_at FROM adaptive_traits ORDER BY name"):
        try:
            out[str(name)] = Trait(_values.decode(value), float(weight), float(updated_at))
        except msgspec.DecodeError:
            continue
    return out
