"""Knowledge keys: different spellings of one key become the same key."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chalie.values.keys import MAX_KEY_CHARS, SPELLINGS, normalise_key


@pytest.mark.parametrize(
    "spelling",
    ["favourite colour", "Favorite color", "my favourite_colour", "favorite-color",
     "  FAVOURITE   Colour ", "My favourite colour", "the favourite colour",
     "user's favourite colour", "users favorite color", "person's favourite colour",
     "the person's favourite.colour", "favourite/colour", "favourite:colour",
     "\uff26\uff41\uff56\uff4f\uff52\uff49\uff54\uff45 color", "my\tfavourite\ncolour"],
)
def test_every_spelling_of_favourite_colour_is_one_key(spelling: str) -> None:
    """Case, separators, a leading "my"/"the"/"user's" and British spelling all meet."""
    assert normalise_key(spelling) == "favorite color"


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("colonel", "colonel"),
        ("centre of gravity", "center of gravity"),
        ("centred", "centred"),
        ("grey cat", "gray cat"),
        ("travelling companion", "traveling companion"),
        ("cancelled plans", "canceled plans"),
        ("theatre tickets", "theater tickets"),
        ("preferred programme", "preferred program"),
        ("driving licence number", "driving license number"),
        ("litre of milk", "liter of milk"),
        ("neighbour's name", "neighbors name"),
        ("organisation", "organization"),
        ("organise", "organize"),
        ("organised", "organized"),
        ("organising style", "organizing style"),
        ("prioritises", "prioritizes"),
        ("memorisation", "memorization"),
        ("summarise", "summarize"),
        ("recognised", "recognized"),
        ("advise", "advise"),
        ("exercise routine", "exercise routine"),
        ("surprise", "surprise"),
        ("mum's birthday", "moms birthday"),
        ("Mom's birthday", "moms birthday"),
        ("mummy", "mummy"),
    ],
)
def test_british_words_become_american_as_whole_words_only(key: str, expected: str) -> None:
    """Only words in the table change; words that merely contain one ("colonel") do not."""
    assert normalise_key(key) == expected


def test_apostrophes_are_dropped_without_splitting_the_word() -> None:
    """Any apostrophe disappears, so "mother's" and "mothers" are the same word."""
    assert normalise_key("mother's name") == "mothers name"
    assert normalise_key("mother\u2019s name") == "mothers name"
    assert normalise_key("mothers name") == "mothers name"
    assert normalise_key("O'Neil") == "oneil"


def test_leading_words_that_add_nothing_are_dropped_but_never_the_last_word() -> None:
    """"My", "the", "a", "an" go from the front, repeatedly; a key that is only one stays."""
    assert normalise_key("My name") == "name"
    assert normalise_key("the person's name") == "name"
    assert normalise_key("an allergy") == "allergy"
    assert normalise_key("a the my dog") == "dog"
    assert normalise_key("the") == "the"
    assert normalise_key("dog of my neighbour") == "dog of my neighbor"


def test_digits_and_other_scripts_are_kept() -> None:
    """Letters of any script, combining marks and digits stay; only their case is folded."""
    assert normalise_key("街") == "街"
    assert normalise_key("Address 2") == "address 2"
    assert normalise_key("Straße") == "strasse"
    assert normalise_key("café_préféré") == "café préféré"
    assert normalise_key("नाम") == "नाम"
    assert normalise_key("½ marathon") == "1 2 marathon"


@pytest.mark.parametrize("key", ["", "!!!", "   ", "_-/.:", "'''", "\u2019", "🙂"])
def test_a_key_with_nothing_in_it_is_empty(key: str) -> None:
    """Punctuation, symbols and whitespace alone normalise to the empty string."""
    assert normalise_key(key) == ""


def test_no_american_spelling_is_itself_rewritten() -> None:
    """The table never maps a word to one it would rewrite again."""
    assert not set(SPELLINGS.values()) & set(SPELLINGS)


def test_the_key_length_limit_is_two_hundred_and_keys_are_not_truncated() -> None:
    """Callers refuse keys over MAX_KEY_CHARS; normalising a long key keeps all of it."""
    assert MAX_KEY_CHARS == 200
    assert normalise_key("word " * 100) == " ".join(["word"] * 100)


@settings(max_examples=500)
@given(st.text())
def test_normalising_twice_changes_nothing(text: str) -> None:
    """Any text normalises without error, to a key that is its own normal form."""
    key = normalise_key(text)
    assert normalise_key(key) == key
    assert key == key.strip()
    assert "  " not in key


@settings(max_examples=300)
@given(st.lists(st.sampled_from(
    ["my", "the", "a", "colour", "favourite", "'", "_", "-", " ", "Organised", "街", "2", "é"]
)))
def test_normalising_keys_built_from_tricky_pieces_twice_changes_nothing(pieces: list[str]) -> None:
    """Keys made of leading words, British words and separators are stable too."""
    key = normalise_key("".join(pieces))
    assert normalise_key(key) == key
