"""Where a turn's words came from, and whether a tool call carries what only a program said.

The person's own words are trusted: their message and mid-turn steering, their lines in the
history and in what recall brings back, and what they had Chalie remember. What other programs
said is data (it reaches the prompt fenced, chalie/prompts.py): paired programs' signals and
messages, their tools' results and MCP servers', their lines in the history and in recall.
Chalie's own words and the episodes' summaries are neither.

A call is tainted when its arguments carry a value only a program said (a word or a name, a
number of three digits or more, an e-mail or web address: words seen in the person's words too
are theirs), or when a program's text names the call, the tool or the action it takes, as an
instruction would ("call memory with ...", "forget(...)", "use the cancel_appointment tool"),
and the person's own request does not, or it spells out this very call, its values too (the
person asked to "remember what matters" in a tool's result; the result says to call memory
with their sister's name as their dog's). The turn driver asks the person before a tainted call
that is not read-only runs (chalie/actors/driver.py), or holds it for them on a turn nobody
watches. This is CaMeL's rule (Debenedetti et al., 2025) as far as one model allows: data from
an untrusted source flows into an action only with the person's consent.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from collections.abc import Iterable, Iterator
from typing import Any

from chalie.llm.types import ToolCall

# An e-mail address, a web address, or a word: letters and digits joined by ' . _ - (3:00 is
# two words; apt_12345 one).
_ATOM = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+|https?://[^\s\"'<>]+|www\.[^\s\"'<>]+"
                   r"|[^\W_]+(?:['\u2019._-][^\W_]+)*")
# Near a tool's name, what makes a text an instruction to call it rather than a mention.
_CUE = re.compile(r"\b(?:call|calls|calling|use|using|run|invoke|execute|trigger|tool|function|"
                  r"command|action)\b|[({=]", re.IGNORECASE)
CUE_CHARS = 60  # how far from the name a cue counts
# Characters that change nothing a reader sees: a name with them inside still names it.
_INVISIBLE = re.compile("[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f"
                        "\u202a-\u202e\u2060-\u2064\u206a-\u206f\ufeff]")
# A run of base64 long enough to carry an instruction (a model reads it as easily as text).
_BASE64 = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}")
MIN_CHARS = 3
SHOWN = 5  # values a reason names at most
# Words too common to tell whose they are.
_STOP_WORDS = """
a about above after again against all also am an and any are aren't as at be because been
before being below between both but by can can't cannot could couldn't did didn't do does
doesn't doing don't down during each few for from further get got had hadn't has hasn't have
haven't having he her here hers herself him himself his how i if in into is isn't it it's its
itself just let's like make me more most my myself new no nor not now of off on once one only
or other our ours ourselves out over own please same she should so some such than that the
their theirs them themselves then there these they this those through to too under until up
very was wasn't we were weren't what when where which while who whom why will with won't would
you your yours yourself yourselves yes today tomorrow tonight
"""
STOP = frozenset(_STOP_WORDS.split())


def readable(text: str) -> str:
    """`text` as a model reads it: compatibility forms folded (full-width letters, ligatures),
    invisible characters dropped, casefolded, and what base64 runs in it decode to added."""
    text = _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))
    decoded = [d for d in (_decoded(m.group()) for m in _BASE64.finditer(text)) if d]
    return "\n".join([text.casefold(), *decoded])


def _decoded(run: str) -> str | None:
    """A base64 run's text, when it is UTF-8 text; else None."""
    try:
        raw = base64.b64decode(run + "=" * (-len(run) % 4), validate=True)
        return raw.decode("utf-8").casefold() if raw.isascii() and raw.strip() else None
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


def atoms(text: str) -> set[str]:
    """The values in `text` worth tracing, casefolded: words and numbers of at least
    MIN_CHARS characters that are not common words, e-mail and web addresses."""
    found = set()
    for match in _ATOM.finditer(text.casefold()):
        atom = match.group().strip(".-'\u2019")
        if len(atom) >= MIN_CHARS and atom not in STOP:
            found.add(atom)
    return found


def mentions(text: str, name: str, *, as_call: bool) -> bool:
    """Whether `text` (casefolded) names `name` as a word; `as_call`: with a cue beside it
    that makes it an instruction to call it."""
    for match in re.finditer(rf"(?<![\w-]){re.escape(name.casefold())}(?![\w-])", text):
        if not as_call:
            return True
        near = text[max(0, match.start() - CUE_CHARS):match.end() + CUE_CHARS]
        if _CUE.search(near):
            return True
    return False


def _values(value: Any) -> Iterator[str]:
    """Every string and number in a call's arguments, nested ones too."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float):
        yield str(value)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _values(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _values(item)


class Provenance:
    """One turn's record of whose words it read. Not thread-safe: its turn's actor owns it."""

    def __init__(self) -> None:
        self._person: set[str] = set()
        # The person's words not yet read for atoms: a turn's context brings a few hundred
        # lines (history, recalled memory), and their atoms are needed only to judge a tool
        # call once another program was heard (most turns: never), so they are read then.
        self._person_unread: list[str] = []
        self._request: list[str] = []  # the person's own request this turn, casefolded
        self._program: set[str] = set()
        self._program_texts: list[str] = []  # casefolded

    def person(self, *texts: str, request: bool = False) -> None:
        """The person's words; `request`: what they ask of this turn (message, steering)."""
        self._person_unread.extend(texts)
        if request:
            self._request.extend(text.casefold() for text in texts)

    def _person_atoms(self) -> set[str]:
        for text in self._person_unread:
            self._person |= atoms(text)
        self._person_unread.clear()
        return self._person

    def program(self, *texts: str) -> None:
        """What another program said, as a model reads it (chalie/act/provenance.readable)."""
        for text in texts:
            seen = readable(text)
            self._program |= atoms(seen)
            self._program_texts.append(seen)

    @property
    def heard_programs(self) -> bool:
        return bool(self._program_texts)

    def taint(self, call: ToolCall, *, options: Iterable[str] = ()) -> str | None:
        """Why `call` comes from a program's words (for the person, and the log), or None.
        `options`: the values the tool's schema lists (an action's name is not a value)."""
        if call.args is None or not self._program_texts:
            return None
        listed = {o.casefold() for o in options}
        carried = sorted({atom for value in _values(call.args) if value.casefold() not in listed
                          for atom in atoms(value)} & self._program - self._person_atoms())
        if carried:
            return "its arguments carry what only another program said: " + ", ".join(
                carried[:SHOWN])
        values = [v.casefold() for v in _values(call.args)
                  if len(v) >= MIN_CHARS and v.casefold() not in listed]
        for name in _names(call):
            asked = any(mentions(text, name, as_call=False) for text in self._request)
            for text in self._program_texts:
                if not mentions(text, name, as_call=True):
                    continue
                # A program's text that asks for the call, or spells this very call out (its
                # values too): even when the person asked for the tool, this call is its.
                if not asked or (values and all(v in text for v in values)):
                    return f"another program's text asks for {name!r}"
        return None


def _names(call: ToolCall) -> list[str]:
    """What a text that asks for this call would name: the tool, its name in words, the
    action it takes."""
    names = [call.name]
    if "_" in call.name:
        names.append(call.name.replace("_", " "))
    action = (call.args or {}).get("action")
    if isinstance(action, str) and len(action) >= MIN_CHARS:
        names += [action, action.replace("_", " ")] if "_" in action else [action]
    return names
