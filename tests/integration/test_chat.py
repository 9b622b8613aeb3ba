"""A user's view of a chat over a real socket, against a stub OpenAI-compatible LLM."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from chalie import __version__
from tests.integration.harness import (
    Reply,
    ServerProcess,
    StubLlm,
    completion,
    db_rows,
    wait_for,
)

REMEMBER = json.dumps({"action": "remember", "key": "favourite colour", "value": "teal"})



def test_health_answers_without_login(server: ServerProcess) -> None:
    """GET /health needs no auth and says the server is ok, and its version: nothing more."""
    r = httpx.get(f"{server.url}/health")
    assert r.status_code == 200
    assert r.json() == {"status": "ok", "version": __version__}


def test_a_turn_with_a_tool_gives_status_narration_message_done(
    server: ServerProcess, llm: StubLlm
) -> None:
    """The model asks for `memory`, then answers: the client sees the five frames in order."""
    llm.queue(
        completion(tool_calls=[("memory", REMEMBER)], prompt_tokens=120, completion_tokens=17),
        completion("Noted: teal.", prompt_tokens=160, completion_tokens=6),
    )
    client = server.connect()
    frames = client.turn("My favourite colour is teal")
    assert [f["type"] for f in frames] == ["status", "status", "act_narration", "message", "done"]
    seqs = [f["seq"] for f in frames]
    assert seqs == sorted(set(seqs))
    status, recalling, narration, message, done = frames
    assert status["stage"] == "processing"
    assert recalling["stage"] == "retrieving_memory"
    assert narration["tool"] == "memory"
    assert message["blocks"] == [{"type": "text", "text": "Noted: teal."}]
    assert message["metrics"]["tools"] == {"memory": 1}
    assert message["metrics"]["tokens_total"] == 120 + 17 + 160 + 6
    assert message["metrics"]["response_time_s"] > 0
    assert done["exchange_id"] == message["exchange_id"] == status["exchange_id"]
    assert done["duration_ms"] >= 0


def test_the_llm_sees_one_user_message_with_the_tool_trail(
    server: ServerProcess, llm: StubLlm
) -> None:
    """Each request is a system prompt plus one user message; tools go out natively."""
    llm.queue(completion(tool_calls=[("memory", REMEMBER)]), completion("Noted."))
    server.connect().turn("My favourite colour is teal")
    first, second = llm.requests
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert "My favourite colour is teal" in first["messages"][1]["content"]
    assert [t["function"]["name"] for t in first["tools"]] == ["memory", "recall", "forget",
                                                              "schedule", "goal"]
    assert "remembered favorite color: teal" in second["messages"][1]["content"]


def test_the_turn_is_stored_with_its_tool_calls_and_the_fact(
    server: ServerProcess, llm: StubLlm
) -> None:
    """After the message frame the turn, its tool call, the transcript and the fact are on disk."""
    llm.queue(completion(tool_calls=[("memory", REMEMBER)]), completion("Noted."))
    frames = server.connect().turn("My favourite colour is teal")
    turn_id = frames[-1]["exchange_id"]
    assert db_rows(server.db_path, "SELECT user_text, response_text, outcome FROM turns "
                "WHERE id = ?", turn_id) == [("My favourite colour is teal", "Noted.", "answered")]
    assert db_rows(server.db_path, "SELECT name, is_error FROM tool_calls WHERE turn_id = ?",
                turn_id) == [("memory", 0)]
    assert db_rows(server.db_path, "SELECT role FROM transcript WHERE turn_id = ? ORDER BY id",
                turn_id) == [("user",), ("assistant",)]
    assert db_rows(server.db_path, "SELECT key, value, kind, source FROM knowledge") == [
        ("favorite color", "teal", "fact", "tool")
    ]


def test_a_remembered_fact_is_recalled_in_a_later_turn(
    server: ServerProcess, llm: StubLlm
) -> None:
    """What one turn remembers, the next turn's recall finds, and its history holds turn one."""
    client = server.connect()
    llm.queue(completion(tool_calls=[("memory", REMEMBER)]), completion("Noted."))
    client.turn("My favourite colour is teal")
    recall = json.dumps({"action": "recall", "query": "colour"})
    llm.queue(completion(tool_calls=[("memory", recall)]), completion("Teal."))
    frames = client.turn("What is my favourite colour?")
    assert frames[-2]["blocks"][0]["text"] == "Teal."
    prompt = llm.requests[-1]["messages"][1]["content"]
    assert "favorite color: teal" in prompt
    assert "My favourite colour is teal" in prompt  # literal history


def test_arguments_that_are_not_json_go_back_to_the_model_as_an_error(
    server: ServerProcess, llm: StubLlm
) -> None:
    """A tool call with broken JSON arguments is answered with an error result, not a crash."""
    llm.queue(completion(tool_calls=[("memory", '{"action": "remem')]), completion("Sorry."))
    frames = server.connect().turn("remember this")
    assert [f["type"] for f in frames] == ["status", "status", "act_narration", "message", "done"]
    assert "error: arguments are not valid JSON" in llm.requests[1]["messages"][1]["content"]


def test_bad_frames_get_error_frames_and_the_socket_stays_usable(
    server: ServerProcess, llm: StubLlm
) -> None:
    """Garbage, unknown types, bad fields, binary and oversized frames each get an error frame."""
    client = server.connect()
    bad: list[object] = [
        "not json",
        json.dumps([1, 2]),
        json.dumps({"type": "teleport"}),
        json.dumps({"type": "chat"}),
        json.dumps({"type": "chat", "text": 5}),
        json.dumps({"type": "chat", "text": "hi", "colour": "red"}),
        b"\x00\x01",
        json.dumps({"type": "chat", "text": "x" * 70_000}),
    ]
    errors = []
    for frame in bad:
        client.send(frame)  # type: ignore[arg-type]
        errors.append(client.recv())
    assert [e["type"] for e in errors] == ["error"] * len(bad)
    assert all(e["recoverable"] is True for e in errors)
    assert "teleport" in errors[2]["message"]
    assert "text" in errors[3]["message"]
    assert "over the 65536-byte limit" in errors[7]["message"]
    seqs = [e["seq"] for e in errors]
    assert seqs == sorted(seqs)
    frames = client.turn("still there?")
    assert frames[-2]["type"] == "message"
    assert frames[-2]["blocks"][0]["text"] == "stub answer"


def test_ws_refuses_a_client_that_has_not_logged_in(server: ServerProcess) -> None:
    """Without the session cookie the upgrade is refused with 401."""
    r = httpx.get(f"{server.url}/ws", headers={"Upgrade": "websocket", "Connection": "Upgrade",
                                               "Sec-WebSocket-Version": "13",
                                               "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
    assert r.status_code == 401


def test_login_errors_name_the_problem(server: ServerProcess) -> None:
    """A wrong password is 401; a body without `password` is 400 naming the field."""
    wrong = httpx.post(f"{server.url}/auth/login", json={"password": "nope"})
    assert wrong.status_code == 401
    missing = httpx.post(f"{server.url}/auth/login", json={"pasword": "secret"})
    assert missing.status_code == 400
    assert "pasword" in missing.json()["error"] or "password" in missing.json()["error"]
    not_json = httpx.post(f"{server.url}/auth/login", content=b"{")
    assert not_json.status_code == 400


def test_metrics_count_turns_llm_calls_tokens_and_tools(
    server: ServerProcess, llm: StubLlm
) -> None:
    """/metrics shows what one turn with one tool cost."""
    llm.queue(
        completion(tool_calls=[("memory", REMEMBER)], prompt_tokens=10, completion_tokens=2),
        completion("ok", prompt_tokens=20, completion_tokens=3),
    )
    server.connect().turn("teal")
    text = httpx.get(f"{server.url}/metrics").text
    assert 'chalie_turns_total{outcome="answered"} 1.0' in text
    assert 'chalie_llm_calls_total{result="ok"} 2.0' in text
    assert 'chalie_llm_tokens_total{kind="prompt"} 30.0' in text
    assert 'chalie_llm_tokens_total{kind="completion"} 5.0' in text
    assert 'chalie_tool_calls_total{result="ok",tool="memory"} 1.0' in text


def test_every_log_line_of_a_turn_carries_its_turn_id(
    server: ServerProcess, llm: StubLlm
) -> None:
    """Grepping the log for one turn id tells the turn's whole story."""
    llm.queue(completion(tool_calls=[("memory", REMEMBER)]), completion("ok"))
    turn_id = server.connect().turn("teal")[-1]["exchange_id"]
    expected = {"turn_started", "context_ready", "llm_answered", "tool_returned",
                "turn_finished", "turn_stored"}

    def events() -> set[str]:
        return {e["event"] for e in server.log_events() if e.get("turn_id") == turn_id}

    wait_for(lambda: expected <= events())  # the log is read from the process's stdout
    # context_ready says where the context's time went (scripts/bench/turn_overhead.py reads it)
    (ready,) = [e for e in server.log_events()
                if e.get("turn_id") == turn_id and e["event"] == "context_ready"]
    assert 0 <= ready["embed_wait_ms"] <= ready["recall_ms"] <= ready["build_ms"] <= ready["ms"]


def test_an_llm_error_gives_a_recoverable_error_frame_and_the_next_turn_works(
    server: ServerProcess, llm: StubLlm
) -> None:
    """HTTP 500 from the LLM ends the turn with error(recoverable) + done; the socket lives."""
    llm.queue(Reply({"error": "boom"}, status=500))
    client = server.connect()
    frames = client.turn("hello")
    assert [f["type"] for f in frames] == ["status", "status", "error", "done"]
    assert frames[2]["recoverable"] is True
    assert "500" in frames[2]["message"]
    assert frames[2]["metrics"]["tokens_total"] == 0
    assert client.turn("again")[-2]["type"] == "message"
    assert db_rows(server.db_path, "SELECT outcome FROM turns ORDER BY started_at") == [
        ("error",), ("answered",)
    ]


def test_repeated_wrong_passwords_lock_the_address_out(tmp_path: Path, llm: StubLlm) -> None:
    """After auth.max_failures wrong passwords even the right one gets 429 with Retry-After."""
    server = ServerProcess(tmp_path, llm, auth={"max_failures": 3, "lockout_s": 600.0}).start()
    try:
        codes = [httpx.post(f"{server.url}/auth/login", json={"password": "guess"}).status_code
                 for _ in range(3)]
        assert codes == [401, 401, 401]
        locked = httpx.post(f"{server.url}/auth/login", json={"password": server.password})
        assert locked.status_code == 429
        assert 590 <= int(locked.headers["Retry-After"]) <= 600
        assert "too many wrong passwords" in locked.json()["error"]
    finally:
        server.kill()
