"""Writes a tool asks for during a turn. They wait in the turn's trail and are applied by the
StoreWriter inside the turn's one transaction, so nothing is written while the loop runs."""

from __future__ import annotations

import msgspec


class RememberFact(msgspec.Struct, frozen=True, tag=True):
    """Keep `value` under `key`; an existing current fact with that key is superseded."""

    key: str
    value: str


Effect = RememberFact
