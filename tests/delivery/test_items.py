"""What a logged frame says away from the page: its kind by source, its text, the chat at that
message, and an escalation's answer buttons; a decision settles; other frames are not for away."""

from __future__ import annotations

import pytest

from chalie.delivery.items import MAX_BODY, Item, Settled, read
from chalie.frames import Decision, Escalation, Notification, Status, encode_frame

NOW = 1_700_000_000.0


def logged(frame: object, seq: int = 7) -> str:
    return encode_frame(frame, seq)  # type: ignore[arg-type]


@pytest.mark.parametrize(("source", "kind", "title"), [
    ("dmn", "notifications", "Chalie"),
    (None, "notifications", "Chalie"),
    ("goal", "goal_results", "Chalie · goal"),
    ("schedule", "scheduled_results", "Chalie · reminder"),
])
def test_a_notification_is_of_the_kind_its_source_says(source: str | None, kind: str,
                                                       title: str) -> None:
    item = read("main", logged(Notification(content="Rain at 5", source=source)), NOW)
    assert isinstance(item, Item)
    assert (item.kind, item.title, item.body) == (kind, title, "Rain at 5")
    assert (item.url, item.tag, item.seq, item.channel) == ("/#seq-7", "chalie-main-7", 7, "main")
    assert item.actions == ()
    assert item.payload() == {"kind": kind, "title": title, "body": "Rain at 5",
                              "url": "/#seq-7", "tag": "chalie-main-7", "channel": "main",
                              "seq": 7}


def test_a_programs_answer_names_the_program() -> None:
    item = read("main", logged(Notification(content="Moved to 3pm", source="interface",
                                            program="calendar")), NOW)
    assert isinstance(item, Item)
    assert (item.kind, item.title, item.program) == ("notifications", "Chalie · calendar",
                                                     "calendar")


def test_a_long_message_is_cut_for_a_push() -> None:
    item = read("main", logged(Notification(content="x" * 5000, source="dmn")), NOW)
    assert isinstance(item, Item)
    assert len(item.body) == MAX_BODY
    assert item.body.endswith("…")


def test_an_escalation_that_waits_has_approve_and_deny_until_it_expires() -> None:
    frame = Escalation(content="Delete the note?", approval_id="ap-1", tool="vault_delete",
                       args='{"id": 4}', expires_in_s=600, exchange_id=None,
                       why="another program's text asks for 'vault_delete'", held=True)
    item = read("main", logged(frame), NOW)
    assert isinstance(item, Item)
    assert item.kind == "escalations"
    assert item.title == "Chalie asks: vault_delete?"
    assert item.body.splitlines() == [
        "Delete the note?", "It asks because another program's text asks for 'vault_delete'.",
        'vault_delete {"id": 4}']
    assert (item.approval_id, item.expires_at, item.actions) == ("ap-1", NOW + 600,
                                                                 ("approve", "deny"))
    assert item.tag == "chalie-approval-ap-1"
    assert item.payload()["actions"] == ["approve", "deny"]
    assert item.payload()["approval_id"] == "ap-1"


def test_a_critics_check_asks_nothing() -> None:
    frame = Escalation(content="Check the e-mail it sent", approval_id="critic-c1",
                       tool="send_email", args="{}", expires_in_s=0, exchange_id="x")
    item = read("main", logged(frame), NOW)
    assert isinstance(item, Item)
    assert (item.actions, item.expires_at, item.title) == ((), None, "Chalie: check send_email")


def test_a_decision_settles_its_escalation_and_other_frames_are_not_for_away() -> None:
    decision = Decision(approval_id="ap-1", outcome="denied", by="page", tool="t",
                        exchange_id=None)
    assert read("main", logged(decision), NOW) == Settled(channel="main", approval_id="ap-1",
                                                          outcome="denied")
    assert read("main", logged(Status(stage="processing")), NOW) is None
    assert read("main", "not json", NOW) is None


def test_a_message_of_another_channel_opens_the_chat_page_itself() -> None:
    """The chat page shows the channel "main": a link to a message elsewhere opens the page."""
    item = read("work", logged(Notification(content="Done", source="dmn")), NOW)
    assert isinstance(item, Item)
    assert (item.url, item.tag) == ("/", "chalie-work-7")
