"""Adaptive traits: how the person likes to talk, learned from each exchange, deterministic.

Four traits, each a table of scores kept as decaying evidence (every score and the total weight
halve every `HALF_LIFE_DAYS`):
- `answer_length`: {"short", "medium", "long"}. Explicit feedback about the previous answer
  ("keep it shorter", "more detail please") is strong evidence (`STRONG`, and the opposite
  score halves); follow-ups are weak (`WEAK`): a question leaning on a short answer asks for
  more, a very short reply to a long answer says it was too much, praise approves the length
  it praises.
- `active_hours`: a 24-bucket histogram of the local hours (in the DMN's zone) of the person's
  messages.
- `language`: a stopword guess of each message's language (en fr de es it pt nl), counted
  when it is clear.
- `tone`: casual (contractions, emoji, exclamation marks, "hey", "lol") or formal ("Dear",
  "please", "would you kindly", "regards") for each message that leans one way.

`describe` gives the identity section's lines, only for traits with enough evidence (the
thresholds below). No model, no clock: every function takes the time it needs.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from datetime import datetime, tzinfo

from chalie.cognition.signals import NlpSignals, nlp_signals
from chalie.cognition.words import TOKEN, normalise, wordset
from chalie.prompts import Prompts
from chalie.values.cognition import Trait

HALF_LIFE_DAYS = 30.0  # every trait's evidence halves in this many days
STRONG = 1.0  # explicit feedback about the answer's length
WEAK = 0.25  # a follow-up that hints at it
SHORT_ANSWER_WORDS = 40  # an answer of at most this many words is short
LONG_ANSWER_WORDS = 150  # of at least this many, long
VERY_SHORT_REPLY_WORDS = 3  # a reply of at most this many words to a long answer is curt
LENGTH_MIN = 0.6  # evidence the leading length needs (one explicit request: ~3 weeks)
LENGTH_MARGIN = 0.4  # and how far it must lead the next
HOURS_MIN = 8.0  # messages (decayed) before the active hours are described
HOURS_SHARE = 0.8  # the usual hours: the busiest hours that hold this share of messages
HOURS_MAX = 14  # more usual hours than this is no pattern
LANGUAGE_MIN = 2.5  # messages (decayed: about three recent ones) in one language
LANGUAGE_SHARE = 0.6  # and its share of the counted messages
LANGUAGE_HITS = 2  # stopwords a message needs to be guessed
TONE_MIN = 2.5  # messages (decayed: about three recent ones) leaning one way
TONE_SHARE = 0.65  # and that way's share

LENGTHS = ("short", "medium", "long")
_DAY_S = 86_400.0


Traits = Mapping[str, Trait]

_LANGUAGES: dict[str, frozenset[str]] = {
    "en": wordset("the and is are you what with this that have it's don't can't of to for "
                  "not my your how was were would could should there which about"),
    "fr": wordset("le la les des est et je tu vous pas une un que qui dans pour avec ce mon "
                  "ne sur au du c'est j'ai nous ils elle mais tres bien merci bonjour"),
    "de": wordset("der die das und ist ich du sie nicht ein eine mit auf fur den dem zu "
                  "es wir ihr aber auch wie was bitte danke kannst ich's habe"),
    "es": wordset("el la los las es y yo tu usted que en por para con una un no pero muy "
                  "como esta estoy gracias hola del al puedes quiero"),
    "it": wordset("il lo la gli le e io tu che di per con una un non ma molto come sono "
                  "questo grazie ciao della nel sei puoi voglio"),
    "pt": wordset("o a os as e eu voce que em por para com uma um nao mas muito como esta "
                  "obrigado ola do da isso voces quero"),
    "nl": wordset("de het een en is ik je jij niet met op voor van dat wat zijn maar ook "
                  "hoe dank bedankt hallo graag kun wil"),
}
_LANGUAGE_NAMES = {"en": "English", "fr": "French", "de": "German", "es": "Spanish",
                   "it": "Italian", "pt": "Portuguese", "nl": "Dutch"}

_CONTRACTION = re.compile(r"[a-z]'(?:s|re|ve|ll|d|t|m)\b")
_EMOJI = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf]")
_CASUAL_WORDS = wordset("hey hiya yo lol haha hehe thx pls plz gonna wanna yeah yep nope "
                        "cool btw u ur omg dunno kinda")
_FORMAL_WORDS = wordset("dear please kindly regards sincerely furthermore therefore "
                        "appreciate")
_FORMAL_PHRASES = ("would you", "could you please", "thank you", "i would like",
                   "would it be possible", "good morning", "good afternoon")


def decayed(trait: Trait, now: float) -> Trait:
    """`trait` as it stands at `now`: every score and the weight halved per HALF_LIFE_DAYS."""
    age = max(0.0, now - trait.updated_at)
    if age == 0.0:
        return trait
    factor = 0.5 ** (age / (HALF_LIFE_DAYS * _DAY_S))
    return Trait({k: v * factor for k, v in trait.value.items()}, trait.weight * factor, now)


def _add(traits: dict[str, Trait], name: str, now: float, add: Mapping[str, float],
         scale: Mapping[str, float] | None = None) -> None:
    """Decay `name` to `now`, multiply the scores in `scale`, add the evidence in `add`."""
    old = traits.get(name)
    trait = decayed(old, now) if old is not None else Trait({}, 0.0, now)
    value = dict(trait.value)
    for key, factor in (scale or {}).items():
        if key in value:
            value[key] *= factor
    for key, amount in add.items():
        value[key] = value.get(key, 0.0) + amount
    value = {k: round(v, 6) for k, v in value.items() if v > 1e-6}
    traits[name] = Trait(value, round(sum(value.values()), 6), now)


def _length_of(answer: str) -> tuple[str, int]:
    words = len(answer.split())
    if words <= SHORT_ANSWER_WORDS:
        return "short", words
    return ("long" if words >= LONG_ANSWER_WORDS else "medium"), words


def length_evidence(text: str, previous_answer: str | None, said: NlpSignals | None = None,
                    ) -> tuple[dict[str, float], dict[str, float]]:
    """(evidence to add, scores to scale) for the preferred answer length from this message
    (`said`: its signals, when they are known already)."""
    signals = said or nlp_signals(text)
    if signals.feedback == "shorter":
        return {"short": STRONG}, {"long": 0.5, "medium": 0.75}
    if signals.feedback == "longer":
        return {"long": STRONG}, {"short": 0.5, "medium": 0.75}
    if not previous_answer:
        return {}, {}
    length, _ = _length_of(previous_answer)
    if signals.feedback == "positive":
        return {length: WEAK}, {}
    if length == "short" and signals.question and signals.implicit_reference:
        return {"medium": WEAK}, {}
    if length == "long" and signals.words <= VERY_SHORT_REPLY_WORDS and not signals.question:
        return {"medium": WEAK}, {}
    return {}, {}


def guess_language(text: str) -> str:
    """The message's language by its stopwords (en fr de es it pt nl), or "unknown" when it has
    too few of them or two languages come close."""
    words = TOKEN.findall(_fold(text))
    if not words:
        return "unknown"
    hits = sorted(((sum(w in table for w in words), lang) for lang, table in _LANGUAGES.items()),
                  reverse=True)
    (best, lang), (second, _) = hits[0], hits[1]
    if best < LANGUAGE_HITS or best < 1.5 * second:
        return "unknown"
    return lang


def guess_tone(text: str) -> str | None:
    """"casual", "formal", or None when the message leans neither way."""
    lowered = normalise(text)
    words = set(TOKEN.findall(lowered))
    casual = (len(_CONTRACTION.findall(lowered)) + len(_EMOJI.findall(text))
              + min(2, text.count("!")) + 2 * len(words & _CASUAL_WORDS))
    formal = 2 * len(words & _FORMAL_WORDS) + 2 * sum(p in lowered for p in _FORMAL_PHRASES)
    if casual > formal:
        return "casual"
    if formal > casual:
        return "formal"
    return None


def learn(traits: Traits, *, text: str, previous_answer: str | None, now: float,
          tz: tzinfo | None, said: NlpSignals | None = None) -> dict[str, Trait]:
    """The traits after the person's message `text` (answering `previous_answer`, the answer
    before it, if any) sent at `now`; `tz` the zone of their local hours (None: not counted);
    `said` the message's signals, when they are known already."""
    out = dict(traits)
    add, scale = length_evidence(text, previous_answer, said)
    if add:
        _add(out, "answer_length", now, add, scale)
    if tz is not None:
        hour = datetime.fromtimestamp(now, tz).hour
        _add(out, "active_hours", now, {str(hour): 1.0})
    language = guess_language(text)
    if language != "unknown":
        _add(out, "language", now, {language: 1.0})
    tone = guess_tone(text)
    if tone is not None:
        _add(out, "tone", now, {tone: 1.0})
    return out


def preferred_length(traits: Traits, now: float | None = None) -> str | None:
    trait = _at(traits, "answer_length", now)
    if trait is None:
        return None
    ranked = sorted(((trait.value.get(k, 0.0), k) for k in LENGTHS), reverse=True)
    (best, length), (second, _) = ranked[0], ranked[1]
    if best < LENGTH_MIN or best - second < LENGTH_MARGIN:
        return None
    return length


def usual_hours(traits: Traits, now: float | None = None) -> frozenset[int] | None:
    """The local hours the person is usually active in, or None without enough evidence or
    without a pattern (active at most hours)."""
    trait = _at(traits, "active_hours", now)
    if trait is None or trait.weight < HOURS_MIN:
        return None
    ranked = sorted(((v, int(k)) for k, v in trait.value.items()), key=lambda p: (-p[0], p[1]))
    hours: set[int] = set()
    covered = 0.0
    for count, hour in ranked:
        if covered >= HOURS_SHARE * trait.weight:
            break
        hours.add(hour)
        covered += count
    return frozenset(hours) if len(hours) <= HOURS_MAX else None


def _top(traits: Traits, name: str, minimum: float, share: float,
         now: float | None) -> str | None:
    trait = _at(traits, name, now)
    if trait is None or trait.weight < minimum or not trait.value:
        return None
    value, label = max((v, k) for k, v in trait.value.items())
    return label if value >= share * trait.weight else None


def language(traits: Traits, now: float | None = None) -> str | None:
    return _top(traits, "language", LANGUAGE_MIN, LANGUAGE_SHARE, now)


def tone(traits: Traits, now: float | None = None) -> str | None:
    return _top(traits, "tone", TONE_MIN, TONE_SHARE, now)


def hour_spans(hours: frozenset[int]) -> list[str]:
    """Hours as "HH:00-HH:00" spans (end exclusive), runs across midnight joined."""
    if len(hours) == 24:
        return ["00:00-24:00"]
    starts = sorted(h for h in hours if (h - 1) % 24 not in hours)
    spans = []
    for start in starts:
        end = start
        while (end + 1) % 24 in hours:
            end = (end + 1) % 24
        spans.append(f"{start:02d}:00-{(end + 1) % 24:02d}:00")
    return spans


def described(traits: Traits, now: float | None = None) -> list[tuple[str, dict[str, str]]]:
    """What the identity section says of the traits with enough evidence (as of `now`, when
    given: decayed), as (fragment of prompts/fragments.toml, its values) pairs."""
    said: list[tuple[str, dict[str, str]]] = []
    length = preferred_length(traits, now)
    if length is not None:
        said.append((f"trait_length_{length}", {}))
    hours = usual_hours(traits, now)
    if hours:
        spans = hour_spans(hours)
        joined = spans[0] if len(spans) == 1 else ", ".join(spans[:-1]) + " and " + spans[-1]
        said.append(("trait_hours", {"hours": joined}))
    lang = language(traits, now)
    if lang is not None:
        said.append(("trait_language", {"language": _LANGUAGE_NAMES[lang]}))
    manner = tone(traits, now)
    if manner is not None:
        said.append((f"trait_tone_{manner}", {}))
    return said


def describe(traits: Traits, prompts: Prompts, now: float | None = None) -> list[str]:
    """The identity section's lines for the traits with enough evidence."""
    return [prompts.fragment(name, **values) for name, values in described(traits, now)]


def next_usual_hour(traits: Traits, at: float, tz: tzinfo) -> float | None:
    """When the next usual active hour starts after `at` (wall-clock seconds), or None when
    `at` is in one already, or the hours are not known."""
    hours = usual_hours(traits, at)
    if not hours:
        return None
    local = datetime.fromtimestamp(at, tz)
    if local.hour in hours:
        return None
    top = local.replace(minute=0, second=0, microsecond=0)
    for step in range(1, 25):
        candidate = top.timestamp() + step * 3600.0
        if datetime.fromtimestamp(candidate, tz).hour in hours:
            return candidate
    return None


def _at(traits: Traits, name: str, now: float | None) -> Trait | None:
    trait = traits.get(name)
    if trait is None or now is None:
        return trait
    return decayed(trait, now)


def _fold(text: str) -> str:
    """Lowercased, accents removed: "très" and "tres", "für" and "fur" are one word."""
    lowered = normalise(text)
    return "".join(c for c in unicodedata.normalize("NFD", lowered)
                   if not unicodedata.combining(c))
