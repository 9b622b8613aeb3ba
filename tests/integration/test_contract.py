"""The /ws contract of spec/interfaces.md section 5, as a client sees it over a real socket."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
import websocket

from tests.integration.harness import (
    Reply,
    ServerProcess,
    StubLlm,
    completion,
    db_rows,
    wait_for,
)

REMEMBER = json.dumps({"action": "remember", "key": "city", "value": "Lyon"})



def user_prompt(request: dict[str, Any]) -> str:
    return str(request["messages"][-1]["content"])


# --- resume ---------------------------------------------------------------------------------------

def test_resume_after_reconnect_replays_everything_after_last_seq(server: ServerProcess) -> None:
    """A socket that resumes from seq N gets every later frame once, in order, then live ones."""
    first = server.connect()
    turn_one = first.turn("one")
    turn_two = first.turn("two")
    first.close()
    second = server.connect()
    second.send({"type": "resume", "last_seq": turn_one[-1]["seq"]})
    replay = second.recv_until(lambda f: f["type"] == "done")
    assert replay == turn_two
    live = second.turn("three")
    seqs = [f["seq"] for f in turn_one + turn_two + live]
    assert seqs == list(range(1, len(seqs) + 1))


def test_resume_during_a_turn_has_no_gap_and_no_duplicate(
    server: ServerProcess, llm: StubLlm
) -> None:
    """Resuming while a turn runs: the replay, then the turn's live frames, each seq once."""
    held = threading.Event()
    remember = Reply(completion(tool_calls=[("memory", REMEMBER)]), hold=held)
    llm.queue(remember, completion("Lyon, noted."))
    watcher = server.connect()
    watcher.send({"type": "chat", "text": "I live in Lyon"})
    status = watcher.recv()
    wait_for(lambda: len(llm.requests) == 1)
    late = server.connect()
    late.send({"type": "resume", "last_seq": 0})
    assert late.recv() == status
    held.set()
    frames = [status, *late.recv_until(lambda f: f["type"] == "done")]
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    assert [f["type"] for f in frames] == ["status", "status", "act_narration", "message", "done"]
    assert watcher.recv_until(lambda f: f["type"] == "done") == frames[1:]


def test_resume_after_a_server_restart_replays_from_the_log(
    tmp_path: Path, llm: StubLlm
) -> None:
    """The event log is durable: after a restart, resume replays frames sent before it."""
    before = ServerProcess(tmp_path, llm).start()
    frames = before.connect().turn("remember me")
    assert before.stop() == 0
    after = ServerProcess(tmp_path, llm).start()
    try:
        client = after.connect()
        client.send({"type": "resume", "last_seq": 0})
        assert client.recv_until(lambda f: f["type"] == "done") == frames
        n = len(frames)
        assert [f["seq"] for f in client.turn("again")] == [n + 1, n + 2, n + 3, n + 4]
    finally:
        after.kill()


def test_every_socket_of_a_channel_gets_every_frame(server: ServerProcess) -> None:
    """Two tabs on one channel both see the turn; a tab on another channel sees nothing of it."""
    tab_a, tab_b = server.connect(), server.connect()
    other = server.connect(channel="work")
    frames = tab_a.turn("hello both")
    assert tab_b.recv_until(lambda f: f["type"] == "done") == frames
    assert [f["seq"] for f in other.turn("separate")] == [1, 2, 3, 4]


# --- keepalive ------------------------------------------------------------------------------------

def test_keepalive_pings_and_closes_a_silent_socket(tmp_path: Path, llm: StubLlm) -> None:
    """Sockets get ping frames; one that answers stays open, one that never does is closed."""
    keepalive = {"ping_interval_s": 0.2, "ping_misses": 2}
    server = ServerProcess(tmp_path, llm, server=keepalive).start()
    try:
        lively, silent = server.connect(), server.connect()
        for _ in range(4):
            assert lively.recv() == {"type": "ping"}
            lively.send({"type": "pong"})
        pings = 0
        try:
            while (raw := silent.ws.recv()) != "":  # "" is the server's close frame
                assert json.loads(raw) == {"type": "ping"}
                pings += 1
        except websocket.WebSocketConnectionClosedException:
            pass
        assert pings == 2
        assert lively.turn("still here")[-1]["type"] == "done"
    finally:
        server.kill()


# --- idempotent chat ------------------------------------------------------------------------------

def test_a_repeated_client_id_starts_no_second_turn(server: ServerProcess, llm: StubLlm) -> None:
    """A client retrying a chat with the same client_id after reconnecting gets the first turn."""
    client = server.connect()
    frames = client.turn("only once", client_id="msg-1")
    client.close()
    again = server.connect()
    again.send({"type": "chat", "text": "only once", "client_id": "msg-1"})
    assert again.recv_until(lambda f: f["type"] == "done") == frames
    assert len(llm.requests) == 1
    assert db_rows(server.db_path, "SELECT count(*) FROM turns") == [(1,)]


# --- steering -------------------------------------------------------------------------------------

def test_steering_reaches_the_next_llm_request_and_drops_unseen_calls(
    server: ServerProcess, llm: StubLlm
) -> None:
    """act_steer while an LLM call is out: the next request carries it; the held calls don't run."""
    held = threading.Event()
    llm.queue(Reply(completion(tool_calls=[("memory", REMEMBER)]), hold=held),
              completion("Paris it is."))
    client = server.connect()
    client.send({"type": "chat", "text": "Remember that I live in Lyon"})
    wait_for(lambda: len(llm.requests) == 1)
    client.send({"type": "act_steer", "text": "Actually it is Paris, not Lyon"})
    wait_for(lambda: any(e.get("event") == "steering_received" for e in server.log_events()))
    held.set()
    frames = client.recv_until(lambda f: f["type"] == "done")
    assert [f["type"] for f in frames] == ["status", "status", "message", "done"]
    steered = user_prompt(llm.requests[1])
    assert "MID-TURN STEERING" in steered
    assert "Actually it is Paris, not Lyon" in steered
    assert "not run: the person sent new instructions first" in steered
    assert db_rows(server.db_path, "SELECT count(*) FROM knowledge") == [(0,)]
    turn = frames[-1]["exchange_id"]
    assert db_rows(server.db_path, "SELECT text FROM steering WHERE turn_id = ?", turn) == [
        ("Actually it is Paris, not Lyon",)
    ]
    assert db_rows(server.db_path, "SELECT name, ran FROM tool_calls WHERE turn_id = ?", turn) == [
        ("memory", 0)
    ]


def test_steering_with_no_turn_running_is_a_chat(server: ServerProcess, llm: StubLlm) -> None:
    """act_steer when nothing runs starts a turn with its text."""
    frames = server.connect().turn_from({"type": "act_steer", "text": "what's up?"})
    assert frames[-2]["type"] == "message"
    assert "what's up?" in user_prompt(llm.requests[0])


# --- fast exits, actions, approvals ---------------------------------------------------------------

@pytest.mark.parametrize("text", ["", "   ", "cancel", "Never mind.", "forget it"])
def test_empty_and_cancel_messages_make_no_llm_call(
    server: ServerProcess, llm: StubLlm, text: str
) -> None:
    """Nothing to answer, or the person calling it off: the turn ends at once with zero tokens."""
    frames = server.connect().turn(text)
    assert [f["type"] for f in frames] == ["status", "message", "done"]
    assert frames[1]["metrics"]["tokens_total"] == 0
    assert llm.requests == []


def test_an_action_runs_a_skill_without_the_llm(server: ServerProcess, llm: StubLlm) -> None:
    """An action frame runs the skill directly: message + done with zero tokens."""
    client = server.connect()
    remember = {"skill": "memory", "params": {"action": "remember", "key": "tea", "value": "green"}}
    frames = client.turn_from({"type": "action", "payload": remember})
    assert frames[-2]["blocks"] == [{"type": "text", "text": "remembered tea: green"}]
    assert frames[-2]["metrics"]["tokens_total"] == 0
    assert frames[-2]["metrics"]["tools"] == {"memory": 1}
    recall = {"skill": "memory", "params": {"action": "recall", "query": "tea"}}
    assert client.turn_from({"type": "action", "payload": recall})[-2]["blocks"][0]["text"] == (
        "- [1] tea: green"
    )
    assert llm.requests == []


@pytest.mark.parametrize("approve", [True, False])
def test_a_confirm_tool_waits_for_the_persons_decision(
    tmp_path: Path, llm: StubLlm, approve: bool
) -> None:
    """A confirm-class call sends an escalation; approving runs it, denying tells the model no."""
    server = ServerProcess(tmp_path, llm, tools={"confirm": ["memory"]}).start()
    try:
        llm.queue(completion(tool_calls=[("memory", REMEMBER)]), completion("Done."))
        client = server.connect()
        client.send({"type": "chat", "text": "I live in Lyon"})
        frames = client.recv_until(lambda f: f["type"] == "escalation")
        escalation = frames[-1]
        assert escalation["tool"] == "memory"
        assert json.loads(escalation["args"])["value"] == "Lyon"
        assert db_rows(server.db_path, "SELECT count(*) FROM knowledge") == [(0,)]
        answer = {"skill": "approval",
                  "params": {"approval_id": escalation["approval_id"], "approve": approve}}
        client.send({"type": "action", "payload": answer})
        rest = client.recv_until(lambda f: f["type"] == "done")
        assert rest[-2]["type"] == "message"
        facts = db_rows(server.db_path, "SELECT value FROM knowledge")
        assert facts == ([("Lyon",)] if approve else [])
        if not approve:
            assert "not run: the person denied it" in user_prompt(llm.requests[1])
    finally:
        server.kill()


# --- compaction -----------------------------------------------------------------------------------

def test_a_small_context_window_compacts_and_keeps_answering(
    tmp_path: Path, llm: StubLlm
) -> None:
    """Long history in a small window: a checkpoint replaces it and turns keep working."""
    server = ServerProcess(tmp_path, llm, llm={"context_window": 1500}).start()
    try:
        client = server.connect()
        for n in range(6):
            frames = client.turn(f"story part {n}: " + "the quick brown fox jumps " * 40)
            assert frames[-2]["type"] == "message"
        stages = {s for (s,) in db_rows(server.db_path, "SELECT stage FROM compactions")}
        assert stages & {"restart", "backstop"}
        checkpoints = db_rows(server.db_path, "SELECT count(*) FROM checkpoints")
        assert checkpoints[0][0] >= 1
        assert any("# Current State" in user_prompt(r) and "(none yet)" not in user_prompt(r)
                   for r in llm.requests)
    finally:
        server.kill()
