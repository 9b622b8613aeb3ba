"""The identity hook's reader: a name the person gives is found, and nothing else is."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chalie.memory.identity import (
    FIRST_TIME,
    MAX_NAME_CHARS,
    RENAMED,
    SAME_NAME,
    NameStatement,
    acknowledgement,
    read_name,
)

NAMED = [
    # (message, name, whole)
    ("call me Sam", "Sam", True),
    ("Call me Ishmael.", "Ishmael", True),
    ("Please call me Sam", "Sam", True),
    ("please just call me Sam", "Sam", True),
    ("you can call me Sam", "Sam", True),
    ("You may call me Dave.", "Dave", True),
    ("just call me Sam!", "Sam", True),
    ("Hi, call me Sam!", "Sam", True),
    ("Good morning Chalie! Feel free to call me Dave 🙂", "Dave", True),
    ("Oh and by the way, call me Sam from now on", "Sam", True),
    ("call me Sam instead", "Sam", True),
    ("call me Sam going forward, thanks", "Sam", True),
    ("call me Sam if you like", "Sam", True),
    ("call me Sam :)", "Sam", True),
    ("call me Sam - thanks", "Sam", True),
    ("call me 'Sam'", "Sam", True),
    ('call me "Mary Ann" please', "Mary Ann", True),
    ("call me mary ann please", "Mary Ann", True),
    ("you can call me J.R.", "J.R.", True),
    ("call me j.r.", "J.R.", True),
    ("call me Dr. Smith", "Dr. Smith", True),
    ("call me o'neil", "O'Neil", True),
    ("call me O\u2019Neil", "O'Neil", True),
    ("call me mary-ann", "Mary-Ann", True),
    ("call me McDonald", "McDonald", True),
    ("call me DJ", "DJ", True),
    ("CALL ME SAM", "Sam", True),
    ("call me \uff33\uff41\uff4d", "Sam", True),
    ("call me 街", "街", True),
    ("My name is Sam", "Sam", True),
    ("Hey! My name is José.", "José", True),
    ("My name is Björk", "Björk", True),
    ("my name's Jean-Luc, nice to meet you", "Jean-Luc", True),
    ("my name is actually Sam", "Sam", True),
    ("Name's Sam.", "Sam", True),
    ("yo name's sam", "Sam", True),
    ("I'm called Sam", "Sam", True),
    ("im called sam", "Sam", True),
    ("I am called Sam, nice to meet you", "Sam", True),
    ("I go by Alex these days", "Alex", True),
    ("i go by the name of Sam", "Sam", True),
    ("I usually go by Sam", "Sam", True),
    ("I'd like to be called Sam", "Sam", True),
    ("I'd rather be called Sam", "Sam", True),
    ("everyone calls me Sam", "Sam", True),
    ("My friends call me Sammy.", "Sammy", True),
    ("Sam is my name", "Sam", True),
    ("Hi, Mary Ann is my name!", "Mary Ann", True),
    ("Call me Sam. What's the weather tomorrow?", "Sam", False),
    ("My name is Sam and I need help with my taxes", "Sam", False),
    ("Hi there! My name is Sam, I'm new here.", "Sam", False),
    ("I'm Samuel but call me Sam", "Sam", False),
    ("it's fine, call me Sam", "Sam", False),
    ("call me Sam how are you", "Sam", False),
    ("call me Sam\nwhat can you do?", "Sam", False),
    ("Name's Bond. James Bond.", "Bond", False),
]


@pytest.mark.parametrize(("message", "name", "whole"), NAMED)
def test_a_name_the_person_gives_is_read_as_they_would_be_addressed(
    message: str, name: str, whole: bool
) -> None:
    """The name comes back cased for addressing, and whole says whether anything else was said."""
    assert read_name(message) == NameStatement(name=name, whole=whole)


NOT_NAMED = [
    "I'm tired",
    "I am Sam's brother",
    "I'm Sam",
    "I am Sam",
    "call me back",
    "call me later",
    "call me when you're done",
    "call me at 5",
    "call me crazy but that's how I like it",
    "call me crazy, but...",
    "call me a taxi",
    "call me an ambulance",
    "call me maybe",
    "call me tomorrow",
    "call me Monday",
    "call me in 5 minutes",
    "call me if you need anything",
    "you can call me anytime",
    "call me whatever you like",
    "call me by my name",
    "call me",
    "my name is not important",
    "my name is on the list",
    "my name is spelled S-A-M",
    "what is my name?",
    "do you know what my name is",
    "If my name is Sam, then what?",
    "don't call me that",
    "please don't call me Bob",
    "Please, don't call me Bob.",
    "never call me Bob again",
    "never call me Bob.",
    "i don't want you to call me Sam",
    "they call me lazy",
    "people call me names",
    "People call me Sam but I hate it",
    "can you call me Dave",
    'he said "call me Sam"',
    "tell him to call me back",
    "I'm called in to work",
    "I go by bus",
    "call me Sam instead of Samuel",
    "call me sam2",
    "call me Sam's",
    "call me Jean-",
    "my name is Sam's",
    "Sam",
    "what's the weather?",
    "Sam is my name and I need help",
]


@pytest.mark.parametrize("message", NOT_NAMED)
def test_phrases_that_usually_mean_something_else_are_not_read_as_a_name(message: str) -> None:
    """Nothing is stored for a message that does not clearly give a name."""
    assert read_name(message) is None


def test_when_several_names_are_given_how_to_address_wins_then_the_last() -> None:
    """"Call me" beats "my name is", which beats what others call them; among equals, the last."""
    assert read_name("My name is Samuel, call me Sam") == NameStatement("Sam", whole=True)
    assert read_name("call me Sam, my name is Samuel") == NameStatement("Sam", whole=True)
    assert read_name("call me Sam. Actually, call me Samuel.") == \
        NameStatement("Samuel", whole=True)
    assert read_name("My friends call me Sammy, but you can call me Samuel") == \
        NameStatement("Samuel", whole=True)


def test_a_name_is_at_most_three_words() -> None:
    """Three words are a name; a fourth makes the statement too unclear to store."""
    assert read_name("My name is Anna Maria Lopez") == NameStatement("Anna Maria Lopez", True)
    assert read_name("My name is Anna Maria Lopez Garcia") is None


def test_a_name_is_at_most_forty_characters() -> None:
    """Forty letters are a name; forty-one are not."""
    forty = "A" + "b" * (MAX_NAME_CHARS - 1)
    assert read_name(f"call me {forty}") == NameStatement(forty, whole=True)
    assert read_name(f"call me {forty}b") is None
    assert read_name("call me Abcdefghijklmnopq Abcdefghijklmnopq Abcdef") is None


def test_casing_is_fixed_only_for_names_typed_in_lower_case() -> None:
    """Lower case gets capitals on each part; any capital typed means the person's casing stays."""
    assert read_name("call me d'angelo") == NameStatement("D'Angelo", whole=True)
    assert read_name("call me van der berg") == NameStatement("Van Der Berg", whole=True)
    assert read_name("My name is SAM") == NameStatement("SAM", whole=True)
    assert read_name("My name is deAndre") == NameStatement("deAndre", whole=True)


def test_the_first_reply_greets_the_person_by_name() -> None:
    """With no name known before, Chalie says it is nice to meet them."""
    assert acknowledgement("Sam", None) == FIRST_TIME.format(name="Sam")
    assert acknowledgement("Sam", None) == "Nice to meet you, Sam."
    assert acknowledgement("Sam", "  ") == "Nice to meet you, Sam."


def test_a_new_name_is_confirmed_as_the_one_used_from_now_on() -> None:
    """With a different name known before, Chalie confirms the change."""
    assert acknowledgement("Samuel", "Sam") == RENAMED.format(name="Samuel")
    assert acknowledgement("Samuel", "Sam") == "Got it, I'll call you Samuel from now on."


def test_the_same_name_again_is_acknowledged_as_known() -> None:
    """The same name, in any casing, is answered as already known."""
    assert acknowledgement("Sam", "sam") == SAME_NAME.format(name="Sam")
    assert acknowledgement("Sam", "Sam") == "I know, Sam."


def test_a_name_ending_in_a_period_does_not_get_a_second_one() -> None:
    """Initials end the sentence themselves: "J.R." not "J.R.."."""
    assert acknowledgement("J.R.", None) == "Nice to meet you, J.R."
    assert acknowledgement("J.R.", "J.R.") == "I know, J.R."
    assert acknowledgement("J.R.", "Sam") == "Got it, I'll call you J.R. from now on."


def _assert_sound(statement: NameStatement | None) -> None:
    if statement is not None:
        assert statement.name
        assert statement.name == statement.name.strip()
        assert len(statement.name) <= MAX_NAME_CHARS
        assert not any(ch.isdigit() for ch in statement.name)


@settings(max_examples=500)
@given(st.text())
def test_any_text_is_read_without_error(text: str) -> None:
    """Arbitrary text never raises, and a name found is non-empty, short and digit-free."""
    _assert_sound(read_name(text))


@settings(max_examples=500)
@given(st.lists(st.sampled_from([
    "call me ", "my name is ", "is my name", "Hi, ", "please", "Sam", "sam", "ß", "\u0149",
    "'", ".", "-", " ", "J", "2", "😊", "\ufe0f", "\u0301", "\n", "街", '"', "and ", "\u01c6",
])))
def test_text_built_from_name_statement_pieces_is_read_soundly(pieces: list[str]) -> None:
    """Triggers, names, digits, marks and quotes in any order never give a bad name."""
    _assert_sound(read_name("".join(pieces)))


@settings(max_examples=300)
@given(st.text(alphabet=st.characters(categories=["L", "M", "Zs"]), min_size=1, max_size=60))
def test_whatever_follows_call_me_gives_a_sound_name_or_none(name: str) -> None:
    """Letters of any script after a trigger, in any casing, give a sound name or none."""
    _assert_sound(read_name("call me " + name))
    _assert_sound(read_name("my name is " + name.lower()))
