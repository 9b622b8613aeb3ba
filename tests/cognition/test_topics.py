"""Which topic a message joins: by a subject word it shares with the topic (never by a general
one), or by its meaning with a semantic embedder; with the lexical hashed embedder the words
decide. Each conversation runs through `topics.choose` and the StoreWriter's `topic_seen` on a
real store, in order, with the shipped [cognition] thresholds."""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import apsw
import pytest

from chalie.clock import ManualClock
from chalie.cognition import signals, topics
from chalie.cognition.topics import TopicChoice
from chalie.config import CognitionConfig
from chalie.memory.embedders import HashedEmbedder
from chalie.memory.recall import Recall
from chalie.store import cognition_rows, db

SPACE = 1

GOLDFISH = "What is a good name for a goldfish?"
STRETCH = "What is a good stretch for the lower back?"
BEES = "How do bees survive the winter?"
BEES_DARK = "Why are bees dying in the dark?"
HOUSEPLANTS = "Which houseplants survive in a dark bathroom?"
BREAD = "I am baking sourdough bread this weekend"
STARTER = "My sourdough starter doubles in six hours on the kitchen counter"
PANCAKES = "Can you tell me how to make pancakes?"
TYRE = "Can you tell me how to change a tyre?"


class FakeSemantic:
    """A semantic embedder whose vectors are set by the test: each text's unit vector."""

    kind = "fake-semantic"
    space = "fake-semantic-3"
    binary_knn = True
    in_process = True

    def __init__(self, vectors: Mapping[str, Sequence[float]]) -> None:
        self.vectors = vectors

    def embed(self, texts: Sequence[str], *, timeout_s: float) -> list[bytes]:
        return [self.embed_one(text) for text in texts]

    def embed_one(self, text: str) -> bytes:
        values = self.vectors[text]
        norm = math.hypot(*values)
        return array("f", [v / norm for v in values]).tobytes()

    def close(self) -> None:
        pass


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[apsw.Connection]:
    writer = db.open_writer(tmp_path / "data", busy_timeout_ms=2000, synchronous="OFF")
    yield writer
    writer.close()


@pytest.fixture
def settings(make_config: Any) -> CognitionConfig:
    """The shipped [cognition] settings (config/chalie.toml)."""
    cognition: CognitionConfig = make_config().cognition
    return cognition


def converse(conn: apsw.Connection, settings: CognitionConfig, texts: Sequence[str],
             embedder: HashedEmbedder | FakeSemantic | None = None) -> list[TopicChoice]:
    """Each text as a person's message on one channel, in order: its topic chosen as the Session
    chooses it (a lexical embedder's vectors not compared), then recorded."""
    semantic = embedder is not None and embedder.kind != HashedEmbedder.kind
    current: str | None = None
    choices = []
    for at, text in enumerate(texts):
        vector = embedder.embed_one(text) if embedder is not None else None
        choice = topics.choose(
            conn, channel="main", text=text, vector=vector, space_id=SPACE,
            threshold=settings.topic_threshold,
            cosine_threshold=settings.topic_cosine if semantic else None,
            recent=settings.recent_topics, current_id=current,
            leans_back=signals.nlp_signals(text).implicit_reference)
        cognition_rows.topic_seen(conn, topic_id=choice.id, channel="main", name=choice.name,
                                  new=choice.new, keywords=choice.keywords, vector=vector,
                                  space_id=SPACE, fok=1.0, now=float(at))
        current = choice.id
        choices.append(choice)
    return choices


def cosine(a: bytes, b: bytes) -> float:
    return sum(x * y for x, y in zip(array("f", a), array("f", b), strict=True))


# -- with the hashed embedder (the default), or before any vector exists --------------------

@pytest.mark.parametrize("hashed", [False, True], ids=["no vectors", "hashed"])
@pytest.mark.parametrize(("before", "after"), [
    (GOLDFISH, STRETCH),  # they share "good"
    (BEES, HOUSEPLANTS),  # they share "survive"
    (BEES_DARK, HOUSEPLANTS),  # they share "dark"
    (PANCAKES, TYRE),  # they share a frame of stop words
])
def test_a_message_that_shares_only_a_general_word_starts_its_own_topic(
    conn: apsw.Connection, settings: CognitionConfig, hashed: bool, before: str, after: str,
) -> None:
    """"A good stretch for the lower back" is not filed under "a good name for a goldfish",
    nor houseplants under bees."""
    first, second = converse(conn, settings, [before, after],
                             HashedEmbedder() if hashed else None)
    assert first.new
    assert second.new
    assert second.id != first.id


@pytest.mark.parametrize("hashed", [False, True], ids=["no vectors", "hashed"])
def test_a_message_that_shares_the_subject_joins_its_topic(
    conn: apsw.Connection, settings: CognitionConfig, hashed: bool,
) -> None:
    """The sourdough starter joins the sourdough bread it shares one subject word with, among
    six other words."""
    bread, starter = converse(conn, settings, [BREAD, STARTER],
                              HashedEmbedder() if hashed else None)
    assert not starter.new
    assert starter.id == bread.id
    assert starter.name == bread.name == "baking sourdough weekend"
    assert starter.similarity >= settings.topic_threshold


def test_a_conversation_of_the_issue_files_each_message_under_its_own_subject(
    conn: apsw.Connection, settings: CognitionConfig,
) -> None:
    """The issue's messages in one conversation: three subjects, each with the message that
    follows it, and no message filed under another subject's topic."""
    texts = [GOLDFISH, STRETCH, BEES, HOUSEPLANTS, BREAD, STARTER,
             "Back to the goldfish: should its name rhyme?"]
    choices = converse(conn, settings, texts, HashedEmbedder())
    ids = [c.id for c in choices]
    assert [c.new for c in choices] == [True, True, True, True, True, False, False]
    assert len(set(ids)) == 5
    assert ids[5] == ids[4]  # the starter joins the bread
    assert ids[6] == ids[0]  # back to the goldfish, past four other topics


def test_the_stored_keywords_are_the_subject_words(
    conn: apsw.Connection, settings: CognitionConfig,
) -> None:
    """A topic keeps what its messages were about, not the general words around it."""
    (choice,) = converse(conn, settings, [STARTER])
    assert choice.keywords == ("sourdough", "starter", "kitchen", "counter")
    ((keywords,),) = conn.execute("SELECT keywords FROM topics WHERE id = ?", (choice.id,))
    assert keywords == "sourdough starter kitchen counter"


def test_words_compare_by_stem_and_the_topics_general_words_count_for_nothing() -> None:
    """"bees" meets "bee", "baking" meets "bake"; a topic's "good" matches nothing."""
    stems = frozenset({"bee", "bak"})
    assert topics.word_share(stems, "bees baking") == 1.0
    assert topics.word_share(stems, "bee hive") == 0.5
    assert topics.word_share(frozenset({"good"}), "good name goldfish") == 0.0
    assert topics.word_share(frozenset(), "bees") == 0.0


def test_the_hashed_embedders_vectors_are_not_compared_though_a_frame_makes_them_close(
    tmp_path: Path, make_config: Any,
) -> None:
    """Two unrelated questions in one frame of stop words are closer in the hashed space than
    the default cosine threshold, which is why the Session does not compare them."""
    settings = make_config().cognition
    hashed = HashedEmbedder()
    assert cosine(hashed.embed_one(PANCAKES), hashed.embed_one(TYRE)) > settings.topic_cosine
    recall = Recall(embedder=hashed, space_id=SPACE, config=make_config().memory,
                    clock=ManualClock())
    assert not recall.semantic
    semantic = Recall(embedder=FakeSemantic({}), space_id=SPACE, config=make_config().memory,
                      clock=ManualClock())
    assert semantic.semantic
    assert not Recall(embedder=None, space_id=SPACE, config=make_config().memory,
                      clock=ManualClock()).semantic


# -- with a semantic embedder (the similarities set by the test) ----------------------------

def test_a_message_close_in_meaning_joins_a_topic_it_shares_no_word_with(
    conn: apsw.Connection, settings: CognitionConfig,
) -> None:
    """With a semantic embedder, the puppy and the young dog are one subject."""
    puppy, dog = "I just adopted a puppy", "What food suits a young terrier?"
    embedder = FakeSemantic({puppy: (1, 0, 0), dog: (0.8, 0, 0.6)})  # cosine 0.8
    first, second = converse(conn, settings, [puppy, dog], embedder)
    assert not second.new
    assert second.id == first.id
    assert second.similarity == pytest.approx(0.85, abs=1e-4)  # 0.8, and the current topic's 0.05


def test_a_message_far_in_meaning_starts_a_new_topic_whatever_frame_it_shares(
    conn: apsw.Connection, settings: CognitionConfig,
) -> None:
    """The goldfish and the stretch share their question's frame: a semantic embedder puts them
    at 0.3, below cognition.topic_cosine, and they share no subject word."""
    embedder = FakeSemantic({GOLDFISH: (1, 0, 0), STRETCH: (0.3, math.sqrt(0.91), 0)})
    first, second = converse(conn, settings, [GOLDFISH, STRETCH], embedder)
    assert second.new
    assert second.id != first.id
    assert settings.topic_cosine > 0.3 + topics.STICKINESS


def test_a_shared_subject_word_joins_even_when_the_embedder_disagrees(
    conn: apsw.Connection, settings: CognitionConfig,
) -> None:
    """The words still count with a semantic embedder: the starter joins the bread at a cosine
    of 0.2."""
    embedder = FakeSemantic({BREAD: (1, 0, 0), STARTER: (0.2, math.sqrt(0.96), 0)})
    bread, starter = converse(conn, settings, [BREAD, STARTER], embedder)
    assert starter.id == bread.id


def test_of_two_topics_the_one_furthest_above_its_threshold_wins(
    conn: apsw.Connection, settings: CognitionConfig,
) -> None:
    """A message close in meaning to an older topic (0.95) joins it rather than the current
    topic it shares one subject word with among four."""
    garden, sourdough = "My tomato garden is struggling", "I am baking sourdough bread"
    question = "Could sourdough discard feed the tomato seedlings?"
    embedder = FakeSemantic({garden: (1, 0, 0), sourdough: (0, 1, 0),
                             question: (0.95, 0.1, math.sqrt(1 - 0.95**2 - 0.01))})
    first, second, third = converse(conn, settings, [garden, sourdough, question], embedder)
    assert second.new
    assert third.id == first.id


def test_vectors_of_another_space_are_not_compared(
    conn: apsw.Connection, settings: CognitionConfig,
) -> None:
    """A topic whose centroid is in another embedder's space is matched by its words only."""
    puppy, dog = "I just adopted a puppy", "What food suits a young terrier?"
    embedder = FakeSemantic({puppy: (1, 0, 0), dog: (1, 0, 0)})
    (first,) = converse(conn, settings, [puppy], embedder)
    choice = topics.choose(conn, channel="main", text=dog, vector=embedder.embed_one(dog),
                           space_id=SPACE + 1, threshold=settings.topic_threshold,
                           cosine_threshold=settings.topic_cosine,
                           recent=settings.recent_topics, current_id=None)
    assert choice.new
    assert choice.id != first.id
