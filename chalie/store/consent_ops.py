"""The StoreWriter's ops of the person's consent (chalie/store/approval_rows.py): a call held
for their approval, their answer to it, a tool always allowed and an allowance revoked. They
travel with the background paths' ops (chalie/store/background_ops.py, which applies them
here) and with a turn's commit, so a call is held in the transaction that stores the turn that
asked for it, and an approved one is marked in the one that stores the turn it ran in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import apsw
import msgspec

from chalie.errors import StoreConflict
from chalie.frames import Decision, Escalation, Frame
from chalie.store import approval_rows
from chalie.store.approval_rows import Allowance, HeldRow


class HoldApproval(msgspec.Struct, frozen=True, tag=True):
    """A call held for the person's approval: stored, and a held `escalation` frame on its
    channel, saying `content`; `why`: which program's words it came from (None: its tool needs
    approval); `always`: "Always allow this tool" is offered (its tool needs approval)."""

    row: HeldRow
    content: str
    why: str | None = None
    always: bool = False


class ResolveHeld(msgspec.Struct, frozen=True, tag=True):
    """A held call was answered (approved: it ran in the turn this op is stored with; denied)
    or expired: a `decision` frame on its channel. Value: False when it was no longer
    waiting."""

    approval_id: str
    status: str
    by: str | None = None  # page | program


class AllowTool(msgspec.Struct, frozen=True, tag=True):
    """Always allow a tool (danger confirm: it runs without asking from now on)."""

    row: Allowance


class RevokeAllowance(msgspec.Struct, frozen=True, tag=True):
    """Value: False when there was no such allowance."""

    allowance_id: str


ConsentOp = HoldApproval | ResolveHeld | AllowTool | RevokeAllowance


@dataclass
class Done:
    """What a consent op gave: frames to log, the allowances when they changed, its value."""

    frames: list[tuple[str, Frame]] = field(default_factory=list)
    allowed: frozenset[tuple[str, str]] | None = None
    value: Any = None


def apply(conn: apsw.Connection, op: ConsentOp, *, turn_id: str | None, now: float) -> Done:
    done = Done()
    match op:
        case HoldApproval(row=held, content=content, why=why, always=always):
            approval_rows.hold(conn, msgspec.structs.replace(held,
                                                              turn_id=held.turn_id or turn_id))
            done.frames.append((held.channel, Escalation(
                content=content, approval_id=held.id, tool=held.tool, args=held.args,
                expires_in_s=round(held.expires_at - now), exchange_id=None, why=why,
                always=always, held=True)))
        case ResolveHeld(approval_id=approval_id, status=status, by=by):
            row = approval_rows.held(conn, approval_id)
            done.value = approval_rows.resolve(
                conn, approval_id, status, now=now, by=by,
                ran_turn_id=turn_id if status == "approved" else None)
            if status == "approved" and not done.value:  # its turn is not stored: it ran once
                raise StoreConflict(f"held approval {approval_id} was answered already")
            if done.value and row is not None:
                done.frames.append((row.channel, Decision(
                    approval_id=approval_id, outcome=status,  # type: ignore[arg-type]
                    by="page" if by == "page" else "program" if by else None, tool=row.tool,
                    exchange_id=None)))
        case AllowTool(row=allowance):
            approval_rows.allow(conn, allowance)
            done.allowed = approval_rows.allowed(conn)
        case RevokeAllowance(allowance_id=allowance_id):
            done.value = approval_rows.revoke(conn, allowance_id)
            done.allowed = approval_rows.allowed(conn)
    return done
