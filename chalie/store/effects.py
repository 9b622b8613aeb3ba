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
    # The transcript id of the person's line it was stated on (the encoder's facts); None for a
    # fact a tool or the identity hook stored, in the turn it is stored with.
    source_line: int | None = None
    # Current facts under other keys that this one makes untrue ("home: Lisbon" for "city:
    # Porto"), by knowledge id: the model named them from the candidates it was shown
    # (chalie.memory.updates). Each is superseded by this fact, keeping its validity interval;
    # one already superseded, forgotten or newer than this fact is left as it is.
    replaces: tuple[int, ...] = ()


class ForgetFact(msgspec.Struct, frozen=True, tag=True):
    """Forget the current item under `key`: it is deleted with its index rows, and its value is
    blanked out of older text shown to the model."""

    key: str


class Recalled(msgspec.Struct, frozen=True, tag=True):
    """These memory items went into a prompt: each one's retrieval strength rises."""

    mkeys: tuple[int, ...]


class CreateSchedule(msgspec.Struct, frozen=True, tag=True):
    """A scheduled prompt the `schedule` tool made (already checked); `source` tool or dmn."""

    id: str
    prompt: str
    timezone: str
    next_run: float
    at: float | None = None
    cron: str | None = None
    source: Literal["tool", "dmn"] = "tool"


class CancelSchedule(msgspec.Struct, frozen=True, tag=True):
    id: str


class StartGoal(msgspec.Struct, frozen=True, tag=True):
    """A goal the `goal` tool started; its actor starts once the turn is stored."""

    id: str
    goal: str
    source: Literal["tool", "dmn"] = "tool"


class CancelGoal(msgspec.Struct, frozen=True, tag=True):
    id: str


class OpenLoop(msgspec.Struct, frozen=True, tag=True):
    """Something to raise with the person later (the DMN's SEED_THREAD)."""

    text: str
    source: str = "tool"


class CloseLoop(msgspec.Struct, frozen=True, tag=True):
    loop_id: int


Effect = (
    RememberFact | ForgetFact | Recalled | CreateSchedule | CancelSchedule | StartGoal
    | CancelGoal | OpenLoop | CloseLoop
)
FactEffect = RememberFact | ForgetFact
