"""The background paths' writes, as data the StoreWriter applies in one transaction.

The DMN, the Scheduler, the Goals and the edge send tuples of these ops (`ApplyOps`, or a turn's
`extras` in CommitTurn, inside the turn's own savepoint), so that what must happen together
happens together: a scheduled run is marked done in the transaction that stores its turn and
its notification; a goal's step is checkpointed with the turn that did it and its `task` frame.
An op that finds the store changed under it raises StoreConflict, and nothing of its
transaction is stored. An op may give frames to log and push after the commit, and a value
for whoever asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import apsw
import msgspec

from chalie.frames import Frame, Notification, Task
from chalie.store import (
    cognition_rows,
    concept_rows,
    consent_ops,
    delivery_ops,
    goal_rows,
    image_rows,
    proactive_rows,
    schedule_rows,
    trait_rows,
)
from chalie.store.consent_ops import AllowTool, HoldApproval, ResolveHeld, RevokeAllowance
from chalie.store.goal_rows import StepRow
from chalie.store.proactive_rows import ProactiveRow
from chalie.store.schedule_rows import ScheduleRow
from chalie.values.cognition import Trait


class InsertImage(msgspec.Struct, frozen=True, tag=True):
    """An image the person uploaded (POST /api/images)."""

    image_id: str
    media_type: str
    data: bytes


class InsertSchedule(msgspec.Struct, frozen=True, tag=True):
    row: ScheduleRow


class CancelSchedule(msgspec.Struct, frozen=True, tag=True):
    """Value: the schedule's state before, or None when there is none."""

    schedule_id: str


class ScheduleRan(msgspec.Struct, frozen=True, tag=True):
    """With the run's turn: the run due at `due_at` happened, once."""

    schedule_id: str
    due_at: float
    outcome: str  # done | failed
    next_run: float | None
    error: str | None = None


class ScheduleMissed(msgspec.Struct, frozen=True, tag=True):
    schedule_id: str
    dues: tuple[float, ...]
    next_run: float | None


class InsertGoal(msgspec.Struct, frozen=True, tag=True):
    goal_id: str
    goal: str
    source: str  # person | tool | dmn


class CancelGoal(msgspec.Struct, frozen=True, tag=True):
    """Value: the goal's state before, or None when there is none. A goal that was active gets
    a `task` frame saying it is cancelled."""

    goal_id: str
    channel: str


class GoalState(msgspec.Struct, frozen=True, tag=True):
    """An active goal moves to `state` (one that is over: with why, goal_rows.END_REASONS);
    with a `task` frame on `channel`."""

    goal_id: str
    state: str
    channel: str
    error: str | None = None
    result: str | None = None
    end_reason: str | None = None


class SavePlan(msgspec.Struct, frozen=True, tag=True):
    """The goal's steps; mode plain: its one step is the goal itself, run without a plan
    because of `problems` (no confidence)."""

    goal_id: str
    steps: tuple[StepRow, ...]
    confidence: float | None
    channel: str
    mode: str = "plan"
    problems: tuple[str, ...] | None = None


class StepStatus(msgspec.Struct, frozen=True, tag=True):
    """One step is running, done or failed; with a `task` frame on `channel`."""

    goal_id: str
    step_id: str
    status: str
    channel: str
    result: str | None = None
    attempt: bool = False


class GoalSpent(msgspec.Struct, frozen=True, tag=True):
    """With a goal's turn (or plan): what it used."""

    goal_id: str
    iterations: int
    elapsed_s: float
    tokens: int


class PauseGoal(msgspec.Struct, frozen=True, tag=True):
    """The goal waits for budget until `until` (None: unknown); its `paused_at` is kept from
    the first of a run of pauses."""

    goal_id: str
    until: float | None
    channel: str


class ProgressTold(msgspec.Struct, frozen=True, tag=True):
    """With a goal's progress notification: the person heard of its progress now."""

    goal_id: str


class Proactive(msgspec.Struct, frozen=True, tag=True):
    """A proactive message as composed. `sent`: logged as a `notification` frame and the
    assistant's line in the channel's transcript, now; `deferred`: it waits; `suppressed`:
    only recorded."""

    row: ProactiveRow
    schedule_id: str | None = None
    goal_id: str | None = None


class DeliverDeferred(msgspec.Struct, frozen=True, tag=True):
    """Deliver the channel's deferred messages: those older than `max_age_s` are dropped.
    Value: (sent, dropped) counts by path."""

    channel: str
    max_age_s: float


class DmnRun(msgspec.Struct, frozen=True, tag=True):
    trigger: str
    at: float
    result: str
    fingerprint: str
    signals: tuple[str, ...] = ()  # the ids of the signals that woke a signal trigger


class Spend(msgspec.Struct, frozen=True, tag=True):
    """Tokens of a background job that is not a turn (an encoding, a plan)."""

    path: str
    tokens: int
    llm_calls: int
    ref: str | None = None


class TopicSeen(msgspec.Struct, frozen=True, tag=True):
    """A person's message joined a topic, or started it (chalie/cognition/topics.py)."""

    topic_id: str
    channel: str
    name: str
    new: bool
    keywords: tuple[str, ...]
    vector: bytes | None
    space_id: int | None
    fok: float


class SaveMind(msgspec.Struct, frozen=True, tag=True):
    """Where a channel's conversation stands (cognition_rows.STATE_FIELDS)."""

    channel: str
    values: dict[str, Any]


class SaveTraits(msgspec.Struct, frozen=True, tag=True):
    """The person's adaptive traits (chalie/cognition/traits.py), one set for every channel."""

    traits: dict[str, Trait]


class ConceptsActivated(msgspec.Struct, frozen=True, tag=True):
    """Spreading activation reached these concepts at `at` (their cooldown starts)."""

    concept_ids: tuple[int, ...]
    at: float


class DriftGist(msgspec.Struct, frozen=True, tag=True):
    """A DMN thought that was not sent: the next user turn on `channel` may see it until
    `expires_at`."""

    channel: str
    text: str
    concepts: tuple[str, ...]
    expires_at: float


Op = (
    InsertSchedule | CancelSchedule | ScheduleRan | ScheduleMissed | InsertGoal | CancelGoal
    | GoalState | SavePlan | StepStatus | GoalSpent | PauseGoal | ProgressTold | Proactive
    | DeliverDeferred | DmnRun | Spend | InsertImage | TopicSeen | SaveMind | SaveTraits
    | ConceptsActivated | DriftGist | HoldApproval | ResolveHeld | AllowTool | RevokeAllowance
    | delivery_ops.DeliveryOp
)


@dataclass
class Applied:
    """What a transaction's ops gave: frames to log (channel, frame) and each op's value."""

    frames: list[tuple[str, Frame]] = field(default_factory=list)
    values: list[Any] = field(default_factory=list)
    schedules_changed: bool = False
    goals_started: list[str] = field(default_factory=list)
    goals_stopped: list[str] = field(default_factory=list)
    delivered: list[tuple[str, str]] = field(default_factory=list)  # (path, sent | dropped)
    allowed: frozenset[tuple[str, str]] | None = None  # the allowances, when they changed


def apply(conn: apsw.Connection, ops: Sequence[Op], *, turn_id: str | None,
          now: float) -> Applied:
    """Apply `ops` in order inside the caller's transaction."""
    out = Applied()
    for op in ops:
        if isinstance(op, consent_ops.ConsentOp):
            out.values.append(_apply_consent(conn, op, turn_id, now, out))
        elif isinstance(op, delivery_ops.DeliveryOp):
            out.values.append(delivery_ops.apply(conn, op, now=now))
        else:
            out.values.append(_apply(conn, op, turn_id, now, out))
    return out


def _apply_cognition(conn: apsw.Connection, op: Op, now: float) -> bool:
    """Apply a cognition op (chalie/cognition); False when `op` is not one."""
    match op:
        case TopicSeen():
            cognition_rows.topic_seen(conn, topic_id=op.topic_id, channel=op.channel,
                                      name=op.name, new=op.new, keywords=op.keywords,
                                      vector=op.vector, space_id=op.space_id, fok=op.fok,
                                      now=now)
        case SaveMind(channel=channel, values=values):
            cognition_rows.save_state(conn, channel, values, now)
        case ConceptsActivated(concept_ids=ids, at=at):
            concept_rows.mark_activated(conn, ids, at)
        case DriftGist():
            concept_rows.add_gist(conn, op.channel, op.text, op.concepts, now=now,
                                  expires_at=op.expires_at)
        case SaveTraits(traits=traits):
            trait_rows.save(conn, traits)
        case _:
            return False
    return True


def _apply_consent(conn: apsw.Connection, op: consent_ops.ConsentOp, turn_id: str | None,
                   now: float, out: Applied) -> Any:
    done = consent_ops.apply(conn, op, turn_id=turn_id, now=now)
    out.frames.extend(done.frames)
    if done.allowed is not None:
        out.allowed = done.allowed
    return done.value


def _apply(conn: apsw.Connection, op: Op, turn_id: str | None, now: float,
           out: Applied) -> Any:
    if _apply_cognition(conn, op, now):
        return None
    match op:
        case InsertImage():
            image_rows.insert(conn, op.image_id, op.media_type, op.data, now)
        case InsertSchedule(row=row):
            schedule_rows.insert(conn, row)
            out.schedules_changed = True
        case CancelSchedule(schedule_id=schedule_id):
            out.schedules_changed = True
            return schedule_rows.cancel(conn, schedule_id)
        case ScheduleRan():
            schedule_rows.ran(conn, op.schedule_id, op.due_at, outcome=op.outcome,
                              next_run=op.next_run, turn_id=turn_id, now=now, error=op.error)
        case ScheduleMissed():
            schedule_rows.missed(conn, op.schedule_id, op.dues, next_run=op.next_run, now=now)
        case InsertGoal():
            goal_rows.insert(conn, op.goal_id, op.goal, source=op.source, turn_id=turn_id,
                             now=now)
            out.goals_started.append(op.goal_id)
        case CancelGoal(goal_id=goal_id, channel=channel):
            before = goal_rows.cancel(conn, goal_id, now)
            if before in goal_rows.ACTIVE:
                out.goals_stopped.append(goal_id)
                out.frames.append((channel, goal_task(conn, goal_id, "cancelled")))
            return before
        case GoalState():
            goal_rows.set_state(conn, op.goal_id, op.state, now=now, error=op.error,
                                result=op.result, end_reason=op.end_reason)
            out.frames.append((op.channel, goal_task(conn, op.goal_id, op.state,
                                                     error=op.error)))
        case SavePlan():
            goal_rows.save_plan(conn, op.goal_id, op.steps, confidence=op.confidence, now=now,
                                mode=op.mode, problems=op.problems)
            out.frames.append((op.channel, goal_task(conn, op.goal_id, "running")))
        case StepStatus():
            goal_rows.step_status(conn, op.goal_id, op.step_id, op.status, now=now,
                                  result=op.result, turn_id=turn_id, attempt=op.attempt)
            step = next(s for s in goal_rows.steps(conn, op.goal_id) if s.step_id == op.step_id)
            out.frames.append((op.channel, Task(
                goal_id=op.goal_id, step_id=op.step_id, status=op.status,
                coverage=goal_rows.coverage(conn, op.goal_id), title=step.description)))
        case GoalSpent():
            goal_rows.spent(conn, op.goal_id, iterations=op.iterations, elapsed_s=op.elapsed_s,
                            tokens=op.tokens, now=now)
        case PauseGoal(goal_id=goal_id, until=until, channel=channel):
            goal_rows.pause(conn, goal_id, until, now)
            if until is not None:
                out.frames.append((channel, goal_task(conn, goal_id, "paused")))
        case ProgressTold(goal_id=goal_id):
            goal_rows.progress_told(conn, goal_id, now)
        case Proactive(row=row):
            proactive_rows.insert(conn, row, turn_id=turn_id, now=now)
            if row.status == "sent":
                out.frames.append((row.channel, Notification(
                    content=row.content, topic=row.topic, source=_source(row.path),
                    schedule_id=op.schedule_id, goal_id=op.goal_id)))
                proactive_rows.said(conn, row.channel, turn_id, row.content, now)
        case DeliverDeferred(channel=channel, max_age_s=max_age):
            return _deliver(conn, channel, max_age, now, out)
        case DmnRun():
            proactive_rows.insert_dmn_run(conn, trigger=op.trigger, at=op.at, result=op.result,
                                          fingerprint=op.fingerprint, turn_id=turn_id,
                                          signals=op.signals)
        case Spend():
            proactive_rows.insert_spending(conn, path=op.path, tokens=op.tokens,
                                           llm_calls=op.llm_calls, at=now, ref=op.ref)
    return None


def goal_task(conn: apsw.Connection, goal_id: str, status: str, *,
              error: str | None = None) -> Task:
    """The goal-level `task` frame for a goal now in `status`."""
    row = goal_rows.get(conn, goal_id)
    return Task(goal_id=goal_id, status=status, coverage=goal_rows.coverage(conn, goal_id),
                title=row.goal if row else "", error=error)


def _source(path: str) -> str:
    return {"scheduled": "schedule"}.get(path, path)


def _deliver(conn: apsw.Connection, channel: str, max_age: float, now: float,
             out: Applied) -> tuple[int, int]:
    sent = dropped = 0
    for item in proactive_rows.deferred(conn, channel):
        if now - item.composed_at > max_age:
            proactive_rows.mark(conn, item.id, "dropped", now=now, reason="too_old")
            out.delivered.append((item.path, "dropped"))
            dropped += 1
            continue
        proactive_rows.mark(conn, item.id, "sent", now=now)
        out.frames.append((channel, Notification(
            content=item.content, topic=item.topic, source=_source(item.path),
            goal_id=item.ref if item.path == "goal" else None,
            schedule_id=item.ref if item.path == "scheduled" else None)))
        proactive_rows.said(conn, channel, item.turn_id, item.content, now)
        out.delivered.append((item.path, "sent"))
        sent += 1
    return sent, dropped
