"""The person's answer to an escalation, for their Session (chalie/actors/session.py).

An escalation of the running turn is answered in it (chalie/actors/driver_approvals.py). Any
other is a call held for them (chalie/actors/consent.py), found in the store: a denial is
recorded at once, and an expired one is marked so; an approval runs the call as an action turn
of theirs (client id "held-<id>", so it is started once), marked approved in the transaction
that stores that turn, so it runs at most once. "Always" beside an approval also allows the
tool from then on, when the escalation offered it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from chalie.act.approval import read_decision
from chalie.actors.consent import allowance
from chalie.actors.driver import TurnDriver
from chalie.actors.session_deps import SessionDeps
from chalie.actors.session_messages import ActionRequest
from chalie.store import approval_rows
from chalie.store.background_ops import Op
from chalie.store.consent_ops import ResolveHeld


def answer(request: ActionRequest, driver: TurnDriver, deps: SessionDeps) -> Answered:
    """The person's answer to an escalation (an `approval` action): the running turn's, or a
    held call's."""
    decision = read_decision(request.skill, request.params)
    if isinstance(decision, str):
        return Answered(error=decision)
    by: Literal["page", "program"] = "page" if request.via == "page" else "program"
    now, monotonic = deps.clock.time(), deps.clock.monotonic()
    tools = deps.tools
    pending = driver.pending(decision.approval_id)
    if pending is not None:
        ops = (allowance(tools, pending.call.name, now),) \
            if decision.approve and decision.always and pending.always else ()
        driver.answer_approval(decision.approval_id, decision.approve, by=by)
        return Answered(ops=ops)
    row = approval_rows.held(deps.read(), decision.approval_id)
    if row is None:
        return Answered(error=f"no approval {decision.approval_id!r} is waiting (it may have "
                              "expired or been answered)")
    if row.status != "waiting":
        return Answered(error=f"approval {row.id!r} was {row.status} already")
    if now >= row.expires_at:
        return Answered(ops=(ResolveHeld(row.id, "expired"),),
                        error=f"approval {row.id!r} expired before it was answered")
    if not decision.approve:
        return Answered(ops=(ResolveHeld(row.id, "denied", by),))
    ops = (allowance(tools, row.tool, now),) \
        if decision.always and tools.danger(row.tool) == "confirm" else ()
    run = ActionRequest(skill=row.tool, params=_decode_args(row.args), received_at=monotonic,
                        client_id=f"held-{row.id}", via=by, held_id=row.id)
    return Answered(ops=ops, run=run)


@dataclass(frozen=True)
class Answered:
    """What answering an escalation asks of the Session: ops for the StoreWriter, a held
    call's action turn to run, an error frame's words."""

    ops: tuple[Op, ...] = ()
    run: ActionRequest | None = None
    error: str | None = None


def _decode_args(raw: str) -> dict[str, Any]:
    try:
        args = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return {}
    return args if isinstance(args, dict) else {}
