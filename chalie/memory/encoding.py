"""Episode encoding, the pure part: the request for a transcript window, the schema its answer
must follow, and the answer turned into episode rows and facts.

The schema goes out as structured output (chalie.llm.structured). Its shape is checked strictly
(every field, its type, at least one episode, a non-empty gist); numbers outside their range
are clamped rather than refused, because small models often say 7 for "0 to 1", and an
episode's line numbers outside the window are pulled into it.

Facts about the person come from the person: a fact is kept only when the line it names is one
of the person's own in the window. One said on a paired program's line (a program's word about
the person is no fact of theirs), on Chalie's, or on no line of the window is dropped, and the
log says so (`encoder_fact_dropped`, with the reason); a kept fact carries the transcript id of
its line (`source_line`).

Knowledge that updates: the prompt shows the current facts nearest in meaning to the person's
lines (chalie.memory.updates), by id, and a fact names under `replaces` those it makes untrue
("moved to Porto" over "home: Lisbon"). Only ids the prompt showed are kept.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import msgspec
import structlog

from chalie.errors import StructuredOutputError
from chalie.llm.structured import decode_structured, structured
from chalie.llm.types import ChatRequest, Message
from chalie.memory import updates
from chalie.prompts import Prompts
from chalie.store.effects import RememberFact
from chalie.store.fact_rows import StoredFact
from chalie.store.memory_queries import WindowLine
from chalie.store.memory_writes import EpisodeRow
from chalie.values.keys import MAX_KEY_CHARS, normalise_key

LINE_CHARS = 1000  # a message longer than this is shown cut in the window
MAX_EPISODES = 8
MAX_FACTS = 20
MAX_LIST = 20  # entities, open loops
MAX_TEXT = 1000  # gist, intent, outcome
MAX_VALUE = 500  # a fact's value
MAX_CONCEPTS = 8  # concepts one window names
MAX_RELATED = 5  # relations one concept names
MAX_CONCEPT_CHARS = 60
MAX_RELATION_CHARS = 40
MAX_SITUATION = 600  # characters of the situation summary
ENCODER_CONFIDENCE = 0.6  # facts the encoder read are less sure than ones the person gave
PERSON = "user"  # the transcript role of the person's own lines, the only ones facts come from

log = structlog.get_logger("chalie.encoder")


class EncodedEpisode(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    gist: Annotated[str, msgspec.Meta(min_length=1)]
    intent: str
    outcome: str
    entities: list[str]
    salience: Annotated[float, msgspec.Meta(ge=0, le=1)]
    valence: Annotated[float, msgspec.Meta(ge=-1, le=1)]
    open_loops: list[str]
    first_line: Annotated[int, msgspec.Meta(ge=1)]
    last_line: Annotated[int, msgspec.Meta(ge=1)]


class EncodedFact(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    key: Annotated[str, msgspec.Meta(min_length=1)]
    value: Annotated[str, msgspec.Meta(min_length=1)]
    kind: Literal["fact", "trait", "preference"]
    line: Annotated[int, msgspec.Meta(ge=1)]
    # ids of the known facts shown in the prompt that this one makes untrue (optional: an
    # answer without it, from a model that leaves it out, replaces nothing)
    replaces: Annotated[list[int], msgspec.Meta(max_length=MAX_FACTS)] = []


class RelatedConcept(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_CONCEPT_CHARS)]
    relation: Annotated[str, msgspec.Meta(max_length=MAX_RELATION_CHARS)]


class EncodedConcept(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_CONCEPT_CHARS)]
    related: Annotated[list[RelatedConcept], msgspec.Meta(max_length=MAX_RELATED)] = []


class Encoding(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    episodes: Annotated[list[EncodedEpisode], msgspec.Meta(min_length=1, max_length=MAX_EPISODES)]
    facts: Annotated[list[EncodedFact], msgspec.Meta(max_length=MAX_FACTS)]
    # optional: an answer without it (an older prompt, a small model) is still an encoding
    concepts: Annotated[list[EncodedConcept], msgspec.Meta(max_length=MAX_CONCEPTS)] = []
    # optional too: the situation model's summarised part, for the whole conversation so far
    situation: str = ""


FORMAT = structured("episodes", Encoding)
_RANGES = {"salience": (0.0, 1.0), "valence": (-1.0, 1.0)}


class Window(msgspec.Struct, frozen=True):
    """An encoded window, ready to store."""

    episodes: tuple[EpisodeRow, ...]
    facts: tuple[RememberFact, ...]
    fact_turn_id: str | None
    concepts: tuple[str, ...] = ()  # normalised names, the related ones too
    relations: tuple[tuple[str, str, str], ...] = ()  # (name, name, relation)
    situation: str = ""  # what is going on for the person, summarised ("" when not given)


def request(prompts: Prompts, lines: Sequence[WindowLine], *,
            retry_error: str | None = None, known: Sequence[StoredFact] = ()) -> ChatRequest:
    """The encoding request for a window; `known`: the current facts nearest to the person's
    lines (chalie.memory.updates.for_lines), which a fact it finds may replace."""
    f = prompts.fragment
    shown = []
    for n, line in enumerate(lines, 1):
        text = " ".join(line.text.split())
        if len(text) > LINE_CHARS:
            text = text[:LINE_CHARS] + "…"
        who = (f("encoding_person") if line.role == "user" else
               f("encoding_program", program=line.speaker or "a program")
               if line.role == "program" else f("encoding_assistant"))
        at = datetime.fromtimestamp(line.created_at, UTC).strftime("%Y-%m-%d %H:%M")
        shown.append(f("encoding_line", n=n, who=who, time=at, text=text))
    facts = f("encoding_known", facts="\n".join(updates.listed(prompts, k) for k in known)) \
        if known else f("encoding_known_none")
    body = prompts.render("episode_encoding", count=str(len(lines)), lines="\n".join(shown),
                          known=facts)
    if retry_error is not None:
        body = f"{body}\n\n{f('encoding_retry', error=retry_error)}"
    return ChatRequest(system="", messages=(Message("user", body),), response_format=FORMAT)


def parse(text: str) -> Encoding:
    """The answer as an Encoding; numbers out of range are clamped first. Raises
    StructuredOutputError naming what is wrong."""
    raw: Any = decode_structured(text, dict[str, Any])
    for key in ("episodes", "facts"):
        items = raw.get(key)
        if isinstance(items, list) and len(items) > (MAX_EPISODES if key == "episodes"
                                                     else MAX_FACTS):
            raw[key] = items[:MAX_EPISODES if key == "episodes" else MAX_FACTS]
    for episode in raw.get("episodes") or ():
        if not isinstance(episode, dict):
            continue
        for name, (low, high) in _RANGES.items():
            value = episode.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                episode[name] = min(high, max(low, float(value)))
        for name in ("first_line", "last_line"):
            value = episode.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value < 1:
                episode[name] = 1
    if isinstance(raw.get("facts"), list):
        raw["facts"] = [f for f in raw["facts"] if not _before_the_window(f)]
    if "concepts" in raw:
        raw["concepts"] = _lenient_concepts(raw["concepts"])
    try:
        encoding = msgspec.convert(raw, Encoding)
    except msgspec.ValidationError as e:
        raise StructuredOutputError(f"the reply does not match the schema: {e}") from None
    for n, episode in enumerate(encoding.episodes):
        if not episode.gist.strip():
            raise StructuredOutputError(f"`$.episodes[{n}].gist` is blank")
    return encoding


def to_window(encoding: Encoding, lines: Sequence[WindowLine], *,
              known: Collection[int] = ()) -> Window:
    """Line numbers become transcript ids (an episode's pulled into the window), texts are
    trimmed, fact keys normalised. A fact is kept only when its line is the person's (see the
    module's docstring); one whose key normalises to nothing, or is longer than a key may be,
    is dropped too (never cut: two long keys must not become one). A fact replaces only known
    facts the prompt showed (the ids in `known`): another id is dropped, and logged."""
    last = len(lines)

    def line_at(n: int) -> WindowLine:
        return lines[min(last, max(1, n)) - 1]

    episodes = []
    for e in encoding.episodes:
        first, final = sorted((min(last, e.first_line), min(last, e.last_line)))
        episodes.append(EpisodeRow(
            gist=_trim(e.gist, MAX_TEXT), intent=_trim(e.intent, MAX_TEXT),
            outcome=_trim(e.outcome, MAX_TEXT), entities=_clean_list(e.entities),
            open_loops=_clean_list(e.open_loops), salience=e.salience, valence=e.valence,
            transcript_from=line_at(first).id, transcript_to=line_at(final).id,
            happened_at=line_at(final).created_at,
        ))
    facts = []
    for fact in encoding.facts:
        said = _persons_line(fact, lines)
        key = normalise_key(fact.key)
        value = _trim(fact.value, MAX_VALUE)
        if said is not None and key and value and len(fact.key) <= MAX_KEY_CHARS:
            facts.append(RememberFact(
                key=key, value=value, kind="trait" if key == "name" else fact.kind,
                source="encoder", confidence=ENCODER_CONFIDENCE,
                observed_at=said.created_at, source_line=said.id,
                replaces=_shown(fact, known),
            ))
    turn_ids = [line.turn_id for line in lines if line.turn_id]
    names: dict[str, None] = {}
    relations: dict[tuple[str, str], str] = {}
    for concept in encoding.concepts:
        name = concept_name(concept.name)
        if not name:
            continue
        names[name] = None
        for other in concept.related:
            other_name = concept_name(other.name)
            if other_name and other_name != name:
                names[other_name] = None
                relation = " ".join(other.relation.split())[:MAX_RELATION_CHARS]
                relations[(name, other_name)] = relation or CO_OCCURS
    kept = tuple(names)[:2 * MAX_CONCEPTS]
    return Window(tuple(episodes), tuple(facts), turn_ids[-1] if turn_ids else None,
                  concepts=kept,
                  relations=tuple((a, b, r) for (a, b), r in relations.items()
                                  if a in kept and b in kept),
                  situation=_trim(" ".join(encoding.situation.split()), MAX_SITUATION))


def _persons_line(fact: EncodedFact, lines: Sequence[WindowLine]) -> WindowLine | None:
    """The person's line the fact was stated on; None (and the drop logged) when its line is
    not in the window or is not the person's."""
    if fact.line > len(lines):
        _dropped(fact.key, fact.line, "outside_window")
        return None
    said = lines[fact.line - 1]
    if said.role != PERSON:
        _dropped(fact.key, fact.line, f"{said.role}_line", transcript_id=said.id,
                 speaker=said.speaker)
        return None
    return said


def _shown(fact: EncodedFact, known: Collection[int]) -> tuple[int, ...]:
    """The ids a fact replaces that were shown to the encoder; others are logged."""
    kept = tuple(i for i in dict.fromkeys(fact.replaces) if i in known)
    if len(kept) < len(set(fact.replaces)):
        log.info("encoder_replaces_dropped", key=fact.key[:MAX_KEY_CHARS],
                 ids=sorted(set(fact.replaces) - set(kept)), reason="not_shown")
    return kept


def _before_the_window(fact: Any) -> bool:
    """A fact naming line 0 or below, which is no line of the window (dropped, logged)."""
    line = fact.get("line") if isinstance(fact, dict) else None
    if isinstance(line, int) and not isinstance(line, bool) and line < 1:
        _dropped(str(fact.get("key")), line, "outside_window")
        return True
    return False


def _dropped(key: str, line: int, reason: str, **more: Any) -> None:
    """Log a fact the person did not state (its value stays out of the log)."""
    log.info("encoder_fact_dropped", key=key[:MAX_KEY_CHARS], line=line, reason=reason,
             **{k: v for k, v in more.items() if v is not None})


CO_OCCURS = "co-occurs"


def concept_name(name: str) -> str:
    """A concept's name as stored (and merged on): lower case, single spaces, no quotes or
    trailing punctuation; "" when nothing is left."""
    name = " ".join(name.lower().split()).strip(" \"'`.,;:!?()[]{}")
    return name[:MAX_CONCEPT_CHARS]


def _lenient_concepts(value: Any) -> Any:
    """Concepts are a bonus: a malformed one is dropped (never the whole encoding), long lists
    are cut."""
    if not isinstance(value, list):
        return []
    kept = []
    for item in value:
        if not isinstance(item, dict) or not _name_ok(item.get("name")):
            continue
        related = item.get("related")
        related = [{"name": r["name"], "relation": r.get("relation") or ""}
                   for r in (related if isinstance(related, list) else [])
                   if isinstance(r, dict) and _name_ok(r.get("name"))
                   and isinstance(r.get("relation", ""), str | None)]
        kept.append({"name": item["name"], "related": [
            {**r, "relation": r["relation"][:MAX_RELATION_CHARS]} for r in related
        ][:MAX_RELATED]})
    return kept[:MAX_CONCEPTS]


def _name_ok(name: Any) -> bool:
    return isinstance(name, str) and 1 <= len(name.strip()) <= MAX_CONCEPT_CHARS


def _trim(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit].rstrip() + "…"


def _clean_list(values: Sequence[str]) -> tuple[str, ...]:
    kept = dict.fromkeys(_trim(v, 200) for v in values if v.strip())
    return tuple(kept)[:MAX_LIST]
