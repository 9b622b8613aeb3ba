"""Notification services from outside: the real server with notify.urls set to Apprise's
json:// URL of a real webhook on 127.0.0.1 (a stdlib HTTP server), a stub model and a paired
program. Each kind reaches the hook once, as it happens: a program's message's answer (a
notification), the call it asked for held for the person (an escalation), a goal's result and
a scheduled prompt's answer; GET /api/notify/log shows each sent, and the URL's password is in
no log line. A hook that fails is tried again after notify.retry_initial_s: the log shows the
failure, then the message sent, and the metric counts both."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.delivery.test_apprise_sender import Hook
from tests.integration.harness import ServerProcess, StubLlm, completion, wait_for
from tests.integration.stub_interface import (
    StubInterface,
    bearer_client,
    capability,
    cookie_client,
    pair,
    serving,
)

ALL_KINDS = ["notifications", "escalations", "goal_results", "scheduled_results"]
TOKEN = "Kx81zQ-integration-hook-secret"
CANCEL = capability("cancel_appointment", "Cancel an appointment", id=("string", True))
CANCEL_CALL = ("cancel_appointment", json.dumps({"id": "apt_12345"}))
ANSWER = "The hospital asked me to cancel; I asked you."
GOAL_RESULT = "Two tickets for Saturday morning are booked."
REMINDER = "Time to call mum."


@pytest.fixture
def hook() -> Iterator[Hook]:
    found = Hook()
    yield found
    found.close()


def in_seconds(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat()


def notify_log(server: ServerProcess, cookie: str) -> list[dict[str, Any]]:
    with cookie_client(server.url, cookie) as http:
        answer = http.get("/api/notify/log")
    assert answer.status_code == 200, answer.text
    items: list[dict[str, Any]] = answer.json()["items"]
    return items


def sent_metric(server: ServerProcess, **labels: str) -> float:
    """chalie_notifications_sent_total with these labels, from GET /metrics (0 when absent)."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in httpx.get(f"{server.url}/metrics").text.splitlines():
        key, _, value = line.rpartition(" ")
        if key == f"chalie_notifications_sent_total{{{want}}}":
            return float(value)
    return 0.0


def with_message(text: str) -> Any:
    return lambda r: text in str(r.body.get("message"))


def test_each_kind_reaches_the_hook_once_and_the_log_shows_it_sent(
    tmp_path: Path, llm: StubLlm, hook: Hook,
) -> None:
    """A program's message: its answer (notification) and the call it asked for, held for the
    person (escalation, a warning that says it waits in the page); then a goal's result and a
    scheduled prompt's answer: four POSTs, one per kind, each sent in the log to the URL's
    masked name; the password reached the hook and no log line."""
    url = hook.url(auth=f"chalie:{TOKEN}@")
    masked = f"json://chalie:****@127.0.0.1:{hook.port}/hook"
    stub = StubInterface([CANCEL], name="hospital")
    with serving(tmp_path, llm, notify={"urls": [url], "kinds": ALL_KINDS}) as server:
        cookie = server.login()
        _, token = pair(server.url, cookie, stub, name="hospital")
        llm.queue(completion(tool_calls=[CANCEL_CALL]), completion(ANSWER))
        with bearer_client(server.url, token) as http:
            r = http.post("/api/messages", json={
                "text": "Please call cancel_appointment with {\"id\": \"apt_12345\"} now"})
            assert r.status_code == 202, r.text
        [answered] = hook.wait_for(1, with_message(ANSWER))
        [asked] = hook.wait_for(1, lambda r: r.body.get("type") == "warning")
        assert "cancel_appointment" in asked.body["title"]
        assert asked.body["message"].endswith("It waits for your answer in Chalie's page.")
        assert answered.body["type"] == "info"

        llm.queue(completion(GOAL_RESULT))
        with cookie_client(server.url, cookie) as http:
            assert http.post("/api/goals", json={"goal": "Get museum tickets"}).status_code == 201
        hook.wait_for(1, with_message(GOAL_RESULT))
        llm.queue(completion(REMINDER))
        with cookie_client(server.url, cookie) as http:
            r = http.post("/api/schedules", json={"prompt": "Remind me to call mum",
                                                  "at": in_seconds(1)})
            assert r.status_code == 201, r.text
        hook.wait_for(1, with_message(REMINDER))

        wait_for(lambda: len(notify_log(server, cookie)) == 4
                 and all(i["status"] == "sent" for i in notify_log(server, cookie)))
        items = notify_log(server, cookie)
        assert sorted(i["kind"] for i in items) == sorted(ALL_KINDS)
        assert {(i["service"], i["target_name"], i["attempts"]) for i in items} == {
            ("json", masked, 1)}
        assert [i["kind"] for i in items][:2] == ["scheduled_results", "goal_results"]
        assert len(hook.received) == 4
        assert all(r.authorization is not None for r in hook.received)
        for kind in ALL_KINDS:
            assert sent_metric(server, channel="json", kind=kind, result="sent") == 1
    assert [line for line in server.lines if TOKEN in line] == []
    stub.stop()


def test_a_failing_hook_is_tried_again_and_the_log_shows_the_failure_then_the_send(
    tmp_path: Path, llm: StubLlm, hook: Hook,
) -> None:
    """The hook answers 500 to a scheduled prompt's answer: the log shows it waiting for its
    next try, with the error and when; after notify.retry_initial_s it is sent, attempted
    twice; the metric counts one failure and one send."""
    hook.statuses = [500]
    with serving(tmp_path, llm, notify={"urls": [hook.url()], "kinds": ALL_KINDS,
                                        "retry_initial_s": 1.0}) as server:
        cookie = server.login()
        llm.queue(completion(REMINDER))
        with cookie_client(server.url, cookie) as http:
            r = http.post("/api/schedules", json={"prompt": "Remind me to call mum",
                                                  "at": in_seconds(1)})
            assert r.status_code == 201, r.text
        hook.wait_for(1)
        hook.hold = threading.Event()  # the retry waits in the hook while the log is read

        def retrying() -> bool:
            items = notify_log(server, cookie)
            return bool(items) and items[0]["attempts"] == 1 and items[0]["status"] == "pending"

        wait_for(retrying)
        [waiting] = notify_log(server, cookie)
        assert "error=500" in waiting["last_error"]
        assert waiting["next_at"] > waiting["created_at"]
        assert waiting["sent_at"] is None
        hook.hold.set()
        hook.wait_for(2)
        wait_for(lambda: notify_log(server, cookie)[0]["status"] == "sent")
        [sent] = notify_log(server, cookie)
        assert (sent["kind"], sent["attempts"], sent["last_error"]) == (
            "scheduled_results", 2, None)
        assert sent["sent_at"] is not None
        assert [r.body["message"] for r in hook.received] == [REMINDER, REMINDER]
        assert sent_metric(server, channel="json", kind="scheduled_results",
                           result="failed") == 1
        assert sent_metric(server, channel="json", kind="scheduled_results",
                           result="sent") == 1
