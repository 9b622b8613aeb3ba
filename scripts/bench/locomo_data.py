"""The LoCoMo recall benchmark's pure parts: the conversation as lines, the export that imports
them, the evidence check and the two baselines (BM25, newest lines). No server, no I/O but
reading a conversation's JSON file; scripts/bench/locomo.py runs the benchmark with them.

A dialog line becomes one message of the person's: `"<speaker>: <text>"`, with
` [shares a photo: <blip_caption>]` appended when the line shared a photo, created at its
session's date (`session_N_date_time`, read as UTC) plus 30 s per line index in the session.
An evidence line counts as found in a text when its first 80 characters, casefolded and with
runs of whitespace folded to one space, appear in the text folded the same way.

A haystack is several conversations as one: every line of each, in time order (a line's time
first, then the conversations' order, then the line's place in its conversation), its id
qualified by its conversation ("26/D1:1"), and the questions of the conversations asked (the
others' lines join it as distractors), each knowing its conversation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apsw
import msgspec

from chalie.llm.types import estimate_tokens
from chalie.store import db
from chalie.store.export import FORMAT, EncodingLine, Header, TranscriptLine

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
LINE_STEP_S = 30.0  # seconds between two lines of one session
NEEDLE_CHARS = 80  # the part of an evidence line looked for
_DATE_FORMAT = "%I:%M %p on %d %B, %Y"  # "1:56 pm on 8 May, 2023"
_SESSION = re.compile(r"session_(\d+)")
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Line:
    dia_id: str
    text: str  # as imported: "<speaker>: <line>"
    created_at: float
    tokens: int  # estimate_tokens(text)


@dataclass(frozen=True)
class Question:
    number: int  # its index in the conversation's qa list
    text: str
    category: int
    evidence: tuple[str, ...]  # the ids that name a line
    invalid: tuple[str, ...]  # the ids that name none (skipped)
    answer: str
    conversation: str = ""  # the conversation it is about (its file's stem)


@dataclass(frozen=True)
class Conversation:
    name: str  # the file's stem: "26"
    lines: tuple[Line, ...]  # in conversation order
    questions: tuple[Question, ...]  # categories 1-4 with at least one valid evidence id
    without_evidence: int  # categories 1-4 questions whose evidence names no line (skipped)

    @property
    def by_id(self) -> dict[str, Line]:
        return {line.dia_id: line for line in self.lines}


def session_start(date_time: str) -> float:
    """"1:56 pm on 8 May, 2023" as a UTC timestamp."""
    return datetime.strptime(date_time, _DATE_FORMAT).replace(tzinfo=UTC).timestamp()


def line_text(entry: dict[str, Any]) -> str:
    """One dialog line as the person's message says it."""
    text = f"{entry['speaker']}: {entry['text']}"
    if entry.get("blip_caption"):
        text += f" [shares a photo: {entry['blip_caption']}]"
    return text


def conversation_lines(raw: dict[str, Any]) -> list[Line]:
    """Every dialog line of every session, in session order, with its time."""
    sessions = sorted(int(m.group(1)) for key in raw if (m := _SESSION.fullmatch(key)))
    lines = []
    for n in sessions:
        start = session_start(raw[f"session_{n}_date_time"])
        for index, entry in enumerate(raw[f"session_{n}"]):
            text = line_text(entry)
            lines.append(Line(entry["dia_id"], text, start + LINE_STEP_S * index,
                              estimate_tokens(text)))
    return lines


def load(path: Path) -> Conversation:
    raw = json.loads(path.read_text(encoding="utf-8"))
    lines = conversation_lines(raw)
    ids = {line.dia_id for line in lines}
    questions, without = [], 0
    for number, qa in enumerate(raw["qa"]):
        if qa["category"] not in CATEGORIES:
            continue
        evidence = [str(e) for e in qa.get("evidence", ())]
        valid = tuple(dict.fromkeys(e for e in evidence if e in ids))
        if not valid:
            without += 1
            continue
        questions.append(Question(number, qa["question"], qa["category"], valid,
                                  tuple(e for e in evidence if e not in ids),
                                  str(qa.get("answer", "")), path.stem))
    return Conversation(path.stem, tuple(lines), tuple(questions), without)


def qualified(conversation: str, dia_id: str) -> str:
    """A line's id in a haystack: "26/D1:1"."""
    return f"{conversation}/{dia_id}"


def haystack(conversations: Sequence[Conversation], asked: Iterable[str], *, limit: int = 0,
             name: str = "haystack") -> Conversation:
    """The conversations as one, in time order; only the questions of `asked` (names), the
    first `limit` of each (0: all)."""
    wanted = set(asked)
    unknown = wanted - {c.name for c in conversations}
    if unknown:
        raise ValueError(f"asked conversations not in the haystack: {sorted(unknown)}")
    keyed = [((line.created_at, order, index),
              replace(line, dia_id=qualified(c.name, line.dia_id)))
             for order, c in enumerate(conversations) for index, line in enumerate(c.lines)]
    lines = tuple(line for _, line in sorted(keyed, key=lambda pair: pair[0]))
    questions = tuple(
        replace(q, evidence=tuple(qualified(c.name, e) for e in q.evidence),
                invalid=tuple(qualified(c.name, e) for e in q.invalid))
        for c in conversations if c.name in wanted for q in c.questions[:limit or None])
    without = sum(c.without_evidence for c in conversations if c.name in wanted)
    return Conversation(name, lines, questions, without)


def export_lines(lines: Sequence[Line], channel: str, now: float) -> Iterator[str]:
    """A chalie export (format 1) of the lines as the person's messages on `channel`, ids from
    1, with the channel's encoding mark at the last line, so that no episode is made of them."""
    encode = msgspec.json.encode
    yield encode(Header(format=FORMAT, schema_version=db.latest_version(),
                        exported_at=now)).decode()
    for n, line in enumerate(lines, start=1):
        yield encode(TranscriptLine(id=n, channel=channel, turn_id=None, role="user",
                                    text=line.text, created_at=line.created_at)).decode()
    if lines:
        yield encode(EncodingLine(channel=channel, upto_transcript_id=len(lines),
                                  encoded_at=lines[-1].created_at)).decode()


# --- the evidence check ------------------------------------------------------------------------

def fold(text: str) -> str:
    """Casefolded, with every run of whitespace one space, trimmed."""
    return " ".join(text.casefold().split())


def needle(line_text_: str) -> str:
    """What is looked for of an evidence line: its first 80 characters, folded."""
    return fold(line_text_[:NEEDLE_CHARS])


def request_text(body: dict[str, Any]) -> str:
    """A chat-completions request as text: every message's content (the system prompt is the
    first message), decoded, one after the other."""
    parts = []
    for message in body.get("messages", ()):
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
    if isinstance(body.get("system"), str):  # an Anthropic-style request keeps it apart
        parts.insert(0, body["system"])
    return "\n".join(parts)


def found_in(evidence: Iterable[str], folded_text: str) -> bool:
    """Every evidence line's needle is in the (folded) text."""
    return all(needle(text) in folded_text for text in evidence)


def ambiguous(conversation: Conversation) -> list[str]:
    """The evidence ids whose needle another line holds too (in a haystack, a line of another
    conversation may begin as an evidence line does, and be taken for it)."""
    folded = [(line.dia_id, fold(line.text)) for line in conversation.lines]
    by_id = conversation.by_id
    evidence = dict.fromkeys(e for q in conversation.questions for e in q.evidence)
    return [e for e in evidence
            if any(needle(by_id[e].text) in text for i, text in folded if i != e)]


# --- the baselines -----------------------------------------------------------------------------

def take_within(ordered: Iterable[Line], budget: int) -> list[Line]:
    """Lines in the given order while their tokens fit the budget (stops at the first that
    does not)."""
    taken, used = [], 0
    for line in ordered:
        if used + line.tokens > budget:
            break
        taken.append(line)
        used += line.tokens
    return taken


def newest(lines: Sequence[Line], budget: int) -> list[Line]:
    """The newest lines, newest first, within the budget."""
    return take_within(sorted(lines, key=lambda line: line.created_at, reverse=True), budget)


def fts_query(question: str) -> str:
    """The question's words, each quoted, OR'd (an FTS5 MATCH expression)."""
    words = dict.fromkeys(w.casefold() for w in _WORD.findall(question))
    return " OR ".join(f'"{w}"' for w in words)


class Bm25:
    """SQLite FTS5 (porter tokenizer) over the lines in memory, ranked by bm25."""

    def __init__(self, lines: Sequence[Line]) -> None:
        self._lines = list(lines)
        self._conn = apsw.Connection(":memory:")
        self._conn.execute("CREATE VIRTUAL TABLE lines USING fts5(text, tokenize = 'porter')")
        with self._conn:
            for n, line in enumerate(self._lines):
                self._conn.execute("INSERT INTO lines (rowid, text) VALUES (?, ?)",
                                   (n, line.text))

    def ranked(self, question: str) -> list[Line]:
        query = fts_query(question)
        if not query:
            return []
        rows = self._conn.execute("SELECT rowid FROM lines WHERE lines MATCH ? "
                                  "ORDER BY bm25(lines), rowid", (query,))
        return [self._lines[rowid] for (rowid,) in rows]

    def select(self, question: str, budget: int) -> list[Line]:
        return take_within(self.ranked(question), budget)

    def close(self) -> None:
        self._conn.close()
