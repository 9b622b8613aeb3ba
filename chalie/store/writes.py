"""Write helpers for the StoreWriter; each runs inside the caller's transaction."""

from __future__ import annotations

from collections.abc import Sequence

import apsw

from chalie.store import background_ops, delivery_rows, memory_writes, proactive_rows
from chalie.store import effects as fx
from chalie.store.background_ops import Applied, Op
from chalie.store.effects import Effect, ForgetFact, Recalled, RememberFact
from chalie.store.records import ProgramLine, StoredCompaction, TurnRecord
from chalie.store.schedule_rows import ScheduleRow


def insert_turn(conn: apsw.Connection, t: TurnRecord, extras: Sequence[Op] = (), *,
                channel: str | None = None) -> Applied:
    """Store a turn whole: its row, tool calls, steering, compactions, transcript lines, its
    effects, its snapshots, and `extras` (a background path's own writes). Returns what the
    effects and extras gave (frames to log, actors to tell). `channel`: where a goal's or a
    schedule's frames go (the person's channel), when the turn's effects make any."""
    conn.execute(
        "INSERT INTO turns (id, channel, client_id, source, user_text, response_text, outcome, "
        "error, iterations, llm_calls, tokens_total, response_time_s, started_at, finished_at, "
        "path) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (t.id, t.channel, t.client_id, t.source, t.user_text, t.response_text, t.outcome,
         t.error, t.iterations, t.llm_calls, t.tokens_total, t.response_time_s, t.started_at,
         t.finished_at, t.path),
    )
    conn.executemany(
        "INSERT INTO tool_calls (turn_id, position, iteration, call_id, name, args, result, "
        "is_error, duration_ms, approval, ran) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(t.id, i, c.iteration, c.call_id, c.name, c.args, c.result, int(c.is_error),
          c.duration_ms, c.approval, int(c.ran)) for i, c in enumerate(t.tool_calls)],
    )
    conn.executemany(
        "INSERT INTO steering (turn_id, position, text, after_iteration) VALUES (?, ?, ?, ?)",
        [(t.id, i, s.text, s.after_iteration) for i, s in enumerate(t.steering)],
    )
    for c in t.compactions:
        insert_compaction(conn, t.id, t.channel, c)
    if t.program is not None:
        _program_lines(conn, t, t.program)
    elif t.path == "user":
        memory_writes.add_transcript(conn, t.channel, t.id, role="user", text=t.user_text,
                                     at=t.started_at)
        if t.response_text:
            memory_writes.add_transcript(conn, t.channel, t.id, role="assistant",
                                         text=t.response_text, at=t.finished_at)
    ops: list[Op] = []
    for effect in t.effects:
        op = apply_effect(conn, effect, turn_id=t.id, now=t.finished_at,
                          channel=channel or t.channel)
        if op is not None:
            ops.append(op)
    memory_writes.insert_snapshots(conn, t.id, t.snapshots)
    if not ops and not extras:
        return Applied()
    return background_ops.apply(conn, (*ops, *extras), turn_id=t.id, now=t.finished_at)


def _program_lines(conn: apsw.Connection, t: TurnRecord, line: ProgramLine) -> None:
    """A program's message and the answer the person was told, in their channel's
    transcript: the next turn's history shows them, and recall finds them."""
    memory_writes.add_transcript(conn, line.channel, t.id, role="program", text=line.text,
                                 at=t.started_at, speaker=line.program)
    if t.response_text:
        memory_writes.add_transcript(conn, line.channel, t.id, role="assistant",
                                     text=t.response_text, at=t.finished_at)


def insert_compaction(conn: apsw.Connection, turn_id: str, channel: str,
                      c: StoredCompaction) -> None:
    conn.execute(
        "INSERT INTO compactions (turn_id, channel, stage, tokens_before, tokens_after, "
        "tokens_used, summary, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (turn_id, channel, c.stage, c.tokens_before, c.tokens_after, c.tokens_used, c.summary,
         c.created_at),
    )


def insert_checkpoint(conn: apsw.Connection, channel: str, text: str, *,
                      upto_transcript_id: int, turn_id: str | None, now: float) -> None:
    conn.execute(
        "INSERT INTO checkpoints (channel, text, upto_transcript_id, turn_id, created_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (channel, text, upto_transcript_id, turn_id, now),
    )


def apply_effect(conn: apsw.Connection, effect: Effect, *, turn_id: str, now: float,
                 channel: str = "main") -> Op | None:
    """Apply a memory effect now; return the op that stands for a schedule or goal effect
    (applied with the turn's extras, so the actors concerned are told after the commit)."""
    match effect:
        case RememberFact() | ForgetFact():
            memory_writes.apply_fact(conn, effect, turn_id=turn_id, now=now)
        case Recalled(mkeys=keys):
            memory_writes.record_recalls(conn, keys, now)
        case fx.OpenLoop(text=text, source=source):
            proactive_rows.open_loop(conn, text, source=source, turn_id=turn_id, now=now)
        case fx.CloseLoop(loop_id=loop_id):
            proactive_rows.close_loop(conn, loop_id, now)
        case fx.CreateSchedule():
            return background_ops.InsertSchedule(ScheduleRow(
                id=effect.id, prompt=effect.prompt, timezone=effect.timezone, at=effect.at,
                cron=effect.cron, next_run=effect.next_run, last_run=None, state="active",
                source=effect.source, turn_id=turn_id, created_at=now))
        case fx.CancelSchedule(id=schedule_id):
            return background_ops.CancelSchedule(schedule_id)
        case fx.StartGoal(id=goal_id, goal=goal, source=source):
            return background_ops.InsertGoal(goal_id, goal, source)
        case fx.CancelGoal(id=goal_id):
            return background_ops.CancelGoal(goal_id, channel)
    return None


def prune_events(conn: apsw.Connection, channel: str, *, keep_after: int) -> None:
    """Drop the channel's frames with seq <= keep_after (the oldest beyond what resume keeps)."""
    conn.execute("DELETE FROM events WHERE channel = ? AND seq <= ?", (channel, keep_after))


def insert_events(
    conn: apsw.Connection, channel: str, rows: list[tuple[int, str, str | None, str]], now: float
) -> None:
    """rows: (seq, type, exchange_id, body). Those for away from the page are queued for the
    Delivery actor in the same transaction (chalie/store/delivery_rows.py)."""
    conn.executemany(
        "INSERT INTO events (channel, seq, type, exchange_id, body, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        [(channel, seq, kind, exchange, body, now) for seq, kind, exchange, body in rows],
    )
    delivery_rows.queue(conn, channel, ((seq, kind, body) for seq, kind, _, body in rows), now)
