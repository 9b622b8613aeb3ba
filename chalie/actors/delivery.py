"""Delivery: what Chalie tells the person reaches them away from the page.

The StoreWriter queues every `notification`, `escalation` and `decision` frame of the person's
channels in the transaction that logs it (chalie/store/delivery_rows.py), and nudges this actor
after the commit (AwayQueued). It reads the queue and, for each frame that makes an Item
(chalie/delivery/items.py), records one delivery per target that takes its kind: every Web Push
device, every Apprise URL and paired Telegram chat whose notify.kinds include it. In the same
transaction the frames leave the queue, so each is delivered to each target once, and a crash
between the commit and the delivery loses none.

A delivery is
- skipped while a page of the person's is open and visible (notify.skip_when_visible; a page
  says so with `presence` frames);
- held in quiet hours (dmn.quiet_hours), as proactive messages are, and sent when they end;
  a scheduled prompt's result is not held: the person chose its time;
- otherwise sent at once, on a worker pool (a send never holds up this mailbox, let alone a
  turn). A failed send is tried again after notify.retry_initial_s, doubling up to
  notify.retry_max_s (or after the service's Retry-After), and given up after
  notify.give_up_s; a target that is gone (a push service's 404 or 410) is removed.
An escalation's deliveries end when it is answered or expires (its `decision` frame): those not
sent yet are dropped, and a service that shows buttons (Telegram) shows the outcome instead.

Every outcome is recorded (GET /api/notify/log) and counted:
chalie_notifications_sent_total{channel, kind, result}. State that matters lives in the store:
a restarted Delivery reads the queue and the open deliveries again.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

import apsw
import msgspec
import structlog

from chalie.actors.delivery_messages import AwayQueued, TargetsChanged
from chalie.actors.store_writer_messages import ApplyOps, OpsApplied
from chalie.actors.supervisor import Directory, Link, SupervisedActor
from chalie.background.attention import QuietHours
from chalie.background.backoff import delay_after
from chalie.clock import Clock, Timer
from chalie.config import Config
from chalie.delivery import items
from chalie.delivery.away import Away
from chalie.delivery.items import Item, Settled
from chalie.delivery.senders import Chooses, Sender, Sent, Settles, Target
from chalie.metrics import Metrics
from chalie.store import delivery_rows
from chalie.store.delivery_ops import (
    CloseDeliveries,
    DeliveryTried,
    PruneDeliveries,
    RecordDeliveries,
    ReleaseHeld,
)
from chalie.store.delivery_rows import DeliveryRow

log = structlog.get_logger("chalie.delivery")

RETRY_QUEUE_S = 5.0  # the queue is read again this long after the store refused a record
PRUNE_EVERY_S = 6 * 3600.0
DAY_S = 86_400.0
_encode_item = msgspec.json.Encoder().encode
_decode_item = msgspec.json.Decoder(Item).decode


class _Tick(msgspec.Struct, frozen=True, tag=True):
    """The Delivery's own: a delivery may be due."""


class _Prune(msgspec.Struct, frozen=True, tag=True):
    """The Delivery's own: time to forget old deliveries."""


class _Sent(msgspec.Struct, frozen=True, tag=True):
    """A send's outcome, from the worker pool."""

    delivery_id: str
    outcome: str
    error: str | None
    ref: str | None
    retry_after_s: float | None


class Delivery(SupervisedActor):
    def __init__(self, link: Link | None, *, away: Away, config: Callable[[], Config],
                 read: Callable[[], apsw.Connection], clock: Clock, directory: Directory,
                 metrics: Metrics, pool: Executor, visible: Callable[[], bool],
                 quiet: Callable[[], QuietHours]) -> None:
        super().__init__(link)
        self._away = away
        self._config = config
        self._read = read
        self._clock = clock
        self._directory = directory
        self._metrics = metrics
        self._pool = pool
        self._visible = visible
        self._quiet = quiet
        self._open: dict[str, DeliveryRow] = {}  # pending and held, by id
        self._sending: set[str] = set()
        self._recording: dict[str, DeliveryRow] | None = None  # rows an ApplyOps stores now
        self._again = False  # the queue grew while a record was in flight
        self._timer: Timer | None = None
        self._timer_at: float | None = None
        self._prune_timer: Timer | None = None

    # -- life --

    def started(self) -> None:
        for row in delivery_rows.open_rows(self._read()):
            self._open[row.id] = row
        if self._open:
            log.info("deliveries_resumed", open=len(self._open))
        self._prune_timer = self._clock.call_later(60.0, lambda: self.tell_self(_Prune()))
        self._read_queue()
        self._due()

    def on_stop(self) -> None:
        for timer in (self._timer, self._prune_timer):
            if timer is not None:
                timer.cancel()

    def on_receive(self, message: Any) -> Any:
        with structlog.contextvars.bound_contextvars(actor="delivery"):
            match message:
                case AwayQueued():
                    self._read_queue()
                case OpsApplied(tag="record"):
                    self._recorded(message)
                case OpsApplied():
                    if message.error is not None:
                        log.warning("delivery_not_recorded", tag=message.tag,
                                    error=message.error)
                case _Sent():
                    self._sent(message)
                case _Tick():
                    self._timer, self._timer_at = None, None
                    self._due()
                case TargetsChanged():
                    self._targets_changed()
                case _Prune():
                    self._prune()
                case _:
                    log.warning("unexpected_message", message=type(message).__name__)

    # -- the queue --

    def _read_queue(self) -> None:
        if self._recording is not None:  # one record in flight at a time, in order
            self._again = True
            return
        queued = delivery_rows.queued(self._read())
        if not queued:
            return
        now = self._clock.time()
        config = self._config()
        targets = self._away.targets()
        rows: list[DeliveryRow] = []
        close: list[str] = []
        answered: set[str] = set()
        for q in queued:
            read = items.read(q.channel, q.frame, now)
            if isinstance(read, Settled):
                close += self._settle(read)
                answered.add(read.approval_id)
            elif read is not None:
                rows += self._rows_for(read, targets, config, now)
        rows = [msgspec.structs.replace(r, status="dropped", next_at=None, last_error="answered")
                if r.approval_id in answered and r.status in delivery_rows.OPEN else r
                for r in rows]
        ops: list[Any] = [RecordDeliveries(tuple(rows), tuple((q.channel, q.seq)
                                                             for q in queued))]
        if close:
            ops.append(CloseDeliveries(tuple(close), "dropped", "answered"))
        self._recording = {row.id: row for row in rows}
        self._again = len(queued) >= delivery_rows.MAX_QUEUE_READ
        if not self._directory.tell("store_writer", ApplyOps(tuple(ops), reply_to="delivery",
                                                             tag="record")):
            self._recording = None
            self._clock.call_later(RETRY_QUEUE_S, lambda: self.tell_self(AwayQueued()))

    def _rows_for(self, item: Item, targets: list[tuple[Sender, Target]], config: Config,
                  now: float) -> list[DeliveryRow]:
        """One delivery per target that takes the item, each in the state it starts in. An
        escalation of a turn the person holds in their Telegram chat is shown there only."""
        if item.kind == "escalations" and self._away.conversing(item.exchange_id):
            return []
        chosen = [(s, t) for s, t in targets if item.kind in t.kinds
                  and (not isinstance(s, Chooses) or s.wants(t, item))]
        if not chosen:
            return []
        status, note = "pending", None
        next_at: float | None = now
        if config.notify.skip_when_visible and self._visible():
            status, next_at, note = "skipped", None, "a page of the person's was visible"
        elif item.kind != "scheduled_results":
            quiet = self._quiet()
            if quiet.is_quiet(now):
                status, next_at, note = "held", quiet.ends_at(now), "quiet hours"
        payload = _encode_item(item).decode()
        return [DeliveryRow(
            id=uuid.uuid4().hex, channel=item.channel, seq=item.seq, kind=item.kind,
            service=target.service, target=target.key, target_name=target.name,
            title=item.title, body=item.body, payload=payload, approval_id=item.approval_id,
            exchange_id=item.exchange_id, status=status, attempts=0, next_at=next_at,
            expires_at=item.expires_at, last_error=note, created_at=now, updated_at=now,
        ) for _, target in chosen]

    def _recorded(self, m: OpsApplied) -> None:
        recording, self._recording = self._recording or {}, None
        if m.error is not None:
            log.warning("deliveries_not_recorded", error=m.error, rows=len(recording))
            self._clock.call_later(RETRY_QUEUE_S, lambda: self.tell_self(AwayQueued()))
            return
        for delivery_id in m.values[0]:
            row = recording[delivery_id]
            if row.status == "skipped":
                self._count(row, "skipped")
            elif row.status in delivery_rows.OPEN:
                self._open[row.id] = row
        if self._again:
            self._again = False
            self._read_queue()
        self._due()

    def _settle(self, settled: Settled) -> list[str]:
        """An escalation was answered or ended: its open deliveries (returned) are dropped;
        those a service shows buttons for are shown the outcome."""
        self._open = {i: r for i, r in self._open.items()
                      if r.approval_id != settled.approval_id or i in self._sending}
        rows = delivery_rows.of_approval(self._read(), settled.approval_id)
        for row in rows:
            if row.status != "sent" or row.ref is None:
                continue
            found = self._target(row.target)
            sender = found[0] if found is not None else None
            if found is not None and isinstance(sender, Settles):
                self._pool.submit(_settled, sender, found[1], _decode_item(row.payload),
                                  row.ref, settled.outcome)
        return [row.id for row in rows if row.status in delivery_rows.OPEN]

    # -- sending --

    def _due(self) -> None:
        now = self._clock.time()
        quiet = self._quiet()
        expired, released = [], []
        soonest: float | None = None
        for delivery_id in list(self._open):
            row = self._open[delivery_id]
            if delivery_id in self._sending:
                continue
            if row.expires_at is not None and now >= row.expires_at:
                expired.append(delivery_id)
                del self._open[delivery_id]
                continue
            if row.status == "held":
                if quiet.is_quiet(now) and row.kind != "scheduled_results":
                    end = quiet.ends_at(now)
                    if end is not None:
                        soonest = end if soonest is None else min(soonest, end)
                    continue
                released.append(delivery_id)
                row = self._open[delivery_id] = msgspec.structs.replace(
                    row, status="pending", next_at=now)
            if row.next_at is not None and row.next_at > now:
                soonest = row.next_at if soonest is None else min(soonest, row.next_at)
                continue
            self._send(row)
        ops: list[Any] = []
        if expired:
            ops.append(CloseDeliveries(tuple(expired), "dropped", "expired before it was sent"))
        if released:
            ops.append(ReleaseHeld(tuple(released)))
        if ops:
            self._directory.tell("store_writer", ApplyOps(tuple(ops), reply_to="delivery",
                                                          tag="due"))
        self._arm(soonest)

    def _send(self, row: DeliveryRow) -> None:
        found = self._target(row.target)
        if found is None:
            del self._open[row.id]
            self._directory.tell("store_writer", ApplyOps(
                (CloseDeliveries((row.id,), "dropped", "the target was removed"),),
                reply_to="delivery", tag="gone-target"))
            return
        sender, target = found
        self._sending.add(row.id)
        item = _decode_item(row.payload)
        future = self._pool.submit(_send, sender, target, item)
        future.add_done_callback(lambda f: self.tell_self(_outcome(row.id, f)))

    def _sent(self, m: _Sent) -> None:
        self._sending.discard(m.delivery_id)
        row = self._open.get(m.delivery_id)
        if row is None:
            return
        now = self._clock.time()
        push_id = row.target.removeprefix("push:") if row.target.startswith("push:") else None
        notify = self._config().notify
        status, next_at = m.outcome, None
        if m.outcome == "failed":
            log.warning("delivery_failed", service=row.service, target=row.target_name,
                        kind=row.kind, attempt=row.attempts + 1, error=m.error)
            if now - row.created_at < notify.give_up_s:
                delay = delay_after(row.attempts + 1, notify.retry_initial_s,
                                    notify.retry_max_s)
                status, next_at = "pending", now + max(delay, m.retry_after_s or 0.0)
        self._count(row, m.outcome)
        if status == "pending":
            self._open[row.id] = msgspec.structs.replace(
                row, attempts=row.attempts + 1, next_at=next_at, last_error=m.error)
        else:
            del self._open[row.id]
            if m.outcome == "gone":  # the store drops its other open deliveries too
                log.info("delivery_target_gone", service=row.service, target=row.target_name)
                self._open = {i: r for i, r in self._open.items() if r.target != row.target}
        self._directory.tell("store_writer", ApplyOps((DeliveryTried(
            row.id, status, error=m.error, next_at=next_at, ref=m.ref, push_id=push_id),),
            reply_to="delivery", tag="tried"))
        self._due()

    def _target(self, key: str) -> tuple[Sender, Target] | None:
        return next(((s, t) for s, t in self._away.targets() if t.key == key), None)

    def _arm(self, at: float | None) -> None:
        if at is None or (self._timer_at is not None and self._timer_at <= at):
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        self._timer = self._clock.call_at(at, lambda: self.tell_self(_Tick()))

    # -- upkeep --

    def _targets_changed(self) -> None:
        keys = {t.key for _, t in self._away.targets()}
        gone = [i for i, r in self._open.items() if r.target not in keys
                and i not in self._sending]
        for delivery_id in gone:
            del self._open[delivery_id]
        if gone:
            self._directory.tell("store_writer", ApplyOps(
                (CloseDeliveries(tuple(gone), "dropped", "the target was removed"),),
                reply_to="delivery", tag="targets"))

    def _prune(self) -> None:
        before = self._clock.time() - self._config().notify.log_days * DAY_S
        self._directory.tell("store_writer", ApplyOps((PruneDeliveries(before),),
                                                      reply_to="delivery", tag="prune"))
        self._prune_timer = self._clock.call_later(PRUNE_EVERY_S,
                                                   lambda: self.tell_self(_Prune()))

    def _count(self, row: DeliveryRow, result: str) -> None:
        self._metrics.notifications_sent.labels(channel=row.service, kind=row.kind,
                                                result=result).inc()


def _send(sender: Sender, target: Target, item: Item) -> Sent:
    """On a worker: one send (a sender that raises after all is a failed send)."""
    try:
        return sender.send(target, item)
    except Exception as e:  # a sender's bug must not lose the delivery
        log.exception("sender_raised", sender=sender.name)
        return Sent("failed", f"{type(e).__name__}: {e}")


def _settled(sender: Settles, target: Target, item: Item, ref: str, outcome: str) -> None:
    try:
        sender.settled(target, item, ref, outcome)
    except Exception:
        log.exception("settle_failed", target=target.name)


def _outcome(delivery_id: str, future: Any) -> _Sent:
    try:
        sent: Sent = future.result()
    except BaseException as e:  # cancelled at shutdown: the delivery stays open in the store
        sent = Sent("failed", f"not sent: {type(e).__name__}")
    return _Sent(delivery_id, sent.outcome, sent.error, sent.ref, sent.retry_after_s)
