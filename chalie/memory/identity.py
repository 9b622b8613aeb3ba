"""The person telling Chalie their name, found without an LLM.

The identity hook runs before the model on every chat message, so this reader is deliberately
conservative: a missed name costs little (the model still reads the message and has its memory
tool), a wrong one renames the person. It matches, case-insensitively and anywhere in a message:

- "call me X", with "please", "just", "you can", "you may", "feel free to", "I'd like you to"...
  in front, at the start of a clause (after the message start, . , ! ? ; : a dash, "and"/"but"/
  "so", or greetings and fillers): "Hi Chalie, please call me Sam".
- "I go by X", "I usually go by X", "I go by the name of X".
- "I'd like/prefer to be called X", "I'd rather be called X".
- "my name is X", "my name's X" (not after "what", "if", "how"...), "name's X" at the message
  start, "I'm called X" / "I am called X", and "X is my name" as the whole message.
- "people call me X", "everyone calls me X", "my friends call me X"... only when the name is
  followed by the end of the message, punctuation or an emoji.

The name is 1 to 3 words of letters (any script, with combining marks), each may have internal
apostrophes, hyphens or periods ("O'Neil", "Jean-Luc", "J.R."), at most 40 characters, no digits,
no word from `_NOT_NAMES` ("back", "later", "a", "crazy", "not"...) and no possessive ("Sam's").
After it must come the end, punctuation, an emoji, a conjunction ("and", "but"...), the first
word of a new sentence ("I", "what", "how"...) or a harmless tail ("please", "thanks", "from now
on", "instead", "going forward", "if you like", "these days", "for short"). So "call me Sam
instead of Samuel" is not matched: the tail is not harmless.

Deliberately not matched:
- "I'm Sam" / "I am Sam": too close to "I'm tired", "I'm done", "I am Sam's brother".
- "can you call me X" / "could you call me X": may ask Chalie to phone someone for the person.
- "call me X" after anything that is not a clause start: "don't call me Bob", "never call me Bob
  again", "they call me lazy", "tell him to call me back", a quoted "call me Sam".

Casing: a name typed all in lower case (or in an all-capitals message) gets a capital at the
start of each part ("mary-ann" -> "Mary-Ann", "o'neil" -> "O'Neil"); otherwise the person's own
casing is kept ("McDonald", "DJ"). Curly apostrophes become "'", and the text is NFKC-normalised.

`whole` is True when nothing is left once the statements, greetings ("hi", "good morning",
"Chalie"), politeness ("please", "thanks", "nice to meet you"), fillers ("by the way",
"actually", "oh", "ok", "and", "but"), the harmless tails, punctuation and emoji are removed:
"my name's Jean-Luc, nice to meet you" is whole; "I'm Samuel but call me Sam" is not.

When a message holds several statements, a "call me"/"go by"/"be called" one wins over a "my
name is" one, which wins over a "people call me" one; among equals the last one wins ("call me
Sam. Actually, call me Samuel" -> Samuel).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal, NamedTuple

import msgspec

MAX_NAME_CHARS = 40
MAX_NAME_WORDS = 3

FIRST_TIME = "Nice to meet you, {name}."
RENAMED = "Got it, I'll call you {name} from now on."
SAME_NAME = "I know, {name}."


class NameStatement(msgspec.Struct, frozen=True):
    name: str  # as it should be addressed: "Sam", "Mary Ann", "J.R.", "José", "O'Neil"
    whole: bool  # the message is only this statement: nothing else to answer


_NOT_NAMES = frozenset({
    "back", "later", "tomorrow", "tonight", "today", "now", "soon", "sometime", "sometimes",
    "anytime", "asap", "when", "whenever", "if", "maybe", "crazy", "a", "an", "the", "at", "on",
    "in", "not", "never", "no", "nothing", "please", "what", "that", "this", "it", "him", "her",
    "them", "anything", "something", "again", "up", "out", "over", "by", "about", "after", "before",
    "around", "from", "to", "for", "with", "into", "onto", "via", "and", "or", "but", "so",
    "because", "yes", "yeah", "yep", "ok", "okay", "here", "there", "then", "instead", "whatever",
    "whoever", "anyone", "someone", "somebody", "anybody", "everyone", "everybody", "nobody", "me",
    "my", "mine", "you", "your", "yours", "i", "he", "she", "we", "they", "us", "our", "its", "his",
    "hers", "their", "myself", "yourself", "himself", "herself", "is", "are", "was", "were", "be",
    "been", "am", "do", "does", "did", "will", "would", "can", "could", "should", "may", "might",
    "must", "just", "also", "too", "very", "really", "actually", "still", "already", "only",
    "thanks", "thank", "sorry", "lazy", "stupid", "dumb", "silly", "weird", "names", "old", "fine",
    "good", "bad", "right", "wrong", "long", "short", "spelled", "spelt", "pronounced", "written",
    "important", "irrelevant", "private", "secret", "hard", "difficult", "easy", "simple",
    "strange", "unusual", "common", "same", "different", "unknown", "listed", "missing", "as",
    "like", "than", "who", "whom", "whose", "which", "where", "why", "how", "these", "those",
    "days", "day", "week", "weekend", "morning", "afternoon", "evening", "night", "monday",
    "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "next", "last", "first",
    "once", "twice", "collect", "home", "directly", "immediately", "urgently", "quickly", "bus",
    "train", "car", "bike", "foot", "plane", "taxi", "cab", "boat", "ferry", "subway", "metro",
    "tube", "uber", "ambulance", "all", "any", "every", "each", "some", "many", "much", "more",
    "most", "other", "another", "either", "neither", "both", "whatsoever"
})
_TITLES = frozenset({"mr", "mrs", "ms", "mx", "dr", "prof", "st", "sr", "jr"})
_QUESTION_WORDS = frozenset(
    {"what", "whether", "if", "how", "why", "where", "when", "who", "unless", "not", "than"}
)
_CONJUNCTIONS = frozenset({"and", "but", "so", "or"})
_LEAD_FILLERS = frozenset({
    "hi", "hello", "hey", "heya", "hiya", "yo", "howdy", "greetings", "good", "morning",
    "afternoon", "evening", "day", "there", "chalie", "ok", "okay", "oh", "ah", "well", "um", "uh",
    "actually", "btw", "by", "the", "way", "anyway", "also", "fyi"
})
_CLAUSE_MARKS = frozenset(".,!?;:\n\r\u2014\u2013-(")
_END_MARKS = frozenset(".,!?;:\n\r\u2014\u2013()[]{}\"\u201c\u201d\u00bb")
_QUOTES = {"'": "'", '"': '"', "\u201c": "\u201d", "\u00ab": "\u00bb"}
_EMOJI_PARTS = frozenset("\u200d\ufe0e\ufe0f\u20e3")
_CLAUSE_WINDOW = 160
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})

_H = r"[^\S\r\n]+"  # horizontal whitespace
_SPACE = re.compile(_H)
_LEADS = ("please", "pls", "plz", "just", "you can", "you may", "u can", "feel free to",
          "i'd like you to", "id like you to", "i would like you to", "i want you to")
_LEAD = "(?:(?:" + "|".join(s.replace(" ", _H) for s in _LEADS) + ")" + _H + ")*"


def _words(*phrases: str) -> str:
    """A regex alternation of phrases (longest first), as whole words."""
    ordered = sorted(phrases, key=len, reverse=True)
    return "(?:" + "|".join(p.replace(" ", _H) for p in ordered) + r")(?![\w'])"


_TAILS = (
    "please", "pls", "plz", "thanks", "thank you", "thx", "ty", "from now on", "instead",
    "going forward", "if you like", "if you want", "if you prefer", "if you don't mind",
    "these days", "nowadays", "now", "for short",
)
_TAIL = re.compile(_words(*_TAILS), re.IGNORECASE)
_NEXT = re.compile(_words(
    "and", "but", "so", "or", "because", "cause", "cos", "cuz", "since", "though", "although",
    "btw", "i", "i'm", "im", "i've", "i'd", "i'll", "how", "what", "what's", "whats", "can",
    "could", "would", "do", "does", "is", "are", "where", "who", "why", "nice", "pleased",
    "glad", "it's", "that's", "thats", "lol", "haha",
), re.IGNORECASE)
_FILLERS = re.compile(r"(?<![\w'])" + _words(
    "hi", "hello", "hey", "heya", "hiya", "yo", "howdy", "greetings", "good morning",
    "good afternoon", "good evening", "good day", "morning", "evening", "hi there",
    "hey there", "hello there", "chalie", "please", "pls", "plz", "thanks", "thank you", "thx",
    "ty", "cheers", "nice to meet you", "pleased to meet you", "good to meet you",
    "glad to meet you", "nice meeting you", "by the way", "btw", "actually", "oh", "ah", "ok",
    "okay", "so", "well", "um", "uh", "and", "but", "also", "just", "anyway", "fyi",
    "just so you know", "for the record", *_TAILS,
), re.IGNORECASE)
_TOKEN = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)*|\S")
_IS_MY_NAME = re.compile(_H + "is" + _H + "my" + _H + r"name(?![\w'])", re.IGNORECASE)

_Where = Literal["clause", "start", "anywhere"]


class _Trigger(NamedTuple):
    pattern: re.Pattern[str]
    where: _Where
    rank: int  # lower wins: 0 how to address, 1 the name, 2 what others call them


def _trigger(regex: str, where: _Where, rank: int) -> _Trigger:
    return _Trigger(re.compile(r"(?<![\w'])" + regex.replace(" ", _H) + _H, re.IGNORECASE),
                    where, rank)


_TRIGGERS = (
    _trigger(_LEAD + "call me", "clause", 0),
    _trigger(r"i (?:(?:usually|mostly|normally|just|now|prefer to) )?go by"
             r"(?: the name(?: of)?)?", "clause", 0),
    _trigger(r"(?:i'?d (?:like|prefer) to|i prefer to|i'?d rather) be called", "clause", 0),
    _trigger(r"my name(?: is|'s)(?: actually)?", "anywhere", 1),
    _trigger(r"name's", "start", 1),
    _trigger(r"(?:i'm|im|i am) called", "clause", 1),
    _trigger(r"(?:(?:all )?my (?:friends|family|mates)|friends|people|most people|everyone"
             r"|everybody|folks) calls? me", "clause", 2),
)
_REPORTED = 2


class _Found(NamedTuple):
    rank: int
    at: int
    name: str
    span: tuple[int, int]


def read_name(text: str) -> NameStatement | None:
    """The name the person gives in `text`, or None when they give none."""
    text = unicodedata.normalize("NFKC", text).translate(_APOSTROPHES)
    found: list[_Found] = []
    for trigger in _TRIGGERS:
        for m in trigger.pattern.finditer(text):
            if not _placed(text, m.start(), trigger.where):
                continue
            read = _read(text, m.end(), reported=trigger.rank == _REPORTED)
            if read is not None:
                found.append(_Found(trigger.rank, m.start(), read.name, (m.start(), read.end)))
    found.extend(_name_first(text))
    if not found:
        return None
    best = min(found, key=lambda f: (f.rank, -f.at))
    name = _cased(best.name, shouting=_shouting(text))
    if len(name) > MAX_NAME_CHARS:  # capitals can be longer: "ß" -> "Ss"
        return None
    return NameStatement(name=name, whole=_nothing_else(text, [f.span for f in found]))


def acknowledgement(name: str, previous: str | None) -> str:
    """Chalie's reply to a message that only gave a name; `previous` is the name it had."""
    if previous is None or not previous.strip():
        template = FIRST_TIME
    elif previous.strip().casefold() == name.strip().casefold():
        template = SAME_NAME
    else:
        template = RENAMED
    reply = template.format(name=name)
    return reply.replace(name + ".", name) if name.endswith(".") else reply  # not "J.R.."


def _placed(text: str, start: int, where: _Where) -> bool:
    """Whether what comes before a trigger at `start` lets it start a statement: "clause", the
    start of a clause; "start", the start of the message; "anywhere", not after "what", "if"..."""
    tokens = _TOKEN.findall(text, max(0, start - _CLAUSE_WINDOW), start)
    if where == "anywhere":
        return not tokens or tokens[-1].casefold() not in _QUESTION_WORDS
    for token in reversed(tokens):
        low = token.casefold()
        if where == "clause" and (token in _CLAUSE_MARKS or low in _CONJUNCTIONS):
            return True
        if low in _LEAD_FILLERS or token in _CLAUSE_MARKS or _is_emoji(token):
            continue
        return False
    return start <= _CLAUSE_WINDOW  # the message start, not the edge of the window


class _Read(NamedTuple):
    name: str
    name_end: int  # just past the name (and its closing quote)
    end: int  # where the statement ends: past any harmless tail


def _read(text: str, pos: int, *, reported: bool) -> _Read | None:
    """The name starting at `pos`, optionally in quotes, if a name may end after it."""
    close = _QUOTES.get(text[pos:pos + 1])
    if close is not None:
        pos += 1
    words: list[str] = []
    while len(words) < MAX_NAME_WORDS:
        end = _word_end(text, pos)
        if end is None:
            return None
        word = text[pos:end]
        if word.casefold() in _NOT_NAMES or word.casefold().endswith("'s"):
            return None
        words.append(word)
        if len(" ".join(words)) > MAX_NAME_CHARS:
            return None
        if close is not None and text.startswith(close, end):
            end += 1
            close = None
        if close is None:
            stop = _ends(text, end, reported=reported)
            if stop is not None:
                return _Read(" ".join(words), end, stop)
        space = _SPACE.match(text, end)
        if space is None:
            return None
        pos = space.end()
    return None


def _word_end(text: str, pos: int) -> int | None:
    """The end of the name word at `pos`: letters with marks and internal ' - . joins."""
    if pos >= len(text) or not _is_letter(text[pos]):
        return None
    i, dotted = pos + 1, False
    while i < len(text):
        ch = text[i]
        if _is_letter(ch) or (unicodedata.category(ch)[0] == "M" and ch not in _EMOJI_PARTS):
            i += 1
        elif ch in "'-." and i + 1 < len(text) and _is_letter(text[i + 1]):
            dotted = dotted or ch == "."
            i += 1
        else:
            break
    if text[i:i + 1] == "." and (dotted or i - pos == 1 or text[pos:i].casefold() in _TITLES):
        i += 1  # "J.R.", "J.", "Dr."
    return i


def _ends(text: str, pos: int, *, reported: bool) -> int | None:
    """Where the statement ends if a name may end at `pos`, else None."""
    while True:
        space = _SPACE.match(text, pos)
        at = space.end() if space else pos
        if at >= len(text):
            return pos
        ch = text[at]
        if ch in _END_MARKS or (ch == "-" and text[at + 1:at + 2].isspace()):
            return at
        if _is_emoji(ch):
            pos = at + 1
            continue
        if reported:
            return None
        tail = _TAIL.match(text, at)
        if tail is not None:
            pos = tail.end()
            continue
        return at if _NEXT.match(text, at) else None


def _name_first(text: str) -> list[_Found]:
    """ "X is my name" (with greetings, thanks and punctuation around it) as the whole message.

    Only the first "is my name" can be that: an earlier one would be left over."""
    m = _IS_MY_NAME.search(text)
    end = None if m is None else _ends(text, m.end(), reported=False)
    if m is None or end is None:
        return []
    starts = [w.start() for w in re.finditer(r"\S+", text[:m.start()])]
    for start in reversed(starts[-MAX_NAME_WORDS:]):  # the shortest name first
        read = _read(text, start, reported=False)
        if read is not None and read.name_end == m.start() and _nothing_else(text, [(start, end)]):
            return [_Found(1, start, read.name, (start, end))]
    return []


def _nothing_else(text: str, spans: list[tuple[int, int]]) -> bool:
    """Whether `text` without `spans` is only greetings, politeness, fillers and punctuation."""
    rest = list(text)
    for start, end in spans:
        rest[start:end] = [" "] * (end - start)
    left = _FILLERS.sub(" ", "".join(rest))
    return not any(_is_letter(ch) or ch.isdigit() for ch in left)


def _cased(name: str, *, shouting: bool) -> str:
    if shouting:
        name = name.lower()
    elif any(ch.isupper() for ch in name):
        return name
    out = []
    for i, ch in enumerate(name):
        out.append(ch.title() if i == 0 or name[i - 1] in " '-." else ch)
    return "".join(out)


def _shouting(text: str) -> bool:
    return any(ch.isupper() for ch in text) and not any(ch.islower() for ch in text)


def _is_letter(ch: str) -> bool:
    return unicodedata.category(ch)[0] == "L"


def _is_emoji(token: str) -> bool:
    return all(unicodedata.category(ch) in ("So", "Sk") or ch in _EMOJI_PARTS for ch in token)
