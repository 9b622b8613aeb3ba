"""The StoreWriter on a real SQLite file: seqs, one-transaction turns, closing cut-off turns,
and failed commits. A recorder stands in for the sessions it answers."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pykka
import pytest

from chalie.actors.session_messages import Deliver
from chalie.actors.store_writer import StoreWriter
from chalie.actors.store_writer_messages import (
    AppendFrames,
    CloseOpenExchange,
    CommitTurn,
    CreateAuthSession,
)
from chalie.actors.supervisor import Directory
from chalie.actors.turn_messages import TurnStored, TurnStoreFailed
from chalie.frames import (
    Decision,
    Done,
    Escalation,
    FrameMetrics,
    Message,
    Notification,
    Status,
    text_blocks,
)
from chalie.metrics import Metrics
from chalie.store.effects import RememberFact
from chalie.store.event_log import INTERRUPTED
from chalie.store.records import StoredToolCall, TurnRecord
from tests.actors.conftest import (
    WAIT_S,
    FakeOutbox,
    RecorderActor,
    Recording,
    WatchedClock,
    query,
)


@dataclass
class Writer:
    ref: pykka.ActorRef[Any]
    outbox: FakeOutbox
    sessions: Recording
    data: Path
    clock: WatchedClock
    metrics: Metrics

    def commit(self, turn: TurnRecord, frames: tuple[Message, Done], age_s: float = 0.5) -> Any:
        """Commit a turn whose message was received `age_s` seconds ago."""
        return self.ask(CommitTurn(turn, frames, self.clock.monotonic() - age_s))

    def ask(self, message: Any) -> Any:
        """Tell the writer and wait until it has handled the message."""
        return self.ref.ask(message, timeout=WAIT_S)

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        return query(self.data, sql, *params)


@pytest.fixture
def start_writer(make_config: Any, clock: WatchedClock) -> Callable[[], Writer]:
    """Start a StoreWriter on the test's data directory; each call is a new instance."""
    config = make_config().store
    outbox, sessions, directory = FakeOutbox(), Recording(), Directory()
    directory.set("sessions", RecorderActor.start(sessions))

    def start() -> Writer:
        metrics = Metrics()
        ref = StoreWriter.start(None, config=config, outbox=outbox, clock=clock,
                                directory=directory, metrics=metrics)
        return Writer(ref, outbox, sessions, Path(config.path), clock, metrics)

    return start


def status(exchange: str | None = "x1") -> Status:
    return Status(stage="processing", exchange_id=exchange)


def record(turn_id: str = "t1", text: str = "Green.") -> TurnRecord:
    return TurnRecord(
        id=turn_id, channel="main", client_id=None, source="text", user_text="my colour?",
        response_text=text, outcome="answered", error=None, iterations=1, llm_calls=2,
        tokens_total=40, response_time_s=0.5, started_at=1_700_000_000.0,
        finished_at=1_700_000_000.5,
        tool_calls=(StoredToolCall(1, "call_0", "memory", '{"action":"recall"}', "none", False,
                                   3.0),),
        effects=(RememberFact(key="colour", value="green"),),
    )


def closing(turn_id: str = "t1", text: str = "Green.") -> tuple[Message, Done]:
    metrics = FrameMetrics(tokens_total=40, tools={"memory": 1}, response_time_s=0.5)
    return (Message(blocks=text_blocks(text), exchange_id=turn_id, metrics=metrics),
            Done(duration_ms=500, exchange_id=turn_id))


def seqs(frames: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(f["seq"], f["type"]) for f in frames]


def test_frames_of_a_channel_are_numbered_from_one_and_logged(start_writer: Any) -> None:
    """A channel's frames get seq 1, 2, 3 across appends, and the log holds what was pushed."""
    w = start_writer()
    w.ask(AppendFrames("main", (status(), status())))
    w.ask(AppendFrames("main", (status(None),)))
    pushed = w.outbox.frames()
    assert seqs(pushed) == [(1, "status"), (2, "status"), (3, "status")]
    assert [f.get("exchange_id") for f in pushed] == ["x1", "x1", None]
    assert w.rows("SELECT seq, type, exchange_id FROM events WHERE channel = 'main' "
                  "ORDER BY seq") == [(1, "status", "x1"), (2, "status", "x1"), (3, "status", None)]


def test_seq_continues_after_the_writer_is_restarted(start_writer: Any) -> None:
    """A new writer on the same store carries on from the channel's last seq, never reusing one."""
    first = start_writer()
    first.ask(AppendFrames("main", (status(), status(), status())))
    first.ref.stop(block=True, timeout=WAIT_S)
    second = start_writer()
    second.ask(AppendFrames("main", (status("x2"),)))
    assert seqs(second.outbox.frames()) == [(1, "status"), (2, "status"), (3, "status"),
                                            (4, "status")]
    assert second.rows("SELECT max(seq), count(*) FROM events") == [(4, 4)]


def test_each_channel_has_its_own_seq(start_writer: Any) -> None:
    """Frames on one channel do not move another channel's seq."""
    w = start_writer()
    w.ask(AppendFrames("main", (status(), status())))
    w.ask(AppendFrames("phone", (status("p1"),)))
    w.ask(AppendFrames("main", (status(),)))
    assert seqs(w.outbox.frames("main")) == [(1, "status"), (2, "status"), (3, "status")]
    assert seqs(w.outbox.frames("phone")) == [(1, "status")]


def test_committed_turn_is_stored_with_its_frames_before_they_are_pushed(
    start_writer: Any,
) -> None:
    """A turn's rows and closing frames are in the store when the client receives the frames."""
    w = start_writer()
    at_push: dict[str, Any] = {}

    def look(channel: str, frames: list[dict[str, Any]]) -> None:
        at_push["turns"] = w.rows("SELECT id, outcome, response_text, tokens_total FROM turns")
        at_push["events"] = w.rows("SELECT seq, type FROM events ORDER BY seq")
        at_push["facts"] = w.rows("SELECT key, value, turn_id FROM knowledge")

    w.outbox.on_push = look
    w.commit(record(), closing())
    assert seqs(w.outbox.frames()) == [(1, "message"), (2, "done")]
    assert at_push == {
        "turns": [("t1", "answered", "Green.", 40)],
        "events": [(1, "message"), (2, "done")],
        "facts": [("color", "green", "t1")],
    }
    assert w.rows("SELECT role, text FROM transcript ORDER BY id") == [
        ("user", "my colour?"), ("assistant", "Green.")
    ]
    assert w.rows("SELECT turn_id, name, result FROM tool_calls") == [("t1", "memory", "none")]
    assert w.sessions.wait_for(bool, "the writer's reply") == [Deliver("main", TurnStored("t1"))]


def test_cut_off_turn_is_closed_with_an_error_and_done(start_writer: Any) -> None:
    """A channel whose last turn stopped after its status frame gets error + done for that turn."""
    w = start_writer()
    w.ask(AppendFrames("main", (status("x1"),)))
    w.ask(CloseOpenExchange("main"))
    assert w.outbox.frames()[1:] == [
        {"type": "error", "seq": 2, "message": INTERRUPTED, "recoverable": True,
         "exchange_id": "x1", "metrics": None},
        {"type": "done", "seq": 3, "duration_ms": 0, "exchange_id": "x1"},
    ]
    w.ask(CloseOpenExchange("main"))  # closed now: a second request adds nothing
    assert w.rows("SELECT seq, type FROM events ORDER BY seq") == [
        (1, "status"), (2, "error"), (3, "done")
    ]


def test_finished_or_empty_channel_is_left_alone_when_closing(start_writer: Any) -> None:
    """A channel whose last turn ended with done, or that has no turns, gets no extra frames."""
    w = start_writer()
    w.ask(AppendFrames("main", (status("t1"),)))
    w.commit(record(), closing())
    w.ask(AppendFrames("main", (status(None),)))  # a frame outside any exchange comes last
    w.ask(CloseOpenExchange("main"))
    w.ask(CloseOpenExchange("phone"))
    assert seqs(w.outbox.frames()) == [(1, "status"), (2, "message"), (3, "done"),
                                       (4, "status")]
    assert w.outbox.frames("phone") == []
    assert w.rows("SELECT count(*) FROM events") == [(4,)]


@pytest.mark.allow_error_logs
def test_failed_commit_pushes_nothing_and_tells_the_session(start_writer: Any) -> None:
    """A turn the store refuses sends no frame, reports TurnStoreFailed, and keeps earlier rows."""
    w = start_writer()
    w.commit(record("t1", "Green."), closing("t1", "Green."))
    w.commit(record("t1", "Blue."), closing("t1", "Blue."))  # same id: refused
    assert seqs(w.outbox.frames()) == [(1, "message"), (2, "done")]
    replies = w.sessions.wait_for(lambda xs: len(xs) == 2, "two replies")
    assert replies == [
        Deliver("main", TurnStored("t1")),
        Deliver("main", TurnStoreFailed("t1", "UNIQUE constraint failed: turns.id")),
    ]
    assert w.rows("SELECT id, response_text FROM turns") == [("t1", "Green.")]
    assert w.rows("SELECT role, text FROM transcript ORDER BY id") == [
        ("user", "my colour?"), ("assistant", "Green.")
    ]
    assert w.rows("SELECT count(*) FROM events") == [(2,)]
    w.ask(AppendFrames("main", (status("t2"),)))  # the refused frames used up no seq
    assert seqs(w.outbox.frames())[-1] == (3, "status")


def test_login_session_is_written_when_asked(start_writer: Any) -> None:
    """CreateAuthSession answers True once the session row is stored."""
    w = start_writer()
    assert w.ask(CreateAuthSession("abc123", 1_700_000_000.0, 1_700_086_400.0)) is True
    assert w.rows("SELECT token_hash, created_at, expires_at FROM auth_sessions") == [
        ("abc123", 1_700_000_000.0, 1_700_086_400.0)
    ]


def test_response_time_is_stamped_when_the_turn_is_stored(start_writer: Any) -> None:
    """The client's response_time_s and duration_ms count the wait for the store, too."""
    w = start_writer()
    w.commit(record(), closing(), age_s=2.25)
    message, done = w.outbox.frames()
    assert message["metrics"]["response_time_s"] == 2.25
    assert done["duration_ms"] == 2250
    assert w.rows("SELECT response_time_s FROM turns") == [(2.25,)]


def test_frames_and_turns_queued_together_share_one_transaction(start_writer: Any) -> None:
    """Messages waiting behind a commit go into the next transaction together, in order."""
    w = start_writer()
    release, entered = threading.Event(), threading.Event()

    def hold_first_push(channel: str, frames: list[dict[str, Any]]) -> None:
        if not entered.is_set():
            entered.set()
            release.wait(WAIT_S)

    w.outbox.on_push = hold_first_push
    w.ref.tell(AppendFrames("main", (status("t0"),)))
    assert entered.wait(WAIT_S)
    w.ref.tell(AppendFrames("main", (status("t1"),)))
    w.ref.tell(CommitTurn(record("t1", "Green."), closing("t1", "Green."), w.clock.monotonic()))
    w.ref.tell(AppendFrames("phone", (status("p1"),)))
    release.set()
    w.ask(CloseOpenExchange("nobody"))  # handled after everything above
    assert seqs(w.outbox.frames()) == [(1, "status"), (2, "status"), (3, "message"), (4, "done")]
    assert seqs(w.outbox.frames("phone")) == [(1, "status")]
    sample = w.metrics.registry.get_sample_value
    assert sample("chalie_store_batch_messages_count") == 2
    assert sample("chalie_store_batch_messages_sum") == 4


def test_frames_for_away_from_the_page_are_queued_with_the_log(start_writer: Any) -> None:
    """Notifications, escalations and decisions of the person's channels are queued for the
    Delivery actor in the transaction that logs them; other frames and program channels'
    frames are not; the Delivery actor is nudged after the commit (absent here: nothing)."""
    w = start_writer()
    note = Notification(content="Rain at 5", source="dmn")
    w.ask(AppendFrames("main", (status(), note)))
    w.ask(AppendFrames("main", (Escalation(content="Send?", approval_id="a1", tool="t",
                                           args="{}", expires_in_s=60, exchange_id=None),
                                Decision(approval_id="a1", outcome="denied", by="page",
                                         tool="t", exchange_id=None))))
    w.ask(AppendFrames("token.app", (note,)))
    w.ask(AppendFrames("interface.i1", (note,)))
    assert w.rows("SELECT channel, seq, type FROM away_queue ORDER BY channel, seq") == [
        ("main", 2, "notification"), ("main", 3, "escalation"), ("main", 4, "decision")]
    [(body,)] = w.rows("SELECT frame FROM away_queue WHERE seq = 2")
    assert body == w.rows("SELECT body FROM events WHERE channel = 'main' AND seq = 2")[0][0]
