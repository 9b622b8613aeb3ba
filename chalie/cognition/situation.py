"""The situation model: a per-channel record of what is going on, updated every turn.

Its deterministic parts are read from the person's own words, by patterns, with no model:
- open loops: what the person said they need, have or plan to do ("I need to call the
  dentist", "I'll eventually have to renew my passport", "I still haven't booked the hotel",
  "remind me to ..."), with any adverbs between ("I really/still/also need to"), until a
  later message says it is done;
- people and places the person mentioned (a capitalised name after "with", "tell", "meet"...,
  or "my <relation> <Name>"; after "in", "at", "near", "visit"...);
- pending decisions: a choice the person is weighing ("should I ... or ...?"), until they
  decide ("let's go with", "I'll take", "I decided").
The current focus is the channel's focus topic. Each list keeps its newest few entries.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import msgspec

from chalie.cognition.words import content_words, plain, stem

MAX_LOOPS, MAX_NAMES, MAX_DECISIONS = 5, 6, 3
LOOP_CHARS = 90

# Adverbs the person may put anywhere in "I (will) (still) need to (also) ...": any "-ly" word
# but the negative ones, and the common short ones. Never "not", "never" or "no longer".
_ADVERB = (r"(?:(?!(?:hardly|barely|scarcely|rarely)\b)[a-z]+ly|still|also|just|even|too|"
           r"soon|now|yet|already|first|then|both|all|maybe|perhaps|definitely|probably)")
_ADVERBS = rf"(?:\s+{_ADVERB})*"
_NOT = r"(?!\s+(?:not|never|no)\b)"
_MODAL = r"(?:(?:need|needs|have|has|want|wants|plan|plans|ought|got)\s+to|must|should|gotta)"
_LOOP = re.compile(
    r"\b(?:i|we)(?:"
    rf"(?:'ll|\s+will|\s+shall){_NOT}{_ADVERBS}(?:\s+{_MODAL})?"  # I'll (eventually) (need to)
    rf"|(?:'m|'re|\s+am|\s+are){_NOT}{_ADVERBS}\s+(?:going|planning|supposed|meant)\s+to"
    rf"|(?:'ve|\s+have){_NOT}{_ADVERBS}\s+got\s+to|(?:'d|\s+had)\s+better"
    rf"|{_ADVERBS}\s+{_MODAL}"  # I (really) need to
    rf"){_ADVERBS}\s+([^.!?\n;]{{3,120}})"
    # "I still haven't booked the hotel": kept as said
    rf"|\b(?:i|we){_ADVERBS}\s+still\s+((?:haven't|have not|didn't|did not)\s+[^.!?\n;]{{3,120}})"
    r"|\b(?:remind me to|don'?t let me forget to|don'?t forget to|i must remember to)\s+"
    r"([^.!?\n;]{3,120})",
    re.IGNORECASE,
)
_DONE = re.compile(r"\b(?:done|did it|finished|completed|sorted|handled|took care of|"
                   r"called|booked|paid|sent|bought|fixed)\b", re.IGNORECASE)
_NAME = r"([A-Z][a-z\u00c0-\u024f]+(?:\s+[A-Z][a-z\u00c0-\u024f]+)?)"
_PERSON = re.compile(r"\b(?:with|tell|ask|call|meet|met|meeting|email|text|visit from)\s+" + _NAME
                     + r"|\bmy (?:wife|husband|partner|boss|mom|mum|mother|dad|father|friend|"
                     r"sister|brother|son|daughter|colleague|manager|doctor|neighbou?r)\s+"
                     + _NAME)
_PLACE = re.compile(r"\b(?:in|at|near|visit|visiting|around|go to|going to|fly to|"
                    r"flying to|travel to|trip to|move to|moving to)\s+" + _NAME)
_CHOICE = re.compile(r"\b(?:should i|shall i|should we|do i|which one|which should)\b[^?]{3,150}"
                     r"\bor\b[^?]{1,150}\?", re.IGNORECASE)
_DECIDED = re.compile(r"\b(?:let'?s go with|i'?ll take|i'?ll go with|i choose|i chose|"
                      r"i decided|i'?ve decided|we decided|decided to|book it)\b", re.IGNORECASE)
_NOT_NAMES = frozenset({
    "I", "The", "A", "An", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday",
    "Sunday", "January", "February", "March", "April", "May", "June", "July", "August",
    "September", "October", "November", "December", "Today", "Tomorrow", "Chalie", "It",
    "This", "That", "Then", "There", "Christmas", "Easter",
})


class Situation(msgspec.Struct, kw_only=True, omit_defaults=True):
    focus: str | None = None
    open_loops: list[str] = msgspec.field(default_factory=list)
    people: list[str] = msgspec.field(default_factory=list)
    places: list[str] = msgspec.field(default_factory=list)
    decisions: list[str] = msgspec.field(default_factory=list)


def update(before: Situation, text: str, *, focus: str | None) -> Situation:
    """The situation after the person said `text` (a new record; `before` is left as it was)."""
    loops = [loop for loop in before.open_loops if not _closes(text, loop)]
    for match in _LOOP.finditer(plain(text)):
        loop = _clean(next(g for g in match.groups() if g))
        if loop and all(_clean(old).lower() != loop.lower() for old in loops):
            loops.append(loop)
    people = _names(before.people, (m.group(1) or m.group(2) for m in _PERSON.finditer(text)))
    places = _names(before.places, (m.group(1) for m in _PLACE.finditer(text)))
    decisions = [] if _DECIDED.search(text) else list(before.decisions)
    for match in _CHOICE.finditer(text):
        decisions.append(_clean(match.group(0)))
    return Situation(focus=focus, open_loops=loops[-MAX_LOOPS:], people=people[-MAX_NAMES:],
                     places=places[-MAX_NAMES:], decisions=decisions[-MAX_DECISIONS:])


def _clean(text: str) -> str:
    text = " ".join(text.split()).strip(" ,")
    return text if len(text) <= LOOP_CHARS else text[:LOOP_CHARS].rstrip() + "…"


def _closes(text: str, loop: str) -> bool:
    """`text` says the loop is done: a word of doing it, and most of the loop's own words."""
    if not _DONE.search(text):
        return False
    wanted = {stem(w) for w in content_words(loop)}
    said = {stem(w) for w in content_words(text)}
    return bool(wanted) and len(wanted & said) / len(wanted) >= 0.5


def _names(known: list[str], found: Iterable[str | None]) -> list[str]:
    out = list(known)
    for name in found:
        if not name:
            continue
        first = name.split()[0]
        if first in _NOT_NAMES:
            continue
        if name in out:
            out.remove(name)  # seen again: newest
        out.append(name)
    return out
