"""The person's memory as JSON Lines, and reading it back into an empty store.

The first line is a header: {"kind": "chalie-export", "format": 1, "schema_version": N,
"exported_at": T}. Every other line is one row, tagged by "kind":

    turn        a turn of the conversation (the transcript's messages belong to one)
    transcript  one message: id, channel, turn_id, role (user, assistant, program), text,
                created_at, speaker (the program's name, for role program)
    knowledge   every fact with its history (superseded_at, superseded_by); the column
                `kind` (fact, trait, preference) is "knowledge_kind" here; source_line: the
                transcript id of the person's message an encoder fact was read from (older
                exports leave it out)
    episode     an encoded window of the transcript (transcript_from..transcript_to)
    encoding    how far a channel's transcript is encoded, so that an import does not
                encode (and remember) it all again
    schedule    a scheduled prompt, with its runs
    goal        a goal, with its steps

Transcript messages keep their turns: a turn line carries the whole `turns` row, so the
conversation comes back as it was (and the transcript's foreign key holds). Ids are kept, so
supersession links and episodes' transcript ranges survive. Vectors are not exported: they
belong to one embedder; after an import the background embedder indexes everything again
(vector_progress starts empty). Sessions, passwords, paired interfaces, the event log and
prompt snapshots are the server's, not the person's memory, and are not exported either.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import IO, Any

import apsw
import msgspec

from chalie.errors import StoreError
from chalie.store import db
from chalie.store.memory_writes import index_text
from chalie.store.queries import search_text
from chalie.values.memory import Kind, episode_text, knowledge_text, mkey

FORMAT = 1


class _Line(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="kind"):
    pass


class Header(_Line, frozen=True, tag="chalie-export"):
    format: int
    schema_version: int
    exported_at: float


class TurnLine(_Line, frozen=True, tag="turn"):
    id: str
    channel: str
    client_id: str | None
    source: str
    user_text: str
    response_text: str | None
    outcome: str
    error: str | None
    iterations: int
    llm_calls: int
    tokens_total: int
    response_time_s: float
    started_at: float
    finished_at: float
    path: str = "user"


class TranscriptLine(_Line, frozen=True, tag="transcript"):
    id: int
    channel: str
    turn_id: str | None
    role: str
    text: str
    created_at: float
    speaker: str | None = None  # role "program": the paired program that said it


class KnowledgeLine(_Line, frozen=True, tag="knowledge"):
    id: int
    key: str
    value: str
    turn_id: str | None
    created_at: float
    superseded_at: float | None
    superseded_by: int | None
    knowledge_kind: str = "fact"
    source: str = "tool"
    confidence: float = 0.9
    source_line: int | None = None  # the person's line an encoder fact was read from


class EpisodeLine(_Line, frozen=True, tag="episode"):
    id: int
    channel: str
    gist: str
    intent: str
    outcome: str
    entities: list[str]
    open_loops: list[str]
    salience: float
    valence: float
    transcript_from: int
    transcript_to: int
    encoding_id: str
    happened_at: float
    created_at: float


class EncodingLine(_Line, frozen=True, tag="encoding"):
    channel: str
    upto_transcript_id: int
    encoded_at: float


class ScheduleRun(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    due_at: float
    outcome: str
    turn_id: str | None
    ran_at: float
    error: str | None


class ScheduleLine(_Line, frozen=True, tag="schedule"):
    id: str
    prompt: str
    at: float | None
    cron: str | None
    timezone: str
    next_run: float | None
    last_run: float | None
    state: str
    source: str
    turn_id: str | None
    created_at: float
    runs: list[ScheduleRun] = []


class GoalStep(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    step_id: str
    position: int
    description: str
    depends_on: list[str]
    status: str
    result: str | None
    turn_id: str | None
    attempts: int = 0
    finished_at: float | None = None


class GoalLine(_Line, frozen=True, tag="goal"):
    id: str
    goal: str
    state: str
    source: str
    turn_id: str | None
    confidence: float | None
    result: str | None
    error: str | None
    iterations: int
    elapsed_s: float
    tokens: int
    paused_until: float | None
    created_at: float
    updated_at: float
    finished_at: float | None
    mode: str | None = None
    plan_problems: list[str] | None = None
    paused_at: float | None = None
    progress_at: float | None = None
    end_reason: str | None = None
    steps: list[GoalStep] = []


AnyLine = (TurnLine | TranscriptLine | KnowledgeLine | EpisodeLine | EncodingLine | ScheduleLine
           | GoalLine)
_header = msgspec.json.Decoder(Header)
_line = msgspec.json.Decoder(AnyLine)
_encoder = msgspec.json.Encoder()
_ids = msgspec.json.Decoder(list[str])

# Each kind of line: its table and the order its rows are written in. A line's fields are
# its table's columns, but for _RENAMED ones and the _NESTED rows of another table.
_ROWS: dict[type[_Line], tuple[str, str]] = {
    TurnLine: ("turns", "ORDER BY started_at, id"),
    TranscriptLine: ("transcript", "ORDER BY id"),
    KnowledgeLine: ("knowledge", "ORDER BY id"),
    EpisodeLine: ("episodes", "ORDER BY id"),
    EncodingLine: ("encodings", "ORDER BY channel"),
    ScheduleLine: ("schedules", "ORDER BY created_at, id"),
    GoalLine: ("goals", "ORDER BY created_at, id"),
}
_RENAMED = {"knowledge_kind": "kind"}
_NESTED = {"runs", "steps"}
_JSON_LISTS = {"entities", "open_loops", "depends_on", "plan_problems"}  # NULL stays None
COUNTED = ("turn", "transcript", "knowledge", "episode", "encoding", "schedule", "goal")


def _columns(cls: type[msgspec.Struct]) -> list[tuple[str, str]]:
    """(field, column) for the fields of `cls` that are columns of its table."""
    return [(f.name, _RENAMED.get(f.name, f.name)) for f in msgspec.structs.fields(cls)
            if f.name not in _NESTED]


def _select(conn: apsw.Connection, cls: type[Any], table: str, tail: str, *,
            where: str = "", params: tuple[Any, ...] = ()) -> Iterator[dict[str, Any]]:
    pairs = _columns(cls)
    sql = f"SELECT {', '.join(c for _, c in pairs)} FROM {table} {where} {tail}"
    for row in conn.execute(sql, params):
        values = dict(zip((f for f, _ in pairs), row, strict=True))
        for name in _JSON_LISTS & values.keys():
            if values[name] is not None:
                values[name] = _ids.decode(values[name])
        yield values


def _tag(cls: type[Any]) -> str:
    return str(cls.__struct_config__.tag)


def export(conn: apsw.Connection, out: IO[str], *, now: float | None = None) -> dict[str, int]:
    """Write the memory in `conn` to `out` as JSON Lines; returns how many lines of each kind.
    Reads in one transaction, so the export is one consistent snapshot."""
    counts = dict.fromkeys(COUNTED, 0)
    (version,) = conn.execute("PRAGMA user_version").fetchone()  # type: ignore[misc]

    def write(line: msgspec.Struct) -> None:
        out.write(_encoder.encode(line).decode())
        out.write("\n")

    with conn:  # a read transaction: one snapshot even while the server writes
        write(Header(format=FORMAT, schema_version=int(version),
                     exported_at=time.time() if now is None else now))
        for cls, (table, tail) in _ROWS.items():
            for values in _select(conn, cls, table, tail):
                if cls is ScheduleLine:
                    values["runs"] = [ScheduleRun(**r) for r in _select(
                        conn, ScheduleRun, "schedule_runs", "ORDER BY due_at",
                        where="WHERE schedule_id = ?", params=(values["id"],))]
                elif cls is GoalLine:
                    values["steps"] = [GoalStep(**s) for s in _select(
                        conn, GoalStep, "goal_steps", "ORDER BY position",
                        where="WHERE goal_id = ?", params=(values["id"],))]
                write(cls(**values))
                counts[_tag(cls)] += 1
    return counts


def _not_empty(conn: apsw.Connection) -> list[str]:
    tables = [table for table, _ in _ROWS.values()]
    return [t for t in tables if conn.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone()]


def _insert(conn: apsw.Connection, table: str, cls: type[Any], line: Any,
            extra: dict[str, Any] | None = None) -> None:
    pairs = _columns(cls)
    values = {c: getattr(line, f) for f, c in pairs}
    for name in _JSON_LISTS & values.keys():
        if values[name] is not None:
            values[name] = _encoder.encode(values[name]).decode()
    values.update(extra or {})
    names = list(values)
    conn.execute(f"INSERT INTO {table} ({', '.join(names)}) "
                 f"VALUES ({', '.join('?' for _ in names)})", tuple(values.values()))


def _store(conn: apsw.Connection, line: Any) -> None:
    match line:
        case KnowledgeLine():
            _insert(conn, "knowledge", KnowledgeLine, line,
                    {"search_text": search_text(line.key, line.value)})
            if line.superseded_at is None:  # the index holds current knowledge only
                index_text(conn, mkey(Kind.KNOWLEDGE, line.id),
                           knowledge_text(line.key, line.value))
        case TranscriptLine():
            _insert(conn, "transcript", TranscriptLine, line)
            index_text(conn, mkey(Kind.TRANSCRIPT, line.id), line.text)
        case EpisodeLine():
            _insert(conn, "episodes", EpisodeLine, line)
            index_text(conn, mkey(Kind.EPISODE, line.id), episode_text(
                line.gist, line.intent, line.outcome, line.entities, line.open_loops,
                labels=False))
        case ScheduleLine():
            _insert(conn, "schedules", ScheduleLine, line)
            for run in line.runs:
                _insert(conn, "schedule_runs", ScheduleRun, run, {"schedule_id": line.id})
        case GoalLine():
            _insert(conn, "goals", GoalLine, line)
            for step in line.steps:
                _insert(conn, "goal_steps", GoalStep, step, {"goal_id": line.id})
        case _:
            _insert(conn, _ROWS[type(line)][0], type(line), line)


def import_(conn: apsw.Connection, lines: Iterable[str], now: float) -> dict[str, int]:
    """Read an export into the store behind `conn` (the writer), which must hold no memory yet;
    all of it or, on any bad line, nothing. Returns how many lines of each kind it stored."""
    del now  # rows keep the times they carry; kept for the writers' calling convention
    counts = dict.fromkeys(COUNTED, 0)
    with db.immediate(conn):
        filled = _not_empty(conn)
        if filled:
            raise StoreError(f"the store is not empty (it has rows in {', '.join(filled)}); "
                             "import only into a new store")
        # Knowledge names its successor before the successor's line: links are checked at
        # commit, when every row is in.
        conn.execute("PRAGMA defer_foreign_keys = ON")
        number = 0
        for number, text in enumerate(lines, start=1):
            if number == 1:
                _check_header(text)
                continue
            if not text.strip():
                continue
            try:
                line = _line.decode(text)
            except msgspec.ValidationError as e:
                raise StoreError(f"line {number}: {e}") from e
            except msgspec.DecodeError as e:
                raise StoreError(f"line {number}: not JSON: {e}") from e
            try:
                _store(conn, line)
            except apsw.ConstraintError as e:
                raise StoreError(f"line {number}: {_tag(type(line))} {_name(line)}: {e}") from e
            counts[_tag(type(line))] += 1
        if number == 0:
            raise StoreError("line 1: empty input: no chalie-export header")
        broken = conn.execute("PRAGMA foreign_key_check").fetchall()
        if broken:
            table, rowid, parent, _ = broken[0]
            raise StoreError(f"the export is not whole: a {table} row (rowid {rowid}) "
                             f"refers to a missing {parent} row")
    return counts


def _name(line: Any) -> str:
    name = getattr(line, "id", None) or getattr(line, "channel", "")
    return str(name)


def _check_header(text: str) -> None:
    try:
        header = _header.decode(text)
    except (msgspec.ValidationError, msgspec.DecodeError) as e:
        raise StoreError(f"line 1: not a chalie-export header: {e}") from e
    if header.format != FORMAT:
        raise StoreError(f"line 1: export format {header.format}; this Chalie reads {FORMAT}")
    latest = db.latest_version()
    if header.schema_version > latest:
        raise StoreError(f"line 1: exported by a newer Chalie (schema {header.schema_version}, "
                         f"this one {latest}): upgrade Chalie first")


def lines_of(stream: IO[str]) -> Iterator[str]:
    """The lines of a text stream without their newlines."""
    for text in stream:
        yield text.rstrip("\n")

