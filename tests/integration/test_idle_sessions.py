"""Idle Sessions on a real server: their threads go after server.session_idle_s, and a client
that comes back picks the conversation up where it left it."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.integration.harness import ServerProcess, StubLlm, completion, wait_for

IDLE_S = 0.5


def metric(server: ServerProcess, name: str) -> float:
    """One unlabelled sample from GET /metrics (0 when absent)."""
    text = httpx.get(f"{server.url}/metrics").text
    for line in text.splitlines():
        key, _, value = line.rpartition(" ")
        if key == name:
            return float(value)
    return 0.0


def threads(server: ServerProcess) -> int:
    """The server process's threads, as the kernel counts them."""
    assert server.proc is not None
    with open(f"/proc/{server.proc.pid}/status", encoding="ascii") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))


def test_idle_sessions_stop_and_their_threads_go(tmp_path: Path, llm: StubLlm) -> None:
    """Three channels chat once; after the idle timeout their Sessions are stopped (counted)
    and the process has at least three threads fewer."""
    server = ServerProcess(tmp_path, llm, server={"session_idle_s": IDLE_S}).start()
    try:
        cookie = server.login()
        for channel in ("a", "b", "c"):
            client = server.connect(cookie, channel)
            assert client.turn(f"hello from {channel}")[-1]["type"] == "done"
        busy = threads(server)
        wait_for(lambda: metric(server, "chalie_sessions_stopped_total") == 3)
        assert metric(server, "chalie_sessions") == 0
        wait_for(lambda: threads(server) <= busy - 3)
    finally:
        server.kill()
    assert server.errors() == []


def test_client_coming_back_resumes_mid_conversation(tmp_path: Path, llm: StubLlm) -> None:
    """After its Session stopped, a client reconnects, resumes from its last seq (missing
    nothing), and the next answer's prompt holds the earlier turns."""
    llm.queue(completion("Your flight to Oslo is at nine."))
    server = ServerProcess(tmp_path, llm, server={"session_idle_s": IDLE_S}).start()
    try:
        cookie = server.login()
        client = server.connect(cookie)
        first = client.turn("remind me when my flight to Oslo leaves")
        last_seq = first[-1]["seq"]
        client.close()
        wait_for(lambda: metric(server, "chalie_sessions_stopped_total") == 1)
        back = server.connect(cookie)
        back.send({"type": "resume", "last_seq": last_seq})
        llm.queue(completion("At nine, as I said."))
        frames = back.turn("when was it again?")
        assert frames[0]["seq"] == last_seq + 1  # nothing replayed twice, nothing skipped
        assert [f["blocks"][0]["text"] for f in frames if f["type"] == "message"] == [
            "At nine, as I said."]
        seen = next(str(r["messages"]) for r in reversed(llm.requests)
                    if "when was it again?" in str(r["messages"]))
        assert "remind me when my flight to Oslo leaves" in seen
        assert "Your flight to Oslo is at nine." in seen
        assert metric(server, "chalie_sessions") == 1
    finally:
        server.kill()
    assert server.errors() == []
