"""Which topic a message belongs to, deterministically.

A message joins the most similar of its channel's recent topics when the similarity is at least
`cognition.topic_threshold`. The similarity is the larger of the cosine similarity of the
message's embedding (the one recall already made) to the topic's centroid, and the share of
the message's content words the topic has seen (what a lexical embedder misses: "the traceback
points at the script" and "my script crashes" share one word and no n-grams to speak of). The
topic the conversation is on gets a small bonus, so that a conversation does not flip between
two close topics, and keeps a message that leans on what was said ("and what about the
price?") or says too little to place. Otherwise the message starts a new topic, named from its
salient words.

Reads only: the StoreWriter records the choice with the turn (`cognition_rows.topic_seen`).
"""

from __future__ import annotations

import uuid

import apsw
import msgspec

from chalie.cognition.confidence import FOK_START
from chalie.cognition.words import content_words, topic_name

STICKINESS = 0.05  # added to the current topic's similarity


class TopicChoice(msgspec.Struct, frozen=True):
    """The topic of one message: `new` when it starts one; `fok` the topic's feeling of knowing
    before this turn; `keywords` the message's content words (what the topic adds)."""

    id: str
    name: str
    new: bool
    similarity: float
    fok: float
    keywords: tuple[str, ...]


def choose(conn: apsw.Connection, *, channel: str, text: str, vector: bytes | None,
           space_id: int | None, threshold: float, recent: int, current_id: str | None,
           leans_back: bool = False) -> TopicChoice:
    """`leans_back`: the message refers to what was said before (NlpSignals.implicit_reference)."""
    mine = tuple(dict.fromkeys(content_words(text)))
    stays = current_id is not None and (leans_back or len(mine) <= 1)
    rows = conn.execute(  # iterated, not fetched: the rows' values are typed Any
        "SELECT id, name, fok, keywords, CASE WHEN ? IS NOT NULL AND centroid IS NOT NULL "
        "AND space_id = ? AND length(centroid) = length(?) "
        "THEN 1 - vec_distance_cosine(centroid, ?) END "
        "FROM topics WHERE channel = ? ORDER BY last_seen DESC LIMIT ?",
        (vector, space_id, vector, vector, channel, recent),
    )
    best: tuple[float, str, str, float] | None = None
    for topic_id, name, fok, keywords, cosine in rows:
        similarity = max(float(cosine) if cosine is not None else 0.0,
                         containment(mine, str(keywords)))
        if topic_id == current_id:
            similarity = max(similarity + STICKINESS, 1.0 if stays else 0.0)
        if best is None or similarity > best[0]:
            best = (similarity, str(topic_id), str(name), float(fok))
    if best is not None and best[0] >= threshold:
        similarity, topic_id, name, fok = best
        return TopicChoice(topic_id, name, False, round(min(1.0, similarity), 4), fok, mine)
    return TopicChoice(uuid.uuid4().hex, topic_name(text), True,
                       round(best[0], 4) if best else 0.0, FOK_START, mine)


def containment(words: tuple[str, ...], keywords: str) -> float:
    """The share of `words` among a topic's `keywords` (0 when there are no words)."""
    if not words:
        return 0.0
    seen = set(keywords.split())
    return sum(1 for w in words if w in seen) / len(words)
