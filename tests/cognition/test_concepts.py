"""Spreading activation (chalie/cognition/concepts.py): seed selection by the drift engine's
weights from a seeded generator, activation to depth 2 with per-hop decay, and cooldowns."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from chalie.cognition import concepts
from chalie.cognition.concepts import (
    COOLDOWN_S,
    HOP_DECAY,
    SEED_WEIGHTS,
    activate,
    choose_seeds,
    spread,
)
from chalie.values.cognition import Concept, Link

NOW = 1_000_000_000.0
DAY = 86400.0


def concept(i: int, *, strength: float = 1.0, seen: float = NOW,
            activated: float | None = None) -> Concept:
    return Concept(i, f"c{i}", strength, seen, activated)


def link(a: int, b: int, strength: float = 1.0) -> Link:
    return Link(a, b, "co-occurs", strength, NOW)


def test_the_seed_weights_are_the_drift_engine_s() -> None:
    assert dict(SEED_WEIGHTS) == {"decaying": 0.35, "recent": 0.25, "salient": 0.15,
                                  "insight": 0.15, "random": 0.10}


def test_strategies_are_drawn_in_proportion_to_their_weights() -> None:
    rng = random.Random(7)
    pool = [concept(i) for i in range(1, 4)]
    drawn = Counter(strategy for _ in range(20_000)
                    for _, strategy in choose_seeds(pool, [], rng, now=NOW, count=1))
    for name, weight in SEED_WEIGHTS:
        assert drawn[name] / 20_000 == pytest.approx(weight, abs=0.015)


def test_each_strategy_picks_its_own_kind_of_concept() -> None:
    """decaying: strong but long unseen; recent: seen last; salient: strongest now; insight:
    most linked."""
    old_strong = concept(1, strength=10.0, seen=NOW - 60 * DAY)
    newest = concept(2, strength=0.5, seen=NOW)
    strong_now = concept(3, strength=5.0, seen=NOW - DAY)
    hub = concept(4, strength=0.2, seen=NOW - 2 * DAY)
    others = [concept(i, strength=0.1, seen=NOW - 3 * DAY) for i in (5, 6, 7)]
    pool = [old_strong, newest, strong_now, hub, *others]
    links = [link(4, 5), link(4, 6), link(4, 7)]
    picked = {}
    for seed in range(200):
        for chosen, strategy in choose_seeds(pool, links, random.Random(seed), now=NOW,
                                             count=1):
            picked.setdefault(strategy, chosen.id)
    assert picked["decaying"] == 1
    assert picked["recent"] == 2
    assert picked["salient"] == 3
    assert picked["insight"] == 4
    assert "random" in picked


def test_the_same_seed_gives_the_same_concepts_and_another_may_not() -> None:
    pool = [concept(i, strength=float(i), seen=NOW - i * DAY) for i in range(1, 30)]
    links = [link(i, i + 1, float(i % 4 + 1)) for i in range(1, 29)]
    first = activate(pool, links, random.Random(42), now=NOW)
    again = activate(pool, links, random.Random(42), now=NOW)
    assert first == again
    assert len(first) == concepts.TOP
    others = {tuple(c.id for c in activate(pool, links, random.Random(s), now=NOW))
              for s in range(20)}
    assert len(others) > 1


def test_activation_spreads_two_hops_losing_some_at_each() -> None:
    """1 - 2 - 3 - 4: from seed 1, concept 2 gets HOP_DECAY, concept 3 HOP_DECAY², and 4 (three
    hops away) nothing. A weaker link passes on less, in proportion to the strongest."""
    pool = [concept(i) for i in range(1, 6)]
    links = [link(1, 2, 2.0), link(2, 3, 2.0), link(3, 4, 2.0), link(1, 5, 1.0)]
    got = {a.id: a.activation for a in spread(pool, links, [(pool[0], "recent")], now=NOW)}
    assert got == {1: 1.0, 2: pytest.approx(HOP_DECAY), 3: pytest.approx(HOP_DECAY ** 2),
                   5: pytest.approx(HOP_DECAY * 0.5)}


def test_only_the_top_five_are_returned_strongest_first() -> None:
    pool = [concept(i) for i in range(1, 10)]
    links = [link(1, i, float(i)) for i in range(2, 10)]
    result = spread(pool, links, [(pool[0], "salient")], now=NOW)
    assert [a.id for a in result] == [1, 9, 8, 7, 6]
    assert result[0].seed == "salient"
    assert result[1].seed is None


def test_a_concept_activated_within_the_cooldown_neither_takes_nor_passes_activation() -> None:
    pool = [concept(1), concept(2, activated=NOW - COOLDOWN_S / 2), concept(3),
            concept(4, activated=NOW - COOLDOWN_S - 1)]
    links = [link(1, 2), link(2, 3), link(1, 4)]
    got = {a.id for a in spread(pool, links, [(pool[0], "recent")], now=NOW)}
    assert got == {1, 4}  # 2 rests, so 3 (only behind it) is not reached; 4's rest is over
    seeds = {c.id for seed in range(50)
             for c, _ in choose_seeds(pool, links, random.Random(seed), now=NOW)}
    assert 2 not in seeds


def test_no_concepts_no_activation() -> None:
    assert activate([], [], random.Random(1), now=NOW) == []
