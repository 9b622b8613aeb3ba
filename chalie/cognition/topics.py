"""Which topic a message belongs to, deterministically.

A message joins the most similar of its channel's recent topics when it is similar enough by
its words or by its meaning:
- by its words: the share of its subject words (content words that are not general ones like
  "good", "time" or "survive": chalie/cognition/words.py) that the topic has seen, compared by
  stem, is at least `cognition.topic_threshold`. One shared subject word can be enough ("the
  traceback points at the script" joins "my script crashes"; "my sourdough starter doubles on
  the counter" joins "baking sourdough bread"); a shared general word never is ("a good name
  for a goldfish" and "a good stretch for the back");
- by its meaning: the cosine similarity of the message's embedding (the one recall already
  made) to the topic's centroid is at least `cognition.topic_cosine`, with a semantic embedder
  only. The hashed embedder is lexical: what its vectors share is words, which the words
  measure better, and its similarity is highest for messages that share a frame of stop words
  ("can you tell me how to make pancakes?" and "... how to change a tyre?": 0.67), so a
  lexical embedder's vectors are not compared (`cosine_threshold` None).
The most similar topic is the one furthest above its threshold. The topic the conversation is
on gets a small bonus, so that a conversation does not flip between two close topics, and
keeps a message that leans on what was said ("and what about the price?") or says too little
to place (one content word at most, or no subject word). Otherwise the message starts a new
topic, named from its salient words.

Reads only: the StoreWriter records the choice with the turn (`cognition_rows.topic_seen`).
"""

from __future__ import annotations

import math
import uuid

import apsw
import msgspec

from chalie.cognition.confidence import FOK_START
from chalie.cognition.words import content_words, is_general, stem, topic_name

STICKINESS = 0.05  # added to the current topic's similarity


class TopicChoice(msgspec.Struct, frozen=True):
    """The topic of one message: `new` when it starts one; `similarity` the measure that
    placed it (or the best one found for a new topic); `fok` the topic's feeling of knowing
    before this turn; `keywords` the message's subject words (what the topic adds)."""

    id: str
    name: str
    new: bool
    similarity: float
    fok: float
    keywords: tuple[str, ...]


def choose(conn: apsw.Connection, *, channel: str, text: str, vector: bytes | None,
           space_id: int | None, threshold: float, cosine_threshold: float | None,
           recent: int, current_id: str | None, leans_back: bool = False) -> TopicChoice:
    """`threshold` the words' (cognition.topic_threshold); `cosine_threshold` the embedding's
    (cognition.topic_cosine), None for a lexical embedder; `leans_back`: the message refers to
    what was said before (NlpSignals.implicit_reference)."""
    said = tuple(dict.fromkeys(content_words(text)))
    subject = tuple(w for w in said if not is_general(w))
    stems = frozenset(map(stem, subject))
    stays = current_id is not None and (leans_back or len(said) <= 1 or not subject)
    probe = vector if cosine_threshold is not None else None
    rows = conn.execute(  # iterated, not fetched: the rows' values are typed Any
        "SELECT id, name, fok, keywords, CASE WHEN ? IS NOT NULL AND centroid IS NOT NULL "
        "AND space_id = ? AND length(centroid) = length(?) "
        "THEN 1 - vec_distance_cosine(centroid, ?) END "
        "FROM topics WHERE channel = ? ORDER BY last_seen DESC LIMIT ?",
        (probe, space_id, probe, probe, channel, recent),
    )
    best: tuple[float, float, str, str, float] | None = None  # margin, similarity, id, name, fok
    for topic_id, name, fok, keywords, cosine in rows:
        similarity = word_share(stems, str(keywords))
        margin = similarity - threshold
        if cosine is not None and cosine_threshold is not None \
                and float(cosine) - cosine_threshold > margin:
            similarity = float(cosine)
            margin = similarity - cosine_threshold
        if topic_id == current_id:
            similarity, margin = similarity + STICKINESS, margin + STICKINESS
            if stays:
                similarity, margin = 1.0, math.inf
        if best is None or margin > best[0]:
            best = (margin, similarity, str(topic_id), str(name), float(fok))
    if best is not None and best[0] >= 0:
        _, similarity, topic_id, name, fok = best
        return TopicChoice(topic_id, name, False, round(min(1.0, similarity), 4), fok, subject)
    return TopicChoice(uuid.uuid4().hex, topic_name(text), True,
                       round(best[1], 4) if best else 0.0, FOK_START, subject)


def word_share(stems: frozenset[str], keywords: str) -> float:
    """The share of a message's subject-word `stems` that a topic's `keywords` have, compared by
    stem and leaving the topic's general words out (0 when there are no stems)."""
    if not stems:
        return 0.0
    seen = {stem(w) for w in keywords.split() if not is_general(w)}
    return len(stems & seen) / len(stems)
