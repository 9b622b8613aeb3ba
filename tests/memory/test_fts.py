"""Full-text search over memory: any text the person types is safe, and the words that matter
find what was said, whatever the spelling, accents or word form."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chalie.memory import fts
from chalie.store import db, memory_writes
from chalie.store.effects import RememberFact
from chalie.values.memory import Kind, mkey


def open_store(directory: Path) -> apsw.Connection:
    return db.open_writer(directory, busy_timeout_ms=2000, synchronous="FULL")


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[apsw.Connection]:
    conn = open_store(tmp_path / "data")
    yield conn
    conn.close()


def say(conn: apsw.Connection, *texts: str, channel: str = "main") -> list[int]:
    """Store each text as a transcript message; their memory keys, in order."""
    with db.immediate(conn):
        return [mkey(Kind.TRANSCRIPT, memory_writes.add_transcript(
            conn, channel, None, role="user", text=text, at=1.0)) for text in texts]


def remember(conn: apsw.Connection, key: str, value: str) -> int:
    with db.immediate(conn):
        item_id = memory_writes.remember(conn, RememberFact(key, value), turn_id="t", now=1.0)
    assert item_id is not None
    return mkey(Kind.KNOWLEDGE, item_id)


# --- any text is safe -----------------------------------------------------------------------------

SAID = ("my parrot is called Kiwi", "we met near the station", "the meeting is at 10:30",
        "Zoë moved to Zürich")


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[apsw.Connection, list[int]]]:
    """One store with a few messages, shared by the many generated queries."""
    conn = open_store(tmp_path_factory.mktemp("fts") / "data")
    keys = say(conn, *SAID)
    yield conn, keys
    conn.close()


# Any character (lone surrogates too), with FTS5's syntax and operators mixed in often.
_SYNTAX = ['"', "*", ":", "(", ")", "-", "^", "+", "{", "}", "\x00", "\ud800", "\udfff", " ",
           " AND ", " OR ", " NOT ", " NEAR ", "NEAR(", "text:", "kiwi", "Kiwi*", "🦜"]
QUERIES = st.lists(
    st.one_of(st.text(st.characters(exclude_categories=()), max_size=20), st.sampled_from(_SYNTAX)),
    max_size=25,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=QUERIES)
def test_any_text_searches_without_error(
    seeded: tuple[apsw.Connection, list[int]], text: str
) -> None:
    """Whatever the person types, search answers with stored items and never raises."""
    conn, keys = seeded
    found = fts.search(conn, text, 10)
    assert set(found) <= set(keys)
    assert len(found) == len(set(found))
    terms = fts.query_terms(conn, text)
    if terms:  # the expression built from them is always a valid FTS5 query
        conn.execute("SELECT count(*) FROM memory_fts WHERE memory_fts MATCH ?",
                     (fts.match_expression(terms),)).fetchall()


KIWI = 0  # index in SAID of the message that mentions Kiwi


@pytest.mark.parametrize(
    ("query", "finds_kiwi"),
    [
        ('"kiwi', True), ('kiwi"', True), ('""kiwi""', True), ('"kiwi parrot', True),
        ("kiwi*", True), ("*", False), ("(kiwi", True), ("kiwi)", True), ("((", False),
        ("-kiwi", True), ("^kiwi", True), ("kiwi:", True), (":", False),
        ("text:kiwi", True), ("nosuchcolumn:kiwi", True), ("{text}: kiwi", True),
        ("kiwi AND", True), ("AND OR NOT", False), ("NOT kiwi", True), ("kiwi NEAR", True),
        ("NEAR(kiwi parrot, 2)", True), ("kiwi + parrot", True), ("kiwi'; DROP TABLE x; --", True),
        ("kiwi\x00", True), ("\x00", False), ("🦜 kiwi 🦜", True), ("🦜", False),
        ("\ud800kiwi", True), ("\ud800 kiwi", True), ("kiwi " * 5000, True), ("x" * 100_000, False),
        ("", False), ("   \n\t ", False),
    ],
    ids=["open-quote", "close-quote", "doubled-quotes", "unbalanced-phrase", "prefix-star",
         "star", "open-paren", "close-paren", "parens", "minus", "caret", "trailing-colon",
         "colon", "column-filter", "unknown-column", "column-set", "trailing-and", "operators",
         "not", "trailing-near", "near-group", "plus", "sql", "nul-inside", "nul", "emoji",
         "emoji-only", "lone-surrogate-glued", "lone-surrogate", "very-long", "one-huge-word",
         "empty", "blank"],
)
def test_nasty_queries_are_searched_as_plain_words(
    seeded: tuple[apsw.Connection, list[int]], query: str, finds_kiwi: bool
) -> None:
    """Quotes, operators, column filters, NUL, emoji and huge input never break search; the
    words among them still find what was said."""
    conn, keys = seeded
    found = fts.search(conn, query, 10)
    assert (keys[KIWI] in found) is finds_kiwi
    assert set(found) <= set(keys)


@pytest.mark.parametrize("operator", ["NEAR", "near", "Near"])
def test_an_operator_word_is_searched_as_a_word(
    seeded: tuple[apsw.Connection, list[int]], operator: str
) -> None:
    """ "NEAR" finds the message "we met near the station" instead of acting as an operator."""
    conn, keys = seeded
    assert fts.search(conn, operator, 10) == [keys[1]]


def test_a_query_longer_than_the_limit_is_searched_by_its_beginning(
    writer: apsw.Connection,
) -> None:
    """A pasted document is cut: a word near its start is searched, one past the cut is not."""
    start, end = say(writer, "about the aardvark", "about the zeppelin")
    query = "aardvark " + "x" * fts.MAX_QUERY_CHARS + " zeppelin"
    assert fts.search(writer, query, 10) == [start]
    assert end not in fts.search(writer, query, 10)


def test_each_term_is_matched_as_a_literal_string(writer: apsw.Connection) -> None:
    """Terms that look like an operator, a phrase, a column filter or a prefix are quoted, so
    FTS5 reads each one as plain text to look for."""
    (key,) = say(writer, "we met near the station")
    expression = fts.match_expression(["NEAR", 'say "hi"', "text:x", "a*"])
    assert expression == '"NEAR" OR "say ""hi""" OR "text:x" OR "a*"'
    assert writer.execute("SELECT rowid FROM memory_fts WHERE memory_fts MATCH ?",
                          (expression,)).fetchall() == [(key,)]


# --- what is searched -----------------------------------------------------------------------------

def test_stop_words_alone_find_nothing(writer: apsw.Connection) -> None:
    """ "what is the" finds nothing, not even a message made of exactly those words."""
    say(writer, "what is the", "is this the one")
    assert fts.query_terms(writer, "What is the...?") == []
    assert fts.search(writer, "What is the...?", 10) == []
    assert fts.search(writer, "and or not", 10) == []


@pytest.mark.parametrize("query", ["what's", "I'm", "don't", "you'd",
                                   "Don't you know what I'm like?"])
def test_contractions_of_stop_words_find_nothing(writer: apsw.Connection, query: str) -> None:
    """A question made only of stop words written as contractions does not recall an unrelated
    message that happens to contain contractions too."""
    say(writer, "it's fine, I'm sure you'd agree, don't worry")
    assert fts.search(writer, query, 10) == []


def test_the_rarest_terms_are_searched_when_there_are_too_many(writer: apsw.Connection) -> None:
    """In a query of more than MAX_TERMS words, the one rare word that matches still finds its
    message, even when it comes last and every common word matches elsewhere."""
    common = ["apple", "banana", "cherry", "grape", "lemon", "mango", "melon", "peach", "plum",
              "berry"]
    assert len(common) > fts.MAX_TERMS
    filler = say(writer, *[" ".join(common)] * 20)
    (rare,) = say(writer, "the zeppelin landed")
    found = fts.search(writer, " ".join([*common, "zeppelin"]), 5)
    assert found[0] == rare
    assert set(found[1:]) <= set(filler)


def test_limit_and_empty_index(writer: apsw.Connection) -> None:
    """An empty memory finds nothing; a limit of zero finds nothing; a limit caps the list."""
    assert fts.search(writer, "parrot", 10) == []
    keys = say(writer, "parrot one", "parrot two", "parrot three")
    assert fts.search(writer, "parrot", 0) == []
    assert len(fts.search(writer, "parrot", 2)) == 2
    assert set(fts.search(writer, "parrot", 10)) == set(keys)


@pytest.mark.parametrize(
    ("stored", "query"),
    [("I visit the lake", "visited"), ("I visited the lake", "visit"),
     ("she was running late", "runs"), ("two parrots", "parrot")],
)
def test_word_forms_meet_by_stemming(writer: apsw.Connection, stored: str, query: str) -> None:
    """Porter stemming: "visited" finds "visit", "parrot" finds "parrots"."""
    (key,) = say(writer, stored)
    say(writer, "something else entirely")
    assert fts.search(writer, query, 10) == [key]


@pytest.mark.parametrize(
    ("stored", "query"),
    [("we met at the cafe", "Café"), ("we met at the Café", "cafe"),
     ("Zoë is coming", "zoe"), ("naïve question", "NAIVE")],
)
def test_accents_are_ignored(writer: apsw.Connection, stored: str, query: str) -> None:
    """ "Café" finds "cafe" and the reverse, in any case."""
    (key,) = say(writer, stored)
    say(writer, "something else entirely")
    assert fts.search(writer, query, 10) == [key]


@pytest.mark.parametrize(
    ("stored", "query"),
    [("my favorite color is teal", "favourite colour"),
     ("my favourite colour is teal", "favorite color"),
     ("the theatre was full", "theater"),
     ("they organized a party", "organised")],
)
def test_british_and_american_spellings_find_each_other(
    writer: apsw.Connection, stored: str, query: str
) -> None:
    """ "favourite colour" finds "favorite color" and the reverse."""
    (key,) = say(writer, stored)
    say(writer, "something else entirely")
    assert fts.search(writer, query, 10) == [key]


def test_kind_restricts_the_search_to_one_kind(writer: apsw.Connection) -> None:
    """The same word in a message and a fact: kind= returns only the one asked for."""
    (message,) = say(writer, "my parrot is called Kiwi")
    fact = remember(writer, "pet", "a parrot called Kiwi")
    assert set(fts.search(writer, "Kiwi", 10)) == {message, fact}
    assert fts.search(writer, "Kiwi", 10, kind=Kind.KNOWLEDGE) == [fact]
    assert fts.search(writer, "Kiwi", 10, kind=Kind.TRANSCRIPT) == [message]
    assert fts.search(writer, "Kiwi", 10, kind=Kind.EPISODE) == []


def test_better_matches_rank_first(writer: apsw.Connection) -> None:
    """A message with both searched words ranks above messages with only one of them."""
    one, both, other = say(writer, "the parrot sleeps", "Kiwi the parrot", "Kiwi fruit salad")
    found = fts.search(writer, "Kiwi parrot", 10)
    assert found[0] == both
    assert set(found) == {one, both, other}


def test_a_query_of_only_common_words_finds_the_newest_items_that_hold_them(
    writer: apsw.Connection, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When even the rarest word of a query is in more items than MAX_TERM_ITEMS, the newest
    items holding it come back (no BM25 over thousands of rows), newest first."""
    monkeypatch.setattr(fts, "MAX_TERM_ITEMS", 3)
    keys = say(writer, "the dog barked", "my dog sleeps", "a dog and a cat", "dog walk today",
               "nothing here")
    assert fts.search(writer, "dog", 2) == [keys[3], keys[2]]
    assert fts.search(writer, "dog", 10) == [keys[3], keys[2], keys[1], keys[0]]
    assert fts.search(writer, "cat dog", 10)[0] == keys[2]  # "cat" is rare: BM25 as usual
