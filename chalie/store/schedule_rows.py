"""Scheduled prompts in the store: the schedules, and each due time's run or miss.

Writes run on the StoreWriter's connection inside its transactions; reads on any reader.
"""

from __future__ import annotations

import apsw
import msgspec

from chalie.errors import StoreConflict

STATES = ("active", "done", "missed", "cancelled")


class ScheduleRow(msgspec.Struct, frozen=True):
    id: str
    prompt: str
    timezone: str
    at: float | None
    cron: str | None
    next_run: float | None
    last_run: float | None
    state: str
    source: str
    turn_id: str | None
    created_at: float


_COLUMNS = ("id, prompt, timezone, at, cron, next_run, last_run, state, source, turn_id, "
            "created_at")


def _row(r: tuple[object, ...]) -> ScheduleRow:
    return msgspec.convert(dict(zip(ScheduleRow.__struct_fields__, r, strict=True)),
                           ScheduleRow)


def insert(conn: apsw.Connection, row: ScheduleRow) -> None:
    conn.execute(
        f"INSERT INTO schedules ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (row.id, row.prompt, row.timezone, row.at, row.cron, row.next_run, row.last_run,
         row.state, row.source, row.turn_id, row.created_at),
    )


def cancel(conn: apsw.Connection, schedule_id: str) -> str | None:
    """Cancel a schedule; its state before (None when there is no such schedule). Only an
    active schedule changes."""
    row = conn.execute("SELECT state FROM schedules WHERE id = ?", (schedule_id,)).fetchone()
    if row is None:
        return None
    conn.execute("UPDATE schedules SET state = 'cancelled', next_run = NULL "
                 "WHERE id = ? AND state = 'active'", (schedule_id,))
    return str(row[0])


def ran(conn: apsw.Connection, schedule_id: str, due_at: float, *, outcome: str,
        next_run: float | None, turn_id: str | None, now: float, error: str | None) -> None:
    """The run due at `due_at` happened (done or failed): recorded once, and the schedule moves
    on to `next_run` (none: it is done). A second record of the same due time is a StoreConflict,
    so the transaction that would have stored the run twice is rolled back."""
    try:
        conn.execute(
            "INSERT INTO schedule_runs (schedule_id, due_at, outcome, turn_id, ran_at, error) "
            "VALUES (?, ?, ?, ?, ?, ?)", (schedule_id, due_at, outcome, turn_id, now, error))
    except apsw.ConstraintError:
        raise StoreConflict(f"the run of schedule {schedule_id} due at {due_at} is stored "
                       "already") from None
    conn.execute(
        "UPDATE schedules SET last_run = ?, next_run = ?, state = CASE WHEN ? IS NULL "
        "THEN 'done' ELSE 'active' END WHERE id = ? AND state = 'active'",
        (due_at, next_run, next_run, schedule_id))


def missed(conn: apsw.Connection, schedule_id: str, dues: tuple[float, ...], *,
           next_run: float | None, now: float) -> None:
    """Due times that passed while the server was down, recorded as missed; the schedule moves
    on to `next_run` (none: a one-shot that was missed)."""
    conn.executemany(
        "INSERT OR IGNORE INTO schedule_runs (schedule_id, due_at, outcome, ran_at) "
        "VALUES (?, ?, 'missed', ?)", [(schedule_id, due, now) for due in dues])
    conn.execute(
        "UPDATE schedules SET next_run = ?, state = CASE WHEN ? IS NULL THEN 'missed' "
        "ELSE 'active' END WHERE id = ? AND state = 'active'",
        (next_run, next_run, schedule_id))


def get(conn: apsw.Connection, schedule_id: str) -> ScheduleRow | None:
    r = conn.execute(f"SELECT {_COLUMNS} FROM schedules WHERE id = ?",
                     (schedule_id,)).fetchone()
    return None if r is None else _row(r)


def active(conn: apsw.Connection) -> list[ScheduleRow]:
    """Every schedule that will run again, soonest first."""
    return [_row(r) for r in conn.execute(
        f"SELECT {_COLUMNS} FROM schedules WHERE state = 'active' AND next_run IS NOT NULL "
        "ORDER BY next_run")]


def listing(conn: apsw.Connection, *, state: str | None, limit: int,
            offset: int) -> list[ScheduleRow]:
    """Schedules, active ones soonest first, then the rest newest first."""
    where, params = ("WHERE state = ?", [state]) if state else ("", [])
    return [_row(r) for r in conn.execute(
        f"SELECT {_COLUMNS} FROM schedules {where} ORDER BY state != 'active', "
        "coalesce(next_run, 0), created_at DESC, id LIMIT ? OFFSET ?",
        (*params, limit, offset))]


def runs(conn: apsw.Connection, schedule_id: str, limit: int) -> list[dict[str, object]]:
    """The schedule's latest runs and misses, newest first."""
    return [{"due_at": due, "outcome": outcome, "turn_id": turn_id, "ran_at": ran_at,
             "error": error}
            for due, outcome, turn_id, ran_at, error in conn.execute(
                "SELECT due_at, outcome, turn_id, ran_at, error FROM schedule_runs "
                "WHERE schedule_id = ? ORDER BY due_at DESC LIMIT ?", (schedule_id, limit))]


def has_run(conn: apsw.Connection, schedule_id: str, due_at: float) -> bool:
    return conn.execute("SELECT 1 FROM schedule_runs WHERE schedule_id = ? AND due_at = ?",
                        (schedule_id, due_at)).fetchone() is not None
