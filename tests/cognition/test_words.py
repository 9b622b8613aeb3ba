"""Words of a message: what a topic is named after and how two texts are compared."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalie.cognition.words import (
    GENERAL_WORDS,
    STOPWORDS,
    content_words,
    is_general,
    overlap,
    salient_words,
    stem,
    subject_words,
    topic_name,
    words,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello, World!", ["hello", "world"]),
        ("Don't stop", ["don't", "stop"]),
        ("don\u2019t stop", ["don't", "stop"]),
        ("'quoted' words", ["quoted", "words"]),
        ("Caf\u00e9 in S\u00e3o Paulo", ["caf\u00e9", "in", "s\u00e3o", "paulo"]),
        ("Cafe\u0301 au lait", ["caf\u00e9", "au", "lait"]),
        ("snake_case and kebab-case", ["snake", "case", "and", "kebab", "case"]),
        ("at 5pm on 2024-05-01", ["at", "5pm", "on", "2024", "05", "01"]),
        ("...!?", []),
        ("", []),
    ],
)
def test_a_message_splits_into_lowercased_words_in_order(text: str, expected: list[str]) -> None:
    """Letters and digits of any script make words; an apostrophe inside a word stays."""
    assert words(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What is the weather in Lisbon tomorrow?", ["weather", "lisbon", "tomorrow"]),
        ("I need 42 apples and 7 pears", ["42", "apples", "pears"]),
        ("ok thanks, I don't know", []),
        ("go to bed by 10", ["bed", "10"]),
        ("the budget, the budget", ["budget", "budget"]),
        ("\u6771\u4eac \u306b \u884c\u304f", ["\u6771\u4eac", "\u884c\u304f"]),
    ],
)
def test_content_words_leave_out_stopwords_and_short_words(
    text: str, expected: list[str]
) -> None:
    """Stopwords and words under 3 letters go; numbers and CJK words of 2 stay."""
    assert content_words(text) == expected


def test_the_stopwords_hold_the_common_function_words() -> None:
    """Articles, pronouns, auxiliaries and politeness words are stopwords."""
    assert {"a", "the", "is", "i", "you", "it", "what", "please", "can", "don't"} <= STOPWORDS


@pytest.mark.parametrize(
    ("text", "k", "expected"),
    [
        ("the meeting near Oslo", 1, ["oslo"]),
        ("Oslo has a meeting", 1, ["meeting"]),
        ("we visited Rome and the colosseum", 2, ["rome", "colosseum"]),
        ("budget cuts: the budget is over, the budget must shrink", 1, ["budget"]),
        ("Planning a weekend trip to Lisbon", 3, ["planning", "weekend", "lisbon"]),
        ("tea, coffee and tea", 5, ["tea", "coffee"]),
        ("Lisbon is lovely. I love Lisbon.", 1, ["lisbon"]),
        ("ok thanks", 3, []),
        ("anything at all", 0, []),
    ],
)
def test_salient_words_prefer_proper_nouns_longer_and_repeated_words(
    text: str, k: int, expected: list[str]
) -> None:
    """Capitalised mid-sentence words, long words and repeats win, in order of appearance."""
    assert salient_words(text, k) == expected


@given(st.text(max_size=300), st.integers(min_value=0, max_value=6))
def test_salient_words_are_distinct_content_words_in_order(text: str, k: int) -> None:
    """At most k distinct content words, in the order they first appear."""
    salient = salient_words(text, k)
    content = content_words(text)
    assert len(salient) == len(set(salient)) <= k
    assert set(salient) <= set(content)
    assert salient == sorted(salient, key=content.index)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Planning a weekend trip to Lisbon", "planning weekend lisbon"),
        ("A weekend trip to Lisbon", "weekend trip lisbon"),
        ("what about the Quarterly Report?", "quarterly report"),
        ("ok thanks!", "general"),
        ("", "general"),
        ("x" * 80, "x" * 60),
    ],
)
def test_a_new_topic_is_named_after_its_salient_words(text: str, expected: str) -> None:
    """Up to three salient words in order, "general" when there are none, 60 characters at most."""
    assert topic_name(text) == expected


@given(st.text(max_size=500))
def test_a_topic_name_is_never_empty_or_over_60_characters(text: str) -> None:
    """Any message gets a usable topic name."""
    assert 0 < len(topic_name(text)) <= 60


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("Lisbon trip this weekend", "the weekend Lisbon trip", 1.0),
        ("Lisbon trip weekend", "Lisbon hotel", 0.25),
        ("Lisbon trip", "quarterly report", 0.0),
        ("ok thanks", "ok thanks", 0.0),
        ("", "Lisbon", 0.0),
    ],
)
def test_overlap_is_the_jaccard_similarity_of_content_words(
    a: str, b: str, expected: float
) -> None:
    """Shared content words over all content words; nothing in common or nothing said is 0."""
    assert overlap(a, b) == pytest.approx(expected)


@given(st.text(max_size=200), st.text(max_size=200))
def test_overlap_is_symmetric_and_within_0_and_1(a: str, b: str) -> None:
    """Comparing a with b is comparing b with a, and the result is a share."""
    assert overlap(a, b) == overlap(b, a)
    assert 0.0 <= overlap(a, b) <= 1.0


@pytest.mark.parametrize(
    "forms",
    [
        ("bee", "bees"),
        ("bake", "baking", "baked", "bakes"),
        ("call", "called", "calling", "calls"),
        ("plan", "planned", "planning", "plans"),
        ("city", "cities"),
        ("movie", "movies"),
        ("party", "parties", "partying"),
        ("day", "days"),
        ("double", "doubles", "doubled"),
        ("stretch", "stretches"),
        ("tree", "trees"),
        ("speed", "speeds", "speeding"),
        ("survive", "survives", "survived", "surviving"),
    ],
)
def test_the_forms_of_a_word_share_a_stem(forms: tuple[str, ...]) -> None:
    """Plurals and -ing, -ed forms come down to one stem, so "bees" meets "bee"."""
    assert len({stem(form) for form in forms}) == 1, [stem(form) for form in forms]


@given(st.text(min_size=1, max_size=30))
def test_a_stem_is_never_empty_nor_longer_than_its_word(word: str) -> None:
    """Any word, of any script, has a stem to compare by."""
    assert 0 < len(stem(word.lower() or "x")) <= len(word.lower() or "x")


@pytest.mark.parametrize("word", ["glass", "cactus", "analysis", "sourdough", "counter", "bus"])
def test_a_word_without_a_suffix_keeps_its_stem_whole(word: str) -> None:
    """An "s" that is part of the word stays, and a short word is not cut."""
    assert stem(word) == word


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What is a good name for a goldfish?", ["name", "goldfish"]),
        ("What is a good stretch for the lower back?", ["stretch"]),
        ("Which houseplants survive in a dark bathroom?", ["houseplants", "bathroom"]),
        ("My sourdough starter doubles in six hours on the kitchen counter",
         ["sourdough", "starter", "kitchen", "counter"]),
        ("What's the best time tomorrow, 9 or 10?", []),
        ("bees and more bees", ["bees"]),
    ],
)
def test_subject_words_leave_out_the_general_ones(text: str, expected: list[str]) -> None:
    """Judgements, sizes, numbers, times and verbs that fit any subject go; once each."""
    assert subject_words(text) == expected


def test_general_words_are_general_in_every_form_and_never_stopwords() -> None:
    """"survived" is as general as "survive"; the two word lists do not overlap."""
    assert {"good", "best", "time", "survive", "six"} <= GENERAL_WORDS
    assert all(map(is_general, ["survived", "hours", "weekends", "2024", "better"]))
    assert not any(map(is_general, ["sourdough", "goldfish", "bees", "plumber", "passport"]))
    assert not GENERAL_WORDS & STOPWORDS
