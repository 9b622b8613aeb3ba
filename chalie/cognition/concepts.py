"""Concepts and spreading activation, the pure part (message-flow-v1, the drift engine).

The encoder names the concepts of each conversation window; the store keeps them with a
strength that grows with each mention and decays with time (half-life HALF_LIFE_S, in
chalie/values/cognition.py), and links between concepts of one window that grow and decay the
same way. When the DMN thinks, a few
seed concepts are drawn (decaying 0.35: strong ones not seen lately; recent 0.25; salient 0.15:
the strongest; insight 0.15: the most connected; random 0.10) with a seeded random.Random, so
the same store and seed give the same thought material. Activation spreads from the seeds along
links to depth 2, each hop passing on HOP_DECAY times the link's normalised strength; concepts
activated within COOLDOWN_S neither take nor pass activation. The TOP most activated join the
DMN's context.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from chalie.values.cognition import Concept, Link, decayed

COOLDOWN_S = 3600.0  # a concept activated this recently rests
SEEDS = 3
MAX_DEPTH = 2
HOP_DECAY = 0.5
TOP = 5
SEED_WEIGHTS: tuple[tuple[str, float], ...] = (
    ("decaying", 0.35), ("recent", 0.25), ("salient", 0.15), ("insight", 0.15), ("random", 0.10),
)


@dataclass(frozen=True)
class Activated:
    id: int
    name: str
    activation: float
    seed: str | None  # the seed strategy that chose it, or None when activation reached it


def cooling(concept: Concept, now: float) -> bool:
    return concept.last_activated is not None and now - concept.last_activated < COOLDOWN_S


def choose_seeds(concepts: Sequence[Concept], links: Sequence[Link], rng: random.Random, *,
                 now: float, count: int = SEEDS) -> list[tuple[Concept, str]]:
    """Up to `count` distinct seeds, each by a strategy drawn with SEED_WEIGHTS; concepts
    cooling down are never seeds. Ties go to the lower id, so only `rng` makes a choice."""
    degree: dict[int, int] = {}
    for link in links:
        degree[link.a] = degree.get(link.a, 0) + 1
        degree[link.b] = degree.get(link.b, 0) + 1
    pool = sorted((c for c in concepts if not cooling(c, now)), key=lambda c: c.id)
    scores: dict[str, Callable[[Concept], float]] = {
        # how much strength time took away: strong concepts not seen lately
        "decaying": lambda c: c.strength - decayed(c.strength, c.last_seen, now),
        "recent": lambda c: c.last_seen,
        "salient": lambda c: decayed(c.strength, c.last_seen, now),
        "insight": lambda c: float(degree.get(c.id, 0)),
    }
    names = [name for name, _ in SEED_WEIGHTS]
    weights = [weight for _, weight in SEED_WEIGHTS]
    seeds: list[tuple[Concept, str]] = []
    while pool and len(seeds) < count:
        strategy = rng.choices(names, weights)[0]
        if strategy == "random":
            chosen = pool[rng.randrange(len(pool))]
        else:
            score = scores[strategy]
            chosen = max(pool, key=lambda c: (score(c), -c.id))
        seeds.append((chosen, strategy))
        pool.remove(chosen)
    return seeds


def spread(concepts: Sequence[Concept], links: Sequence[Link],
           seeds: Sequence[tuple[Concept, str]], *, now: float,
           top: int = TOP) -> list[Activated]:
    """Activation from the seeds (1.0 each) along links, to depth MAX_DEPTH: a hop passes
    HOP_DECAY * (link strength / the strongest link) of what reached the concept it leaves;
    what reaches a concept from several paths adds up. Concepts cooling down are skipped.
    The `top` most activated, strongest first (ties: lower id)."""
    by_id = {c.id: c for c in concepts}
    now_strength = {(link.a, link.b): decayed(link.strength, link.updated_at, now)
                    for link in links}
    strongest = max(now_strength.values(), default=0.0)
    neighbours: dict[int, list[tuple[int, float]]] = {}
    if strongest > 0:
        for (a, b), strength in sorted(now_strength.items()):
            weight = strength / strongest
            neighbours.setdefault(a, []).append((b, weight))
            neighbours.setdefault(b, []).append((a, weight))
    activation: dict[int, float] = {}
    seed_of: dict[int, str] = {}
    frontier: dict[int, float] = {}
    for concept, strategy in seeds:
        if concept.id in by_id and not cooling(concept, now):
            seed_of[concept.id] = strategy
            activation[concept.id] = activation.get(concept.id, 0.0) + 1.0
            frontier[concept.id] = frontier.get(concept.id, 0.0) + 1.0
    for _ in range(MAX_DEPTH):
        reached: dict[int, float] = {}
        for source, amount in sorted(frontier.items()):
            for target, weight in neighbours.get(source, ()):
                node = by_id.get(target)
                if node is None or cooling(node, now) or target in seed_of:
                    continue
                reached[target] = reached.get(target, 0.0) + amount * HOP_DECAY * weight
        for target, amount in reached.items():
            activation[target] = activation.get(target, 0.0) + amount
        frontier = reached
    ranked = sorted(activation.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return [Activated(i, by_id[i].name, round(a, 6), seed_of.get(i)) for i, a in ranked]


def activate(concepts: Sequence[Concept], links: Sequence[Link], rng: random.Random, *,
             now: float, top: int = TOP) -> list[Activated]:
    """Seeds drawn with `rng`, then spread: the `top` activated concepts."""
    return spread(concepts, links, choose_seeds(concepts, links, rng, now=now), now=now, top=top)
