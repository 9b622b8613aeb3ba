"""Confidence: how sure Chalie is about a topic, and what a turn did."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalie.cognition.confidence import (
    FOK_MAX,
    FOK_MIN,
    FOK_START,
    FOK_STEP,
    Mode,
    answer_used,
    memory_confidence,
    turn_mode,
    update_fok,
    warmth,
)

RECALLED = ["Ana's birthday is on 12 March", "The person prefers window seats on trains"]


@pytest.mark.parametrize(
    ("answer", "recalled", "expected"),
    [
        ("Ana's birthday is on 12 March, so next Tuesday.", RECALLED, True),
        ("I booked you a window seat.", RECALLED, True),
        ("March is a busy month.", RECALLED, False),
        ("It is on the 12th, a Tuesday.", RECALLED, False),
        ("You like window seats, so I picked one.", RECALLED, True),
        ("Happy birthday!", ["birthday party"], True),
        ("Tea or milk for Ana?", ["Ana likes tea with milk"], True),
        ("Your preferences are noted.", ["The person prefers tea"], False),
        ("Anything else?", RECALLED, False),
        ("Ana's birthday is on 12 March.", [], False),
        ("", RECALLED, False),
    ],
)
def test_an_answer_used_recall_when_it_shares_its_content_words(
    answer: str, recalled: list[str], expected: bool
) -> None:
    """Two shared content words, or one of 6 letters or more, mean the answer used recall."""
    assert answer_used(answer, recalled) is expected


@pytest.mark.parametrize(
    ("fok", "recalled", "used", "expected"),
    [
        (FOK_START, 3, True, FOK_START + FOK_STEP),
        (FOK_START, 3, False, FOK_START - FOK_STEP),
        (FOK_START, 0, False, FOK_START - FOK_STEP),
        (FOK_START, 0, True, FOK_START - FOK_STEP),
        (FOK_MAX, 2, True, FOK_MAX),
        (FOK_MIN, 0, False, FOK_MIN),
        (0.2, 0, False, FOK_MIN),
        (4.8, 1, True, FOK_MAX),
        (float("nan"), 1, True, FOK_START + FOK_STEP),
    ],
)
def test_feeling_of_knowing_rises_when_recall_is_used_and_falls_otherwise(
    fok: float, recalled: int, used: bool, expected: float
) -> None:
    """One step up for used recall, one step down for none or ignored, within 0..5."""
    assert update_fok(fok, recalled=recalled, used=used) == pytest.approx(expected)


@given(st.floats(allow_nan=True), st.integers(min_value=-5, max_value=50), st.booleans())
def test_feeling_of_knowing_always_stays_within_0_and_5(
    fok: float, recalled: int, used: bool
) -> None:
    """No sequence of turns pushes FOK out of its range."""
    assert FOK_MIN <= update_fok(fok, recalled=recalled, used=used) <= FOK_MAX


def test_a_topic_returned_to_with_used_recall_gains_confidence_turn_by_turn() -> None:
    """Each turn whose answer uses what recall found raises memory confidence."""
    fok, seen = FOK_START, []
    for history in range(2, 12, 2):
        fok = update_fok(fok, recalled=2, used=True)
        seen.append(memory_confidence(fok, warmth(history, 0), 0.4, new_topic=False))
    assert seen == sorted(seen)
    assert seen[0] < seen[-1]


@pytest.mark.parametrize(
    ("history", "world", "full", "expected"),
    [
        (0, 0, 10, 0.0),
        (5, 0, 10, 0.25),
        (10, 3, 10, 1.0),
        (40, 9, 10, 1.0),
        (2, 1, 4, (0.5 + 1 / 3) / 2),
        (-3, -1, 10, 0.0),
        (3, 0, 0, 0.5),
    ],
)
def test_context_warmth_is_the_mean_of_history_and_world_fullness(
    history: int, world: int, full: int, expected: float
) -> None:
    """Half from how full the history is, half from world signals (full at 3)."""
    assert warmth(history, world, history_full=full) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("fok", "warm", "dense", "new_topic", "expected"),
    [
        (5.0, 1.0, 1.0, False, 1.0),
        (5.0, 1.0, 1.0, True, 0.7),
        (0.0, 0.0, 0.0, False, 0.0),
        (2.5, 0.5, 0.5, False, 0.5),
        (1.0, 0.25, 0.4, False, 0.26),
        (1.0, 0.25, 0.4, True, 0.182),
        (9.0, 2.0, 3.0, False, 1.0),
        (-1.0, -1.0, -1.0, False, 0.0),
    ],
)
def test_memory_confidence_weighs_fok_warmth_and_density(
    fok: float, warm: float, dense: float, new_topic: bool, expected: float
) -> None:
    """0.4 x fok/5 + 0.4 x warmth + 0.2 x density, times 0.7 on a new topic, 3 decimals."""
    assert memory_confidence(fok, warm, dense, new_topic=new_topic) == expected


@given(st.floats(), st.floats(), st.floats(), st.booleans())
def test_memory_confidence_is_always_within_0_and_1(
    fok: float, warm: float, dense: float, new_topic: bool
) -> None:
    """Whatever goes in, confidence is a number in 0..1."""
    assert 0.0 <= memory_confidence(fok, warm, dense, new_topic=new_topic) <= 1.0


@given(st.floats(0, 5), st.floats(0, 1), st.floats(0, 1))
def test_a_new_topic_never_raises_confidence(fok: float, warm: float, dense: float) -> None:
    """The same knowledge counts for less on a topic that just started."""
    new = memory_confidence(fok, warm, dense, new_topic=True)
    assert new <= memory_confidence(fok, warm, dense, new_topic=False)


@pytest.mark.parametrize(
    ("social", "tools", "answer", "expected"),
    [
        (True, 0, "You're welcome.", "acknowledge"),
        (True, 2, "Okay.", "acknowledge"),
        (False, 1, "Which city do you mean?", "act"),
        (False, 0, "Which city do you mean?", "clarify"),
        (False, 0, "Sure. Which Porto, Portugal or Texas? \N{SLIGHTLY SMILING FACE}", "clarify"),
        (False, 0, "Do you mean *Porto?*", "clarify"),
        (False, 0, "\u3069\u3061\u3089\u3067\u3059\u304b\uff1f", "clarify"),
        (False, 0, "Is it Porto? It is Porto.", "respond"),
        (False, 0, "It is sunny in Lisbon.", "respond"),
        (False, 0, "", "respond"),
        (False, 0, None, "respond"),
    ],
)
def test_the_turn_mode_says_what_the_turn_did(
    social: bool, tools: int, answer: str | None, expected: Mode
) -> None:
    """Social fast path, tool calls, a question back, or a plain answer."""
    assert turn_mode(social=social, tools_called=tools, answer=answer) == expected
