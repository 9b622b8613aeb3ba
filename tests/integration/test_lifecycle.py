"""Start-up, shutdown and crashes of the real server process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from tests.conftest import write_config
from tests.integration.harness import (
    ROOT,
    Reply,
    ServerProcess,
    StubLlm,
    completion,
    db_rows,
    wait_for,
)


def test_a_turn_survives_kill_9_sent_right_after_its_message_frame(
    tmp_path: Path, llm: StubLlm
) -> None:
    """The message frame is pushed only after the commit, so SIGKILL cannot lose the turn."""
    server = ServerProcess(tmp_path, llm).start()
    remember = json.dumps({"action": "remember", "key": "dog", "value": "Rex"})
    llm.queue(completion(tool_calls=[("memory", remember)]), completion("Rex it is."))
    client = server.connect()
    client.send({"type": "chat", "text": "My dog is Rex"})
    frames = client.recv_until(lambda f: f["type"] == "message")
    server.kill()
    turn_id = frames[-1]["exchange_id"]
    assert db_rows(server.db_path, "PRAGMA integrity_check") == [("ok",)]
    assert db_rows(server.db_path, "SELECT outcome, response_text FROM turns WHERE id = ?",
                   turn_id) == [("answered", "Rex it is.")]
    assert db_rows(server.db_path, "SELECT count(*) FROM tool_calls WHERE turn_id = ?",
                   turn_id) == [(1,)]
    assert db_rows(server.db_path, "SELECT value FROM knowledge WHERE key = 'dog'") == [("Rex",)]


def test_a_turn_cut_off_by_a_crash_ends_with_an_error_after_restart(
    tmp_path: Path, llm: StubLlm
) -> None:
    """SIGKILL mid-turn: after restart the turn's exchange is closed with error + done."""
    server = ServerProcess(tmp_path, llm).start()
    held = threading.Event()
    llm.queue(Reply(completion("never seen"), hold=held))
    client = server.connect()
    client.send({"type": "chat", "text": "slow question"})
    status = client.recv()
    assert status["type"] == "status"
    wait_for(lambda: len(llm.requests) == 1)  # both status frames are logged by now
    server.kill()
    held.set()
    restarted = ServerProcess(tmp_path, llm).start()
    try:
        body = db_rows(restarted.db_path,
                       "SELECT type, seq, body FROM events WHERE channel = 'main' ORDER BY seq")
        assert [(t, s) for t, s, _ in body] == [("status", 1), ("status", 2), ("error", 3),
                                                ("done", 4)]
        error = json.loads(str(body[2][2]))
        assert error["recoverable"] is True
        assert error["exchange_id"] == status["exchange_id"]
        assert db_rows(restarted.db_path, "SELECT count(*) FROM turns") == [(0,)]
        frames = restarted.connect().turn("again")
        assert [f["seq"] for f in frames] == [5, 6, 7, 8]  # seq continues across the restart
    finally:
        restarted.kill()


def test_sigterm_stops_the_server_cleanly(tmp_path: Path, llm: StubLlm) -> None:
    """SIGTERM shuts down with exit code 0 and no error in the log."""
    server = ServerProcess(tmp_path, llm).start()
    server.connect().turn("hi")
    assert server.stop() == 0
    assert server.errors() == []
    assert any(e.get("event") == "stopped" for e in server.log_events())


def test_sigterm_lets_a_turn_in_flight_finish_and_store(tmp_path: Path, llm: StubLlm) -> None:
    """A turn running at SIGTERM is given server.shutdown_grace_s to be stored; resume shows it."""
    server = ServerProcess(tmp_path, llm).start()
    held = threading.Event()
    llm.queue(Reply(completion("finished in time"), hold=held))
    client = server.connect()
    client.send({"type": "chat", "text": "slow"})
    assert client.recv()["type"] == "status"
    server.proc.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
    # Read on, as a client does: the server's close frame (1001) is answered and the socket
    # closes at once (a client that never reads would hold it open for Tornado's 5 s).
    client.read_until_closed()
    wait_for(lambda: any('"ws_closed"' in ln for ln in server.lines))  # shutdown has begun
    held.set()
    assert server.wait() == 0
    assert db_rows(server.db_path, "SELECT user_text, response_text FROM turns") == [
        ("slow", "finished in time")
    ]
    after = ServerProcess(tmp_path, llm).start()
    try:
        replay = after.connect()
        replay.send({"type": "resume", "last_seq": 1})
        assert [f["type"] for f in replay.recv_until(lambda f: f["type"] == "done")] == [
            "status", "message", "done"
        ]
    finally:
        after.kill()


def test_sigterm_does_not_wait_for_a_hung_llm_call(tmp_path: Path, llm: StubLlm) -> None:
    """A turn stuck in an LLM call past the grace does not hold the process open; the next
    start closes it with error + done."""
    server = ServerProcess(tmp_path, llm, server={"shutdown_grace_s": 0.2}).start()
    held = threading.Event()
    llm.queue(Reply(completion("never"), hold=held))  # the stub holds it for 20 s
    try:
        client = server.connect()
        client.send({"type": "chat", "text": "stuck"})
        status = client.recv()
        wait_for(lambda: len(llm.requests) == 1)
        server.proc.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
        assert server.proc.wait(10) == 0  # type: ignore[union-attr]
    finally:
        held.set()
        server.kill()
    after = ServerProcess(tmp_path, llm).start()
    try:
        closing = db_rows(after.db_path, "SELECT type FROM events WHERE exchange_id = ? "
                                         "ORDER BY seq", status["exchange_id"])
        assert closing == [("status",), ("status",), ("error",), ("done",)]
    finally:
        after.kill()


def test_a_generated_password_is_printed_once_and_works(tmp_path: Path, llm: StubLlm) -> None:
    """With no auth.password the first start prints a password; the second start does not."""
    first = ServerProcess(tmp_path, llm, password="").start()
    try:
        printed = [ln for ln in first.lines if "generated login password" in ln]
        assert len(printed) == 1
        password = printed[0].rsplit(":", 1)[1].strip()
        first.password = password
        first.login()
    finally:
        first.stop()
    stored = db_rows(first.db_path, "SELECT password_hash FROM auth_password")
    assert password not in str(stored)
    second = ServerProcess(tmp_path, llm, password="").start()
    try:
        assert not any("generated login password" in ln for ln in second.lines)
        second.password = password
        second.login()
    finally:
        second.stop()


def _serve_with(tmp_path: Path, env: dict[str, str], config: Path | None = None) -> tuple[int, str]:
    args = [sys.executable, "-m", "chalie", "serve"]
    if config is not None:
        args += ["--config", str(config)]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CHALIE_")}
    proc = subprocess.run(args, cwd=ROOT, env={**clean, **env}, capture_output=True, text=True,
                          timeout=30, check=False)
    return proc.returncode, proc.stderr


@pytest.mark.parametrize(
    ("sections", "env", "key"),
    [
        ({"server": {"prot": 1}}, {}, "server.prot"),
        ({"server": {"port": "eighty"}}, {}, "server.port"),
        ({}, {"CHALIE_SERVER__PORT": "nine thousand"}, "server.port"),
        ({}, {"CHALIE_LLM__TEMPERATURE": "0.2"}, "llm.temperature"),
        ({"llm": {"provider": "skynet"}}, {}, "llm.provider"),
    ],
)
def test_bad_configuration_stops_start_up_naming_the_key(
    tmp_path: Path, sections: dict[str, dict[str, object]], env: dict[str, str], key: str
) -> None:
    """An unknown key or a wrong type exits with code 2 and one line that names the key."""
    sections = {"store": {"path": str(tmp_path / "data")}, **sections}
    code, stderr = _serve_with(tmp_path, env, write_config(tmp_path, sections))
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1
    assert key in lines[0]
    assert not (tmp_path / "data").exists()


def test_environment_overrides_the_config_file(tmp_path: Path, llm: StubLlm) -> None:
    """CHALIE_AUTH__PASSWORD wins over the file's auth.password."""
    server = ServerProcess(tmp_path, llm, password="from-file",
                           env={"CHALIE_AUTH__PASSWORD": "from-env"}).start()
    try:
        r = httpx.post(f"{server.url}/auth/login", json={"password": "from-file"})
        assert r.status_code == 401
        server.password = "from-env"
        server.login()
    finally:
        server.kill()
