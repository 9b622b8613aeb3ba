"""Knowledge keys, normalised so that different spellings of one key meet.

Facts, traits and preferences are stored under a key, and a new value for a known key
supersedes the old one. So "My favourite colour", "favorite-color" and "favourite_colour" must
all become the same key: "favorite color".

`normalise_key` is pure, deterministic and idempotent (normalising a key twice changes nothing),
because the store also uses it as a SQL function when it migrates old keys. Changing what it does
changes which stored keys meet, so a change here wants a migration that re-normalises them.

- Unicode NFKC, then casefold ("Straße" -> "strasse", full-width letters -> ASCII).
- Apostrophes are dropped, not spaced: "person's" -> "persons", "mum's" -> "moms", so "mothers
  name" (the apostrophe forgotten) meets "mother's name".
- Every other character that is not a letter, a digit or a combining mark (punctuation,
  symbols, underscores, controls) becomes a space; whitespace is collapsed and stripped.
  Letters of any script and digits are kept: "街" stays "街", "address 2" stays "address 2".
- Leading words that add nothing are dropped, repeatedly: "my", "the", "a", "an", "users",
  "persons" (so "the person's name" -> "name"). Never the last word: "the" alone stays "the".
- British spellings of a list of common words become American, as whole words from a table
  (never a substring rewrite, so "colonel" stays "colonel"): colour, favourite, centre,
  organise/organised/organising/organisation..., grey, travelling, cancelled, mum -> mom...

Nothing is truncated: cutting a word in half could make a key that normalises differently next
time. Callers refuse keys longer than `MAX_KEY_CHARS` instead.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from types import MappingProxyType

MAX_KEY_CHARS = 200
"""The longest key (as given) that callers accept."""

# straight, left and right single quotes, modifier letter apostrophe, prime, backtick
_APOSTROPHES = frozenset("'\u2018\u2019\u02bc\u2032`")

_EMPTY_LEADS = frozenset({"my", "the", "a", "an", "users", "persons"})

# British -> American, whole words. Only words whose British form is not also a different
# American word ("tyre" is, in the US, a misspelling of "tire", so it is safe; "cheque" would
# become "check" and is left out).
_WORDS = {
    "colour": "color", "colours": "colors", "coloured": "colored", "colourful": "colorful",
    "favourite": "favorite", "favourites": "favorites",
    "favour": "favor", "favours": "favors",
    "flavour": "flavor", "flavours": "flavors", "flavoured": "flavored",
    "honour": "honor", "honours": "honors", "honoured": "honored",
    "humour": "humor",
    "labour": "labor",
    "rumour": "rumor", "rumours": "rumors",
    "neighbour": "neighbor", "neighbours": "neighbors",
    "neighbourhood": "neighborhood", "neighbourhoods": "neighborhoods",
    "behaviour": "behavior", "behaviours": "behaviors",
    "centre": "center", "centres": "centers",
    "theatre": "theater", "theatres": "theaters",
    "metre": "meter", "metres": "meters",
    "kilometre": "kilometer", "kilometres": "kilometers",
    "centimetre": "centimeter", "centimetres": "centimeters",
    "litre": "liter", "litres": "liters",
    "programme": "program", "programmes": "programs",
    "licence": "license", "licences": "licenses",
    "defence": "defense", "offence": "offense",
    "grey": "gray", "greys": "grays",
    "travelling": "traveling", "travelled": "traveled",
    "traveller": "traveler", "travellers": "travelers",
    "cancelled": "canceled", "cancelling": "canceling",
    "jewellery": "jewelry", "pyjamas": "pajamas", "aluminium": "aluminum",
    "tyre": "tire", "tyres": "tires",
    "analyse": "analyze", "analysed": "analyzed", "analysing": "analyzing",
    # "mum" as in "keep mum" never names a fact; "mummy" (also the Egyptian kind) is left alone.
    "mum": "mom", "mums": "moms",
}

# -ise verbs that are -ize in American English, with their -ised/-ising/-isation... forms.
# Not verbs whose -ise is American too (advise, exercise, surprise, compromise, revise...).
_ISE_STEMS = (
    "organ", "real", "recogn", "apolog", "priorit", "special", "personal", "custom", "memor",
    "summar", "categor", "optim", "minim", "maxim", "final", "util", "emphas", "visual",
    "author", "standard", "familiar", "critic",
)
_ISE_ENDINGS = {
    "ise": "ize", "ises": "izes", "ised": "ized", "ising": "izing", "iser": "izer",
    "isers": "izers", "isation": "ization", "isations": "izations",
}
_WORDS.update(
    {stem + british: stem + american
     for stem in _ISE_STEMS for british, american in _ISE_ENDINGS.items()}
)
SPELLINGS: Mapping[str, str] = MappingProxyType(_WORDS)
"""The British -> American whole-word table."""


def _kept(ch: str) -> str:
    if ch in _APOSTROPHES:
        return ""
    return ch if unicodedata.category(ch)[0] in "LNM" else " "


def normalise_key(key: str) -> str:
    """`key` in the one spelling every variant of it shares; "" when nothing is left."""
    text = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", key).casefold())
    # Dropping an apostrophe can leave a base letter next to a combining mark: compose again.
    words = unicodedata.normalize("NFKC", "".join(_kept(ch) for ch in text)).split()
    while len(words) > 1 and words[0] in _EMPTY_LEADS:
        del words[0]
    return " ".join(SPELLINGS.get(word, word) for word in words)
