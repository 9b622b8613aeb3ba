"""Reading the person's answer to an escalation out of an `action` frame.

The documented form is {"skill": "approval", "params": {"approval_id": ID, "approve": true}},
with "always": true beside an approval to always allow the tool.
Clients that say it differently are understood too: skill "approve" or "deny" with the id, the
id as "id", or a "decision" of approve/allow/yes or deny/reject/no.
"""

from __future__ import annotations

from typing import Any

import msgspec

SKILLS = frozenset({"approval", "approve", "deny"})
_YES = frozenset({"approve", "approved", "allow", "yes"})
_NO = frozenset({"deny", "denied", "reject", "no"})
USAGE = ('answer an escalation with {"skill": "approval", "params": {"approval_id": "...", '
         '"approve": true or false}}')


class Decision(msgspec.Struct, frozen=True):
    approval_id: str
    approve: bool
    always: bool = False  # "Always allow this tool", beside an approval


def read_decision(skill: str, params: dict[str, Any]) -> Decision | str:
    """The decision, or a message saying what is missing."""
    approval_id = params.get("approval_id", params.get("id"))
    if not isinstance(approval_id, str) or not approval_id:
        return f"approval_id is missing: {USAGE}"
    always = params.get("always") is True
    if skill in ("approve", "deny"):
        return Decision(approval_id, skill == "approve", always and skill == "approve")
    approve = params.get("approve", params.get("approved"))
    if isinstance(approve, bool):
        return Decision(approval_id, approve, always and approve)
    decision = params.get("decision")
    if isinstance(decision, str) and decision.casefold() in _YES | _NO:
        yes = decision.casefold() in _YES
        return Decision(approval_id, yes, always and yes)
    return f"approve is missing: {USAGE}"
