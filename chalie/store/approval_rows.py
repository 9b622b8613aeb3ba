"""The person's consent in the store: tool calls held for their approval, and the tools they
always allow.

A call is held when it came from another program's words on a turn nobody watched (the
DMN's, a goal's, a scheduled prompt's, a program's message): it waits, shown to the person as
an `escalation` frame, until they approve it (it then runs), deny it, or it expires. An
allowance lets a tool that needs approval (danger `confirm`) run without asking, per program
and tool; it never lets a call that came from a program's words through.

Writes run on the StoreWriter's connection inside its transactions; reads on any reader.
"""

from __future__ import annotations

import apsw
import msgspec

HeldStatus = str  # waiting | approved | denied | expired


class HeldRow(msgspec.Struct, frozen=True):
    id: str
    channel: str  # the person's channel, where they are asked
    path: str  # the path whose turn asked: dmn, goal, scheduled, user (a program's message)
    tool: str  # the name the model called it by
    args: str  # the call's arguments, JSON
    reason: str  # why it needs the person: which program's words
    provider: str | None  # interface:<id>, mcp:<name>; None for an innate tool
    turn_id: str | None
    status: HeldStatus
    created_at: float
    expires_at: float
    decided_at: float | None = None
    decided_by: str | None = None
    ran_turn_id: str | None = None


class Allowance(msgspec.Struct, frozen=True):
    id: str
    provider: str  # interface:<id>, mcp:<name>, or "chalie" (an innate tool)
    tool: str  # the provider's own name for it
    shown_as: str  # the name the person saw when they allowed it
    created_at: float


_HELD = ", ".join(HeldRow.__struct_fields__)
_ALLOWANCE = ", ".join(Allowance.__struct_fields__)


# --- held calls -----------------------------------------------------------------------------

def hold(conn: apsw.Connection, row: HeldRow) -> None:
    conn.execute(f"INSERT INTO held_approvals ({_HELD}) VALUES "
                 f"({', '.join('?' for _ in HeldRow.__struct_fields__)})",
                 msgspec.structs.astuple(row))


def held(conn: apsw.Connection, approval_id: str) -> HeldRow | None:
    row = conn.execute(f"SELECT {_HELD} FROM held_approvals WHERE id = ?",
                       (approval_id,)).fetchone()
    return None if row is None else HeldRow(*row)


def resolve(conn: apsw.Connection, approval_id: str, status: HeldStatus, *, now: float,
            by: str | None, ran_turn_id: str | None = None) -> bool:
    """A waiting call is approved (and ran in `ran_turn_id`), denied or expired; False when it
    was no longer waiting."""
    conn.execute("UPDATE held_approvals SET status = ?, decided_at = ?, decided_by = ?, "
                 "ran_turn_id = ? WHERE id = ? AND status = 'waiting'",
                 (status, now, by, ran_turn_id, approval_id))
    return conn.changes() > 0


def listing(conn: apsw.Connection, *, limit: int, offset: int) -> list[HeldRow]:
    """Held calls, newest first."""
    return [HeldRow(*r) for r in conn.execute(
        f"SELECT {_HELD} FROM held_approvals ORDER BY created_at DESC, id LIMIT ? OFFSET ?",
        (limit, offset))]


# --- always allowed -------------------------------------------------------------------------

def allow(conn: apsw.Connection, row: Allowance) -> None:
    """Always allow a tool (a second allowance of the same tool keeps the first)."""
    conn.execute(f"INSERT OR IGNORE INTO tool_allowances ({_ALLOWANCE}) VALUES (?, ?, ?, ?, ?)",
                 msgspec.structs.astuple(row))


def revoke(conn: apsw.Connection, allowance_id: str) -> bool:
    conn.execute("DELETE FROM tool_allowances WHERE id = ?", (allowance_id,))
    return conn.changes() > 0


def revoke_provider(conn: apsw.Connection, provider: str) -> None:
    """An unpaired program's allowances go with it."""
    conn.execute("DELETE FROM tool_allowances WHERE provider = ?", (provider,))


def allowances(conn: apsw.Connection) -> list[Allowance]:
    """Every allowance, oldest first."""
    return [Allowance(*r) for r in conn.execute(
        f"SELECT {_ALLOWANCE} FROM tool_allowances ORDER BY created_at, id")]


def allowed(conn: apsw.Connection) -> frozenset[tuple[str, str]]:
    """(provider, tool) of every allowance: what the tool catalog lets run without asking."""
    return frozenset((str(p), str(t)) for p, t in conn.execute(
        "SELECT provider, tool FROM tool_allowances"))


