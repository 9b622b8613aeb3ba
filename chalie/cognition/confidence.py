"""How sure Chalie is about a topic, and what a turn did (message-flow-v2, phase A steps 6-8).

Feeling-of-knowing (FOK) is kept per topic on message-flow-v2's scale of 0 to 5: it rises by a
step when recall found material and the answer used it, and falls by a step when recall found
nothing or the answer ignored what it found. Context warmth says how much the conversation and
the world already hold; density how much of the memory section's own budget recall filled.
Memory confidence combines them with the spec's weights, `0.4*fok + 0.4*warmth + 0.2*density`,
where FOK is first normalised to 0..1 (fok / 5) so that the result is 0..1; a new topic
multiplies it by 0.7.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from chalie.cognition.words import content_words

FOK_MIN, FOK_MAX, FOK_START, FOK_STEP = 0.0, 5.0, 1.0, 0.5
Mode = Literal["respond", "clarify", "act", "acknowledge"]

WORLD_FULL = 3  # world signals (items of world state) at which the world part of warmth is full
NEW_TOPIC_FACTOR = 0.7
SHARED_WORDS = 2  # content words an answer must share with a recalled text to have used it
LONG_WORD = 6  # ... or one shared content word at least this long

# What may follow an answer's closing question mark: quotes, brackets, markdown emphasis and
# emoji ("Which one do you mean? 🙂").
_CLOSERS = frozenset("\"')]*_~\u201d\u2019\u200d\ufe0f")


def _is_closer(ch: str) -> bool:
    return ch.isspace() or ch in _CLOSERS or "\U0001f000" <= ch <= "\U0001faff" or (
        "\u2600" <= ch <= "\u27bf"
    )


def _last_mark(text: str) -> str:
    """The last character of `text` that is not a closer (see _CLOSERS), or ""."""
    end = len(text)
    while end > 0 and _is_closer(text[end - 1]):
        end -= 1
    return text[end - 1] if end else ""


def _unit(value: float) -> float:
    """`value` within 0..1; NaN counts as 0."""
    return min(1.0, max(0.0, value)) if not math.isnan(value) else 0.0


def answer_used(answer: str, recalled: Sequence[str]) -> bool:
    """Whether the answer used what recall found: some recalled text shares at least 2 content
    words with it, or one content word of 6 characters or more."""
    said = set(content_words(answer))
    if not said:
        return False
    for text in recalled:
        shared = said.intersection(content_words(text))
        if len(shared) >= SHARED_WORDS or any(len(w) >= LONG_WORD for w in shared):
            return True
    return False


def update_fok(fok: float, *, recalled: int, used: bool) -> float:
    """A topic's feeling-of-knowing after a turn: one step up when recall found material and
    the answer used it, one step down otherwise (nothing found, or found and ignored); always
    within FOK_MIN..FOK_MAX. A NaN starts again from FOK_START."""
    if math.isnan(fok):
        fok = FOK_START
    step = FOK_STEP if recalled > 0 and used else -FOK_STEP
    return min(FOK_MAX, max(FOK_MIN, fok + step))


def warmth(history_messages: int, world_signals: int, *, history_full: int = 10) -> float:
    """Context warmth, 0..1: the mean of how full the conversation history is (full at
    `history_full` messages) and how much world state there is (full at 3 signals)."""
    history = min(1.0, max(0, history_messages) / max(1, history_full))
    world = min(1.0, max(0, world_signals) / WORLD_FULL)
    return (history + world) / 2


def memory_confidence(fok: float, warmth: float, density: float, *, new_topic: bool) -> float:
    """Memory confidence, 0..1 to 3 decimals: 0.4 * fok / FOK_MAX + 0.4 * warmth + 0.2 *
    density, times 0.7 on a new topic. (The spec's FOK is 0..5; it is normalised to 0..1 here.)"""
    confidence = 0.4 * _unit(fok / FOK_MAX) + 0.4 * _unit(warmth) + 0.2 * _unit(density)
    if new_topic:
        confidence *= NEW_TOPIC_FACTOR
    return round(_unit(confidence), 3)


def turn_mode(*, social: bool, tools_called: int, answer: str | None) -> Mode:
    """What the turn did: "acknowledge" on the social fast path, "act" when it called a tool,
    "clarify" when the answer asks the person something back (it ends with a question mark,
    closing quotes, brackets, emphasis and emoji aside), otherwise "respond"."""
    if social:
        return "acknowledge"
    if tools_called > 0:
        return "act"
    if answer and _last_mark(answer) in ("?", "\uff1f"):
        return "clarify"
    return "respond"
