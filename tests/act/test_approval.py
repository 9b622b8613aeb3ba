"""Reading the person's answer to an escalation, in the documented form and the usual others."""

from __future__ import annotations

import pytest

from chalie.act.approval import Decision, read_decision


@pytest.mark.parametrize(
    ("skill", "params", "expected"),
    [
        ("approval", {"approval_id": "a1", "approve": True}, Decision("a1", True)),
        ("approval", {"approval_id": "a1", "approve": False}, Decision("a1", False)),
        ("approval", {"id": "a1", "approved": True}, Decision("a1", True)),
        ("approval", {"approval_id": "a1", "decision": "Deny"}, Decision("a1", False)),
        ("approval", {"approval_id": "a1", "decision": "allow"}, Decision("a1", True)),
        ("approve", {"approval_id": "a1"}, Decision("a1", True)),
        ("deny", {"id": "a1"}, Decision("a1", False)),
    ],
)
def test_answers_in_every_accepted_form_are_understood(
    skill: str, params: dict[str, object], expected: Decision
) -> None:
    """The documented params and the common variants all give the same decision."""
    assert read_decision(skill, params) == expected


@pytest.mark.parametrize(
    ("params", "missing"),
    [
        ({"approve": True}, "approval_id is missing"),
        ({"approval_id": 7, "approve": True}, "approval_id is missing"),
        ({"approval_id": "a1"}, "approve is missing"),
        ({"approval_id": "a1", "approve": "yes please"}, "approve is missing"),
        ({"approval_id": "a1", "decision": "maybe"}, "approve is missing"),
    ],
)
def test_an_unreadable_answer_says_what_is_missing_and_how_to_answer(
    params: dict[str, object], missing: str
) -> None:
    """A malformed answer names the missing field and shows the documented form."""
    message = read_decision("approval", params)
    assert isinstance(message, str)
    assert message.startswith(missing)
    assert '"skill": "approval"' in message
