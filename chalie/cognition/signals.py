"""NLP signals of a message, the social fast path and the conversation phase.

`nlp_signals` is layer 1 of message-flow-v2's phase B: question marks, interrogatives,
greetings, farewells, explicit feedback, information density, implicit reference and decisions,
from plain string matching (no model, no external call). Phrases are matched on the message's
words joined by single spaces, with "|" where a clause ends (. ! ? ; : , or a new line), so a
phrase never matches across punctuation and "at the start" means at the start of the message.

`is_social` and `social_reply` are the seeds' social filter (message-flow-v1): a short thanks
or acknowledgement ("thanks!", "ok, thanks", "👍") is answered without an LLM call.
`next_phase` tracks where the conversation stands.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from itertools import filterfalse
from typing import Literal

import msgspec

from chalie.cognition.words import TOKEN, count_content, normalise, plain, wordset

Phase = Literal["opening", "exploring", "working", "deciding", "closing"]
Feedback = Literal["positive", "negative", "shorter", "longer"]

DENSE = 0.5  # at least this dense, a statement is work material
SPARSE = 0.3  # below this, a first message without a question is small talk
SHORT_WORDS = 6  # a message of at most this many words is short
FEW_CONTENT_WORDS = 3  # an anaphor leans on earlier talk when its message has at most this many
DENSITY_FULL_WORDS = 12  # density reaches full weight at this many words

_CLAUSE = re.compile(r"[.!?;:,\n]|" + TOKEN.pattern)
_BREAKS = tuple(".!?;:,\n")
_IS_BREAK = frozenset(_BREAKS).__contains__
_TLDR = re.compile(r"\btl;dr\b", re.IGNORECASE)
_QUESTION_MARKS = ("?", "\uff1f", "\u00bf")  # ASCII, full-width and the Spanish opening mark


class _Phrases:
    """A table of phrases, matched on the " | w1 w2 | w3 | " form of a message (see
    `_clauses`). Only the phrases whose first word the message has are tried, so a table costs
    a set intersection, not one scan of the message per phrase."""

    __slots__ = ("by_first", "firsts")

    def __init__(self, *phrases: str) -> None:
        table: dict[str, list[str]] = {}
        for phrase in phrases:
            said = TOKEN.findall(normalise(phrase))
            table.setdefault(said[0], []).append(" " + " ".join(said) + " ")
        self.by_first = {first: tuple(padded) for first, padded in table.items()}
        self.firsts = frozenset(table)

    def _tried(self, unique: set[str]) -> list[str]:
        return [p for first in self.firsts & unique for p in self.by_first[first]]

    def anywhere(self, joined: str, unique: set[str]) -> bool:
        """Whether one of the phrases is in the message."""
        return any(p in joined for p in self._tried(unique))

    def at_start(self, joined: str, first: str) -> bool:
        """Whether the message (whose first word is `first`) starts with one of the phrases."""
        return any(joined.startswith(p, 2) for p in self.by_first.get(first, ()))

    def count(self, joined: str, unique: set[str], *, clause_start: bool = False) -> int:
        """How often the phrases occur, anywhere or only where a clause starts."""
        bar = "|" if clause_start else ""
        return sum(joined.count(bar + p) for p in self._tried(unique))


_INTERROGATIVE_WORDS = wordset(
    "what why how when where who which whom whose what's where's who's how's when's why's"
)
_INTERROGATIVES_ANYWHERE = _Phrases(
    "can you", "could you", "would you", "will you", "do you", "did you", "have you",
    "can i", "could i", "may i", "should i", "shall i", "shall we", "should we", "any idea",
    "anyone know", "do i", "is there", "are there",
)
_INTERROGATIVES_AT_CLAUSE_START = _Phrases(
    "is it", "is this", "is that", "are you", "are they", "am i", "does it", "does this",
    "does that", "did i", "was it", "were you", "have i", "has it",
)

_GREETING_WORDS = wordset("hi hello hey heya hiya howdy yo greetings hola bonjour hallo")
_GREETINGS_AT_START = _Phrases("good morning", "good afternoon", "good evening", "good day")
_GREETING_CLAUSES = (" | morning | ", " | evening | ", " | afternoon | ", " | morning all | ")

_FAREWELLS_ANYWHERE = _Phrases(
    "bye", "goodbye", "bye bye", "good night", "goodnight", "ttyl", "talk later",
    "talk to you later", "talk soon", "see you later", "see ya", "catch you later", "gotta go",
    "signing off", "have a good night", "have a good one", "until next time",
)
_FAREWELLS_IN_SHORT = _Phrases("see you", "that's all", "that is all", "that's all for now")

_NEGATIVE_ANYWHERE = _Phrases(
    "that's wrong", "that is wrong", "this is wrong", "it's wrong", "you're wrong",
    "you are wrong", "wrong answer", "you got it wrong", "got that wrong", "that's not right",
    "that is not right", "this is not right", "that isn't right", "not what i asked",
    "not what i meant", "not what i wanted", "that's incorrect", "that is incorrect",
    "you misunderstood", "that's not it", "not helpful", "doesn't help", "didn't help",
    "that's not true", "that's false", "you're mistaken", "makes no sense",
)
_NEGATIVE_AT_START = _Phrases("wrong", "incorrect", "nope", "no that's", "not quite")
_SHORTER_ANYWHERE = _Phrases(
    "too long", "tldr", "tl dr", "be brief", "briefly", "in one sentence", "in two sentences",
    "in one line", "keep it short", "shorter please", "make it shorter", "shorter answer",
    "shorter version", "be shorter", "be concise", "more concise", "too verbose",
    "too much detail", "less detail", "just the answer", "short answer",
    "keep it shorter", "keep it brief", "keep them short", "keep them shorter",
    "shorter answers", "answers shorter", "be more brief", "less verbose",
)
_SHORTER_AT_START = _Phrases("shorter", "short version")
_LONGER_ANYWHERE = _Phrases(
    "more detail", "more details", "more detailed", "elaborate", "explain more", "go deeper",
    "in depth", "in more depth", "tell me more", "say more", "expand on", "too short",
    "too brief", "make it longer", "longer answer", "longer please", "be longer",
    "longer version", "dig deeper", "longer answers", "answers longer",
)
_LONGER_AT_START = _Phrases("longer", "more please")
_POSITIVE_ANYWHERE = _Phrases(
    "thanks", "thank you", "thx", "that helps", "that helped", "this helps", "very helpful",
    "so helpful", "really helpful", "exactly what i needed", "that works", "spot on",
    "well done", "good job", "nice job", "great job", "good answer", "great answer",
    "love it", "appreciate it", "much appreciated",
)
_POSITIVE_AT_START = _Phrases(
    "great", "perfect", "awesome", "excellent", "brilliant", "nice", "cool", "exactly",
    "amazing", "helpful", "ty", "cheers", "fantastic", "wonderful",
)

_FEEDBACK: tuple[tuple[Feedback, _Phrases, _Phrases], ...] = (
    ("negative", _NEGATIVE_ANYWHERE, _NEGATIVE_AT_START),
    ("shorter", _SHORTER_ANYWHERE, _SHORTER_AT_START),
    ("longer", _LONGER_ANYWHERE, _LONGER_AT_START),
    ("positive", _POSITIVE_ANYWHERE, _POSITIVE_AT_START),
)

_REFERENCE_AT_START = _Phrases("and", "also", "what about", "how about", "plus")
_ANAPHOR_WORDS = wordset("it that this those them these again")
_REFERENCES = _Phrases(
    "the same", "as i said", "like before", "as before", "you said", "you mentioned",
    "the other one", "the first one", "the second one", "the last one", "that one",
    "the previous", "mentioned earlier",
)

_DECISION_WORDS = wordset(
    "decide decided deciding decision option options pick picked choose chose chosen choice"
)
_DECISIONS = _Phrases(
    "let's go with", "i'll go with", "go with the", "i'll take", "i will take", "i choose",
    "which one should", "which should i", "should i go with", "or should i", "which is better",
    "go ahead", "book it", "yes do it", "let's do it", "just do it", "ok do it", "please do it",
    "let's do that", "sounds like a plan",
)
_DECISIONS_AT_CLAUSE_START = _Phrases("do it", "go for it", "do that")


class NlpSignals(msgspec.Struct, frozen=True):
    """What a message says about itself, before any model reads it."""

    has_question_mark: bool
    interrogatives: int  # interrogative words and question openers ("can you", "is there")
    greeting: bool  # opens with hi, hello, hey, good morning...
    farewell: bool  # bye, see you, good night, that's all...
    feedback: Feedback | None  # explicit feedback about Chalie's answers
    density: float  # 0..1: share of content words, scaled down for short messages
    implicit_reference: bool  # leans on earlier talk ("and what about...", "do it again")
    decision: bool  # a choice being made or asked for
    words: int

    @property
    def question(self) -> bool:
        """Whether the message asks something: a question mark or an interrogative."""
        return self.has_question_mark or self.interrogatives > 0


def _clauses(text: str) -> tuple[list[str], str]:
    """The lowercased words of `text` (as `words.words` has them, "tl;dr" made one word) and the
    form phrases are matched in: " | w1 w2 | w3 ... | ", with a bar where a clause ends."""
    text = text.lower() if text.isascii() else plain(text)
    if ";" in text:
        text = _TLDR.sub("tldr", text)
    tokens = _CLAUSE.findall(text)
    if text.isascii():  # lowercasing ASCII never changes where words split
        found = list(filterfalse(_IS_BREAK, tokens))
        joined = " ".join(tokens)
    else:
        found = list(map(str.lower, filterfalse(_IS_BREAK, tokens)))
        joined = " ".join(tokens).lower()
    for mark in _BREAKS:  # str.replace is a fast C loop; translate() is slow on non-ASCII text
        joined = joined.replace(mark, "|")
    return found, " | " + joined + " | "


def _feedback(joined: str, unique: set[str], first: str) -> Feedback | None:
    """Explicit feedback, the most specific first: a correction or a length request outweighs
    a polite "thanks" in the same message."""
    for kind, anywhere, at_start in _FEEDBACK:
        if anywhere.anywhere(joined, unique) or at_start.at_start(joined, first):
            return kind
    return None


def nlp_signals(text: str) -> NlpSignals:
    """The layer-1 signals of a message (see the module docstring for how phrases match)."""
    found, joined = _clauses(text)
    count = len(found)
    unique = set(found)
    first = found[0] if found else ""
    content = count_content(found)
    interrogatives = (
        sum(map(_INTERROGATIVE_WORDS.__contains__, found))
        + _INTERROGATIVES_ANYWHERE.count(joined, unique)
        + _INTERROGATIVES_AT_CLAUSE_START.count(joined, unique, clause_start=True)
    )
    greeting = (
        first in _GREETING_WORDS
        or _GREETINGS_AT_START.at_start(joined, first)
        or joined.startswith(_GREETING_CLAUSES)
    )
    farewell = _FAREWELLS_ANYWHERE.anywhere(joined, unique) or (
        count <= SHORT_WORDS and _FAREWELLS_IN_SHORT.anywhere(joined, unique)
    )
    density = content / count * min(1.0, count / DENSITY_FULL_WORDS) if count else 0.0
    reference = _REFERENCE_AT_START.at_start(joined, first) or (
        content <= FEW_CONTENT_WORDS
        and (not unique.isdisjoint(_ANAPHOR_WORDS) or _REFERENCES.anywhere(joined, unique))
    )
    return NlpSignals(
        has_question_mark=any(mark in text for mark in _QUESTION_MARKS),
        interrogatives=interrogatives,
        greeting=greeting,
        farewell=farewell,
        feedback=_feedback(joined, unique, first),
        density=round(density, 3),
        implicit_reference=reference,
        decision=not unique.isdisjoint(_DECISION_WORDS)
        or _DECISIONS.anywhere(joined, unique)
        or _DECISIONS_AT_CLAUSE_START.count(joined, unique, clause_start=True) > 0,
        words=count,
    )


# Emoji and their modifiers: pictographs, symbols and dingbats, skin tones (inside U+1F000..),
# variation selectors, the zero-width joiner, keycaps and flag tags.
_EMOJI = re.compile(
    "[\U0001f000-\U0001faff\u2300-\u23ff\u2600-\u27bf\u2b00-\u2bff\u3030\u303d\u3297\u3299"
    "\u200d\u20e3\ufe0e\ufe0f\U000e0020-\U000e007f]"
)
_EMOTICONS = wordset(":) :-) :] =) :d :-d ;) ;-) <3 ^^ ^_^ (:")
_SOCIAL_SEPARATORS = re.compile(r"[\s.!~,]+")


@lru_cache(maxsize=8)
def _social_phrases(phrases: tuple[str, ...]) -> tuple[frozenset[tuple[str, ...]], int]:
    """The configured phrases as word tuples, and the longest one's length in words."""
    table = frozenset(
        tuple(t for t in _SOCIAL_SEPARATORS.split(normalise(p)) if t) for p in phrases
    ) - {()}
    return table, max((len(p) for p in table), default=0)


def _is_phrases(tokens: list[str], table: frozenset[tuple[str, ...]], longest: int) -> bool:
    """Whether `tokens` is a run of one or more phrases of `table`, back to back."""
    reachable = [True] + [False] * len(tokens)
    for start in range(len(tokens)):
        if reachable[start]:
            for end in range(start + 1, min(len(tokens), start + longest) + 1):
                if tuple(tokens[start:end]) in table:
                    reachable[end] = True
    return reachable[-1]


def is_social(text: str, phrases: Sequence[str], max_chars: int) -> bool:
    """Whether `text` is only a social acknowledgement that needs no model: at most `max_chars`
    long, no question mark, and nothing but `phrases` (compared the same way) and emoji. Case,
    spaces and the punctuation . ! ~ , around words do not matter ("Thanks!"), and phrases may
    follow one another ("ok, thanks 👍"); any other word may not ("ok do it"). Only emoji ("👍",
    "🙏🙏", ":)") is social too; an empty message is not (it is handled before this)."""
    stripped = text.strip()
    if not stripped or len(stripped) > max_chars:
        return False
    if any(mark in stripped for mark in _QUESTION_MARKS):
        return False
    bare, emoji = _EMOJI.subn(" ", normalise(stripped))
    tokens = [t for t in _SOCIAL_SEPARATORS.split(bare) if t]
    said = [t for t in tokens if t not in _EMOTICONS]
    if not said:
        return emoji > 0 or len(tokens) > 0
    table, longest = _social_phrases(tuple(phrases))
    return _is_phrases(said, table, longest)


_THANKS_WORDS = wordset(
    "thanks thank thx ty tysm cheers merci danke gracias grazie obrigado appreciate appreciated"
)
_GLAD_WORDS = wordset(
    "great nice perfect awesome excellent amazing brilliant wonderful fantastic lovely"
)
_BYE_WORDS = wordset("bye goodbye goodnight night ttyl later")


def social_reply(text: str) -> str:
    """The deterministic acknowledgement of a social message: thanks get "You're welcome.",
    a farewell "Bye for now.", a greeting "Hello!", praise "Glad to hear it.", only emoji "👍",
    anything else ("ok", "got it", "sounds good") "Okay."."""
    found = TOKEN.findall(normalise(text))
    said = set(found)
    if not found:
        return "\N{THUMBS UP SIGN}"
    if said & _THANKS_WORDS:
        return "You're welcome."
    if said & _BYE_WORDS:
        return "Bye for now."
    if found[0] in _GREETING_WORDS:
        return "Hello!"
    if said & _GLAD_WORDS:
        return "Glad to hear it."
    return "Okay."


def next_phase(
    previous: Phase | None,
    signals: NlpSignals,
    *,
    exchanges: int,
    used_tools: bool,
    new_topic: bool,
) -> Phase:
    """The conversation's phase after this message; the first rule that holds wins:

    1. a farewell: "closing";
    2. positive feedback in a short message (at most 6 words) after "working" or "deciding":
       "closing" (the work is done);
    3. a greeting, or the first exchange (`exchanges` <= 1, this one included) with no question
       and a sparse message (density below 0.3): "opening";
    4. a decision being made or asked for: "deciding";
    5. the turn used tools, or a dense statement (density at least 0.5, no question): "working";
    6. a question (a question mark or an interrogative), or a new topic: "exploring";
    7. otherwise the phase stays `previous` ("exploring" when there is none).
    """
    if signals.farewell:
        return "closing"
    if (
        signals.feedback == "positive"
        and signals.words <= SHORT_WORDS
        and previous in ("working", "deciding")
    ):
        return "closing"
    if signals.greeting or (
        exchanges <= 1 and not signals.question and signals.density < SPARSE
    ):
        return "opening"
    if signals.decision:
        return "deciding"
    if used_tools or (signals.density >= DENSE and not signals.question):
        return "working"
    if signals.question or new_topic:
        return "exploring"
    return previous or "exploring"
