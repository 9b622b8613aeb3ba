"""Messages that end a turn without an LLM call: empty ones and plain cancel phrases."""

from __future__ import annotations

import pytest

from chalie.act.fastpath import is_cancel, is_empty


@pytest.mark.parametrize("text", ["", "   ", "\n\n", " \t\n "])
def test_blank_messages_are_empty(text: str) -> None:
    """A message of nothing but whitespace has nothing to answer."""
    assert is_empty(text) is True


@pytest.mark.parametrize("text", ["hi", "  ok \n", "."])
def test_messages_with_text_are_not_empty(text: str) -> None:
    """Any visible character makes a message worth answering."""
    assert is_empty(text) is False


@pytest.mark.parametrize(
    "text",
    ["cancel", "Cancel.", " never mind ", "nevermind", "forget it!", "stop", "scratch that",
     "no, forget it", "STOP!!", "Never mind…"],
)
def test_plain_cancel_phrases_cancel(text: str) -> None:
    """A whole message that only calls things off cancels, whatever its case and end punctuation."""
    assert is_cancel(text) is True


@pytest.mark.parametrize(
    "text",
    ["cancel my appointment", "stop the music", "don't forget it", "", "   ", "please stop it"],
)
def test_requests_that_merely_contain_a_cancel_word_do_not_cancel(text: str) -> None:
    """A request that mentions cancelling, or nothing at all, is answered normally."""
    assert is_cancel(text) is False
