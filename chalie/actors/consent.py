"""The person's consent, for the actors: calls held for their approval, always-allowed tools.

A call the turn driver holds (chalie/actors/driver.py: it came from another program's words, or
needs approval, on a turn the person was not watching) is stored with the turn that asked for
it, as a HoldApproval op, and reaches the person as a held `escalation` frame on their channel,
answerable until `act.held_approval_days` have passed (their answer: session_approvals.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from chalie.llm.types import ToolCall
from chalie.store.approval_rows import Allowance, HeldRow
from chalie.store.consent_ops import AllowTool, HoldApproval
from chalie.tools.base import ToolSource

DAY_S = 86_400.0
NEEDS_APPROVAL = "the tool needs your approval"


@dataclass(frozen=True)
class HeldCall:
    """A call the driver held: why (which program's words; None: the tool needs approval)."""

    call: ToolCall
    why: str | None


def content(sentence: str, why: str | None) -> str:
    """What an escalation asks the person, in words."""
    said = f" It came from another program's words: {why}." if why else ""
    return f"Chalie wants to go on with this: {sentence.rstrip('…')}.{said} Allow it?"


def held_ops(held: list[HeldCall], *, tools: ToolSource, channel: str, path: str, now: float,
             days: float, narrate: Callable[[str, object], str]) -> tuple[HoldApproval, ...]:
    """The turn's held calls as the ops that store them and ask the person on `channel`."""
    ops = []
    for item in held:
        call = item.call
        provider, _ = tools.identity(call.name)
        row = HeldRow(
            id=uuid.uuid4().hex, channel=channel, path=path, tool=call.name,
            args=call.raw_args or msgspec.json.encode(call.args or {}).decode(),
            reason=item.why or NEEDS_APPROVAL,
            provider=None if provider == "chalie" else provider, turn_id=None,
            status="waiting", created_at=now, expires_at=now + days * DAY_S)
        ops.append(HoldApproval(row, content(narrate(call.name, call.args), item.why),
                                why=item.why, always=tools.danger(call.name) == "confirm"))
    return tuple(ops)


def allowance(tools: ToolSource, name: str, now: float) -> AllowTool:
    """Always allow the tool the model calls `name`, from now on."""
    provider, own = tools.identity(name)
    return AllowTool(Allowance(uuid.uuid4().hex, provider, own, name, now))
