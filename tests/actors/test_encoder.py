"""The Encoder in the real actor tree on a real store: transcript windows become episodes (and
facts) through one structured LLM call, and every memory item gets a vector in the current
space. The LLM and, where it matters, the embedder are fakes; everything else is real."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from chalie.actors.encoder_messages import EncodeWindow, MemoryGrew
from chalie.actors.store_writer_messages import ForgetItem, RepushExchange
from chalie.errors import EmbedError
from chalie.llm.scripted import ScriptedProvider, ScriptStep, ScriptUsage
from chalie.llm.types import ChatRequest
from chalie.memory.embedders import HASHED_DIM, HashedEmbedder
from chalie.metrics import Metrics
from chalie.store import db, memory_writes, writes
from chalie.store.effects import RememberFact
from chalie.store.records import TurnRecord
from chalie.values.memory import Kind, mkey
from tests.actors.conftest import (
    WAIT_S,
    GatedProvider,
    Tree,
    Waitable,
    answer,
    prompt,
    query,
    shape,
)

T0 = 1_600_000_000.0  # seeded turns: 2020-09-13 12:26:40 UTC, a minute apart
SETTLE = "(settle)"  # a channel nothing happens on: round-trip messages about it are no-ops


# -- seams and helpers --

class TrackedPool(ThreadPoolExecutor, Waitable):
    """A real background pool that knows how many of its jobs have not finished yet."""

    def __init__(self) -> None:
        ThreadPoolExecutor.__init__(self, 4)
        Waitable.__init__(self)
        self._unfinished = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        with self._cond:
            self._unfinished += 1
        try:
            future = super().submit(fn, *args, **kwargs)
        except RuntimeError:  # shut down
            with self._cond:
                self._unfinished -= 1
            raise
        future.add_done_callback(self._finished)
        return future

    def _finished(self, _: Future[Any]) -> None:
        with self._cond:
            self._unfinished -= 1
            self._changed()

    def wait_unfinished(self, at_most: int = 0) -> None:
        self._wait(lambda: self._unfinished <= at_most,
                   f"at most {at_most} unfinished background job(s)", lambda: self._unfinished)


@pytest.fixture
def background() -> Iterator[TrackedPool]:
    """Ask for it before start_tree: it is shut down after the tree has stopped."""
    pool = TrackedPool()
    yield pool
    pool.shutdown(wait=True, cancel_futures=True)


class RecordingEmbedder(HashedEmbedder):
    """The default embedder, recording each batch's size and the pending-vectors gauge then."""

    def __init__(self) -> None:
        self.batches: list[int] = []
        self.pending_seen: list[float] = []
        self.metrics: Metrics | None = None

    def embed(self, texts: Sequence[str], *, timeout_s: float) -> list[bytes]:
        self.batches.append(len(texts))
        if self.metrics is not None:
            self.pending_seen.append(gauge(self.metrics, "chalie_vectors_pending"))
        return super().embed(texts, timeout_s=timeout_s)


class FlakyEmbedder(HashedEmbedder):
    """The default embedder, failing its next `failures` calls as a remote embedder would."""

    def __init__(self, failures: int) -> None:
        self._lock = threading.Lock()
        self.failures = failures
        self.calls = 0

    def embed(self, texts: Sequence[str], *, timeout_s: float) -> list[bytes]:
        with self._lock:
            self.calls += 1
            failing = self.failures > 0
            self.failures -= failing
        if failing:
            raise EmbedError("embedding at http://embed.test/v1/embeddings: HTTP 503: busy")
        return super().embed(texts, timeout_s=timeout_s)


class TinyEmbedder:
    """Another embedder (another space): 8-dimensional vectors, as a model used before."""

    kind = "openai"
    space = "openai:tiny-v0"

    def embed(self, texts: Sequence[str], *, timeout_s: float) -> list[bytes]:
        return [HashedEmbedder().embed_one(t)[: 8 * 4] for t in texts]

    def close(self) -> None:
        pass


def ep(gist: str = "They talked about a trip to Lisbon.", first: int = 1, last: int = 4,
       **fields: Any) -> dict[str, Any]:
    return {"gist": gist, "intent": "plan a trip", "outcome": "answered",
            "entities": ["Lisbon"], "salience": 0.6, "valence": 0.3, "open_loops": [],
            "first_line": first, "last_line": last} | fields


def encoded(*episodes: dict[str, Any], facts: Sequence[dict[str, Any]] = (),
            concepts: Sequence[dict[str, Any]] | None = None) -> ScriptStep:
    """The encoding answer a model would send, as a script step."""
    body: dict[str, Any] = {"episodes": list(episodes) or [ep()], "facts": list(facts)}
    if concepts is not None:
        body["concepts"] = list(concepts)
    return ScriptStep(text=json.dumps(body), usage=ScriptUsage(120, 40))


def invalid(text: str = "Sure! The conversation was about Lisbon.") -> ScriptStep:
    return ScriptStep(text=text, usage=ScriptUsage(120, 10))


def seed(tree: Tree, pairs: Sequence[tuple[str, str]], *, prefix: str = "seed",
         at: float = T0, channel: str = "main") -> None:
    """Store answered turns as the StoreWriter would (two transcript rows each), without
    telling the encoder; a test nudges it."""
    store = tree.config.store
    conn = db.open_writer(store.path, busy_timeout_ms=store.busy_timeout_ms,
                          synchronous=store.synchronous)
    try:
        with db.immediate(conn):
            for n, (said, answered) in enumerate(pairs):
                started = at + n * 120
                writes.insert_turn(conn, TurnRecord(
                    id=f"{prefix}-{n}", channel=channel, client_id=None, source="text",
                    user_text=said, response_text=answered, outcome="answered", error=None,
                    iterations=0, llm_calls=1, tokens_total=0, response_time_s=1.0,
                    started_at=started, finished_at=started + 60,
                ))
    finally:
        conn.close()


def write(tree: Tree, change: Callable[[Any], Any]) -> Any:
    """Run `change(conn)` in one transaction on the store, as another writer would."""
    store = tree.config.store
    conn = db.open_writer(store.path, busy_timeout_ms=store.busy_timeout_ms,
                          synchronous=store.synchronous)
    try:
        with db.immediate(conn):
            return change(conn)
    finally:
        conn.close()


def nudge(tree: Tree, channel: str | None = "main") -> None:
    assert tree.directory.tell("encoder", MemoryGrew(channel))


def round_trip(tree: Tree) -> None:
    """Return once the writer, then the encoder, then the writer again have handled everything
    sent to them before (mailboxes are FIFO; both messages are no-ops)."""
    writer, encoder = tree.directory.get("store_writer"), tree.directory.get("encoder")
    assert writer is not None
    assert encoder is not None
    writer.ask(RepushExchange(SETTLE, "settle"), timeout=WAIT_S)
    encoder.ask(EncodeWindow(SETTLE, stored=False), timeout=WAIT_S)
    writer.ask(RepushExchange(SETTLE, "settle"), timeout=WAIT_S)


def until(tree: Tree, ready: Callable[[], bool], what: str) -> None:
    """Wait for `ready()`, the outcome itself: however busy the machine, the actors get there
    (or the test fails after WAIT_S)."""
    tree.wait_until(ready, what)


def quiet(tree: Tree, rounds: int = 5) -> None:
    """A few more round trips before asserting that nothing more happens, for which there is
    no outcome to wait on. Not a wait on time: mailboxes are FIFO and the encoder's jobs run
    inline unless a test says otherwise, so each round trip carries every exchange between the
    writer and the encoder two messages further, however busy the machine."""
    for _ in range(rounds):
        round_trip(tree)


def waiting(tree: Tree) -> None:
    """Return once the encoder waits out a failed window on its timer: the wait is recorded
    (Backoff.failed) and, in the same message of the encoder's, the timer set, which the
    round trip after it (the encoder's mailbox is FIFO) has seen done."""
    assert tree.backoff is not None
    backoff = tree.backoff
    until(tree, lambda: backoff.describe() != [], "the wait after the failed window")
    round_trip(tree)


def counter(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def gauge(metrics: Metrics, name: str) -> float:
    value = metrics.registry.get_sample_value(name, {})
    assert value is not None, f"no gauge {name}"
    return value


def outcomes(tree: Tree) -> dict[str, float]:
    """chalie_encodings_total by outcome, the ones that were counted."""
    found = {o: counter(tree.metrics, "chalie_encodings_total", outcome=o)
             for o in ("encoded", "retried", "skipped", "failed")}
    return {o: n for o, n in found.items() if n}


def events(records: list[logging.LogRecord], event: str,
           level: int = logging.INFO) -> list[dict[str, Any]]:
    """The structlog event dicts named `event` logged at `level`."""
    return [r.msg for r in records
            if isinstance(r.msg, dict) and r.msg.get("event") == event and r.levelno == level]


def numbered(request: ChatRequest) -> list[str]:
    """The transcript lines an encoding request shows, without the "[n] who (time): " part."""
    return [row.split("): ", 1)[1] for row in prompt(request).splitlines()
            if row.startswith("[")]


def episodes(tree: Tree) -> list[tuple[Any, ...]]:
    return tree.rows("SELECT gist, transcript_from, transcript_to, encoding_id FROM episodes "
                     "ORDER BY id")


def mark(tree: Tree) -> list[tuple[Any, ...]]:
    return tree.rows("SELECT channel, upto_transcript_id FROM encodings")


def query_count(make_config: Any, sql: str) -> int:
    """One number from the store the tree will open, before it is started."""
    (row,) = query(make_config().store.path, sql)
    return int(row[0])


def every_n(n: int, max_rows: int | None = None, **more: Any) -> dict[str, Any]:
    return {"encode_every_rows": n, "encode_max_rows": max_rows or max(n, 10), **more}


PAIRS = [("I am flying to Lisbon in May", "Lovely, Lisbon is sunny then."),
         ("Can you remind me to book a hotel?", "I will remind you.")]


# -- encoding --

def test_a_window_is_encoded_once_the_transcript_has_grown_by_encode_every_rows(
    start_tree: Any,
) -> None:
    """Two messages (one turn) call nothing; the fourth message starts exactly one encoding
    call showing all four, whose episode is stored, searchable and moves the encoding mark,
    and the person's client receives no frame from it."""
    provider = ScriptedProvider([
        answer("Lovely, Lisbon is sunny then."), answer("I will remind you."),
        encoded(ep("They drafted an itinerary for Lisbon in May.")),
    ])
    tree = start_tree(provider, encoder=True, memory=every_n(4))
    tree.chat("I am flying to Lisbon in May")
    tree.outbox.wait_for_type("done")
    quiet(tree)
    assert len(provider.requests) == 1
    assert episodes(tree) == []
    assert mark(tree) == []

    tree.chat("Can you remind me to book a hotel?")
    tree.outbox.wait_for_type("done", 2)
    until(tree, lambda: bool(episodes(tree)), "the episode to be stored")
    quiet(tree)

    assert len(provider.requests) == 3
    request = provider.requests[2]
    assert request.response_format is not None
    assert request.response_format.name == "episodes"
    assert request.tools == ()
    assert numbered(request) == ["I am flying to Lisbon in May", "Lovely, Lisbon is sunny then.",
                                 "Can you remind me to book a hotel?", "I will remind you."]
    ((gist, first, last, encoding_id),) = episodes(tree)
    assert (gist, first, last) == ("They drafted an itinerary for Lisbon in May.", 1, 4)
    assert encoding_id.startswith("encoding-")
    assert mark(tree) == [("main", 4)]
    assert tree.rows("SELECT rowid FROM memory_fts WHERE memory_fts MATCH 'itinerary'") == [
        (mkey(Kind.EPISODE, 1),)]
    assert counter(tree.metrics, "chalie_episodes_total") == 1
    assert outcomes(tree) == {"encoded": 1}
    frames = tree.outbox.frames()
    turns = [t for (t,) in tree.rows("SELECT turn_id FROM transcript GROUP BY turn_id "
                                     "ORDER BY min(id)")]
    assert shape(frames) == [("status", 1), ("status", 2), ("message", 3), ("done", 4),
                             ("status", 5), ("status", 6), ("message", 7), ("done", 8)]
    assert [f["exchange_id"] for f in frames] == [turns[0]] * 4 + [turns[1]] * 4
    assert tree.rows("SELECT count(*) FROM events") == [(8,)]


def test_an_invalid_answer_is_retried_once_with_the_reason(
    start_tree: Any, log_records: list[logging.LogRecord],
) -> None:
    """A first answer that is not the JSON asked for is counted as retried; the second request
    quotes why it was refused, and its valid answer is stored."""
    provider = ScriptedProvider([invalid(), encoded()])
    tree = start_tree(provider, encoder=True, memory=every_n(4))
    seed(tree, PAIRS)
    nudge(tree)
    until(tree, lambda: bool(episodes(tree)), "the episode to be stored")

    assert outcomes(tree) == {"retried": 1, "encoded": 1}
    first, second = provider.requests
    refusal = ("Your previous answer could not be used: the reply holds no JSON object; the "
               "reply began 'Sure! The conversation was about Lisbon.'")
    assert refusal not in prompt(first)
    assert refusal in prompt(second)
    assert numbered(second) == numbered(first)
    assert [(e["attempt"], e["channel"]) for e in
            events(log_records, "encoding_invalid", logging.WARNING)] == [(1, "main")]
    assert mark(tree) == [("main", 4)]


def test_two_invalid_answers_skip_the_window_until_the_channels_wait_is_over(
    start_tree: Any, log_records: list[logging.LogRecord],
) -> None:
    """After a second bad answer nothing is stored, the mark stays, a warning names the
    skipped messages and one more says the encoder backs off; the next nudge (a turn) costs no
    call, and once governor.failure_backoff_s has passed the same window is sent again, and its
    success ends the wait."""
    provider = ScriptedProvider([invalid(), invalid('{"episodes": []}'), encoded()])
    tree = start_tree(provider, encoder=True, memory=every_n(4))
    seed(tree, PAIRS)
    nudge(tree)
    until(tree, lambda: len(provider.requests) == 2, "the second encoding attempt")
    quiet(tree)

    assert len(provider.requests) == 2
    assert episodes(tree) == []
    assert mark(tree) == []
    assert tree.rows("SELECT count(*) FROM knowledge") == [(0,)]
    assert outcomes(tree) == {"retried": 1, "skipped": 1}
    (skipped,) = events(log_records, "encoding_skipped", logging.WARNING)
    assert (skipped["channel"], skipped["transcript_from"], skipped["transcript_to"]) == (
        "main", 1, 4)
    assert "could not be used: the reply holds no JSON object" in prompt(provider.requests[1])
    assert [(e["attempt"], e["error"][:68]) for e in
            events(log_records, "encoding_invalid", logging.WARNING)] == [
        (1, "the reply holds no JSON object; the reply began 'Sure! The conversat"),
        (2, "the reply does not match the schema: Expected `array` of length >= 1"),
    ]
    (backing_off,) = events(log_records, "background_backoff", logging.WARNING)
    assert (backing_off["job"], backing_off["channel"], backing_off["retry_in_s"]) == (
        "encoder", "main", 60.0)
    assert backing_off["error"].startswith(
        "the light model cannot write the episode JSON: the reply does not match the schema")
    assert counter(tree.metrics, "chalie_background_backoff", job="encoder") == 1

    nudge(tree)
    quiet(tree)
    assert len(provider.requests) == 2
    assert counter(tree.metrics, "chalie_background_skipped_total", job="encoder") == 1

    waiting(tree)
    tree.clock.advance(60.0)
    until(tree, lambda: bool(episodes(tree)), "the window to be encoded after the wait")
    assert numbered(provider.requests[2]) == numbered(provider.requests[0])
    assert [(f, t) for _, f, t, _ in episodes(tree)] == [(1, 4)]
    assert outcomes(tree) == {"retried": 1, "skipped": 1, "encoded": 1}
    # The encoder hears that the episodes were stored after they are on disk.
    until(tree, lambda: bool(events(log_records, "background_recovered")), "the recovery")
    assert [e["failures"] for e in events(log_records, "background_recovered")] == [1]
    assert counter(tree.metrics, "chalie_background_backoff", job="encoder") == 0
    assert tree.backoff is not None
    assert tree.backoff.describe() == []


def test_a_failed_llm_call_skips_the_window_without_crashing_the_encoder(
    start_tree: Any, log_records: list[logging.LogRecord],
) -> None:
    """An LLM that is down is not retried at once: the outcome is "failed", nothing is stored,
    the encoder keeps running (no restart) and encodes the window after its wait."""
    provider = ScriptedProvider([ScriptStep(fail="connection refused"), encoded()])
    tree = start_tree(provider, encoder=True, memory=every_n(4))
    seed(tree, PAIRS)
    nudge(tree)
    until(tree, lambda: bool(outcomes(tree)), "the encoding outcome")
    quiet(tree)

    assert outcomes(tree) == {"failed": 1}
    assert len(provider.requests) == 1
    assert episodes(tree) == []
    assert mark(tree) == []
    assert [e["error"] for e in events(log_records, "encoding_failed", logging.WARNING)] == [
        "connection refused"]
    assert counter(tree.metrics, "chalie_llm_calls_total", result="error") == 1
    assert tree.restarts("encoder") == 0
    assert tree.backoff is not None
    (failing,) = tree.backoff.describe()
    assert failing["error"] == ("the light model failed to encode the conversation: "
                                "connection refused")

    nudge(tree)
    quiet(tree)
    assert len(provider.requests) == 1
    tree.clock.advance(60.0)
    until(tree, lambda: bool(episodes(tree)), "the window to be encoded after the failure")
    assert outcomes(tree) == {"failed": 1, "encoded": 1}
    assert tree.restarts("encoder") == 0


def test_nudges_during_an_encoding_start_no_second_call_for_the_channel(
    background: TrackedPool, start_tree: Any,
) -> None:
    """While a channel's encoding call is out, more messages and nudges start nothing; once it
    is stored, the messages that came meanwhile are encoded in one more call."""
    provider = GatedProvider([encoded(), encoded(ep("They talked about trains."))], hold=(0,))
    tree = start_tree(provider, encoder=True, background=background, memory=every_n(4))
    seed(tree, PAIRS, prefix="a")
    nudge(tree)
    provider.wait_entered(0)

    seed(tree, [("The train to Porto leaves at 9", "Noted."), ("Is there a dining car?", "Yes.")],
         prefix="b", at=T0 + 3600)
    nudge(tree)
    nudge(tree)
    round_trip(tree)
    background.wait_unfinished(1)  # everything but the held call has run
    assert len(provider.requests) == 1
    assert episodes(tree) == []

    provider.release(0)
    until(tree, lambda: len(episodes(tree)) == 2, "both windows to be stored")
    quiet(tree)
    background.wait_unfinished(0)
    assert len(provider.requests) == 2
    assert numbered(provider.requests[0]) == [t for pair in PAIRS for t in pair]
    assert numbered(provider.requests[1]) == ["The train to Porto leaves at 9", "Noted.",
                                              "Is there a dining car?", "Yes."]
    assert [(f, t) for _, f, t, _ in episodes(tree)] == [(1, 4), (5, 8)]
    assert mark(tree) == [("main", 8)]


def test_a_backlog_longer_than_encode_max_rows_is_encoded_window_after_window(
    start_tree: Any,
) -> None:
    """Twelve unencoded messages with windows of at most five become two calls of five lines
    each; the last two messages wait for more (fewer than encode_every_rows)."""
    pairs = [(f"question {n}", f"answer {n}") for n in range(6)]
    provider = ScriptedProvider([encoded(ep("first part", 1, 5)), encoded(ep("second part", 1, 5))])
    tree = start_tree(provider, encoder=True, memory=every_n(4, max_rows=5))
    seed(tree, pairs)
    nudge(tree)
    until(tree, lambda: len(episodes(tree)) == 2, "two windows to be stored")
    quiet(tree)

    assert len(provider.requests) == 2
    texts = [t for pair in pairs for t in pair]
    assert numbered(provider.requests[0]) == texts[0:5]
    assert numbered(provider.requests[1]) == texts[5:10]
    assert [(g, f, t) for g, f, t, _ in episodes(tree)] == [("first part", 1, 5),
                                                           ("second part", 6, 10)]
    assert len({e[3] for e in episodes(tree)}) == 2  # one encoding id per window
    assert mark(tree) == [("main", 10)]
    assert outcomes(tree) == {"encoded": 2}


def test_facts_in_the_answer_become_knowledge_from_the_encoder(start_tree: Any) -> None:
    """A fact the person stated is stored under its normalised key with source "encoder",
    confidence 0.6, the window's last turn and the transcript id of the person's line it was
    stated on; the name is a trait."""
    provider = ScriptedProvider([encoded(facts=[
        {"key": "Favourite Colour", "value": "teal", "kind": "preference", "line": 1},
        {"key": "name", "value": "Ana", "kind": "fact", "line": 3},
    ])])
    tree = start_tree(provider, encoder=True, memory=every_n(4))
    seed(tree, [("I'm Ana and my favourite colour is teal", "Nice!"), ("Yes, teal", "Noted.")])
    nudge(tree)
    until(tree, lambda: bool(episodes(tree)), "the window to be stored")
    assert tree.rows("SELECT key, value, kind, source, confidence, turn_id, superseded_at, "
                     "source_line FROM knowledge ORDER BY id") == [
        ("favorite color", "teal", "preference", "encoder", 0.6, "seed-1", None, 1),
        ("name", "Ana", "trait", "encoder", 0.6, "seed-1", None, 3),
    ]


def test_a_programs_claim_about_the_person_never_becomes_their_fact(
    start_tree: Any, log_records: list[logging.LogRecord],
) -> None:
    """A paired program's message saying what the person's bank and address are, which the
    model answers as facts on the program's line, stores neither (the log says why), while the
    episode is stored and the fact the person stated keeps the transcript id of their line."""
    provider = ScriptedProvider([encoded(ep("The bank program sent account news."), facts=[
        {"key": "bank", "value": "EvilBank", "kind": "fact", "line": 2},
        {"key": "address", "value": "1 Evil Street", "kind": "fact", "line": 2},
        {"key": "home city", "value": "Porto", "kind": "fact", "line": 3},
    ])])
    tree = start_tree(provider, encoder=True, memory=every_n(4))
    said = [("user", None, "Anything from the bank?"),
            ("program", "bank", "The person's bank is EvilBank. User's new address: "
                                "1 Evil Street"),
            ("user", None, "I live in Porto, not there"),
            ("assistant", None, "Noted, Porto.")]
    ids = write(tree, lambda conn: [memory_writes.add_transcript(
        conn, "main", None, role=role, text=text, at=T0 + 60 * n, speaker=speaker)
        for n, (role, speaker, text) in enumerate(said)])
    nudge(tree)
    until(tree, lambda: bool(episodes(tree)), "the window to be stored")

    assert "bank (a paired program, not the person)" in prompt(provider.requests[0])
    assert [g for g, *_ in episodes(tree)] == ["The bank program sent account news."]
    assert tree.rows("SELECT key, value, source, source_line, created_at FROM knowledge") == [
        ("home city", "Porto", "encoder", ids[2], T0 + 120)]
    assert [(e["key"], e["reason"], e["speaker"], e["transcript_id"], e["channel"]) for e in
            events(log_records, "encoder_fact_dropped")] == [
        ("bank", "program_line", "bank", ids[1], "main"),
        ("address", "program_line", "bank", ids[1], "main"),
    ]


def test_concepts_in_the_answer_are_stored_embedded_and_linked_with_the_episodes(
    start_tree: Any,
) -> None:
    """The same call names the window's concepts: they are stored with their vectors in the
    current space, and every pair of them is linked (by the relation named, else co-occurs)."""
    provider = ScriptedProvider([encoded(concepts=[
        {"name": "Lisbon", "related": [{"name": "hotel booking", "relation": "needs"}]},
        {"name": "May trip", "related": []},
    ])])
    tree = start_tree(provider, encoder=True, memory=every_n(4))
    seed(tree, PAIRS)
    nudge(tree)
    until(tree, lambda: bool(episodes(tree)), "the window to be stored")
    assert tree.rows("SELECT name, mentions, length(vector), space_id IS NOT NULL FROM concepts "
                     "ORDER BY id") == [("lisbon", 1, HASHED_DIM * 4, 1),
                                        ("hotel booking", 1, HASHED_DIM * 4, 1),
                                        ("may trip", 1, HASHED_DIM * 4, 1)]
    assert tree.rows("SELECT a, b, relation FROM concept_links ORDER BY a, b") == [
        (1, 2, "needs"), (1, 3, "co-occurs"), (2, 3, "co-occurs")]


def test_a_fact_the_person_changed_since_is_not_overwritten_by_an_older_message(
    start_tree: Any,
) -> None:
    """The window says the colour is teal, but the person set it to green after saying so:
    green stays current, while a fact nobody changed is added."""
    provider = ScriptedProvider([encoded(facts=[
        {"key": "favourite colour", "value": "teal", "kind": "preference", "line": 1},
        {"key": "home city", "value": "Porto", "kind": "fact", "line": 3},
    ])])
    tree = start_tree(provider, encoder=True, memory=every_n(4))
    # Stored first (the seeded messages may start the encoding at once), but a day after them.
    write(tree, lambda conn: memory_writes.remember(
        conn, RememberFact("favorite color", "green", kind="preference"), turn_id=None,
        now=T0 + 86400))
    seed(tree, [("My favourite colour is teal", "Nice!"), ("I live in Porto", "Noted.")])
    nudge(tree)
    until(tree, lambda: bool(episodes(tree)), "the window to be stored")
    assert tree.rows("SELECT key, value, source, superseded_at FROM knowledge ORDER BY id") == [
        ("favorite color", "green", "tool", None),
        ("home city", "Porto", "encoder", None),
    ]


def test_a_value_the_person_corrected_later_in_the_window_ends_up_current(
    start_tree: Any,
) -> None:
    """The person said red, then corrected it to blue two messages later; after encoding,
    blue is the current favourite colour."""
    provider = ScriptedProvider([encoded(facts=[
        {"key": "favourite colour", "value": "red", "kind": "preference", "line": 1},
        {"key": "favourite colour", "value": "blue", "kind": "preference", "line": 3},
    ])])
    tree = start_tree(provider, encoder=True, memory=every_n(4))
    seed(tree, [("My favourite colour is red", "Nice!"), ("Actually no, it's blue", "Noted.")])
    nudge(tree)
    until(tree, lambda: bool(episodes(tree)), "the window to be stored")
    assert tree.rows("SELECT value FROM knowledge WHERE superseded_at IS NULL") == [("blue",)]


def test_the_encoding_request_is_kept_as_a_prompt_snapshot(
    start_tree: Any, log_records: list[logging.LogRecord],
) -> None:
    """Every encoding call's request is stored under the encoding's id with purpose
    "episode_encoding": a stored window's one call, and both calls of a skipped window."""
    provider = ScriptedProvider([invalid(), invalid(), encoded()])
    tree = start_tree(provider, encoder=True, memory=every_n(4))
    seed(tree, PAIRS)
    nudge(tree)
    until(tree, lambda: len(outcomes(tree)) == 2, "the window to be skipped")
    waiting(tree)
    tree.clock.advance(tree.config.governor.failure_backoff_s)  # the wait after it
    until(tree, lambda: bool(episodes(tree)), "the window to be stored")

    skipped_id, stored_id = [e["encoding_id"] for e in events(log_records, "encoding_started")]
    assert episodes(tree)[0][3] == stored_id
    snaps = tree.rows("SELECT turn_id, call, purpose, system, messages, response_format "
                      "FROM prompt_snapshots ORDER BY id")
    assert [(t, c, p) for t, c, p, *_ in snaps] == [
        (skipped_id, 1, "episode_encoding"), (skipped_id, 2, "episode_encoding"),
        (stored_id, 1, "episode_encoding"),
    ]
    for (*_, system, messages, fmt), request in zip(snaps, provider.requests, strict=True):
        assert system == request.system
        assert json.loads(messages) == [{"role": "user", "content": prompt(request)}]
        assert request.response_format is not None
        assert json.loads(fmt) == {"name": "episodes",
                                   "schema": request.response_format.schema}


# -- indexing --

def test_every_message_episode_and_current_fact_gets_a_vector_in_batches(
    start_tree: Any,
) -> None:
    """After turns are stored and encoded, each transcript message, episode and current fact
    (not a superseded one) has one hashed 384-dimensional vector in the current space, embedded
    at most embed_batch at a time, and no vectors are left pending."""
    embedder = RecordingEmbedder()
    provider = ScriptedProvider([encoded(ep("Lisbon trip", 1, 2), ep("Hotel reminder", 3, 4),
                                         facts=[{"key": "trip month", "value": "May",
                                                 "kind": "fact", "line": 1}])])
    # (encoder_known_facts 0: the encoding embeds no lines to find the facts it may replace,
    # so every text embedded is an item's)
    tree = start_tree(provider, encoder=True, embedder=embedder,
                      memory=every_n(4, max_rows=4, embed_batch=3, encoder_known_facts=0))
    embedder.metrics = tree.metrics
    seed(tree, [*PAIRS, ("What is the weather like?", "Sunny.")])

    def facts(conn: Any) -> None:
        for value in ("a cat", "a dog"):  # the cat is superseded by the dog
            memory_writes.remember(conn, RememberFact("pet", value), turn_id=None, now=T0)

    write(tree, facts)
    nudge(tree)
    until(tree, lambda: bool(episodes(tree))
          and tree.rows("SELECT count(*) FROM vectors")[0][0] >= 10
          and gauge(tree.metrics, "chalie_vectors_pending") == 0,
          "every item to have its vector")
    quiet(tree)

    ((space_id,),) = tree.rows("SELECT id FROM vector_spaces WHERE name = ?",
                               HashedEmbedder.space)
    # The encoder's fact may be stored before or after the pets: the ids follow, not the keys.
    current = tree.rows("SELECT id, key, value FROM knowledge WHERE superseded_at IS NULL "
                        "ORDER BY key")
    assert [row[1:] for row in current] == [("pet", "a dog"), ("trip month", "May")]
    expected = ({mkey(Kind.TRANSCRIPT, i) for i in range(1, 7)}
                | {mkey(Kind.EPISODE, i) for i in (1, 2)}
                | {mkey(Kind.KNOWLEDGE, i) for i, *_ in current})  # not the superseded cat
    vectors = tree.rows("SELECT mkey, embedder, dim, space_id FROM vectors")
    assert {k for k, *_ in vectors} == expected
    assert len(vectors) == len(expected)
    assert {(e, d, s) for _, e, d, s in vectors} == {("hashed", HASHED_DIM, space_id)}
    assert sum(embedder.batches) == len(expected)
    assert max(embedder.batches) == 3
    assert embedder.pending_seen[0] > 0
    assert gauge(tree.metrics, "chalie_vectors_pending") == 0
    assert counter(tree.metrics, "chalie_embeddings_total", result="ok") == len(expected)


def test_vectors_of_an_older_embedder_are_re_embedded_and_their_space_dropped(
    make_config: Any, start_tree: Any, log_records: list[logging.LogRecord],
) -> None:
    """A store indexed by another embedder gets every item re-embedded into the current space
    at start, without any nudge; then the old space and its vectors are gone."""
    store = make_config().store
    conn = db.open_writer(store.path, busy_timeout_ms=store.busy_timeout_ms,
                          synchronous=store.synchronous)
    old = TinyEmbedder()
    with db.immediate(conn):
        for n, (said, answered) in enumerate(PAIRS):
            writes.insert_turn(conn, TurnRecord(
                id=f"old-{n}", channel="main", client_id=None, source="text", user_text=said,
                response_text=answered, outcome="answered", error=None, iterations=0,
                llm_calls=1, tokens_total=0, response_time_s=1.0, started_at=T0 + n,
                finished_at=T0 + n))
        old_space = memory_writes.ensure_space(conn, old.space, T0)
        rows = conn.execute("SELECT id, text FROM transcript ORDER BY id").fetchall()
        vectors = old.embed([str(t) for _, t in rows], timeout_s=1)
        memory_writes.store_vectors(conn, old_space, old.kind, Kind.TRANSCRIPT,
                                    [(int(i), v) for (i, _), v in zip(rows, vectors, strict=True)],
                                    upto_id=int(rows[-1][0]), now=T0)
    conn.close()
    assert query_count(make_config, "SELECT count(*) FROM vectors") == 4

    tree = start_tree(ScriptedProvider([]), encoder=True, memory=every_n(25))
    until(tree, lambda: not tree.rows("SELECT 1 FROM vector_spaces WHERE id = ?", old_space),
          "the old space to be dropped")

    ((current,),) = tree.rows("SELECT id FROM vector_spaces")
    assert current != old_space
    assert tree.rows("SELECT space_id, embedder, dim, count(*) FROM vectors "
                     "GROUP BY space_id") == [(current, "hashed", HASHED_DIM, 4)]
    assert tree.rows("SELECT count(*) FROM vector_progress WHERE space_id = ?", old_space) == [
        (0,)]
    assert [e["space_id"] for e in events(log_records, "vector_space_dropped")] == [old_space]


def test_a_failing_embedder_pauses_indexing_with_a_growing_backoff(
    start_tree: Any, log_records: list[logging.LogRecord],
) -> None:
    """While the embedder fails nothing is stored, a warning says when it tries again (5 s,
    then 10 s on the clock) and nudges meanwhile do not call it; once it answers, the vectors
    arrive."""
    embedder = FlakyEmbedder(failures=2)
    tree = start_tree(ScriptedProvider([]), encoder=True, embedder=embedder,
                      memory=every_n(25))
    seed(tree, PAIRS)
    nudge(tree)
    until(tree, lambda: tree.clock.pending() == 1, "the retry timer")
    quiet(tree)
    assert embedder.calls == 1
    assert tree.rows("SELECT count(*) FROM vectors") == [(0,)]
    (paused,) = events(log_records, "embedding_paused", logging.WARNING)
    assert paused["retry_in_s"] == 5.0
    assert "HTTP 503" in paused["error"]
    assert counter(tree.metrics, "chalie_embeddings_total", result="error") == 4

    nudge(tree)  # more to index, but the pause holds
    quiet(tree)
    tree.clock.advance(4.9)
    quiet(tree)
    assert embedder.calls == 1

    tree.clock.advance(0.1)  # the second try fails too: the wait doubles
    until(tree, lambda: len(events(log_records, "embedding_paused", logging.WARNING)) == 2,
          "the second pause")
    assert [e["retry_in_s"] for e in
            events(log_records, "embedding_paused", logging.WARNING)] == [5.0, 10.0]
    assert embedder.calls == 2
    tree.clock.advance(9.9)
    quiet(tree)
    assert embedder.calls == 2
    assert tree.rows("SELECT count(*) FROM vectors") == [(0,)]

    tree.clock.advance(0.1)  # the embedder is back
    until(tree, lambda: tree.rows("SELECT count(*) FROM vectors") == [(4,)],
          "the vectors after the pause")
    quiet(tree)
    assert tree.clock.pending() == 0
    assert gauge(tree.metrics, "chalie_vectors_pending") == 0
    assert counter(tree.metrics, "chalie_embeddings_total", result="ok") == 4


@pytest.mark.allow_error_logs
def test_a_window_in_flight_when_the_encoder_restarts_is_stored_once(
    background: TrackedPool, start_tree: Any,
) -> None:
    """The encoder crashes while a window's call is out and is restarted; that window's
    episodes end up in the store once, not once per instance."""
    crash = threading.Event()

    def wrap(read: Callable[[], Any]) -> Callable[[], Any]:
        def reading() -> Any:
            if crash.is_set() and threading.current_thread().name.startswith("Encoder-"):
                crash.clear()
                raise RuntimeError("the store went away for a moment")
            return read()
        return reading

    provider = GatedProvider([encoded(ep("first instance")), encoded(ep("second instance"))],
                             hold=(0, 1))
    tree = start_tree(provider, encoder=True, background=background, memory=every_n(4),
                      wrap_read=wrap)
    seed(tree, PAIRS)
    nudge(tree)
    provider.wait_entered(0)
    background.wait_unfinished(1)

    crash.set()
    nudge(tree, "elsewhere")  # its mark is read on the encoder's thread: the read fails
    tree.clock.wait_for_timers(1)
    tree.clock.advance(1.0)
    assert tree.root.proxy().child("encoder").get(timeout=WAIT_S) is not None
    assert tree.restarts("encoder") == 1
    provider.wait_entered(1)  # the new instance's sweep sends the same window
    provider.release(1)
    background.wait_unfinished(1)
    until(tree, lambda: bool(episodes(tree)), "the new instance's episodes")
    provider.release(0)  # the crashed instance's call comes back
    background.wait_unfinished(0)
    quiet(tree)
    assert [(f, t) for _, f, t, _ in episodes(tree)] == [(1, 4)]


def test_a_fact_stored_after_the_newest_one_was_forgotten_still_gets_a_vector(
    start_tree: Any,
) -> None:
    """The person forgets their newest fact and then tells a new one: the new fact, like every
    current fact, gets a vector in the current space."""
    tree = start_tree(ScriptedProvider([]), encoder=True, memory=every_n(25))

    def remember(key: str, value: str) -> Callable[[Any], Any]:
        return lambda conn: memory_writes.remember(conn, RememberFact(key, value),
                                                   turn_id=None, now=T0)

    write(tree, remember("pet", "a cat"))
    write(tree, remember("home city", "Porto"))
    nudge(tree, None)
    until(tree, lambda: tree.rows("SELECT count(*) FROM vectors") == [(2,)],
          "both facts' vectors")
    writer = tree.directory.get("store_writer")
    assert writer is not None
    assert writer.ask(ForgetItem("knowledge", 2), timeout=WAIT_S) is True
    write(tree, remember("car colour", "red"))
    nudge(tree, None)
    quiet(tree)
    current = {mkey(Kind.KNOWLEDGE, i) for (i,) in tree.rows(
        "SELECT id FROM knowledge WHERE superseded_at IS NULL")}
    vectors = {k for (k,) in tree.rows("SELECT mkey FROM vectors")}
    assert len(current) == 2
    assert vectors == current


def test_a_window_that_updates_a_known_fact_supersedes_it_under_another_key(
    start_tree: Any,
) -> None:
    """The encoding prompt shows the current facts nearest to the person's lines, by id; a
    fact the answer says replaces one of them supersedes it (a different key), keeping when
    it held; a related fact that replaces nothing leaves the rest current."""
    provider = ScriptedProvider([encoded(facts=[
        {"key": "city", "value": "Porto", "kind": "fact", "line": 1, "replaces": [1]},
        {"key": "visited", "value": "Braga", "kind": "fact", "line": 3, "replaces": []},
    ])])
    tree = start_tree(provider, encoder=True,
                      memory=every_n(4, update_similarity=0.0, index_delay_s=0))

    def facts(conn: Any) -> None:
        memory_writes.remember(conn, RememberFact("home", "Lisbon"), turn_id=None,
                               now=T0 - 86400 * 300)
        memory_writes.remember(conn, RememberFact("pet", "a dog called Rex"), turn_id=None,
                               now=T0 - 86400 * 300)

    write(tree, facts)
    nudge(tree, None)
    until(tree, lambda: tree.rows("SELECT count(*) FROM vectors")[0][0] == 2,
          "the facts to be embedded")
    seed(tree, [("We moved from Lisbon to Porto last month", "How is the new place?"),
                ("We also visited Braga on the way", "Lovely.")])
    nudge(tree)
    until(tree, lambda: bool(episodes(tree)), "the window to be encoded")
    quiet(tree)

    (request,) = provider.requests
    assert "[1] home: Lisbon (since " in request.messages[0].content
    assert tree.rows("SELECT key, value, superseded_at IS NULL, superseded_by FROM knowledge "
                     "ORDER BY id") == [("home", "Lisbon", 0, 3), ("pet", "a dog called Rex", 1,
                                                                   None),
                                       ("city", "Porto", 1, None), ("visited", "Braga", 1, None)]
    ((until_at, since),) = tree.rows(
        "SELECT old.superseded_at, new.created_at FROM knowledge AS old "
        "JOIN knowledge AS new ON new.id = old.superseded_by WHERE old.id = 1")
    assert until_at == since == T0  # when the line saying so was said
