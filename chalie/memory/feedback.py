"""Recall's second pass: a full-text search seeded by what the first pass found.

A question that takes two steps ("what activities does she do with her family?") names the
topic, and the lines that answer it name the things: the pottery class, the camping trip. The
first pass finds some of them; the words those share are what the rest are likely to say too.
So the best SEEDS items of the first pass (not the person's own questions, which only repeat the
question) give the words that at least SHARED of them hold and the question does not (a word
one item alone holds is that item's own, and drags in strays: a number, a name), those more
seeds hold first, then the rarer in the index, at most TERMS of them; the question's own terms
and these are searched by BM25 once more, and that ranking joins the fusion beside the first two
(relevance feedback, as in Rocchio's and the relevance models of information retrieval, on words
only: no second embedding). It costs one more full-text search over rare terms.

On LoCoMo at an 8k window (the shared five conversations, same run settings), the multi-hop
questions with every evidence line in the prompt went from 77 to 83 of 141 (54.6% -> 58.9%),
all questions from 647 to 650 of 759; temporal lost 3 of 156, open-domain 1 of 44, single-hop
gained 1 of 418 (the rankings compete for one budget). With the five in one store (locomo.py
--haystack) it lost at 8k (multi-hop 74 -> 71, all 634 -> 626) and won at 32k (multi-hop 129 ->
133, all 743 -> 740): so memory.feedback_weight is 0 by default, until it helps there too.
Tried and not kept (an offline replay of recall and the memory section's fill): the first
pass's vectors as a Rocchio query (a centroid, or each seed's nearest items), its capitalised
words, a penalty for many items of
one day or a bonus for a day with many, fewer or weaker neighbours, other RRF constants and
weights, and a full-text ranking weighted more: none moved multi-hop by more than a question
or two without costing as much elsewhere.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import apsw

from chalie.memory import fts

SEEDS = 8  # the best items of the first pass whose words seed the second
TERMS = 10  # the seeds' words added to the question's
SHARED = 2  # seeds that must hold a word for it to be added: one item's own words drag in strays


def expansion(conn: apsw.Connection, query: str, seeds: Sequence[str]) -> list[str]:
    """The question's terms, then at most TERMS terms of the `seeds` texts (best first) that
    the question does not have and the index holds more than once: the terms more seeds
    hold first, the rarer in the index among equals. [] when the seeds add nothing."""
    asked = fts.query_terms(conn, query)
    have = set(asked)
    held: Counter[str] = Counter()
    order: dict[str, None] = {}
    for text in seeds:
        terms = [t for t in fts.query_terms(conn, text) if t not in have]
        held.update(set(terms))
        order.update(dict.fromkeys(terms))
    if not order:
        return []
    frequency = fts.frequencies(conn, list(order))
    # A word only this item holds finds nothing else; words in every item say nothing.
    added = sorted((t for t in order if frequency.get(t, 0) > 1 and held[t] >= SHARED),
                   key=lambda t: (-held[t], frequency[t]))[:TERMS]
    return [*asked, *added] if added else []


def search(conn: apsw.Connection, query: str, seeds: Sequence[str], limit: int) -> list[int]:
    """Memory keys of the items that best match the question and the seeds' words (see
    `expansion`), best first; [] when the seeds add no word."""
    terms = expansion(conn, query, seeds)
    return fts.search_terms(conn, terms, limit) if terms else []
