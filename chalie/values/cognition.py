"""What cognition keeps in the store: the person's adaptive traits, and concepts with the links
between them, whose strengths decay with time (chalie/cognition/traits.py and concepts.py
reason with them; chalie/store/trait_rows.py and concept_rows.py keep them)."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

HALF_LIFE_S = 14 * 86400.0  # a concept's (and a link's) strength halves in this time unseen


class Trait(msgspec.Struct, frozen=True):
    """One trait: its scores (label or hour -> decayed evidence), their sum, when last changed."""

    value: dict[str, float]
    weight: float
    updated_at: float


@dataclass(frozen=True)
class Concept:
    id: int
    name: str
    strength: float  # as stored at last_seen
    last_seen: float
    last_activated: float | None = None


@dataclass(frozen=True)
class Link:
    a: int
    b: int
    relation: str
    strength: float  # as stored at updated_at
    updated_at: float


def decayed(strength: float, since: float, now: float) -> float:
    """`strength` as of `since`, decayed to `now`."""
    return float(strength * 0.5 ** (max(0.0, now - since) / HALF_LIFE_S))
