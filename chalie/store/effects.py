"""Writes a tool asks for during a turn. They wait in the turn's trail and are applied by the
StoreWriter inside the turn's one transaction, so nothing is written while the loop runs."""

from __future__ import annotations

import msgspec


class RememberFact(msgspec.Struct, frozen=True, tag=True):
    """Keep `value` under `key`; an existing current fact with that key is superseded."""

    key: str
    value: str


class ForgetFact(msgspec.Struct, frozen=True, tag=True):
    """Stop knowing the current fact under `key` (it stays in the table, superseded)."""

    key: str


Effect = RememberFact | ForgetFact
