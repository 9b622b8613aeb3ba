"""The Delivery actor on a real StoreWriter and store, moved by a ManualClock, with senders
faked at their seam (chalie/delivery/senders.py): each frame reaches each target once and is
recorded; a visible page skips it; quiet hours hold it (not a scheduled result); a failure is
tried again with back-off, then given up; a gone target is dropped; an answered escalation's
deliveries end, and a service that settles is told; a restarted actor resumes from the store."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pykka
import pytest

from chalie.actors.delivery import Delivery
from chalie.actors.delivery_messages import TargetsChanged
from chalie.actors.store_writer import StoreWriter
from chalie.actors.store_writer_messages import AppendFrames
from chalie.actors.supervisor import ChildSpec, Directory, Link, Supervisor
from chalie.background.attention import QuietHours
from chalie.config import Config
from chalie.delivery.away import Away
from chalie.delivery.items import Item
from chalie.delivery.senders import ALL_KINDS, Sent, Target
from chalie.frames import Decision, Escalation, Frame, Notification
from chalie.metrics import Metrics
from chalie.store import db
from tests.actors.conftest import WAIT_S, FakeOutbox, InlineExecutor, WatchedClock, query


@dataclass
class FakeSender:
    """A service at its seam: targets as set, outcomes scripted per target (default sent)."""

    name: str = "fake"
    kinds: frozenset[str] = ALL_KINDS
    keys: list[str] = field(default_factory=lambda: ["fake:a"])
    outcomes: dict[str, list[Sent]] = field(default_factory=dict)
    sent: list[tuple[str, Item]] = field(default_factory=list)
    settled_calls: list[tuple[str, str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def targets(self) -> list[Target]:
        return [Target(k, self.name, f"target {k}", self.kinds) for k in list(self.keys)]

    def send(self, target: Target, item: Item) -> Sent:
        with self.lock:
            self.sent.append((target.key, item))
            script = self.outcomes.get(target.key)
            return script.pop(0) if script else Sent("sent", ref=f"ref-{len(self.sent)}")

    def settled(self, target: Target, item: Item, ref: str, outcome: str) -> None:
        with self.lock:
            self.settled_calls.append((target.key, ref, outcome))


class Bench:
    def __init__(self, data: Path, clock: WatchedClock, metrics: Metrics, sender: FakeSender,
                 directory: Directory) -> None:
        self.data, self.clock, self.metrics, self.sender = data, clock, metrics, sender
        self.directory = directory
        self.visible = False
        self.quiet = QuietHours(None, ZoneInfo("UTC"))
        self.config: Config | None = None
        self.conversing: set[str] = set()  # exchanges the person holds in Telegram
        self.root: pykka.ActorRef[Any] | None = None

    def log(self, *frames: Frame, channel: str = "main") -> None:
        assert self.directory.tell("store_writer", AppendFrames(channel, tuple(frames)))

    def rows(self) -> list[dict[str, Any]]:
        names = ("seq", "kind", "target", "status", "attempts", "next_at", "last_error",
                 "approval_id", "ref")
        return [dict(zip(names, r, strict=True)) for r in query(
            self.data, f"SELECT {', '.join(names)} FROM deliveries ORDER BY created_at, seq, "
                       "target")]

    def wait(self, ready: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while not ready():
            if time.monotonic() > deadline:
                pytest.fail(f"gave up waiting for {what}; deliveries {self.rows()!r}")
            time.sleep(0.002)

    def wait_rows(self, ready: Callable[[list[dict[str, Any]]], bool], what: str) -> \
            list[dict[str, Any]]:
        self.wait(lambda: ready(self.rows()), what)
        return self.rows()

    def count(self, **labels: str) -> float:
        return self.metrics.registry.get_sample_value("chalie_notifications_sent_total",
                                                      labels) or 0.0

    def tell(self, message: Any) -> None:
        assert self.directory.tell("delivery", message)


@pytest.fixture
def bench(make_config: Any, clock: WatchedClock) -> Iterator[Callable[..., Bench]]:
    roots: list[pykka.ActorRef[Any]] = []

    def start(sender: FakeSender | None = None, config: Config | None = None,
              **notify: Any) -> Bench:
        config = config or make_config(notify={"retry_initial_s": 30.0, "retry_max_s": 120.0,
                                               "give_up_s": 600.0, **notify})
        assert config is not None
        metrics, directory = Metrics(), Directory()
        built = Bench(Path(config.store.path), clock, metrics, sender or FakeSender(), directory)
        built.config = config
        away = Away(senders=[built.sender], conversing=lambda e: e in built.conversing)
        db.open_writer(config.store.path, busy_timeout_ms=5000, synchronous="FULL").close()
        readers = db.Readers(db.db_path(config.store.path), busy_timeout_ms=5000)

        def start_writer(link: Link) -> pykka.ActorRef[Any]:
            return StoreWriter.start(link, config=config.store, outbox=FakeOutbox(), clock=clock,
                                     directory=directory, metrics=metrics)

        def start_delivery(link: Link) -> pykka.ActorRef[Any]:
            return Delivery.start(link, away=away, config=lambda: config,
                                  read=readers.get, clock=clock,
                                  directory=directory, metrics=metrics, pool=InlineExecutor(),
                                  visible=lambda: built.visible, quiet=lambda: built.quiet)

        root = Supervisor.start(None, name="root", config=config.supervisor, clock=clock,
                                directory=directory, metrics=metrics, children=(
                                    ChildSpec("store_writer", start_writer),
                                    ChildSpec("delivery", start_delivery)))
        roots.append(root)
        built.root = root
        built.wait(lambda: directory.get("delivery") is not None, "the delivery actor")
        return built

    yield start
    for root in roots:
        try:
            root.stop(block=True, timeout=WAIT_S)
        except pykka.ActorDeadError:
            pass


def note(text: str = "A thought", source: str | None = "dmn") -> Notification:
    return Notification(content=text, source=source)


def escalation(approval_id: str = "ap1", expires_in_s: float = 300.0,
               exchange_id: str | None = None) -> Escalation:
    return Escalation(content="Send the e-mail?", approval_id=approval_id, tool="send_email",
                      args='{"to": "x@example.com"}', expires_in_s=expires_in_s,
                      exchange_id=exchange_id, held=exchange_id is None)


def test_each_frame_reaches_each_target_once_and_is_recorded(bench: Any) -> None:
    b = bench(FakeSender(keys=["fake:a", "fake:b"]))
    b.log(note("first"), note("second", source="goal"))
    rows = b.wait_rows(lambda r: len(r) == 4 and all(x["status"] == "sent" for x in r),
                       "four sends")
    assert sorted((r["kind"], r["target"]) for r in rows) == [
        ("goal_results", "fake:a"), ("goal_results", "fake:b"),
        ("notifications", "fake:a"), ("notifications", "fake:b")]
    assert sorted((k, i.body) for k, i in b.sender.sent) == [
        ("fake:a", "first"), ("fake:a", "second"), ("fake:b", "first"), ("fake:b", "second")]
    assert b.count(channel="fake", kind="notifications", result="sent") == 2
    assert not query(b.data, "SELECT * FROM away_queue")


def test_kinds_a_target_does_not_take_are_not_delivered(bench: Any) -> None:
    b = bench(FakeSender(kinds=frozenset({"escalations"})))
    b.log(note(), escalation())
    rows = b.wait_rows(lambda r: len(r) == 1 and r[0]["status"] == "sent", "one send")
    assert rows[0]["kind"] == "escalations"
    (_key, item), = b.sender.sent
    assert item.actions == ("approve", "deny")
    assert item.approval_id == "ap1"
    b.wait(lambda: not query(b.data, "SELECT * FROM away_queue"), "the queue emptied")


def test_program_channels_are_not_delivered(bench: Any) -> None:
    b = bench()
    b.log(note("a token's"), channel="token.app")
    b.log(note("an interface's"), channel="interface.abc")
    b.log(note("the person's"))
    b.wait_rows(lambda r: len(r) == 1 and r[0]["status"] == "sent", "one delivery sent")
    assert [i.body for _, i in b.sender.sent] == ["the person's"]


def test_a_visible_page_skips_the_delivery(bench: Any) -> None:
    b = bench()
    b.visible = True
    b.log(note())
    rows = b.wait_rows(lambda r: len(r) == 1, "one delivery")
    assert rows[0]["status"] == "skipped"
    assert "visible" in rows[0]["last_error"]
    assert not b.sender.sent
    b.wait(lambda: b.count(channel="fake", kind="notifications", result="skipped") == 1,
           "the skip counted")


def test_a_visible_page_does_not_skip_when_the_person_chose_so(bench: Any) -> None:
    b = bench(skip_when_visible=False)
    b.visible = True
    b.log(note())
    b.wait_rows(lambda r: len(r) == 1 and r[0]["status"] == "sent", "sent")


def test_quiet_hours_hold_until_they_end_but_not_a_scheduled_result(bench: Any) -> None:
    b = bench()
    wall = b.clock.time()
    minute = int(wall // 60 % 1440)
    b.quiet = QuietHours(((minute - 1) % 1440, (minute + 60) % 1440), ZoneInfo("UTC"))
    b.log(note("a thought"), note("your reminder", source="schedule"))
    rows = b.wait_rows(lambda r: len(r) == 2 and {x["status"] for x in r} == {"held", "sent"},
                       "one held, one sent")
    held = next(r for r in rows if r["status"] == "held")
    assert held["kind"] == "notifications"
    assert held["next_at"] > wall
    assert [i.body for _, i in b.sender.sent] == ["your reminder"]
    b.clock.advance(held["next_at"] - wall + 1)
    b.wait_rows(lambda r: all(x["status"] == "sent" for x in r), "the held one sent")
    assert [i.body for _, i in b.sender.sent] == ["your reminder", "a thought"]


def test_a_failure_is_tried_again_with_back_off_then_given_up(bench: Any) -> None:
    failed = Sent("failed", "503 from the service")
    b = bench(FakeSender(outcomes={"fake:a": [failed, Sent("failed", "again", retry_after_s=90),
                                              failed, failed, failed, failed, failed]}))
    start = b.clock.time()
    b.log(note())
    row = b.wait_rows(lambda r: len(r) == 1 and r[0]["attempts"] == 1, "the first try")[0]
    assert row["status"] == "pending"
    assert row["next_at"] == pytest.approx(start + 30)
    assert row["last_error"] == "503 from the service"
    b.clock.advance(30)
    row = b.wait_rows(lambda r: r[0]["attempts"] == 2, "the second try")[0]
    assert row["next_at"] == pytest.approx(start + 30 + 90)  # the service's Retry-After
    while b.rows()[0]["status"] == "pending":
        attempts = b.rows()[0]["attempts"]
        b.clock.advance(b.rows()[0]["next_at"] - b.clock.time())
        b.wait(lambda a=attempts: b.rows()[0]["attempts"] > a  # type: ignore[misc]
               or b.rows()[0]["status"] != "pending", "another try")
    row = b.rows()[0]
    assert row["status"] == "failed"
    assert b.clock.time() - start >= 600
    assert b.count(channel="fake", kind="notifications", result="failed") == row["attempts"]
    assert b.count(channel="fake", kind="notifications", result="sent") == 0


def test_a_gone_target_is_dropped_with_its_other_deliveries(bench: Any) -> None:
    b = bench(FakeSender(outcomes={"fake:a": [Sent("gone", "410 Gone")]}))
    b.log(note("one"))
    rows = b.wait_rows(lambda r: len(r) == 1 and r[0]["status"] == "gone", "gone")
    assert rows[0]["last_error"] == "410 Gone"
    assert b.count(channel="fake", kind="notifications", result="gone") == 1


def test_an_answered_escalation_ends_its_deliveries_and_settles_what_was_sent(
        bench: Any) -> None:
    b = bench(FakeSender(keys=["fake:a", "fake:b"]))
    b.quiet = QuietHours((0, 0), ZoneInfo("UTC"))  # never quiet
    b.log(escalation())
    b.wait_rows(lambda r: len(r) == 2 and all(x["status"] == "sent" for x in r), "sent")
    b.log(Decision(approval_id="ap1", outcome="approved", by="page", tool="send_email",
                   exchange_id=None))
    deadline = time.monotonic() + WAIT_S
    while len(b.sender.settled_calls) < 2:
        assert time.monotonic() < deadline, "the senders were never told"
        time.sleep(0.002)
    assert sorted(c[0] for c in b.sender.settled_calls) == ["fake:a", "fake:b"]
    assert {c[2] for c in b.sender.settled_calls} == {"approved"}


def test_an_escalation_answered_before_it_is_sent_is_dropped(bench: Any) -> None:
    b = bench()
    wall = b.clock.time()
    minute = int(wall // 60 % 1440)
    b.quiet = QuietHours(((minute - 1) % 1440, (minute + 60) % 1440), ZoneInfo("UTC"))
    b.log(escalation())
    b.wait_rows(lambda r: len(r) == 1 and r[0]["status"] == "held", "held")
    b.log(Decision(approval_id="ap1", outcome="denied", by="page", tool="send_email",
                   exchange_id=None))
    rows = b.wait_rows(lambda r: r[0]["status"] == "dropped", "dropped")
    assert rows[0]["last_error"] == "answered"
    b.clock.advance(3700)  # quiet hours end: nothing of the escalation may go out
    b.log(note("later"))
    b.wait_rows(lambda r: len(r) == 2 and r[1]["status"] == "sent", "the later one sent")
    assert [i.body for _, i in b.sender.sent] == ["later"]


def test_an_escalation_not_sent_before_it_expires_is_dropped(bench: Any) -> None:
    b = bench()
    wall = b.clock.time()
    minute = int(wall // 60 % 1440)
    b.quiet = QuietHours(((minute - 1) % 1440, (minute + 60) % 1440), ZoneInfo("UTC"))
    b.log(escalation(expires_in_s=600))
    b.wait_rows(lambda r: len(r) == 1 and r[0]["status"] == "held", "held")
    b.clock.advance(3700)
    rows = b.wait_rows(lambda r: r[0]["status"] == "dropped", "dropped")
    assert "expired" in rows[0]["last_error"]
    assert not b.sender.sent


def test_a_removed_target_drops_its_open_deliveries(bench: Any) -> None:
    sender = FakeSender(outcomes={"fake:a": [Sent("failed", "down")]})
    b = bench(sender)
    b.log(note())
    b.wait_rows(lambda r: len(r) == 1 and r[0]["attempts"] == 1, "one failed try")
    sender.keys = []
    b.tell(TargetsChanged())
    rows = b.wait_rows(lambda r: r[0]["status"] == "dropped", "dropped")
    assert rows[0]["last_error"] == "the target was removed"


def test_a_restarted_delivery_resumes_from_the_store(bench: Any) -> None:
    sender = FakeSender(outcomes={"fake:a": [Sent("failed", "down")]})
    b = bench(sender)
    b.log(note())
    b.wait_rows(lambda r: len(r) == 1 and r[0]["attempts"] == 1, "one failed try")
    assert b.root is not None
    b.root.stop(block=True)
    conn = db.open_writer(str(b.data), busy_timeout_ms=5000, synchronous="FULL")
    with db.immediate(conn):  # a frame queued by a commit whose nudge never came
        conn.execute("INSERT INTO away_queue VALUES ('main', 99, 'notification', ?, 1.0)",
                     ('{"type":"notification","seq":99,"content":"queued","source":"dmn"}',))
    conn.close()
    again = bench(sender, config=b.config)
    again.wait_rows(lambda r: len(r) == 2 and r[1]["status"] == "sent", "the queue read")
    again.clock.advance(30)
    again.wait_rows(lambda r: r[0]["status"] == "sent", "the open one sent after the restart")
    assert [i.body for _, i in sender.sent] == ["A thought", "queued", "A thought"]


def test_an_escalation_of_a_turn_held_in_telegram_goes_nowhere_else(bench: Any) -> None:
    """The person talks in their Telegram chat: its turn's escalation is shown there, with
    buttons, by the bridge; no push or notification service repeats it."""
    b = bench()
    b.conversing.add("x-tg")
    b.log(escalation("ap-tg", exchange_id="x-tg"), escalation("ap-page", exchange_id="x-page"))
    rows = b.wait_rows(lambda r: len(r) == 1 and r[0]["status"] == "sent", "one send")
    assert rows[0]["approval_id"] == "ap-page"
    b.wait(lambda: not query(b.data, "SELECT * FROM away_queue"), "the queue emptied")
