"""Words of a message: tokens, content words, subject words, salient words and topic names.

A word is a run of letters and digits (any script; an apostrophe inside a word is kept, so
"don't" is one word), lowercased. Content words are the words that say what a message is about:
not a stopword, and at least 3 characters long (2 for numbers and CJK, where short words carry
meaning). Subject words are the content words that say which subject: not a general word
("good", "time", "six", "survive"...) that fits any subject alike. A stem is a word with one
common English ending taken off, so that "bees" and "bee", "baking" and "bake" compare equal.
Everything here is deterministic and cheap: one regular expression pass per text.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import filterfalse, pairwise

TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)*")
"""One word of `plain` text."""

_TOKEN_OR_STOP = re.compile(r"[.!?\n]|[^\W_]+(?:'[^\W_]+)*")
_SENTENCE_ENDS = frozenset(".!?\n")
_CJK = "\u2e80"  # the first CJK code point: CJK, kana and hangul words are often 1-2 characters
TOPIC_CHARS = 60
GENERAL_TOPIC = "general"


def wordset(text: str) -> frozenset[str]:
    """The whitespace-separated words of `text` as a set: word tables read better as prose."""
    return frozenset(text.split())


STOPWORDS: frozenset[str] = wordset(
    """
    a about above after again against all almost also although always am an and another any
    anyone anything are around as at away back be because been before being below between both
    but by can could did do does doing done down during each either else enough even ever every
    everything few for from further get gets getting give go goes going gonna got had has have
    having he hello her here hers herself hey hi him himself his how however i if in into is it
    its itself just kind know let like lot lots made make many may maybe me might mine more most
    much must my myself need needs never no nor not nothing now of off oh ok okay on once one only
    or other others our ours ourselves out over own please quite rather really right said same
    say says see she should since so some someone something sort still such sure take tell than
    thank thanks that the their theirs them themselves then there these they thing things think
    this those though through thus to too under until up upon us use used very want wants wanna
    was way we well were what when where whether which while who whom whose why will with within
    without would yeah yes yet you your yours yourself yourselves
    i'm i've i'll i'd you're you've you'll you'd he's she's it's we're we've we'll we'd they're
    they've they'll they'd that's there's here's what's where's who's how's let's don't doesn't
    didn't isn't aren't wasn't weren't won't wouldn't can't couldn't shouldn't haven't hasn't
    hadn't
    """
)


# Content words that fit any subject, so two messages that share only them share no subject:
# judgements, sizes, amounts and numbers, times, generic nouns, and verbs whose object carries the
# subject ("call the plumber", "survive the winter"). Compared by stem, so inflections count too.
GENERAL_WORDS: frozenset[str] = wordset(
    """
    good better best bad worse worst great nice fine cool awesome amazing perfect ideal proper
    wrong correct true false real actual important main major minor basic simple easy hard
    difficult tough possible impossible likely unlikely special certain clear different similar
    usual normal common general specific particular whole full empty entire total extra various
    new old young big bigger biggest small smaller little large huge tiny long short high higher
    low lower top bottom fast quick slow early late recent current latest next previous last
    first second third final dark light bright able free ready
    two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty hundred
    thousand million billion half double triple single couple several dozen number amount
    percent
    time day week weekend month year hour minute moment today tonight tomorrow yesterday
    morning afternoon evening night noon midnight later soon ago often sometimes usually
    already recently currently daily weekly monthly yearly
    actually probably definitely basically literally especially totally exactly simply finally
    quickly easily generally perhaps certainly absolutely seriously honestly pretty
    stuff part piece bit type place area spot idea question answer problem issue matter
    example reason fact point option choice case end start side result step tip advice info
    information detail help people person everyone guy folks version
    come put keep begin stop finish try find look show ask talk feel seem become happen
    change love hate prefer work mean bring leave stay live die grow survive last move turn run
    hold wait plan hope wish remember forget learn understand recommend suggest explain describe
    improve avoid deal handle manage call check choose pick decide add include create build fit
    """
)


def plain(text: str) -> str:
    """`text` in Unicode NFC with typographic apostrophes made plain, case kept."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFC", text).replace("\u2019", "'").replace("\u02bc", "'")


def normalise(text: str) -> str:
    """`plain(text)` lowercased."""
    return plain(text).lower()


def words(text: str) -> list[str]:
    """The lowercased words of `text`, in order."""
    if text.isascii():  # lowercasing ASCII never changes where words split
        return TOKEN.findall(text.lower())
    return list(map(str.lower, TOKEN.findall(plain(text))))


def is_content(word: str) -> bool:
    """Whether a lowercased word says what a message is about (see the module docstring)."""
    return word not in STOPWORDS and (len(word) > 2 or _short_content(word))


def _short_content(word: str) -> bool:
    return len(word) == 2 and (word.isdigit() or word[0] >= _CJK)


def _content(found: Iterable[str]) -> list[str]:
    return [w for w in filterfalse(STOPWORDS.__contains__, found)
            if len(w) > 2 or _short_content(w)]


def count_content(found: Sequence[str]) -> int:
    """How many of the lowercased words `found` are content words."""
    return len(_content(found))


def content_words(text: str) -> list[str]:
    """The content words of `text`, in order, repeats kept."""
    return _content(words(text))


# Endings that are not the suffix: "speed", "trees" (-s, not -es), "glass", "cactus", "analysis".
_KEPT = {"ing": (), "ed": ("eed",), "es": ("ees",), "s": ("ss", "us", "is")}
_DOUBLED = frozenset("bdgmnprt")  # consonants doubled before -ing and -ed


def stem(word: str) -> str:
    """A lowercased word without one common English ending, and a final "y" made "i": "city"
    and "cities" -> "citi", "baking" and "bakes" -> "bak" (as "bake"), "called" -> "call",
    "planning" -> "plan", "bees" -> "bee"; a stem keeps at least 3 characters; "speed", "tree",
    "glass", "cactus" and "analysis" stay whole."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 \
                and not word.endswith(_KEPT[suffix]):
            word = word[: -len(suffix)]
            if suffix in ("ing", "ed") and word[-1] == word[-2] and word[-1] in _DOUBLED:
                word = word[:-1]  # "planned", "stopping"
            break
    if word.endswith("e") and not word.endswith("ee") and len(word) > 3:
        return word[:-1]
    return word[:-1] + "i" if word.endswith("y") else word


_GENERAL_STEMS = frozenset(map(stem, GENERAL_WORDS))


def is_general(word: str) -> bool:
    """Whether a lowercased content word fits any subject: a general word in any of its forms,
    or a number."""
    return word.isdigit() or stem(word) in _GENERAL_STEMS


def subject_words(text: str) -> list[str]:
    """The distinct content words of `text` that are not general, in order of first appearance."""
    return [w for w in dict.fromkeys(content_words(text)) if not is_general(w)]


def salient_words(text: str, k: int = 3) -> list[str]:
    """Up to `k` distinct content words that best say what `text` is about, in order of first
    appearance. A word scores its length (up to 10), 4 more when it is capitalised somewhere other
    than at the start of a sentence (a proper noun: "Lisbon", "NASA"), and 2 more for each repeat;
    of equal scores the earlier word wins."""
    if k <= 0:
        return []
    tokens = _TOKEN_OR_STOP.findall(plain(text))
    content = _content(map(str.lower, tokens))
    if not content:
        return []
    repeats = Counter(content)
    order = {word: i for i, word in enumerate(dict.fromkeys(content))}
    score = {word: min(len(word), 10) + 2 * (repeats[word] - 1) for word in order}
    # A capitalised word counts as a proper noun unless it starts a sentence (the message, or
    # the word after . ! ? or a new line).
    for word in {t.lower() for p, t in pairwise(tokens)
                 if t[0].isupper() and p not in _SENTENCE_ENDS}:
        if word in score:
            score[word] += 4
    best = sorted(order, key=lambda w: (-score[w], order[w]))[:k]
    return sorted(best, key=order.__getitem__)


def topic_name(text: str) -> str:
    """A short name for a new topic: its salient words in order of appearance, at most 60
    characters, or "general" when it has none."""
    salient = salient_words(text, 3)
    if not salient:
        return GENERAL_TOPIC
    name = salient[0][:TOPIC_CHARS]
    for word in salient[1:]:
        if len(name) + 1 + len(word) > TOPIC_CHARS:
            break
        name = f"{name} {word}"
    return name


def overlap(a: str, b: str) -> float:
    """Jaccard similarity of the content-word sets of two texts: 0 when either has none."""
    left, right = set(content_words(a)), set(content_words(b))
    if not left or not right:
        return 0.0
    return len(left & right) / len(left | right)
