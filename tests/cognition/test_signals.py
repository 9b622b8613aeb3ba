"""NLP signals, the social fast path and the conversation phase, from a message's text alone."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalie.cognition.signals import (
    Feedback,
    NlpSignals,
    Phase,
    is_social,
    next_phase,
    nlp_signals,
    social_reply,
)
from chalie.config_load import load_config

COGNITION = load_config(env={}).cognition
PHRASES = COGNITION.social_phrases
MAX_CHARS = COGNITION.social_max_chars


@pytest.mark.parametrize(
    ("text", "expected"),
    [("Where is it?", True), ("where is it", False), ("\u00bfD\u00f3nde est\u00e1?", True),
     ("\u4f55\u3067\u3059\u304b\uff1f", True), ("It is 5 o'clock.", False)],
)
def test_a_question_mark_anywhere_is_seen(text: str, expected: bool) -> None:
    """ASCII, full-width and Spanish question marks all count."""
    assert nlp_signals(text).has_question_mark is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("what time is it", 1),
        ("What's the weather like", 1),
        ("why and how", 2),
        ("can you check the weather", 1),
        ("Could you help? Is there a train?", 2),
        ("Is it late", 1),
        ("this is it", 0),
        ("I booked the hotel", 0),
        ("", 0),
    ],
)
def test_interrogative_words_and_openers_are_counted(text: str, expected: int) -> None:
    """Wh-words count anywhere, "can you" style openers too, "is it" only opening a clause."""
    assert nlp_signals(text).interrogatives == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hi", True), ("Hello there!", True), ("Hey, quick question", True),
        ("Good morning!", True), ("good evening Chalie", True), ("Morning!", True),
        ("yo, what's up", True), ("Morning meetings are boring", False),
        ("say hi to Ana", False), ("high tide at noon", False), ("good answer", False),
    ],
)
def test_a_greeting_is_seen_only_at_the_start(text: str, expected: bool) -> None:
    """Hi, hello, hey, good morning... open a message; elsewhere they are just words."""
    assert nlp_signals(text).greeting is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("bye!", True), ("ok, goodbye", True), ("Good night", True), ("ttyl", True),
        ("talk to you later", True), ("see you tomorrow", True), ("That's all, thanks", True),
        ("that's all I have in the fridge, what can I cook with it", False),
        ("I'll see you at the conference next week in Berlin to talk budgets", False),
        ("what is the capital of France", False),
    ],
)
def test_a_farewell_is_seen(text: str, expected: bool) -> None:
    """Bye, good night, ttyl... anywhere; "see you" and "that's all" only in a short message."""
    assert nlp_signals(text).farewell is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("thanks!", "positive"),
        ("Great, that helps", "positive"),
        ("perfect", "positive"),
        ("That's wrong, the meeting is at 5", "negative"),
        ("not what I asked", "negative"),
        ("thanks, but that's not right", "negative"),
        ("too long", "shorter"),
        ("tl;dr please", "shorter"),
        ("TL;DR", "shorter"),
        ("Be brief.", "shorter"),
        ("answer in one sentence", "shorter"),
        ("thanks, but too long", "shorter"),
        ("Can you elaborate?", "longer"),
        ("more detail on the second point", "longer"),
        ("explain more", "longer"),
        ("go deeper", "longer"),
        ("longer please", "longer"),
        ("what is wrong with my car", None),
        ("how much longer is the drive", None),
        ("a great place to eat in Lisbon", None),
        ("book a table", None),
    ],
)
def test_explicit_feedback_on_answers_is_classified(text: str, expected: Feedback | None) -> None:
    """A correction or length request outweighs thanks; the words used otherwise are no feedback."""
    assert nlp_signals(text).feedback == expected


@pytest.mark.parametrize(
    ("text", "low", "high"),
    [
        ("ok", 0.0, 0.0),
        ("Lisbon flights", 0.1, 0.2),
        ("I need to finalise the quarterly budget report with revenue projections for the "
         "marketing and engineering teams", 0.5, 1.0),
        ("and then I said that it was what it was and that was that", 0.0, 0.1),
    ],
)
def test_information_density_counts_content_words_and_penalises_short_messages(
    text: str, low: float, high: float
) -> None:
    """Dense prose scores high; filler and two-word messages score low."""
    assert low <= nlp_signals(text).density <= high


@given(st.text(max_size=400))
def test_density_is_always_between_0_and_1_and_never_high_for_short_messages(text: str) -> None:
    """Density is a share, scaled by length: under 12 words it is at most words/12."""
    signals = nlp_signals(text)
    assert 0.0 <= signals.density <= 1.0
    assert signals.density <= round(signals.words / 12, 3)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("and what about tomorrow?", True),
        ("Also the hotel", True),
        ("how about Porto", True),
        ("do it again", True),
        ("the same as before", True),
        ("book them", True),
        ("What is the population of Portugal", False),
        ("It rained on the whole Lisbon Porto Braga road trip", False),
    ],
)
def test_an_implicit_reference_leans_on_earlier_talk(text: str, expected: bool) -> None:
    """Openers like "and"/"what about" always; "it", "that", "again" when little else is said."""
    assert nlp_signals(text).implicit_reference is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("let's go with the second option", True), ("I'll take the blue one", True),
        ("Which one should I pick?", True), ("go ahead", True), ("book it", True),
        ("yes, do it", True), ("Do it.", True), ("I can't decide", True),
        ("the weather in Lisbon", False), ("how do I do it", False),
    ],
)
def test_a_decision_being_made_or_asked_for_is_seen(text: str, expected: bool) -> None:
    """Choosing words and phrases mark a decision."""
    assert nlp_signals(text).decision is expected


def test_the_signals_count_the_words_of_the_message() -> None:
    """Punctuation and emoji are not words."""
    assert nlp_signals("Hi! Don't book it yet, ok? \N{THUMBS UP SIGN}").words == 6


@pytest.mark.parametrize(
    "text",
    ["thanks!", "Thanks", "  thank you so much~ ", "OK.", "ok, thanks!", "Got   it.",
     "Sounds good!!", "cool \N{THUMBS UP SIGN}", "\N{PERSON WITH FOLDED HANDS} thanks",
     "\N{THUMBS UP SIGN}", "\N{PERSON WITH FOLDED HANDS}\N{PERSON WITH FOLDED HANDS}",
     "\N{THUMBS UP SIGN}\N{EMOJI MODIFIER FITZPATRICK TYPE-4}", "\u2764\ufe0f", "thx :)",
     "merci"],
)
def test_a_short_thanks_or_acknowledgement_is_social(text: str) -> None:
    """Only configured phrases, emoji and end punctuation: no model needed."""
    assert is_social(text, PHRASES, MAX_CHARS)


@pytest.mark.parametrize(
    "text",
    ["thanks, and what about tomorrow?", "ok do it", "ok?", "", "   ", "!!!", "thanks Ana",
     "hello", "great, now book the hotel", "not ok", "k" * 3],
)
def test_anything_with_a_question_or_more_content_is_not_social(text: str) -> None:
    """Another word, a question mark or nothing at all goes to the model."""
    assert not is_social(text, PHRASES, MAX_CHARS)


def test_a_social_message_longer_than_the_limit_is_not_social() -> None:
    """Even a run of thanks goes to the model past max_chars."""
    text = "thanks " * 6
    assert is_social(text, PHRASES, len(text.strip()))
    assert not is_social(text, PHRASES, len(text.strip()) - 1)


def test_configured_phrases_are_compared_the_same_way_as_the_message() -> None:
    """A phrase written with case, spaces and end punctuation still matches."""
    assert is_social("much obliged", ["  Much   Obliged! "], 40)
    assert not is_social("thanks", ["  Much   Obliged! "], 40)


@given(st.text(max_size=60))
def test_a_message_with_a_question_mark_is_never_social(text: str) -> None:
    """Whatever else it holds, a question goes to the model."""
    assert not is_social(text + "?", PHRASES, MAX_CHARS)
    assert not is_social("?" + text, PHRASES, MAX_CHARS)


@given(st.lists(st.sampled_from(PHRASES), min_size=1, max_size=4))
def test_configured_phrases_back_to_back_are_social_within_the_limit(
    phrases: list[str],
) -> None:
    """Runs of phrases ("ok, thanks") are social exactly when they fit max_chars."""
    text = ", ".join(phrases) + "!"
    assert is_social(text, PHRASES, MAX_CHARS) is (len(text) <= MAX_CHARS)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("thanks!", "You're welcome."), ("ok, thank you", "You're welcome."),
        ("merci", "You're welcome."), ("ok", "Okay."), ("Got it.", "Okay."),
        ("sounds good", "Okay."), ("perfect!", "Glad to hear it."), ("great", "Glad to hear it."),
        ("\N{THUMBS UP SIGN}", "\N{THUMBS UP SIGN}"),
        ("\N{PERSON WITH FOLDED HANDS}\N{PERSON WITH FOLDED HANDS}", "\N{THUMBS UP SIGN}"),
        ("bye", "Bye for now."), ("hello", "Hello!"),
    ],
)
def test_a_social_message_gets_a_fixed_acknowledgement(text: str, expected: str) -> None:
    """Thanks are welcomed, praise is acknowledged, emoji get a thumbs up."""
    assert social_reply(text) == expected


PLAIN = NlpSignals(has_question_mark=False, interrogatives=0, greeting=False, farewell=False,
                   feedback=None, density=0.4, implicit_reference=False, decision=False, words=10)


@pytest.mark.parametrize(
    ("previous", "fields", "turn", "expected"),
    [
        ("working", {"farewell": True, "greeting": True}, (5, True, False), "closing"),
        ("working", {"feedback": "positive", "words": 2}, (5, False, False), "closing"),
        ("deciding", {"feedback": "positive", "words": 6}, (5, False, False), "closing"),
        ("exploring", {"feedback": "positive", "words": 2}, (5, False, False), "exploring"),
        ("working", {"feedback": "positive", "words": 7}, (5, False, False), "working"),
        ("working", {"greeting": True, "decision": True}, (5, True, False), "opening"),
        (None, {"density": 0.1}, (1, False, False), "opening"),
        (None, {"density": 0.1, "has_question_mark": True}, (1, False, True), "exploring"),
        (None, {"density": 0.1, "interrogatives": 1}, (1, False, False), "exploring"),
        ("exploring", {"density": 0.1}, (2, False, False), "exploring"),
        ("exploring", {"decision": True, "has_question_mark": True}, (3, True, True), "deciding"),
        ("exploring", {}, (3, True, False), "working"),
        ("exploring", {"density": 0.6}, (3, False, False), "working"),
        ("exploring", {"density": 0.6, "has_question_mark": True}, (3, False, False), "exploring"),
        ("working", {"interrogatives": 2}, (3, False, False), "exploring"),
        ("working", {}, (3, False, True), "exploring"),
        ("deciding", {}, (3, False, False), "deciding"),
        (None, {}, (3, False, False), "exploring"),
    ],
)
def test_the_phase_follows_the_first_rule_that_holds(
    previous: Phase | None, fields: dict[str, object], turn: tuple[int, bool, bool],
    expected: Phase,
) -> None:
    """Farewell, thanks after work, greeting, decision, work, question or new topic, else stay."""
    exchanges, used_tools, new_topic = turn
    phase = next_phase(previous, msgspec.structs.replace(PLAIN, **fields), exchanges=exchanges,
                       used_tools=used_tools, new_topic=new_topic)
    assert phase == expected


def test_a_conversation_moves_through_its_phases() -> None:
    """A greeting opens, a question explores, tools work, a choice decides, thanks close."""
    turns = [
        ("Hi Chalie!", False, True, "opening"),
        ("What are good weekend trips from Lisbon?", False, True, "exploring"),
        ("Check trains to Porto for Saturday", True, False, "working"),
        ("let's go with the 9am train", False, False, "deciding"),
        ("perfect, thanks!", False, False, "closing"),
        ("bye", False, False, "closing"),
    ]
    phase: Phase | None = None
    for exchanges, (text, used_tools, new_topic, expected) in enumerate(turns, start=1):
        phase = next_phase(phase, nlp_signals(text), exchanges=exchanges,
                           used_tools=used_tools, new_topic=new_topic)
        assert (text, phase) == (text, expected)


PHASES: list[Phase | None] = [None, "opening", "exploring", "working", "deciding", "closing"]


@given(st.text(max_size=200), st.sampled_from(PHASES), st.integers(0, 50), st.booleans(),
       st.booleans())
def test_a_farewell_always_closes_and_every_message_has_a_phase(
    text: str, previous: Phase | None, exchanges: int, used_tools: bool, new_topic: bool
) -> None:
    """Whatever the message, the phase is one of the five; after a farewell it is closing."""
    signals = nlp_signals(text)
    phase = next_phase(previous, signals, exchanges=exchanges, used_tools=used_tools,
                       new_topic=new_topic)
    assert phase in PHASES[1:]
    assert phase == "closing" or not signals.farewell
