"""Hybrid recall on a real store: full text and vectors fused, weighted by recency, retrieval
strength and salience, and full text alone when the query cannot be embedded."""

from __future__ import annotations

import logging
import math
import sys
from array import array
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import apsw
import msgspec
import pytest

from chalie.clock import ManualClock
from chalie.config import Config
from chalie.errors import EmbedError
from chalie.memory.embedders import HashedEmbedder
from chalie.memory.recall import DAY_S, RRF_K, Hit, Recall
from chalie.metrics import Metrics
from chalie.store import db, memory_queries, memory_writes
from chalie.store.effects import RememberFact
from chalie.store.memory_writes import EpisodeRow
from chalie.values.memory import Kind, mkey, split

RECENCY_DAYS = 10.0
DECAY = 0.5


@pytest.fixture
def config(make_config: Any) -> Config:
    built: Config = make_config(memory={"recency_days": RECENCY_DAYS, "retrieval_decay": DECAY})
    return built


@pytest.fixture
def space_id(writer: apsw.Connection) -> int:
    with db.immediate(writer):
        return memory_writes.ensure_space(writer, HashedEmbedder.space, now=1.0)


def recall_with(config: Config, clock: ManualClock, space: int, *, embedder: Any = None,
                metrics: Metrics | None = None, decay: float | None = None) -> Recall:
    memory = config.memory
    if decay is not None:
        memory = msgspec.structs.replace(memory, retrieval_decay=decay)
    return Recall(embedder=HashedEmbedder() if embedder is None else embedder, space_id=space,
                  config=memory, clock=clock, metrics=metrics)


def say(conn: apsw.Connection, text: str, *, at: float, channel: str = "main") -> int:
    """Store a message said at `at`; its memory key."""
    with db.immediate(conn):
        item_id = memory_writes.add_transcript(conn, channel, None, role="user", text=text, at=at)
    return mkey(Kind.TRANSCRIPT, item_id)


def remember(conn: apsw.Connection, key: str, value: str, *, at: float) -> int:
    with db.immediate(conn):
        item_id = memory_writes.remember(conn, RememberFact(key, value), turn_id="t", now=at)
    assert item_id is not None
    return mkey(Kind.KNOWLEDGE, item_id)


def add_episode(conn: apsw.Connection, gist: str, *, salience: float, at: float) -> int:
    row = EpisodeRow(gist=gist, intent="", outcome="", entities=(), open_loops=(),
                     salience=salience, valence=0.0, transcript_from=0, transcript_to=0,
                     happened_at=at)
    with db.immediate(conn):
        (item_id,) = memory_writes.insert_episodes(conn, "main", [row], upto_transcript_id=0,
                                                   encoding_id="enc", now=at)
    return mkey(Kind.EPISODE, item_id)


def embed(conn: apsw.Connection, space: int, keys: Sequence[int], *, at: float = 0.0) -> None:
    """Store the hashed vectors of the items behind `keys` (of their text) in `space`."""
    found = memory_queries.items(conn, keys)
    by_kind: dict[Kind, list[tuple[int, bytes]]] = {}
    for key in keys:
        kind, item_id = split(key)
        by_kind.setdefault(kind, []).append((item_id, vector(found[key].text)))
    with db.immediate(conn):
        for kind, rows in by_kind.items():
            memory_writes.store_vectors(conn, space, "hashed", kind, rows,
                                        upto_id=max(i for i, _ in rows), now=at)


def vector(text: str) -> bytes:
    return HashedEmbedder().embed_one(text)


def cosine(a: bytes, b: bytes) -> float:
    x, y = array("f", a), array("f", b)
    if sys.byteorder == "big":
        x.byteswap()
        y.byteswap()
    return sum(p * q for p, q in zip(x, y, strict=True))


def by_key(hits: Sequence[Hit]) -> dict[int, Hit]:
    return {h.item.mkey: h for h in hits}


def order(hits: Iterable[Hit]) -> list[int]:
    return [h.item.mkey for h in hits]


def expected_score(hit: Hit, salience: float = 1.0) -> float:
    """The documented formula, from the hit's own parts."""
    return (hit.rrf * (0.7 + 0.3 * hit.recency)
            * (0.8 + 0.4 * hit.strength / (1 + hit.strength)) * salience)


class FailingEmbedder:
    """An embedder whose server is down: every call raises EmbedError."""

    kind = "openai"
    space = HashedEmbedder.space
    binary_knn = True
    in_process = False

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str], *, timeout_s: float) -> list[bytes]:
        self.calls += 1
        raise EmbedError("embedding at http://embed.test/v1/embeddings: could not connect")

    def close(self) -> None:
        pass


# --- full text first ------------------------------------------------------------------------------

def test_a_message_said_once_is_found_before_any_vector_exists(
    writer: apsw.Connection, space_id: int, config: Config, clock: ManualClock
) -> None:
    """Right after it is said, a message is found word for word by full text, with no vector
    ranking and nothing reported as degraded."""
    now = clock.time()
    key = say(writer, "the wifi password is purple-otter-42", at=now)
    say(writer, "let's talk about dinner", at=now)
    found = recall_with(config, clock, space_id).recall(writer, "what is the wifi password?", 5)
    assert found.degraded is None
    hit, beside = found.hits  # the line said after it comes along as its neighbour
    assert beside.beside == key
    assert beside.item.text == "let's talk about dinner"
    assert hit.item.mkey == key
    assert hit.item.text == "the wifi password is purple-otter-42"
    assert (hit.item.kind, hit.item.role, hit.item.channel) == ("message", "user", "main")
    assert (hit.fts_rank, hit.vector_rank, hit.similarity) == (1, None, None)
    assert hit.rrf == pytest.approx(1 / (RRF_K + 1))


def test_a_blank_query_recalls_nothing(
    writer: apsw.Connection, space_id: int, config: Config, clock: ManualClock
) -> None:
    """An empty or blank query, or k = 0, gives no hits."""
    say(writer, "the wifi password is purple-otter-42", at=clock.time())
    recall = recall_with(config, clock, space_id)
    assert recall.recall(writer, "   ", 5).hits == ()
    assert recall.recall(writer, "wifi password", 0).hits == ()


# --- fusion ---------------------------------------------------------------------------------------

def test_an_item_found_by_both_rankings_outranks_one_found_by_full_text_alone(
    writer: apsw.Connection, space_id: int, config: Config, clock: ManualClock
) -> None:
    """The shorter message matches "dog" better by BM25, but the one that is also near the
    query's vector ranks first, and its score is the documented formula."""
    two_days_ago = clock.time() - 2 * DAY_S
    only_text = say(writer, "dog", at=two_days_ago)
    both = say(writer, "my dog Rex likes the park", at=two_days_ago)
    elsewhere = say(writer, "a cat called Tom", at=two_days_ago)
    embed(writer, space_id, [both, elsewhere])
    found = recall_with(config, clock, space_id).recall(writer, "dog", 5)
    assert found.degraded is None
    assert order(h for h in found.hits if h.beside is None) == [both, only_text]
    assert [h.item.mkey for h in found.hits if h.beside is not None] == [elsewhere]
    hits = by_key(found.hits)

    lone = hits[only_text]
    assert (lone.fts_rank, lone.vector_rank, lone.similarity) == (1, None, None)
    assert lone.rrf == pytest.approx(1 / (RRF_K + 1))

    hit = hits[both]
    assert (hit.fts_rank, hit.vector_rank) == (2, 1)
    similarity = cosine(vector("dog"), vector("my dog Rex likes the park"))
    assert hit.similarity == pytest.approx(similarity, abs=1e-5)
    rrf = 1 / (RRF_K + 2) + 1 / (RRF_K + 1)
    recency = 1 / (1 + 2 / RECENCY_DAYS)
    strength = (1 + 0) * (1 + 2) ** -DECAY
    assert hit.rrf == pytest.approx(rrf)
    assert hit.recency == pytest.approx(recency)
    assert hit.strength == pytest.approx(strength)
    assert hit.score == pytest.approx(
        rrf * (0.7 + 0.3 * recency) * (0.8 + 0.4 * strength / (1 + strength)))
    assert lone.score == pytest.approx(expected_score(lone))


def test_a_recent_fact_near_the_query_is_found_by_its_vector_alone(
    writer: apsw.Connection, space_id: int, config: Config, clock: ManualClock
) -> None:
    """ "What have I got?" is all stop words to full text, yet the fact "I got jazz a lot" is
    recalled by its vector (the newest facts are always vector candidates)."""
    now = clock.time()
    fact = remember(writer, "music", "I got jazz a lot", at=now)
    other = remember(writer, "tax", "the quarterly return is due", at=now)
    embed(writer, space_id, [fact, other])
    found = recall_with(config, clock, space_id).recall(writer, "What have I got?", 5)
    assert order(found.hits) == [fact]
    hit = found.hits[0]
    assert (hit.fts_rank, hit.vector_rank) == (None, 1)
    similarity = cosine(vector("What have I got?"), vector("music: I got jazz a lot"))
    assert similarity >= 0.2
    assert hit.similarity == pytest.approx(similarity, abs=1e-5)
    assert hit.rrf == pytest.approx(1 / (RRF_K + 1))


class KnnHashedEmbedder(HashedEmbedder):
    """The hashed embedder, declared fit for the bit-quantised KNN (as semantic ones are)."""

    binary_knn = True


def test_an_old_message_near_the_query_is_found_through_the_bit_index(
    writer: apsw.Connection, space_id: int, config: Config, clock: ManualClock
) -> None:
    """With an embedder whose vectors keep their neighbourhoods in sign bits, a message that
    shares no searchable word with the query is recalled through the KNN on the bit index."""
    now = clock.time()
    message = say(writer, "I got jazz a lot", at=now - 5 * DAY_S)
    embed(writer, space_id, [message])
    query = "What have I got?"
    plain = recall_with(config, clock, space_id).recall(writer, query, 5)
    assert plain.hits == ()  # no words to search, and the hashed embedder does no KNN
    found = recall_with(config, clock, space_id, embedder=KnnHashedEmbedder()).recall(
        writer, query, 5)
    assert order(found.hits) == [message]
    assert (found.hits[0].fts_rank, found.hits[0].vector_rank) == (None, 1)


def test_a_message_an_episode_covers_is_still_found_by_its_vector(
    writer: apsw.Connection, space_id: int, config: Config, clock: ManualClock
) -> None:
    """An episode standing for a message does not take it out of the vector ranking: a line
    worded unlike the question is found by its meaning or not at all (issue 22). And once it
    is forgotten, the bit pass no longer brings it."""
    now = clock.time()
    message = say(writer, "I got jazz a lot", at=now - 5 * DAY_S)
    _, item_id = split(message)
    row = EpisodeRow(gist="Talked about records", intent="", outcome="", entities=(),
                     open_loops=(), salience=0.5, valence=0.0, transcript_from=item_id,
                     transcript_to=item_id, happened_at=now - 5 * DAY_S)
    with db.immediate(writer):
        memory_writes.insert_episodes(writer, "main", [row], upto_transcript_id=item_id,
                                      encoding_id="enc", now=now)
    assert memory_queries.encoded_upto(writer, "main") == item_id
    embed(writer, space_id, [message])
    recall = recall_with(config, clock, space_id, embedder=KnnHashedEmbedder())
    found = recall.recall(writer, "What have I got?", 5)
    assert order(found.hits)[0] == message
    assert found.hits[0].vector_rank == 1
    with db.immediate(writer):
        memory_writes.unindex(writer, message)
        writer.execute("DELETE FROM transcript WHERE id = ?", (item_id,))
    assert recall.recall(writer, "What have I got?", 5).hits == ()


def test_warming_reads_the_bit_index_before_the_first_recall(
    writer: apsw.Connection, space_id: int, config: Config, clock: ManualClock,
    log_records: list[logging.LogRecord],
) -> None:
    """At start the server reads the bit index on a background thread (`warm`), logging how
    many items it holds; a store that cannot be read then is logged, not raised: the first
    turn reads it instead."""
    keys = [say(writer, f"line {n}", at=clock.time()) for n in range(3)]
    embed(writer, space_id, keys)

    @contextmanager
    def connect() -> Iterator[apsw.Connection]:
        yield writer

    @contextmanager
    def broken() -> Iterator[apsw.Connection]:
        raise apsw.CantOpenError("unable to open database file")
        yield writer

    recall = recall_with(config, clock, space_id, embedder=KnnHashedEmbedder())
    recall.warm(broken)
    recall.warm(connect)
    logged = [(r.levelno, r.msg) for r in log_records
              if r.name == "chalie.memory" and isinstance(r.msg, dict)]
    assert [(level, e["event"], e["error"]) for level, e in logged
            if e["event"] == "bit_index_not_read"] == [
        (logging.WARNING, "bit_index_not_read", "CantOpenError('unable to open database file')")]
    assert [e["items"] for _, e in logged if e["event"] == "bit_index_read"] == [3]
    recall_with(config, clock, space_id).warm(connect)  # hashed: no bit index, nothing read
    assert len([r for r in log_records if isinstance(r.msg, dict)
                and r.msg.get("event") == "bit_index_read"]) == 1


# --- recency and retrieval strength ---------------------------------------------------------------

def test_of_two_equal_matches_the_newer_ranks_first(
    writer: apsw.Connection, space_id: int, config: Config, clock: ManualClock
) -> None:
    """The same words said yesterday and 40 days ago: yesterday's comes first."""
    now = clock.time()
    newer = say(writer, "the dentist appointment is on Friday", at=now - DAY_S)
    older = say(writer, "the dentist appointment is on Friday", at=now - 40 * DAY_S)
    found = recall_with(config, clock, space_id, decay=0.0).recall(writer, "dentist", 5)
    assert order(found.hits) == [newer, older]
    hits = by_key(found.hits)
    assert hits[newer].recency == pytest.approx(1 / (1 + 1 / RECENCY_DAYS))
    assert hits[older].recency == pytest.approx(1 / (1 + 40 / RECENCY_DAYS))
    assert hits[newer].strength == hits[older].strength == 1.0


def test_recency_halves_after_recency_days(
    writer: apsw.Connection, space_id: int, config: Config, clock: ManualClock
) -> None:
    """A message recalled just after it was said has recency 1; recency_days later, 0.5."""
    key = say(writer, "the dentist appointment is on Friday", at=clock.time())
    recall = recall_with(config, clock, space_id)
    (fresh,) = recall.recall(writer, "dentist", 5).hits
    assert fresh.recency == 1.0
    clock.advance(RECENCY_DAYS * DAY_S)
    (later,) = recall.recall(writer, "dentist", 5).hits
    assert later.item.mkey == key
    assert later.recency == pytest.approx(0.5)
    assert later.score < fresh.score


def test_recalling_an_item_strengthens_it_past_an_equal_one(
    writer: apsw.Connection, space_id: int, config: Config, clock: ManualClock
) -> None:
    """Of two equal messages, the one that went into a prompt before overtakes the other."""
    now = clock.time()
    first = say(writer, "Anna feeds the parrot on Sundays", at=now)
    second = say(writer, "Anna feeds the parrot on Sundays", at=now)
    recall = recall_with(config, clock, space_id)
    before = recall.recall(writer, "who feeds the parrot", 5).hits
    loser = order(before)[-1]
    assert set(order(before)) == {first, second}
    with db.immediate(writer):
        memory_writes.record_recalls(writer, [loser], now=now)
    after = recall.recall(writer, "who feeds the parrot", 5).hits
    assert order(after)[0] == loser
    assert by_key(after)[loser].strength == pytest.approx(2.0)  # (1 + 1) * (1 + 0) ** -0.5


def test_retrieval_strength_decays_as_a_power_law_of_days_since_the_last_recall(
    writer: apsw.Connection, space_id: int, config: Config, clock: ManualClock
) -> None:
    """Recalled twice, three days ago: strength (1 + 2) * (1 + 3) ** -0.5 = 1.5; never recalled
    and said three days ago: (1 + 3) ** -0.5 = 0.5."""
    now = clock.time()
    recalled = say(writer, "Anna feeds the parrot on Sundays", at=now)
    other = say(writer, "Anna feeds the parrot on Sundays", at=now)
    with db.immediate(writer):
        memory_writes.record_recalls(writer, [recalled], now=now)
        memory_writes.record_recalls(writer, [recalled], now=now)
    clock.advance(3 * DAY_S)
    hits = by_key(recall_with(config, clock, space_id).recall(writer, "parrot", 5).hits)
    assert hits[recalled].strength == pytest.approx(3 * 4 ** -DECAY)
    assert hits[other].strength == pytest.approx(4 ** -DECAY)
    assert hits[recalled].score == pytest.approx(expected_score(hits[recalled]))


# --- what is left out -----------------------------------------------------------------------------

def test_messages_from_before_transcript_id_on_are_left_out(
    writer: apsw.Connection, space_id: int, config: Config, clock: ManualClock
) -> None:
    """Messages already in the prompt's history (id >= before_transcript_id) are not recalled,
    even by vector; facts and episodes are not affected by the transcript id."""
    now = clock.time()
    old = say(writer, "Kiwi the parrot likes apples", at=now)
    recent = say(writer, "Kiwi the parrot likes pears", at=now)
    remember(writer, "city", "Lyon", at=now)
    fact = remember(writer, "pet", "Kiwi the parrot", at=now)
    embed(writer, space_id, [old, recent, fact])
    _, recent_id = split(recent)
    assert split(fact)[1] >= recent_id  # an id at or past the mark, but of another kind
    found = recall_with(config, clock, space_id).recall(
        writer, "Kiwi the parrot", 5, before_transcript_id=recent_id)
    assert set(order(found.hits)) == {old, fact}
    assert all(h.vector_rank is not None for h in found.hits)


def test_excluded_keys_are_left_out(
    writer: apsw.Connection, space_id: int, config: Config, clock: ManualClock
) -> None:
    """Keys already in the prompt (passed in `exclude`) are not recalled again."""
    now = clock.time()
    message = say(writer, "Kiwi the parrot likes apples", at=now)
    fact = remember(writer, "pet", "Kiwi the parrot", at=now)
    embed(writer, space_id, [message, fact])
    found = recall_with(config, clock, space_id).recall(writer, "Kiwi", 5, exclude={fact})
    assert order(found.hits) == [message]


def test_superseded_and_forgotten_knowledge_is_never_recalled(
    writer: apsw.Connection, space_id: int, config: Config, clock: ManualClock
) -> None:
    """An old value of a fact and a forgotten fact are not recalled, by words or by vector,
    even though both were embedded; the current value is."""
    now = clock.time()
    old = remember(writer, "pet", "a parrot called Kiwi", at=now - 10.0)
    forgotten = remember(writer, "neighbour pet", "a parrot called Kiwi", at=now - 9.0)
    embed(writer, space_id, [old, forgotten])
    current = remember(writer, "pet", "a cat called Kiwi", at=now)
    embed(writer, space_id, [current])
    with db.immediate(writer):
        assert memory_writes.forget_knowledge(writer, split(forgotten)[1], now=now)
    found = recall_with(config, clock, space_id).recall(writer, "a parrot called Kiwi", 5)
    assert order(found.hits) == [current]
    assert found.hits[0].item.text == "pet: a cat called Kiwi"


def test_an_episodes_salience_weighs_in(
    writer: apsw.Connection, space_id: int, config: Config, clock: ManualClock
) -> None:
    """Of two equal episodes, the salient one ranks first; salience multiplies the score by
    0.9 + 0.2 * salience."""
    now = clock.time()
    salient = add_episode(writer, "Booked the flight to Lisbon", salience=1.0, at=now)
    dull = add_episode(writer, "Booked the flight to Lisbon", salience=0.0, at=now)
    found = recall_with(config, clock, space_id).recall(writer, "Lisbon flight", 5)
    assert order(found.hits) == [salient, dull]
    hits = by_key(found.hits)
    assert hits[salient].item.salience == 1.0
    assert hits[salient].score == pytest.approx(expected_score(hits[salient], 1.1))
    assert hits[dull].score == pytest.approx(expected_score(hits[dull], 0.9))


# --- degraded recall ------------------------------------------------------------------------------

def test_an_embedder_that_fails_degrades_recall_to_full_text(
    writer: apsw.Connection, space_id: int, config: Config, clock: ManualClock,
    log_records: list[logging.LogRecord],
) -> None:
    """With the embedding server down, recall still answers by full text, says why it is
    degraded, counts it in chalie_recall_degraded_total and logs a warning, not an error."""
    now = clock.time()
    key = say(writer, "Kiwi the parrot likes apples", at=now)
    embed(writer, space_id, [key])  # the space has vectors, so the query must be embedded
    metrics = Metrics()
    embedder = FailingEmbedder()
    found = recall_with(config, clock, space_id, embedder=embedder, metrics=metrics).recall(
        writer, "Kiwi", 5)
    assert embedder.calls == 1
    assert order(found.hits) == [key]
    assert (found.hits[0].fts_rank, found.hits[0].vector_rank) == (1, None)
    assert found.degraded is not None
    assert "could not be embedded" in found.degraded
    assert "could not connect" in found.degraded
    assert metrics.registry.get_sample_value("chalie_recall_degraded_total") == 1.0
    warnings = [r for r in log_records if r.name == "chalie.memory"]
    assert [r.levelno for r in warnings] == [logging.WARNING]
    assert "query_not_embedded" in warnings[0].getMessage()


def test_vectors_of_another_space_are_never_used(
    writer: apsw.Connection, space_id: int, config: Config, clock: ManualClock
) -> None:
    """Items embedded only by a previous embedder are found by full text alone until the
    current one has embedded them."""
    now = clock.time()
    with db.immediate(writer):
        stale = memory_writes.ensure_space(writer, "hashed-previous", now=1.0)
    old = say(writer, "Kiwi the parrot likes apples", at=now)
    new = say(writer, "Kiwi the parrot likes pears", at=now)
    embed(writer, stale, [old, new])
    embed(writer, space_id, [new])
    found = recall_with(config, clock, space_id).recall(writer, "Kiwi the parrot likes apples",
                                                       5)
    assert found.degraded is None
    hits = by_key(found.hits)
    assert set(hits) == {old, new}
    assert (hits[old].vector_rank, hits[old].similarity) == (None, None)
    assert hits[new].vector_rank == 1
    assert math.isfinite(hits[new].score)


# --- neighbours -----------------------------------------------------------------------------------

def test_a_recalled_message_brings_the_episode_that_covers_it(
    writer: apsw.Connection, space_id: int, config: Config, clock: ManualClock
) -> None:
    """Beside a recalled message: the lines said before and after it, and the episode whose span
    covers it, each at half the message's score; an episode of other lines does not come."""
    at = clock.time() - DAY_S
    before = say(writer, "we should plan something for the weekend", at=at)
    hit = say(writer, "the canoe rental opens at nine on saturday", at=at + 30)
    after = say(writer, "great, I'll bring sandwiches", at=at + 60)
    row = EpisodeRow(gist="weekend trip planned", intent="", outcome="", entities=(),
                     open_loops=(), salience=0.5, valence=0.0,
                     transcript_from=split(before)[1], transcript_to=split(after)[1],
                     happened_at=at + 60)
    other = EpisodeRow(gist="tax forms", intent="", outcome="", entities=(), open_loops=(),
                       salience=0.5, valence=0.0, transcript_from=split(after)[1] + 1,
                       transcript_to=split(after)[1] + 5, happened_at=at + 90)
    with db.immediate(writer):
        covering, _ = memory_writes.insert_episodes(writer, "main", [row, other],
                                                    upto_transcript_id=0, encoding_id="enc",
                                                    now=at + 90)
    found = recall_with(config, clock, space_id).recall(writer, "canoe rental", 10)
    hits = by_key(found.hits)
    assert order(found.hits)[0] == hit
    beside = {key: h for key, h in hits.items() if h.beside == hit}
    assert set(beside) == {before, after, mkey(Kind.EPISODE, covering)}
    for h in beside.values():
        assert h.score == pytest.approx(hits[hit].score * 0.5)
