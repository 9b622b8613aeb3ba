"""Pre-loop memory seeding: stored facts that share a meaningful word with the message."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from chalie.memory.seed import relevant_facts, render_facts
from chalie.store import db
from chalie.store.queries import Fact
from tests.tools.test_memory import store


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[apsw.Connection]:
    writer = db.open_writer(tmp_path / "data", busy_timeout_ms=2000, synchronous="FULL")
    yield writer
    writer.close()


def test_facts_sharing_a_word_with_the_message_are_found_by_key_or_value(
    conn: apsw.Connection,
) -> None:
    """A fact whose key or value contains a long word of the message is seeded; others are not."""
    store(conn, ("pet", "a dog called Biscuit"), ("city", "Lyon"), ("birthday", "12 March"))
    assert relevant_facts(conn, "Is Biscuit allowed treats?", 8) == [
        Fact("pet", "a dog called Biscuit", 0.0)
    ]
    assert relevant_facts(conn, "When is my birthday?", 8) == [Fact("birthday", "12 March", 2.0)]


def test_stop_words_and_short_words_find_nothing(conn: apsw.Connection) -> None:
    """Common words like "what" or "about" and words under four letters match no fact."""
    store(conn, ("plan", "what about that trip"), ("pet", "a dog"))
    assert relevant_facts(conn, "What about that dog?", 8) == []


def test_no_more_than_the_limit_is_returned_newest_first(conn: apsw.Connection) -> None:
    """With more matching facts than the limit, only the newest `limit` come back."""
    store(conn, ("garden", "roses"), ("allotment", "garden plot 7"), ("shed", "garden tools"))
    assert relevant_facts(conn, "my garden", 2) == [
        Fact("shed", "garden tools", 2.0), Fact("allotment", "garden plot 7", 1.0)
    ]


def test_longer_words_are_searched_first(conn: apsw.Connection) -> None:
    """The most specific (longest) word of the message fills the limit before shorter ones."""
    store(conn, ("city", "Lyon"), ("pet", "Biscuit"))
    assert relevant_facts(conn, "lyon and biscuit", 1) == [Fact("pet", "Biscuit", 1.0)]
    assert relevant_facts(conn, "biscuit and lyon", 8) == [
        Fact("pet", "Biscuit", 1.0), Fact("city", "Lyon", 0.0)
    ]


@pytest.mark.parametrize("text", ["ÉLODIE?", "where is zürich", "HAUPTSTRASSE"])
def test_matching_ignores_case_including_non_ascii(conn: apsw.Connection, text: str) -> None:
    """Accented and German letters match whatever their case in the message or the fact."""
    store(conn, ("sister", "Élodie in Zürich, Hauptstraße 5"))
    assert relevant_facts(conn, text, 8) == [Fact("sister", "Élodie in Zürich, Hauptstraße 5", 0.0)]


def test_superseded_facts_are_not_seeded(conn: apsw.Connection) -> None:
    """Only a key's current value is seeded, never the value it replaced."""
    store(conn, ("pet", "Biscuit"), ("pet", "Pretzel"))
    assert relevant_facts(conn, "biscuit", 8) == []
    assert relevant_facts(conn, "biscuit or pretzel", 8) == [Fact("pet", "Pretzel", 1.0)]


def test_rendered_facts_are_one_key_value_line_each() -> None:
    """Seeded facts reach the prompt as "- key: value" lines, and no facts as nothing."""
    facts = [Fact("pet", "Rex", 0.0), Fact("city", "Lyon", 1.0)]
    assert render_facts(facts) == "- pet: Rex\n- city: Lyon"
    assert render_facts([]) == ""
