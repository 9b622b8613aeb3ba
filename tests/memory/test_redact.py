"""Forgotten values stay out of text written before they were forgotten."""

from __future__ import annotations

from chalie.memory.redact import BLANK, Redactor


def test_a_forgotten_value_is_blanked_out_of_older_text_only() -> None:
    """Text from before the forgetting loses the value; text written afterwards keeps it."""
    redact = Redactor([("teal", 100.0)])
    assert redact("my favourite colour is Teal.", 50.0) == f"my favourite colour is {BLANK}."
    assert redact("I still like teal", 150.0) == "I still like teal"
    assert redact("teal, again", None) == f"{BLANK}, again"


def test_whole_words_only_and_any_spacing_of_a_phrase() -> None:
    """A value matches as whole words, with any whitespace between them; parts of words stay."""
    redact = Redactor([("Rue de la Paix", 10.0)])
    assert redact("I live at rue  de\nla paix now", 1.0) == f"I live at {BLANK} now"
    assert Redactor([("sam", 10.0)])("Samuel and sam and Sam's", 1.0) == \
        f"Samuel and {BLANK} and {BLANK}'s"


def test_values_with_regex_characters_are_taken_literally() -> None:
    """Punctuation in a value is matched as itself, never as a pattern."""
    redact = Redactor([("a+b (c)", 10.0)])
    assert redact("x a+b (c) y aab c", 1.0) == f"x {BLANK} y aab c"


def test_nothing_forgotten_changes_nothing() -> None:
    """With no forgotten values the redactor is falsy and returns text as it is."""
    redact = Redactor([])
    assert not redact
    assert redact("anything at all", 1.0) == "anything at all"
