"""Concepts' and links' strengths decay with time, the same for every reader."""

from __future__ import annotations

import pytest

from chalie.values.cognition import HALF_LIFE_S, decayed

NOW = 1_000_000_000.0


def test_strength_halves_every_half_life() -> None:
    assert decayed(4.0, NOW - HALF_LIFE_S, NOW) == pytest.approx(2.0)
    assert decayed(4.0, NOW, NOW) == 4.0
    assert decayed(4.0, NOW + 5, NOW) == 4.0  # a time after now is no decay, never growth
