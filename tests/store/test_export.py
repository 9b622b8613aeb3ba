"""Export of the person's memory as JSON Lines and import into a new store, on real SQLite
files, with the data written by the store's own writers."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import apsw
import msgspec
import pytest

from chalie.errors import StoreError
from chalie.memory import fts
from chalie.store import db, export, goal_rows, memory_queries, memory_writes, schedule_rows, writes
from chalie.store.effects import RememberFact
from chalie.store.goal_rows import StepRow
from chalie.store.memory_writes import EpisodeRow
from chalie.store.records import ProgramLine, TurnRecord
from chalie.store.schedule_rows import ScheduleRow
from chalie.values.memory import Kind

TIMEOUT_MS = 2000
# What an export carries, table by table, as the comparison reads it.
TABLES = ("turns", "transcript", "knowledge", "episodes", "encodings", "schedules",
          "schedule_runs", "goals", "goal_steps")
EMPTY: dict[str, list[tuple[Any, ...]]] = {table: [] for table in TABLES}


def open_store(directory: Path) -> apsw.Connection:
    return db.open_writer(directory, busy_timeout_ms=TIMEOUT_MS, synchronous="FULL")


def turn(turn_id: str, user: str, answer: str, at: float) -> TurnRecord:
    return TurnRecord(id=turn_id, channel="main", client_id=None, source="ws", user_text=user,
                      response_text=answer, outcome="answered", error=None, iterations=1,
                      llm_calls=1, tokens_total=10, response_time_s=0.5, started_at=at,
                      finished_at=at + 1)


def fill(conn: apsw.Connection) -> None:
    """A little of everything an export carries, written as the server writes it."""
    with db.immediate(conn):
        writes.insert_turn(conn, turn("t1", "My dog is Rex.", "Noted: Rex.", 10.0))
        writes.insert_turn(conn, turn("t2", "Rex is now Max.", "Max it is.", 20.0))
        memory_writes.remember(conn, RememberFact("dog", "Rex"), turn_id="t1", now=11.0)
        memory_writes.remember(conn, RememberFact("dog", "Max"), turn_id="t2", now=21.0)
        memory_writes.remember(conn, RememberFact("city", "Lisbon", kind="preference"),
                               turn_id=None, now=22.0)
        memory_writes.insert_episodes(
            conn, "main", [EpisodeRow(gist="Talked about the dog", intent="share",
                                      outcome="renamed", entities=("Rex", "Max"),
                                      open_loops=("buy a collar",), salience=0.7,
                                      valence=0.2, transcript_from=1, transcript_to=4,
                                      happened_at=21.0)],
            upto_transcript_id=4, encoding_id="enc-1", now=30.0)
        schedule_rows.insert(conn, ScheduleRow(
            id="s1", prompt="Remind me to walk Max", timezone="UTC", at=None,
            cron="0 8 * * *", next_run=86400.0, last_run=None, state="active",
            source="person", turn_id="t2", created_at=23.0))
        schedule_rows.ran(conn, "s1", 100.0, outcome="done", next_run=86500.0, turn_id=None,
                          now=101.0, error=None)
        goal_rows.insert(conn, "g1", "Find a vet", source="person", turn_id="t2", now=24.0)
        goal_rows.save_plan(conn, "g1", [StepRow("a", 0, "search", ()),
                                         StepRow("b", 1, "compare", ("a",))],
                            confidence=0.8, now=25.0)
        goal_rows.step_status(conn, "g1", "a", "done", now=26.0, result="three vets")
        goal_rows.insert(conn, "g2", "Book the vet", source="tool", turn_id=None, now=27.0)
        goal_rows.save_plan(conn, "g2", [StepRow("goal", 0, "Book the vet", ())],
                            confidence=None, now=28.0, mode="plain",
                            problems=["The plan's confidence is 0.3."])
        goal_rows.progress_told(conn, "g2", 29.0)
        goal_rows.pause(conn, "g2", None, 30.0)
        goal_rows.set_state(conn, "g2", "expired", now=31.0, end_reason="expired")


def rows(conn: apsw.Connection) -> dict[str, list[tuple[Any, ...]]]:
    return {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in TABLES}


def exported(conn: apsw.Connection) -> str:
    out = io.StringIO()
    export.export(conn, out, now=1000.0)
    return out.getvalue()


def test_an_export_read_into_a_new_store_gives_back_every_row(tmp_path: Path) -> None:
    """Turns, transcript, knowledge with its history, episodes, schedules with runs and goals
    with steps come back row for row, ids and supersession links included."""
    source = open_store(tmp_path / "a")
    fill(source)
    text = exported(source)
    target = open_store(tmp_path / "b")
    counts = export.import_(target, text.splitlines(), 2000.0)
    assert counts == {"turn": 2, "transcript": 4, "knowledge": 3, "episode": 1, "encoding": 1,
                      "schedule": 1, "goal": 2}
    assert rows(target) == rows(source)
    dog = target.execute("SELECT id, value, superseded_by FROM knowledge WHERE key = 'dog' "
                         "ORDER BY id").fetchall()
    assert [(v, s) for _, v, s in dog] == [("Rex", dog[1][0]), ("Max", None)]


def test_a_programs_message_in_the_transcript_comes_back_named(tmp_path: Path) -> None:
    """A paired program's message kept in the person's transcript (role program, its name)
    and the answer survive an export and an import."""
    source = open_store(tmp_path / "a")
    with db.immediate(source):
        writes.insert_turn(source, msgspec.structs.replace(
            turn("t1", "[framed] Max's vaccine is due", "Max's vaccine is due Friday.", 10.0),
            channel="interface.vet", source="interface",
            program=ProgramLine("main", "vet", "Max's vaccine is due")))
    target = open_store(tmp_path / "b")
    export.import_(target, exported(source).splitlines(), 2000.0)
    assert target.execute("SELECT channel, role, speaker, text FROM transcript ORDER BY id"
                          ).fetchall() == [
        ("main", "program", "vet", "Max's vaccine is due"),
        ("main", "assistant", None, "Max's vaccine is due Friday.")]


def test_a_facts_source_line_survives_and_an_older_export_without_it_imports(
    tmp_path: Path,
) -> None:
    """A fact the encoder read keeps the transcript id of the person's message through an
    export and an import; a knowledge line from before source lines imports with none."""
    source = open_store(tmp_path / "a")
    fill(source)
    with db.immediate(source):
        memory_writes.remember(source, RememberFact("vet", "Dr Sousa", source="encoder",
                                                    source_line=3), turn_id="t2", now=23.0)
    lines = exported(source).splitlines()
    (vet,) = [json.loads(line) for line in lines if '"vet"' in line]
    assert (vet["source"], vet["source_line"]) == ("encoder", 3)
    target = open_store(tmp_path / "b")
    export.import_(target, lines, 2000.0)
    assert rows(target) == rows(source)

    older = [json.dumps({k: v for k, v in json.loads(line).items() if k != "source_line"})
             if '"kind":"knowledge"' in line else line for line in lines]
    again = open_store(tmp_path / "c")
    export.import_(again, older, 2000.0)
    assert again.execute("SELECT key, source, source_line FROM knowledge WHERE key = 'vet'"
                         ).fetchall() == [("vet", "encoder", None)]


def test_the_export_starts_with_a_header_naming_format_and_schema(tmp_path: Path) -> None:
    """The first line says what the file is; every line after it names its kind."""
    conn = open_store(tmp_path / "a")
    fill(conn)
    lines = [json.loads(line) for line in exported(conn).splitlines()]
    assert lines[0] == {"kind": "chalie-export", "format": 1,
                        "schema_version": db.latest_version(), "exported_at": 1000.0}
    knowledge = [line for line in lines if line["kind"] == "knowledge"]
    assert {(k["key"], k["value"], k["knowledge_kind"]) for k in knowledge} == {
        ("dog", "Rex", "fact"), ("dog", "Max", "fact"), ("city", "Lisbon", "preference")}
    first, plain = (line for line in lines if line["kind"] == "goal")
    assert [s["depends_on"] for s in first["steps"]] == [[], ["a"]]
    assert (first["mode"], first["plan_problems"], first["end_reason"]) == ("plan", None, None)
    assert (plain["mode"], plain["plan_problems"], plain["end_reason"], plain["paused_at"],
            plain["progress_at"]) == ("plain", ["The plan's confidence is 0.3."], "expired",
                                      30.0, 29.0)


def test_imported_memory_is_found_by_full_text_search_like_written_memory(
    tmp_path: Path,
) -> None:
    """The full-text index is filled as the writers fill it: current knowledge, episodes and
    messages are found; superseded knowledge is not."""
    source = open_store(tmp_path / "a")
    fill(source)
    target = open_store(tmp_path / "b")
    export.import_(target, exported(source).splitlines(), 2000.0)
    assert fts.search(target, "Rex", 50) != []  # the messages say it
    assert fts.search(target, "dog", 50, kind=Kind.KNOWLEDGE) != []
    assert fts.search(target, "Rex", 50, kind=Kind.KNOWLEDGE) == []  # superseded
    for word in ("Max", "Rex", "collar", "Lisbon"):
        assert fts.search(target, word, 50) == fts.search(source, word, 50), word


def test_after_an_import_the_embedder_has_everything_still_to_index(tmp_path: Path) -> None:
    """No vectors come with an export: the background embedder starts from nothing and so
    indexes every imported item."""
    source = open_store(tmp_path / "a")
    fill(source)
    target = open_store(tmp_path / "b")
    export.import_(target, exported(source).splitlines(), 2000.0)
    space = memory_writes.ensure_space(target, "hashed-384", 2000.0)
    done = memory_queries.progress(target, space)
    assert done == dict.fromkeys(Kind, 0)
    assert memory_queries.pending_estimate(target, done) == 4 + 1 + 3


def test_importing_into_a_store_with_memory_is_refused_and_changes_nothing(
    tmp_path: Path,
) -> None:
    """An import never mixes with memory a store has: it names what is there."""
    source = open_store(tmp_path / "a")
    fill(source)
    text = exported(source)
    with pytest.raises(StoreError, match=r"not empty.*turns"):
        export.import_(source, text.splitlines(), 2000.0)
    assert source.execute("SELECT count(*) FROM turns").fetchone() == (2,)


@pytest.mark.parametrize(("bad", "says"), [
    ('{"kind": "knowledge", "id": 1}', r"line 3: .*required field"),
    ('{"kind": "knowledge", "id": 9, "key": "k", "value": "v", "turn_id": null, '
     '"created_at": 1.0, "superseded_at": null, "superseded_by": null, "colour": "red"}',
     r"line 3: .*unknown field `colour`"),
    ('{"kind": "memo", "text": "x"}', r"line 3: .*memo"),
    ("not json", "line 3: not JSON"),
    ('{"kind": "transcript", "id": 1, "channel": "main", "turn_id": "t1", "role": "user", '
     '"text": "hello", "created_at": 1.0}',
     r"line 5: transcript 1: UNIQUE constraint failed: transcript.id"),
])
def test_a_bad_line_is_named_and_nothing_is_imported(
    tmp_path: Path, bad: str, says: str,
) -> None:
    """One bad line stops the import with its number, and the store stays empty."""
    source = open_store(tmp_path / "a")
    fill(source)
    lines = exported(source).splitlines()
    lines.insert(2, bad)
    target = open_store(tmp_path / "b")
    with pytest.raises(StoreError, match=says):
        export.import_(target, lines, 2000.0)
    assert rows(target) == EMPTY


def test_a_message_whose_turn_is_missing_is_refused(tmp_path: Path) -> None:
    """A transcript message must come with its turn: an export cut short is not imported."""
    source = open_store(tmp_path / "a")
    fill(source)
    lines = [line for line in exported(source).splitlines() if '"kind":"turn"' not in line]
    target = open_store(tmp_path / "b")
    with pytest.raises(StoreError, match=r"transcript row .* missing turns row"):
        export.import_(target, lines, 2000.0)
    assert rows(target) == EMPTY


def test_an_export_from_a_newer_chalie_is_refused(tmp_path: Path) -> None:
    """A header with a schema newer than the code says to upgrade Chalie first."""
    header = json.dumps({"kind": "chalie-export", "format": 1,
                         "schema_version": db.latest_version() + 1, "exported_at": 1.0})
    target = open_store(tmp_path / "b")
    with pytest.raises(StoreError, match=r"line 1: exported by a newer Chalie.*upgrade"):
        export.import_(target, [header], 2000.0)


def test_a_file_without_the_header_is_refused(tmp_path: Path) -> None:
    """Something that is not an export is named as such on its first line."""
    target = open_store(tmp_path / "b")
    with pytest.raises(StoreError, match="line 1: not a chalie-export header"):
        export.import_(target, ['{"kind": "turn"}'], 2000.0)
    with pytest.raises(StoreError, match="line 1: empty input"):
        export.import_(target, [], 2000.0)
