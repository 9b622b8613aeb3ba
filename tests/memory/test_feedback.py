"""Recall's second pass: the words that what the first pass found share are searched with the
question's, so that a line worded like the first finds, but not like the question, is found."""

from __future__ import annotations

from typing import Any

import apsw
import msgspec
import pytest

from chalie.clock import ManualClock
from chalie.config import Config
from chalie.memory import feedback
from chalie.memory.embedders import HashedEmbedder
from chalie.memory.recall import DAY_S, Recall
from chalie.store import db, memory_writes
from chalie.values.memory import Kind, mkey


@pytest.fixture
def config(make_config: Any) -> Config:
    built: Config = make_config()
    return built


def say(conn: apsw.Connection, text: str, *, at: float) -> int:
    with db.immediate(conn):
        item_id = memory_writes.add_transcript(conn, "main", None, role="user", text=text, at=at)
    return mkey(Kind.TRANSCRIPT, item_id)


def recall_with(conn: apsw.Connection, config: Config, clock: ManualClock,
                weight: float) -> Recall:
    with db.immediate(conn):
        space = memory_writes.ensure_space(conn, HashedEmbedder.space, now=1.0)
    memory = msgspec.structs.replace(config.memory, feedback_weight=weight)
    return Recall(embedder=HashedEmbedder(), space_id=space, config=memory, clock=clock)


def pottery(conn: apsw.Connection, clock: ManualClock) -> int:
    """Two lines about the pottery class, one about the clay vase that never says "pottery"
    (said long after, so it is no neighbour of theirs), and talk of other things; the key of
    the vase's line."""
    at = clock.time() - 20 * DAY_S
    say(conn, "I signed up for a pottery class at the clay studio", at=at)
    say(conn, "the weather was grey all week", at=at + 60)
    say(conn, "our pottery class made a clay bowl with a blue class glaze", at=at + 120)
    for n in range(6):
        say(conn, f"the train was late again, number {n}", at=at + 180 + 60 * n)
    vase = say(conn, "we glazed the clay vase on Sunday", at=at + DAY_S)
    say(conn, "the studio downtown closed", at=at + DAY_S + 60)
    return vase


def test_a_line_worded_like_what_was_found_is_recalled_by_the_second_pass(
    writer: apsw.Connection, config: Config, clock: ManualClock
) -> None:
    """ "What about my pottery?" finds the two lines about the class; the line about the clay
    vase shares no word with the question, but "clay" with both of them, and is recalled too,
    ranked by neither of the first two rankings."""
    vase = pottery(writer, clock)
    found = recall_with(writer, config, clock, 1.0).recall(writer, "What about my pottery?", 20)
    hits = {h.item.mkey: h for h in found.hits}
    assert vase in hits
    assert (hits[vase].fts_rank, hits[vase].vector_rank, hits[vase].beside) == (None, None, None)
    assert hits[vase].rrf > 0
    assert not any("train" in h.item.text for h in found.hits if h.beside is None)


def test_without_the_second_pass_only_what_the_question_words_is_found(
    writer: apsw.Connection, config: Config, clock: ManualClock
) -> None:
    """With memory.feedback_weight = 0 the clay vase is not recalled: nothing of the question
    is in it."""
    vase = pottery(writer, clock)
    found = recall_with(writer, config, clock, 0.0).recall(writer, "What about my pottery?", 20)
    assert vase not in {h.item.mkey for h in found.hits}
    assert {h.item.text for h in found.hits if h.beside is None} == {
        "I signed up for a pottery class at the clay studio",
        "our pottery class made a clay bowl with a blue class glaze",
    }


def test_the_added_words_are_those_the_seeds_share_and_the_index_holds_again(
    writer: apsw.Connection, config: Config, clock: ManualClock
) -> None:
    """The question's terms come first; of the seeds' words, those both hold and the index
    holds more than once are added ("class", "clay"); "studio" (one seed), "bowl" (said once)
    and the question's own "pottery" are not."""
    pottery(writer, clock)
    seeds = ["I signed up for a pottery class at the clay studio",
             "our pottery class made a clay bowl with a blue class glaze"]
    assert feedback.expansion(writer, "What about my pottery?", seeds) == [
        "potteri", "class", "clai"]  # as the index spells them (porter)
    assert feedback.expansion(writer, "What about my pottery?", seeds[:1]) == []
    assert feedback.search(writer, "What about my pottery?", [], 10) == []
