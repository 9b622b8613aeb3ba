"""Writes a turn asks for. They wait in the turn's record and are applied by the StoreWriter
inside the turn's one transaction, so nothing is written while the loop runs."""

from __future__ import annotations

from typing import Literal

import msgspec


class RememberFact(msgspec.Struct, frozen=True, tag=True):
    """Keep `value` under `key` (already normalised); a current item with that key is
    superseded and keeps its validity interval."""

    key: str
    value: str
    kind: Literal["fact", "trait", "preference"] = "fact"
    source: Literal["tool", "identity", "encoder"] = "tool"
    confidence: float = 0.9
    # When the value was true as of (the encoder reads old messages): an item stored after
    # that is newer knowledge and is not superseded by this one. None: as of now.
    observed_at: float | None = None


class ForgetFact(msgspec.Struct, frozen=True, tag=True):
    """Forget the current item under `key`: it is deleted with its index rows, and its value is
    blanked out of older text shown to the model."""

    key: str


class Recalled(msgspec.Struct, frozen=True, tag=True):
    """These memory items went into a prompt: each one's retrieval strength rises."""

    mkeys: tuple[int, ...]


Effect = RememberFact | ForgetFact | Recalled
FactEffect = RememberFact | ForgetFact
