"""Pre-loop memory seeding: stored facts that share a word with the person's message."""

from __future__ import annotations

import re

import apsw

from chalie.store.queries import Fact, facts_matching

MIN_WORD = 4
_STOP = frozenset([
    "about", "also", "been", "could", "does", "from", "have", "here", "into", "just", "know",
    "like", "make", "more", "much", "must", "only", "should", "some", "than", "that", "their",
    "them", "then", "there", "these", "they", "this", "what", "when", "where", "which", "while",
    "will", "with", "would", "your", "yours",
])
MAX_WORDS = 12
_WORD = re.compile(r"\w+")


def relevant_facts(conn: apsw.Connection, text: str, limit: int) -> list[Fact]:
    """Up to `limit` current facts whose key or value contains a word of `text`, longest
    (most specific) words first."""
    candidates = {w for w in _WORD.findall(text.casefold()) if len(w) >= MIN_WORD}
    words = sorted(candidates - _STOP, key=lambda w: (-len(w), w))[:MAX_WORDS]
    return facts_matching(conn, words, limit)


def render_facts(facts: list[Fact]) -> str:
    return "\n".join(f"- {f.key}: {f.value}" for f in facts)
