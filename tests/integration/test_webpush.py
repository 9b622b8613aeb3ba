"""Web Push end to end: the real server as a subprocess, a stub LLM and a push service stand-in
on 127.0.0.1 that verifies each push's VAPID JWT and decrypts it with the device's keys
(tests/push_service.py). A device subscribes; a scheduled prompt's answer arrives there while
no page is open; a device its push service says is gone (410) is removed; a push service that
fails (500) shows on the device as failures and the last error. The key pair is made on the
first start, kept across restarts, and written back from the store when its file is lost."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.harness import WAIT_S, ServerProcess, StubLlm, completion, db_rows, wait_for
from tests.push_service import PushService, make_subscription


@pytest.fixture
def service() -> Iterator[PushService]:
    stand_in = PushService()
    yield stand_in
    stand_in.close()


@pytest.fixture
def http(server: ServerProcess, cookie: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, cookies={"chalie_session": cookie},
                      timeout=WAIT_S) as client:
        yield client


def in_seconds(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat()


def subscribe(http: httpx.Client, service: PushService, name: str) -> dict[str, Any]:
    """A device at the stand-in, bound to the server's VAPID key, subscribed over REST."""
    key = http.get("/api/push/key")
    assert key.status_code == 200, key.text
    body, _, _ = make_subscription(service, name, key.json()["public_key"])
    r = http.post("/api/push/subscriptions", json={**body, "name": name})
    assert r.status_code == 201, r.text
    made: dict[str, Any] = r.json()
    return made


def schedule(http: httpx.Client, llm: StubLlm, answer: str) -> None:
    """A prompt due a moment from now, which the stub LLM answers with `answer`."""
    llm.queue(completion(answer))
    r = http.post("/api/schedules", json={"prompt": "Remind me to call mum",
                                          "at": in_seconds(1)})
    assert r.status_code == 201, r.text


def device(http: httpx.Client, sub_id: str) -> dict[str, Any] | None:
    items = http.get("/api/push/subscriptions").json()["items"]
    return next((d for d in items if d["id"] == sub_id), None)


def sent_total(server: ServerProcess, **labels: str) -> float:
    """chalie_notifications_sent_total with these labels, from GET /metrics (0 when absent)."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in httpx.get(f"{server.url}/metrics").text.splitlines():
        key, _, value = line.rpartition(" ")
        if key == f"chalie_notifications_sent_total{{{want}}}":
            return float(value)
    return 0.0


def test_a_scheduled_answer_arrives_as_a_push_while_no_page_is_open(
        server: ServerProcess, llm: StubLlm, http: httpx.Client, service: PushService) -> None:
    """The push verifies (VAPID signed by the server's key, for the stand-in's origin) and
    decrypts to the answer's payload; the device shows when it was last sent to; the metric
    counts it."""
    made = subscribe(http, service, "phone")
    schedule(http, llm, "Time to call mum.")
    (push,) = service.wait_pushes("phone")
    assert service.failures == []
    assert push.status == 201
    assert push.payload == {"kind": "scheduled_results", "title": "Chalie · reminder",
                            "body": "Time to call mum.", "url": push.payload["url"],
                            "tag": push.payload["tag"], "channel": "main",
                            "seq": push.payload["seq"]}
    assert push.payload["url"] == f"/#seq-{push.payload['seq']}"
    assert push.vapid_key == http.get("/api/push/key").json()["public_key"]
    wait_for(lambda: (device(http, made["id"]) or {}).get("last_sent_at") is not None)
    shown = device(http, made["id"])
    assert shown is not None
    assert (shown["failures"], shown["last_error"], shown["retry_at"]) == (0, None, None)
    wait_for(lambda: sent_total(server, channel="webpush", kind="scheduled_results",
                                result="sent") == 1)


def test_a_device_its_push_service_says_is_gone_is_removed(
        server: ServerProcess, llm: StubLlm, http: httpx.Client, service: PushService) -> None:
    """410 Gone: the subscription is removed, and the delivery recorded as gone."""
    made = subscribe(http, service, "old-phone")
    service.answer("old-phone", 410)
    schedule(http, llm, "Time to call mum.")
    service.wait_pushes("old-phone")
    wait_for(lambda: device(http, made["id"]) is None)
    assert service.failures == []
    wait_for(lambda: db_rows(server.db_path, "SELECT status FROM deliveries WHERE target = ?",
                             f"push:{made['id']}") == [("gone",)])


def test_a_failing_push_service_shows_on_the_device(
        server: ServerProcess, llm: StubLlm, http: httpx.Client, service: PushService) -> None:
    """500: the device stays, with its run of failures, the last error (the endpoint's origin,
    never its secret path) and when the next try is due."""
    made = subscribe(http, service, "flaky")
    service.answer("flaky", 500, body="push service down")
    schedule(http, llm, "Time to call mum.")
    service.wait_pushes("flaky")
    wait_for(lambda: (device(http, made["id"]) or {}).get("failures", 0) >= 1)
    shown = device(http, made["id"])
    assert shown is not None
    assert shown["last_error"] == (f"{service.origin}/… answered 500 Internal Server Error: "
                                   "push service down")
    assert shown["retry_at"] is not None
    assert shown["last_sent_at"] is None
    assert service.failures == []


def test_the_test_button_reaches_the_device(http: httpx.Client, service: PushService) -> None:
    made = subscribe(http, service, "phone")
    r = http.post(f"/api/push/subscriptions/{made['id']}/test")
    assert (r.status_code, r.json()) == (200, {"result": "sent", "error": None})
    (push,) = service.delivered("phone")
    assert push.payload["test"] is True
    assert service.failures == []


def test_the_key_pair_is_made_once_kept_private_and_restored_from_the_store(
        tmp_path: Path, llm: StubLlm) -> None:
    """First start: vapid_private.pem (0600) and the store's row. A restart keeps the key; a
    start without the file (a backup restored elsewhere) writes it back from the store."""
    key_file = tmp_path / "data" / "vapid_private.pem"
    keys = []
    for lose_the_file in (False, False, True):
        if lose_the_file:
            key_file.unlink()
        server = ServerProcess(tmp_path, llm).start()
        try:
            with httpx.Client(base_url=server.url, timeout=WAIT_S,
                              cookies={"chalie_session": server.login()}) as http:
                keys.append(http.get("/api/push/key").json()["public_key"])
            assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
            assert db_rows(server.db_path, "SELECT public_key FROM vapid_keys") == [
                (keys[-1],)]
        finally:
            assert server.stop() == 0
            assert server.errors() == []
    assert len(set(keys)) == 1
