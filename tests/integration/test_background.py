"""Chalie on its own, as a client sees it: the real server, a stub LLM on loopback, small
intervals set by config and environment. The DMN thinks when idle and not again while nothing
changes; a signal makes it think again; quiet hours hold its message until the person
connects; the daily cap holds. A one-shot schedule notifies once, also across kill -9 and a
restart. A three-step goal reports `task` frames and, killed during step 2, resumes there. A
goal whose plans always fail the checks finishes by the plain loop; an exhausted budget pauses
a goal, and the metric says so."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from chalie.store import db, memory_writes
from chalie.store.memory_writes import EpisodeRow
from tests.integration.harness import (
    WAIT_S,
    Client,
    Reply,
    ServerProcess,
    StubLlm,
    completion,
    db_rows,
    wait_for,
)

PLAN = {"steps": [
    {"id": "s1", "description": "Find the three cheapest flights to Lisbon in May",
     "depends_on": []},
    {"id": "s2", "description": "Compare their departure times and baggage allowances",
     "depends_on": ["s1"]},
    {"id": "s3", "description": "Write a short recommendation with the prices for the person",
     "depends_on": ["s2"]},
], "confidence": 0.9}
QUIET_NEVER = {"enabled": True, "quiet_hours": "", "timezone": "UTC"}


def seed_episode(workdir: Path, gist: str = "Booked Luigi's for Friday at 8pm") -> None:
    """An episode in the store before the server starts, as the Encoder would have left it."""
    conn = db.open_writer(workdir / "data", busy_timeout_ms=5000, synchronous="FULL")
    try:
        with db.immediate(conn):
            memory_writes.insert_episodes(conn, "main", [EpisodeRow(
                gist=gist, intent="dinner", outcome="booked", entities=("Luigi's",),
                open_loops=(), salience=0.9, valence=0.5, transcript_from=1, transcript_to=2,
                happened_at=datetime.now(UTC).timestamp() - 600)],
                upto_transcript_id=0, encoding_id="seed", now=datetime.now(UTC).timestamp())
    finally:
        conn.close()


def metric(server: ServerProcess, name: str, **labels: str) -> float:
    """One sample from GET /metrics (0 when absent)."""
    with httpx.Client() as http:
        text = http.get(f"{server.url}/metrics").text
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        if key == (f"{name}{{{want}}}" if want else name):
            return float(value)
    return 0.0


_clients: list[httpx.Client] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _clients:
        _clients.pop().close()


def api(server: ServerProcess, cookie: str) -> httpx.Client:
    """A REST client with the person's cookie (closed after the test)."""
    client = httpx.Client(base_url=server.url, cookies={"chalie_session": cookie},
                          timeout=WAIT_S)
    _clients.append(client)
    return client


def until_type(client: Client, kind: str) -> dict[str, Any]:
    frames = client.recv_until(lambda f: f["type"] == kind)
    return frames[-1]


def in_seconds(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat()


def logged(server: ServerProcess, event: str) -> list[dict[str, Any]]:
    return [e for e in server.log_events() if e.get("event") == event]


# --- the DMN ------------------------------------------------------------------------------

def test_the_idle_trigger_fires_once_and_a_new_signal_makes_the_next_cadence_call(
    tmp_path: Path, llm: StubLlm,
) -> None:
    """Idle for dmn.idle_s (set by environment): one call. Cadence triggers then skip without
    a call while nothing changes; a signal arrives and the next one calls, seeing it."""
    seed_episode(tmp_path)
    llm.queue(completion("NOTHING"), completion("NOTHING"))
    server = ServerProcess(
        tmp_path, llm, env={"CHALIE_DMN__IDLE_S": "1", "CHALIE_DMN__CADENCE_S": "0.3"},
        dmn={**QUIET_NEVER, "boot_delay_s": 1.5}).start()
    try:
        wait_for(lambda: len(llm.requests) == 1)
        first = llm.requests[0]["messages"][1]["content"]
        assert "has sent nothing since" in first  # the idle trigger's view
        assert "Booked Luigi's for Friday at 8pm" in first
        wait_for(lambda: metric(server, "chalie_dmn_triggers_total", trigger="cadence",
                                result="nothing_new") >= 3)
        assert len(llm.requests) == 1
        assert metric(server, "chalie_dmn_triggers_total", trigger="idle", result="ran") == 1
        r = api(server, server.login()).post("/api/signals", json={
            "signal_type": "notice", "content": "Luigi's is closed tonight",
            "activation_energy": 0.9})
        assert r.status_code == 202, r.text
        wait_for(lambda: len(llm.requests) == 2)
        assert "Luigi's is closed tonight" in llm.requests[1]["messages"][1]["content"]
    finally:
        server.kill()
    assert server.errors() == []


def test_quiet_hours_hold_a_message_until_the_person_connects(
    tmp_path: Path, llm: StubLlm,
) -> None:
    """With a zone that cannot be resolved every hour is quiet: the DMN's message waits in the
    store until a socket opens on the person's channel, then arrives there once."""
    seed_episode(tmp_path)
    llm.queue(completion("Your parcel arrives tomorrow."))
    server = ServerProcess(tmp_path, llm, dmn={"enabled": True, "boot_delay_s": 0.2,
                                               "idle_s": 3600,
                                               "timezone": "Mars/Olympus"}).start()
    try:
        assert logged(server, "quiet_all_day")[0]["key"] == "dmn.timezone"
        wait_for(lambda: db_rows(server.db_path, "SELECT status FROM proactive") == [
            ("deferred",)])
        assert db_rows(server.db_path, "SELECT count(*) FROM events WHERE type = "
                                       "'notification'") == [(0,)]
        client = server.connect()
        note = until_type(client, "notification")
        assert (note["content"], note["source"]) == ("Your parcel arrives tomorrow.", "dmn")
        assert db_rows(server.db_path, "SELECT status FROM proactive") == [("sent",)]
        again = server.connect()  # the log holds it once
        again.send({"type": "resume", "last_seq": 0})
        replayed = again.recv_until(lambda f: f["type"] == "notification")
        assert [f["type"] for f in replayed].count("notification") == 1
    finally:
        server.kill()
    assert server.errors() == []


def test_the_daily_cap_holds_back_a_second_message(tmp_path: Path, llm: StubLlm) -> None:
    """dmn.daily_cap 1: the first thought is sent, the next (a signal made it think) is not."""
    seed_episode(tmp_path)
    llm.queue(completion("First thought."), completion("Second thought."))
    server = ServerProcess(tmp_path, llm, dmn={**QUIET_NEVER, "boot_delay_s": 0.2,
                                               "idle_s": 3600, "cadence_s": 0.3,
                                               "daily_cap": 1}).start()
    try:
        client = server.connect()
        client.send({"type": "resume", "last_seq": 0})  # it may have come before the connect
        assert until_type(client, "notification")["content"] == "First thought."
        api(server, server.login()).post("/api/signals", json={
            "signal_type": "notice", "content": "Rain tonight", "activation_energy": 0.9})
        wait_for(lambda: metric(server, "chalie_proactive_suppressed_total",
                                reason="cap") == 1)
        # Counted when decided; its row is stored by the writer a moment later.
        wait_for(lambda: len(db_rows(server.db_path, "SELECT id FROM proactive")) == 2)
        assert db_rows(server.db_path, "SELECT content, status, reason FROM proactive "
                                       "ORDER BY id") == [
            ("First thought.", "sent", None), ("Second thought.", "suppressed", "cap")]
        assert db_rows(server.db_path, "SELECT count(*) FROM events WHERE type = "
                                       "'notification'") == [(1,)]
    finally:
        server.kill()
    assert server.errors() == []


# --- scheduled prompts --------------------------------------------------------------------

def test_bad_cron_unknown_zones_and_past_times_get_400_naming_the_field(
    server: ServerProcess, cookie: str,
) -> None:
    """Each mistake is a 400 whose error names the field; nothing is stored."""
    http = api(server, cookie)
    cases = [
        ({"prompt": "x", "cron": "61 * * * *", "timezone": "UTC"}, "cron: "),
        ({"prompt": "x", "cron": "0 9 * * * *", "timezone": "UTC"}, "cron: needs five fields"),
        ({"prompt": "x", "cron": "0 9 * * *", "timezone": "Mars/Olympus"}, "timezone: "),
        ({"prompt": "x", "at": "2020-01-01T09:00:00+00:00"}, "at: "),
        ({"prompt": "x", "at": "2099-01-01T09:00:00"}, "at: "),
        ({"prompt": "x", "at": in_seconds(60), "cron": "0 9 * * *"}, "at: give either"),
        ({"prompt": " ", "at": in_seconds(60)}, "prompt: "),
        ({"prompt": "x"}, "at: give `at`"),
        ({"prompt": "x", "at": in_seconds(60), "when": "now"}, "unknown field"),
    ]
    for body, named in cases:
        r = http.post("/api/schedules", json=body)
        assert r.status_code == 400, (body, r.text)
        assert named in r.json()["error"], (body, r.json())
    assert http.get("/api/schedules").json() == {"items": []}


def test_a_one_shot_schedule_notifies_once_and_lists_as_done(
    server: ServerProcess, llm: StubLlm, cookie: str,
) -> None:
    """POST {prompt, at}: 201 {id, next_run}; at its time one notification; GET shows it done."""
    http = api(server, cookie)
    client = server.connect(cookie)
    llm.queue(completion("Time to call mum."))
    r = http.post("/api/schedules", json={"prompt": "Remind me to call mum", "at": in_seconds(1)})
    assert r.status_code == 201, r.text
    created = r.json()
    assert list(created)[:2] == ["id", "next_run"]
    note = until_type(client, "notification")
    assert (note["content"], note["source"], note["schedule_id"]) == (
        "Time to call mum.", "schedule", created["id"])
    [listed] = http.get("/api/schedules").json()["items"]
    assert (listed["state"], listed["next_run"], listed["last_run"]) == (
        "done", None, created["next_run"])
    runs = http.get(f"/api/schedules/{created['id']}").json()["runs"]
    assert [run["outcome"] for run in runs] == ["done"]
    assert http.delete(f"/api/schedules/{created['id']}").status_code == 409
    assert http.delete("/api/schedules/nope").status_code == 404


def test_a_schedule_cut_off_by_kill_9_runs_once_after_the_restart(
    tmp_path: Path, llm: StubLlm,
) -> None:
    """Killed while its prompt's LLM call is out, the run is not stored; at the next start it
    runs (within scheduler.catch_up_s) and notifies once. Killed after it is stored, it never
    runs again."""
    server = ServerProcess(tmp_path, llm).start()
    cookie = server.login()
    held = threading.Event()
    llm.queue(Reply(completion("never seen"), hold=held))
    r = api(server, cookie).post("/api/schedules", json={"prompt": "Water the plants",
                                                          "at": in_seconds(1)})
    schedule_id = r.json()["id"]
    wait_for(lambda: len(llm.requests) == 1)
    server.kill()
    held.set()
    assert db_rows(server.db_path, "SELECT count(*) FROM schedule_runs") == [(0,)]

    llm.queue(completion("Time to water the plants."))
    server.start()
    client = server.connect()
    client.send({"type": "resume", "last_seq": 0})
    note = until_type(client, "notification")
    assert (note["content"], note["schedule_id"]) == ("Time to water the plants.", schedule_id)
    wait_for(lambda: db_rows(server.db_path, "SELECT outcome FROM schedule_runs") == [
        ("done",)])
    server.kill()

    before = len(logged(server, "scheduler_ready"))  # the log holds every start's lines
    server.start()
    wait_for(lambda: len(logged(server, "scheduler_ready")) > before)
    assert logged(server, "scheduler_ready")[-1]["due"] == 0
    assert len(llm.requests) == 2
    assert db_rows(server.db_path, "SELECT count(*) FROM events WHERE type = "
                                   "'notification'") == [(1,)]
    assert db_rows(server.db_path, "SELECT state FROM schedules") == [("done",)]
    server.kill()
    assert server.errors() == []


# --- goals --------------------------------------------------------------------------------

def test_a_goal_killed_during_step_2_resumes_at_step_2(tmp_path: Path, llm: StubLlm) -> None:
    """task frames for the plan and each step; killed while step 2's call is out, the
    restarted server runs step 2 and 3 only, and the result arrives as a notification."""
    server = ServerProcess(tmp_path, llm).start()
    cookie = server.login()
    client = server.connect(cookie)
    held = threading.Event()
    llm.queue_structured(completion(json.dumps(PLAN)))
    llm.queue(completion("TAP 89, Ryanair 45, easyJet 60."),
              Reply(completion("never seen"), hold=held))
    r = api(server, cookie).post("/api/goals", json={"goal": "Find me a flight to Lisbon"})
    assert r.status_code == 201, r.text
    goal_id = r.json()["id"]
    frames = client.recv_until(lambda f: f["type"] == "task" and f["step_id"] == "s2")
    assert [(f["step_id"], f["status"]) for f in frames if f["type"] == "task"] == [
        (None, "planning"), (None, "running"), ("s1", "running"), ("s1", "done"),
        ("s2", "running")]
    wait_for(lambda: len(llm.requests) == 3)
    server.kill()
    held.set()

    llm.queue(completion("easyJet has a bag and leaves at noon."),
              completion("Take easyJet: 60 euros with a bag."))
    server.start()
    client = server.connect()
    client.send({"type": "resume", "last_seq": 0})
    note = until_type(client, "notification")
    assert (note["content"], note["goal_id"]) == ("Take easyJet: 60 euros with a bag.", goal_id)
    after_restart = llm.requests[3:]
    assert "Step s2:" in after_restart[0]["messages"][1]["content"]
    assert "TAP 89, Ryanair 45, easyJet 60." in after_restart[0]["messages"][1]["content"]
    assert "Step s3:" in after_restart[1]["messages"][1]["content"]
    goal = api(server, server.login()).get(f"/api/goals/{goal_id}").json()
    assert goal["state"] == "completed"
    assert [(s["id"], s["status"], s["attempts"]) for s in goal["plan"]["steps"]] == [
        ("s1", "done", 1), ("s2", "done", 2), ("s3", "done", 1)]
    server.kill()
    assert server.errors() == []


def test_a_goal_whose_plans_always_fail_finishes_by_the_plain_loop(
    server: ServerProcess, llm: StubLlm, cookie: str,
) -> None:
    """The stub's minimal plans fail the checks twice: the goal runs one loop on its own text,
    the person's socket gets its `task` frames and the result as a notification, and GET says
    it ran without a plan, why, and how it ended."""
    llm.queue(completion("Two tickets for Saturday morning are booked."))
    client = server.connect(cookie)
    http = api(server, cookie)
    goal_id = http.post("/api/goals", json={"goal": "Get museum tickets"}).json()["id"]
    frames = client.recv_until(lambda f: f["type"] == "notification")
    assert [(f["step_id"], f["status"]) for f in frames if f["type"] == "task"] == [
        (None, "planning"), (None, "running"), ("goal", "running"), ("goal", "done"),
        (None, "completed")]
    note = frames[-1]
    assert (note["content"], note["goal_id"], note["source"]) == (
        "Two tickets for Saturday morning are booked.", goal_id, "goal")
    goal = http.get(f"/api/goals/{goal_id}").json()
    assert (goal["state"], goal["mode"], goal["end_reason"], goal["result"], goal["error"]) == (
        "completed", "plain", "completed", "Two tickets for Saturday morning are booked.", None)
    assert any("confidence is 0" in p for p in goal["plan_problems"])
    assert [(s["id"], s["description"], s["status"]) for s in goal["plan"]["steps"]] == [
        ("goal", "Get museum tickets", "done")]
    [listed] = http.get("/api/goals").json()["items"]
    assert (listed["mode"], listed["end_reason"]) == ("plain", "completed")
    plan_calls = [r for r in llm.requests if "response_format" in r]
    assert len(plan_calls) == 2
    assert "could not be used" in plan_calls[1]["messages"][-1]["content"]
    assert "No step-by-step plan could be made" in llm.requests[2]["messages"][-1]["content"]
    assert http.delete(f"/api/goals/{goal_id}").status_code == 409


def test_goals_are_listed_and_cancelled_and_bad_bodies_get_400(
    server: ServerProcess, llm: StubLlm, cookie: str,
) -> None:
    """DELETE cancels an active goal (a `task` frame says so); 404 for an unknown id; a blank
    or unknown field is a 400 naming it."""
    held = threading.Event()
    llm.queue_structured(Reply(completion(json.dumps(PLAN)), hold=held))
    http = api(server, cookie)
    client = server.connect(cookie)
    goal_id = http.post("/api/goals", json={"goal": "Find flights"}).json()["id"]
    wait_for(lambda: len(llm.requests) == 1)
    r = http.delete(f"/api/goals/{goal_id}")
    assert (r.status_code, r.json()["state"]) == (200, "cancelled")
    task = until_type(client, "task")
    while task["status"] != "cancelled":
        task = until_type(client, "task")
    held.set()
    assert [g["state"] for g in http.get("/api/goals").json()["items"]] == ["cancelled"]
    assert http.get("/api/goals?state=running").json() == {"items": []}
    assert http.delete("/api/goals/nope").status_code == 404
    for body, named in [({"goal": "  "}, "goal"), ({"goal": "x", "when": 1}, "when"),
                        ({}, "goal")]:
        r = http.post("/api/goals", json=body)
        assert r.status_code == 400, (body, r.text)
        assert named in r.json()["error"], (body, r.text)


def test_an_exhausted_goal_budget_pauses_the_goal_and_the_metric_shows_it(
    tmp_path: Path, llm: StubLlm,
) -> None:
    """governor.goal_tokens_per_day smaller than the plan call: the goal pauses after it (a
    `paused` task frame, paused_until set) and /metrics says the path is paused."""
    server = ServerProcess(tmp_path, llm, governor={"goal_tokens_per_day": 20}).start()
    cookie = server.login()
    client = server.connect(cookie)
    llm.queue_structured(completion(json.dumps(PLAN), prompt_tokens=100))
    http = api(server, cookie)
    goal_id = http.post("/api/goals", json={"goal": "Find flights"}).json()["id"]
    task = until_type(client, "task")
    while task["status"] != "paused":
        task = until_type(client, "task")
    assert metric(server, "chalie_budget_paused", path="goal") == 1
    assert metric(server, "chalie_budget_pauses_total", path="goal") == 1
    goal = http.get(f"/api/goals/{goal_id}").json()
    assert goal["state"] == "running"
    assert goal["paused_until"] > datetime.now(UTC).timestamp() + 80_000
    spending = http.get("/api/spending").json()
    assert spending["paths"]["goal"]["paused"] is True
    assert spending["paths"]["goal"]["tokens_24h"] == 105
    assert len(llm.requests) == 1
    server.kill()
    assert server.errors() == []


@pytest.mark.parametrize("path", ["/api/schedules", "/api/goals", "/api/spending",
                                  "/api/proactive"])
def test_the_background_endpoints_need_the_login_cookie(server: ServerProcess,
                                                        path: str) -> None:
    """Without the cookie every one of them is a 401."""
    with httpx.Client() as http:
        assert http.get(f"{server.url}{path}").status_code == 401
