"""Scheduler: scheduled prompts run when they are due, each exactly once.

It keeps one timer, for the soonest due schedule. A due prompt runs an ACT loop (prompts/
scheduled.md, with the person's identity, Current State, history and what recall finds; without
the `schedule` and `goal` tools, so a scheduled prompt cannot schedule or start anything) and
its answer reaches the person as a `notification`. The run is marked done in the transaction
that stores its turn and its notification, keyed by (schedule, due time): a run stored once is
never stored again, and a run cut off by a crash was never stored, so it runs at the next start.
At start, runs missed while the server was down run once if the latest is at most
`scheduler.catch_up_s` old; the others are recorded as missed. Runs go one at a time.

A run whose LLM call fails still notifies the person with the prompt itself (outcome failed).
When the scheduled path's budget is used up, due runs wait until it frees room. Prompts the
person set (REST, their own turn) are sent on time, never capped or deferred; reminders the DMN
set itself go through Attention like any proactive message.
"""

from __future__ import annotations

from typing import Any

import msgspec
import structlog

from chalie.actors.background_messages import SchedulesChanged
from chalie.actors.driver_deps import Ending
from chalie.actors.path import PathActor, PathDeps
from chalie.actors.store_writer_messages import ApplyOps, OpsApplied
from chalie.actors.supervisor import Link
from chalie.actors.turn_messages import TurnStored, TurnStoreFailed
from chalie.background import schedules
from chalie.background.schedules import Spec
from chalie.clock import Timer
from chalie.config import SchedulerConfig
from chalie.store import schedule_rows
from chalie.store.background_ops import Proactive, ScheduleMissed, ScheduleRan
from chalie.store.proactive_rows import ProactiveRow
from chalie.store.schedule_rows import ScheduleRow
from chalie.tools.view import ToolView

log = structlog.get_logger("chalie.scheduler")

EXCLUDED_TOOLS = ("schedule", "goal")
MISSED_KEPT = 100  # missed due times recorded per schedule at one start (the newest)
FALLBACK = "Reminder: {prompt}"


class _Tick(msgspec.Struct, frozen=True, tag=True):
    """The Scheduler's own: a schedule may be due."""


def spec_of(row: ScheduleRow) -> Spec:
    return Spec(prompt=row.prompt, timezone=row.timezone, at=row.at, cron=row.cron)


class Scheduler(PathActor):
    path = "scheduled"

    def __init__(self, link: Link | None, *, deps: PathDeps, config: SchedulerConfig) -> None:
        super().__init__(link, deps=deps, tools=ToolView(deps.catalog, deny=EXCLUDED_TOOLS))
        self._config = config
        self._queue: list[tuple[float, str]] = []  # (due time, schedule id), soonest first
        self._running: tuple[ScheduleRow, float] | None = None
        self._storing: str | None = None  # the turn id being stored
        self._timer: Timer | None = None  # the next due time
        self._pause_timer: Timer | None = None  # the budget frees room
        self._paused = False
        self._ready = False  # missed runs are recorded (or there were none)

    def started(self) -> None:
        missed = self._catch_up()
        if missed:  # arm once they are stored, so no missed time is taken for a due one
            self._to_writer(ApplyOps(missed, reply_to="scheduler", tag="catch_up"))
        else:
            self._start_arming()

    def on_stop(self) -> None:
        for timer in (self._timer, self._pause_timer):
            if timer is not None:
                timer.cancel()

    def on_receive(self, message: Any) -> Any:
        with structlog.contextvars.bound_contextvars(actor="scheduler"):
            match message:
                case OpsApplied(tag="catch_up", error=error):
                    if error is not None:
                        log.error("missed_runs_not_stored", error=error)
                    self._start_arming()
                case _Resume():
                    self._pause_timer = None
                    self._paused = False
                    self._arm()
                case _Tick() | SchedulesChanged():
                    self._arm()
                case TurnStored(turn_id=tid) | TurnStoreFailed(turn_id=tid) if \
                        tid == self._storing:
                    self._stored(message)
                case _:
                    self.turn_message(message)

    # -- what is due --

    def _catch_up(self) -> tuple[ScheduleMissed, ...]:
        """At start: runs missed while the server was down. The latest, if recent enough, runs
        once (it stays due); the others are recorded as missed."""
        d = self._deps
        now = d.clock.time()
        ops: list[ScheduleMissed] = []
        for row in schedule_rows.active(d.read()):
            if row.next_run is None or row.next_run > now:
                continue
            spec = spec_of(row)
            dues = schedules.occurrences(spec, row.next_run, now, MISSED_KEPT + 1)
            if not dues:
                continue
            latest = dues[-1]
            run_latest = now - latest <= self._config.catch_up_s
            missed = tuple(dues[:-1] if run_latest else dues)
            if missed:
                next_run = latest if run_latest else schedules.next_after(spec, now)
                ops.append(ScheduleMissed(row.id, missed, next_run))
                d.metrics.schedule_runs.labels(outcome="missed").inc(len(missed))
                log.warning("schedule_runs_missed", schedule_id=row.id, missed=len(missed),
                            running_latest=run_latest)
        return tuple(ops)

    def _start_arming(self) -> None:
        self._ready = True
        self._arm()
        log.info("scheduler_ready", active=len(schedule_rows.active(self._deps.read())),
                 due=len(self._queue) + (self._running is not None))

    def _arm(self) -> None:
        """Queue what is due now; set the timer for the next; run the first in the queue."""
        if not self._ready:
            return
        d = self._deps
        now = d.clock.time()
        rows = schedule_rows.active(d.read())
        queued = {sid for _, sid in self._queue}
        running = self._running[0].id if self._running else None
        soonest: float | None = None
        for row in rows:
            if row.next_run is None or row.id in queued or row.id == running:
                continue
            if row.next_run <= now:
                self._queue.append((row.next_run, row.id))
            elif soonest is None or row.next_run < soonest:
                soonest = row.next_run
        self._queue.sort()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if soonest is not None:
            self._timer = d.clock.call_at(soonest, lambda: self.tell_self(_Tick()))
        self._next()

    def _next(self) -> None:
        if self._running is not None or self._storing is not None or self._paused:
            return
        d = self._deps
        while self._queue:
            due_at, schedule_id = self._queue[0]
            row = schedule_rows.get(d.read(), schedule_id)
            if row is None or row.state != "active" or row.next_run != due_at or \
                    schedule_rows.has_run(d.read(), schedule_id, due_at):
                self._queue.pop(0)  # cancelled, or moved on, since it was queued
                continue
            if not d.governor.has_room(self.path):
                self._pause()
                return
            self._queue.pop(0)
            self._start(row, due_at)
            return

    def _pause(self) -> None:
        """The path used its budget: due runs wait until it frees room."""
        d = self._deps
        self._paused = True
        frees = d.governor.frees_at(self.path)
        d.metrics.schedule_runs.labels(outcome="paused").inc()
        log.warning("schedule_runs_paused", waiting=len(self._queue),
                    frees_in_s=round(frees - d.clock.time(), 1))
        if self._pause_timer is not None:
            self._pause_timer.cancel()
            self._pause_timer = None
        if frees != float("inf"):
            self._pause_timer = d.clock.call_at(frees, lambda: self.tell_self(_Resume()))

    # -- a run --

    def _start(self, row: ScheduleRow, due_at: float) -> None:
        d = self._deps
        self._running = (row, due_at)
        zone = row.timezone
        turn = self.new_turn(
            text=row.prompt, template="scheduled",
            extra={"prompt": row.prompt, "due": schedules.iso(due_at, zone),
                   "created": schedules.iso(row.created_at, zone)},
            max_iterations=self._config.max_iterations, timeout_s=self._config.timeout_s,
            request=(row.id, due_at), asked=row.prompt if row.source != "dmn" else None,
        )
        log.info("schedule_run_started", schedule_id=row.id, due_at=due_at, turn_id=turn.id,
                 late_s=round(d.clock.time() - due_at, 3))
        self._driver.begin(turn)
        self.gather_context(turn, d.channel)

    def turn_ended(self, ending: Ending) -> None:
        assert self._running is not None
        row, due_at = self._running
        d = self._deps
        if ending.paused:  # out of budget mid-run: stored for its tokens; it stays due
            self._storing = ending.turn.id
            self.commit(ending, (), reply_to="scheduler")
            self._queue.insert(0, (due_at, row.id))
            self._pause()
            return
        spec = spec_of(row)
        next_run = schedules.next_after(spec, max(due_at, d.clock.time()))
        answered = ending.outcome == "answered" and bool(ending.text)
        outcome = "done" if answered else "failed"
        content = ending.text if answered and ending.text else FALLBACK.format(prompt=row.prompt)
        if row.source == "dmn":  # a reminder Chalie set itself: attention decides
            status, reason = d.attention.decide(capped=True)
        else:
            status, reason = "sent", None
        proactive = ProactiveRow(path="scheduled", channel=d.channel, content=content,
                                 status=status, capped=row.source == "dmn",
                                 composed_at=d.clock.time(), ref=row.id, reason=reason)
        error = None if answered else (ending.error or "no answer")
        self._storing = ending.turn.id
        self.commit(ending, (ScheduleRan(row.id, due_at, outcome, next_run, error),
                             Proactive(proactive, schedule_id=row.id)), reply_to="scheduler")
        d.metrics.schedule_runs.labels(outcome=outcome).inc()
        if status == "suppressed":
            d.metrics.proactive_suppressed.labels(reason=reason or "cap").inc()
        else:
            d.metrics.proactive.labels(path="scheduled", result=status).inc()
        log.info("schedule_run_finished", schedule_id=row.id, due_at=due_at, outcome=outcome,
                 delivery=status, next_run=next_run, error=error)

    def _stored(self, message: TurnStored | TurnStoreFailed) -> None:
        self._storing = None
        self._running = None
        if isinstance(message, TurnStoreFailed):
            log.warning("schedule_run_not_stored", error=message.error)
        self._arm()


class _Resume(msgspec.Struct, frozen=True, tag=True):
    """The Scheduler's own: the budget may have room again."""
