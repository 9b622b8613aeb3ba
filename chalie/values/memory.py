"""What memory is made of, and one integer key for any item of it.

Transcript messages, episodes and knowledge live in their own tables with their own ids. The
full-text index, the vector indexes and the retrieval strengths hold all three, keyed by the
item's memory key: its id times 4 plus its kind. So one search returns one ranked list of keys.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Literal

import msgspec


class Kind(IntEnum):
    TRANSCRIPT = 1
    EPISODE = 2
    KNOWLEDGE = 3

    @property
    def label(self) -> KindName:
        return _LABELS[self]


KindName = Literal["message", "episode", "knowledge"]
_LABELS: dict[Kind, KindName] = {
    Kind.TRANSCRIPT: "message", Kind.EPISODE: "episode", Kind.KNOWLEDGE: "knowledge",
}
KnowledgeKind = Literal["fact", "trait", "preference"]
KnowledgeSource = Literal["tool", "identity", "encoder"]


def mkey(kind: Kind, item_id: int) -> int:
    return item_id * 4 + int(kind)


_BY_CODE = (Kind.TRANSCRIPT, Kind.TRANSCRIPT, Kind.EPISODE, Kind.KNOWLEDGE)  # 0 is never used


def split(key: int) -> tuple[Kind, int]:
    return _BY_CODE[key & 3], key >> 2


class Item(msgspec.Struct, frozen=True):
    """One remembered thing, as recall and the prompt see it."""

    mkey: int
    kind: KindName
    id: int
    text: str  # what goes into the prompt and what is indexed
    created_at: float  # when it was said or learned (episodes: when the window ended)
    channel: str | None = None
    role: str | None = None  # transcript: "user", "assistant" or "program"
    key: str | None = None  # knowledge
    knowledge_kind: KnowledgeKind | None = None
    salience: float | None = None  # episodes
    speaker: str | None = None  # transcript: the program's name, for a program's message


def episode_text(gist: str, intent: str, outcome: str, entities: list[str],
                 open_loops: list[str], *, labels: bool = True) -> str:
    """An episode as one text: with labels for the prompt ("Intent: ..."); without them for the
    full-text index and the embedder, where a label word in every episode would match any
    query that says "open" or "outcome"."""
    entity_list = ", ".join(e.strip() for e in entities if e.strip())
    loop_list = "; ".join(o.strip() for o in open_loops if o.strip())
    parts = [("", gist), ("Intent: ", intent), ("Outcome: ", outcome),
             ("Entities: ", entity_list), ("Open: ", loop_list)]
    return " | ".join((label if labels else "") + text.strip()
                      for label, text in parts if text.strip())


def knowledge_text(key: str, value: str) -> str:
    return f"{key}: {value}"


class MemoryLine(msgspec.Struct, frozen=True):
    """One recalled item as a prompt's memory section shows it: the heading of the day it was
    said (each day's shown once, above its items), its line, the relevance it was recalled with,
    and whether it is among the best few, those the turn reinforces
    (chalie.memory.context.REINFORCED): they give their room to the turn's own tool trail last."""

    day: str
    text: str
    score: float
    best: bool = False


def memory_text(lines: tuple[MemoryLine, ...] | list[MemoryLine]) -> str:
    """The memory section: the lines in the order given (the order they were said), each day's
    heading above the first of its lines."""
    out: list[str] = []
    day = None
    for line in lines:
        if line.day != day:
            day = line.day
            out.append(day)
        out.append(line.text)
    return "\n".join(out)
