"""The LoCoMo benchmark's pure parts (scripts/bench/locomo_data.py): the lines it imports, the
export that carries them, the evidence check and the baselines. The benchmark run itself (a
real server per conversation) stays out of the suite: scripts/bench/locomo.py."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from chalie.store import db
from chalie.store import memory_queries as mq
from chalie.store.export import import_

BENCH = Path(__file__).resolve().parents[1] / "scripts" / "bench"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("locomo_data", BENCH / "locomo_data.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["locomo_data"] = module
    spec.loader.exec_module(module)
    return module


ld = _load()

CONVERSATION: dict[str, Any] = {
    "speaker_a": "Ann", "speaker_b": "Bob",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
        {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a  puppy called Biscuit."},
        {"speaker": "Bob", "dia_id": "D1:2", "text": "Lovely!", "img_url": ["x"],
         "blip_caption": "a photo of a dog"},
    ],
    "session_2_date_time": "9:00 am on 1 June, 2023",
    "session_2": [{"speaker": "Bob", "dia_id": "D2:1", "text": "I started pottery classes."}],
    "qa": [
        {"question": "What is Ann's puppy called?", "answer": "Biscuit", "evidence": ["D1:1"],
         "category": 4},
        {"question": "What did Bob take up?", "answer": "pottery",
         "evidence": ["D2:1", "D9:9"], "category": 1},
        {"question": "Who is Carl?", "evidence": ["D1:2"], "category": 5,
         "adversarial_answer": "a friend"},
        {"question": "What broke?", "answer": "x", "evidence": ["D1:1; D2:1"], "category": 2},
    ],
}


@pytest.fixture
def conversation(tmp_path: Path) -> Any:
    path = tmp_path / "99.json"
    path.write_text(json.dumps(CONVERSATION))
    return ld.load(path)


def test_each_dialog_line_is_a_message_of_its_speaker_at_its_session_time(
        conversation: Any) -> None:
    """A line reads "<speaker>: <text>" (a shared photo's caption appended) and is dated at its
    session's start, read as UTC, plus 30 s per line before it."""
    lines = conversation.lines
    assert [line.text for line in lines] == [
        "Ann: I adopted a  puppy called Biscuit.",
        "Bob: Lovely! [shares a photo: a photo of a dog]",
        "Bob: I started pottery classes.",
    ]
    assert lines[0].created_at == 1683554160.0  # 2023-05-08 13:56 UTC
    assert lines[1].created_at == 1683554190.0
    assert lines[2].created_at == 1685610000.0  # 2023-06-01 09:00 UTC


def test_questions_keep_evidence_that_names_a_line_and_leave_out_adversarial_ones(
        conversation: Any) -> None:
    """Category 5 is left out, an id naming no line is skipped, and a question left with no
    evidence at all is counted apart instead of asked."""
    assert [(q.text, q.evidence, q.invalid) for q in conversation.questions] == [
        ("What is Ann's puppy called?", ("D1:1",), ()),
        ("What did Bob take up?", ("D2:1",), ("D9:9",)),
    ]
    assert conversation.without_evidence == 1


def test_the_export_imports_as_encoded_messages_of_the_person(
        conversation: Any, tmp_path: Path) -> None:
    """The export reads into an empty store as the person's messages on the channel, with the
    encoding mark at the last one, so the encoder has nothing to make episodes of."""
    conn = db.open_writer(tmp_path / "data", busy_timeout_ms=1000, synchronous="NORMAL")
    try:
        counts = import_(conn, ld.export_lines(conversation.lines, "main", 0.0), 0.0)
        rows = list(conn.execute("SELECT channel, role, text FROM transcript ORDER BY id"))
        upto = mq.encoded_upto(conn, "main")
        waiting = mq.unencoded_count(conn, "main", upto)
    finally:
        conn.close()
    assert counts["transcript"] == 3
    assert counts["encoding"] == 1
    assert rows[1] == ("main", "user", "Bob: Lovely! [shares a photo: a photo of a dog]")
    assert waiting == 0


OTHER: dict[str, Any] = {
    "speaker_a": "Cid", "speaker_b": "Dee",
    "session_1_date_time": "10:00 am on 20 May, 2023",
    "session_1": [{"speaker": "Cid", "dia_id": "D1:1", "text": "My puppy is called Biscuit too."}],
    "qa": [{"question": "What is Cid's dog called?", "answer": "Biscuit", "evidence": ["D1:1"],
            "category": 4}],
}


def test_a_haystack_holds_every_line_in_time_order_and_asks_only_the_asked_questions(
        conversation: Any, tmp_path: Path) -> None:
    """The lines of both conversations interleave by time with ids naming their conversation;
    only the asked conversation's questions are asked (at most --limit of it), their evidence
    qualified the same way, and the export imports them all onto the one channel."""
    path = tmp_path / "98.json"
    path.write_text(json.dumps(OTHER))
    other = ld.load(path)

    stack = ld.haystack([conversation, other], ["99"])
    limited = ld.haystack([conversation, other], ["99", "98"], limit=1)

    assert [line.dia_id for line in stack.lines] == ["99/D1:1", "99/D1:2", "98/D1:1", "99/D2:1"]
    assert [(q.conversation, q.text, q.evidence, q.invalid) for q in stack.questions] == [
        ("99", "What is Ann's puppy called?", ("99/D1:1",), ()),
        ("99", "What did Bob take up?", ("99/D2:1",), ("99/D9:9",)),
    ]
    assert stack.without_evidence == 1
    assert [(q.conversation, q.number) for q in limited.questions] == [("99", 0), ("98", 0)]
    conn = db.open_writer(tmp_path / "data", busy_timeout_ms=1000, synchronous="NORMAL")
    try:
        import_(conn, ld.export_lines(stack.lines, "main", 0.0), 0.0)
        rows = list(conn.execute("SELECT channel, text FROM transcript ORDER BY id"))
        waiting = mq.unencoded_count(conn, "main", mq.encoded_upto(conn, "main"))
    finally:
        conn.close()
    assert ld.ambiguous(stack) == []
    assert rows[2] == ("main", "Cid: My puppy is called Biscuit too.")
    assert len(rows) == 4
    assert waiting == 0


def test_a_haystack_names_the_evidence_another_conversation_begins_a_line_as(
        conversation: Any, tmp_path: Path) -> None:
    """A distractor's line that holds an evidence line's needle could be taken for it: the
    evidence id is named, and a line that only shares words is not."""
    echo = {**OTHER, "session_1": [
        {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy called Biscuit. Again!"}]}
    path = tmp_path / "98.json"
    path.write_text(json.dumps(echo))

    stack = ld.haystack([conversation, ld.load(path)], ["99"])

    assert ld.ambiguous(stack) == ["99/D1:1"]


def test_evidence_is_found_by_its_first_80_characters_folded() -> None:
    """Case and runs of whitespace do not matter, text past the 80th character may be cut, and
    the request's JSON escapes are decoded before looking."""
    line = "Ann: I adopted a  puppy called Biscuit.\nShe is " + "very " * 30 + "cute."
    body = json.loads(json.dumps({"messages": [
        {"role": "system", "content": "You are Chalie."},
        {"role": "user", "content": "- (2023-05-08, the person said) ANN: i adopted a puppy "
                                    "called biscuit. she is " + "very " * 9 + "…"},
    ]}))
    text = ld.fold(ld.request_text(body))
    assert ld.found_in([line], text)
    assert not ld.found_in([line, "Bob: I started pottery classes."], text)
    assert ld.found_in(["You are  CHALIE."], text)


def test_bm25_ranks_the_matching_line_first_and_stops_at_the_budget(
        conversation: Any) -> None:
    """The question's words find the line that holds them; lines are taken in rank order (or
    newest first) while they fit the budget, and the first that does not ends the selection."""
    bm25 = ld.Bm25(conversation.lines)
    try:
        ranked = [line.dia_id for line in bm25.ranked("Did Bob take pottery classes?")]
        within = [line.dia_id for line in bm25.select("puppy Biscuit", 3)]
    finally:
        bm25.close()
    assert ranked[0] == "D2:1"
    assert within == []  # the only match needs 10 tokens
    budget = conversation.lines[2].tokens + conversation.lines[1].tokens
    assert [line.dia_id for line in ld.newest(conversation.lines, budget)] == ["D2:1", "D1:2"]
    assert ld.fts_query('Bob\'s "pottery" pottery') == '"bob" OR "s" OR "pottery"'


@pytest.mark.parametrize(("args", "problem"), [
    (["--data", "{empty}"], "--data: no LoCoMo conversation (*.json) in {empty}"),
    (["--data", "{data}", "--conversations", "99,7"], "--conversations: no 7.json in {data}"),
    (["--data", "{data}", "--haystack", "--distractors", "7"],
     "--distractors: no 7.json in {data}"),
    (["--data", "{data}", "--haystack", "--conversations", "99", "--distractors", "99"],
     "--distractors: 99 also asked (--conversations)"),
    (["--data", "{data}", "--distractors", "99"], "--distractors: only with --haystack"),
])
def test_the_benchmark_names_missing_conversations_before_it_starts(
        tmp_path: Path, args: list[str], problem: str) -> None:
    empty, data = tmp_path / "empty", tmp_path / "data"
    empty.mkdir()
    data.mkdir()
    (data / "99.json").write_text(json.dumps(CONVERSATION))
    paths = {"empty": str(empty), "data": str(data)}
    done = subprocess.run(
        [sys.executable, str(BENCH / "locomo.py"), *(a.format(**paths) for a in args)],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert problem.format(**paths) in done.stderr
    assert "Traceback" not in done.stderr
