"""A light model that cannot write the episode JSON, through the real server: 60 turns cost
the person one call each and the encoder only its first window's two, not two a turn; /health
(still 200, still ok) names the job, the channel and why."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.integration.harness import Reply, ServerProcess, StubLlm, completion, wait_for

TURNS = 60
PROSE = "Sure! The two of them talked about the weather."


def structured(llm: StubLlm) -> int:
    return sum(1 for r in llm.requests if "response_format" in r)


def test_sixty_turns_with_a_model_that_cannot_write_json_cost_two_structured_calls(
    tmp_path: Path, llm: StubLlm
) -> None:
    """Every turn makes a window to encode; the first window's two invalid answers start the
    wait (an hour here, so that a slow machine changes nothing); the other 59 turns start no
    structured call. The log says so once; /health lists the job without failing."""
    llm.queue_structured(*[Reply(completion(PROSE)) for _ in range(4 * TURNS)])
    server = ServerProcess(tmp_path, llm, memory={"embedder": "hashed", "encode_every_rows": 2},
                           governor={"failure_backoff_s": 3600.0,
                                     "failure_backoff_max_s": 7200.0}).start()
    try:
        cookie = server.login()
        client = server.connect(cookie)
        person = {"chalie_session": cookie}  # /health's details are the person's
        assert httpx.get(f"{server.url}/health", cookies=person).json()["jobs"] == []
        client.turn("Hello there")
        wait_for(lambda: structured(llm) == 2)
        for n in range(1, TURNS):
            assert client.turn(f"message number {n}")[-2]["type"] == "message"
        plain = [r for r in llm.requests if "response_format" not in r]
        assert len(plain) == TURNS
        assert structured(llm) == 2  # without the backoff: 2 a turn (120)
        health = httpx.get(f"{server.url}/health", cookies=person)
        assert health.status_code == 200
        body = health.json()
        assert body["status"] == "ok"
        (job,) = body["jobs"]
        assert (job["job"], job["channel"], job["state"], job["failures"]) == (
            "encoder", "main", "backing_off", 1)
        assert job["error"].startswith("the light model cannot write the episode JSON: ")
        assert job["retry_at"] - job["since"] == 3600.0
        events = server.log_events()
        assert len([e for e in events if e.get("event") == "background_backoff"]) == 1
        metrics = httpx.get(f"{server.url}/metrics").text
        assert 'chalie_background_backoff{job="encoder"} 1.0' in metrics
    finally:
        server.kill()
    assert server.errors() == []
