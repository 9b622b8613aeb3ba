"""An LLM that misbehaves: the person gets an error frame that says whether to retry, the
session keeps working, and nothing already stored is lost."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.integration.harness import Reply, ServerProcess, StubLlm, completion, db_rows


def turns(path: Path) -> list[tuple[Any, ...]]:
    return db_rows(path, "SELECT user_text, outcome FROM turns ORDER BY started_at")


FAULTS = {
    "http_500": (Reply({"error": "overloaded"}, status=500), True, "HTTP 500"),
    "http_401": (Reply({"error": "bad key"}, status=401), False, "HTTP 401"),
    "garbage": (Reply(raw=b"<html>not json</html>"), True, "not a chat completion"),
    "no_choices": (Reply({"choices": []}), True, "no choices"),
    "dropped": (Reply(drop=True), True, "unreachable"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_failing_llm_gives_an_error_frame_and_the_session_lives_on(
    server: ServerProcess, llm: StubLlm, fault: str
) -> None:
    """Each fault ends its turn with error(recoverable as it should be) + done; the next works."""
    reply, recoverable, words = FAULTS[fault]
    client = server.connect()
    before = client.turn("a first question")
    llm.queue(reply)
    frames = client.turn("this one fails")
    assert [f["type"] for f in frames] == ["status", "status", "error", "done"]
    error = frames[2]
    assert error["recoverable"] is recoverable
    assert words in error["message"]
    assert error["exchange_id"] == frames[-1]["exchange_id"]
    assert error["metrics"] == {"tokens_total": 0, "tools": {}, "response_time_s":
                                error["metrics"]["response_time_s"]}
    after = client.turn("and this one works")
    assert after[-2]["type"] == "message"
    assert before[-2]["type"] == "message"
    assert turns(server.db_path) == [
        ("a first question", "answered"), ("this one fails", "error"),
        ("and this one works", "answered"),
    ]


def test_an_llm_that_hangs_past_the_turn_budget_times_out(tmp_path: Path, llm: StubLlm) -> None:
    """A hung LLM call ends the turn at act.timeout_s: recoverable error, partial metrics. (The
    budget leaves room for the first call and its tool on a busy machine: only the second call
    hangs.)"""
    server = ServerProcess(tmp_path, llm, act={"timeout_s": 2.0}).start()
    held = threading.Event()
    try:
        remember = '{"action":"remember","key":"k","value":"v"}'
        llm.queue(completion(tool_calls=[("memory", remember)], prompt_tokens=40,
                             completion_tokens=4),
                  Reply(completion("too late"), hold=held))
        client = server.connect()
        frames = client.turn("slow")
        assert [f["type"] for f in frames] == ["status", "status", "act_narration", "error",
                                               "done"]
        error = frames[3]
        assert error["recoverable"] is True
        assert "longer than 2s" in error["message"]
        assert error["metrics"]["tokens_total"] == 44
        assert error["metrics"]["tools"] == {"memory": 1}
        held.set()
        assert client.turn("quick")[-2]["type"] == "message"
        assert turns(server.db_path) == [("slow", "timeout"), ("quick", "answered")]
    finally:
        held.set()
        server.kill()
    assert server.errors() == []


def test_a_retryable_failure_is_retried_before_the_person_sees_it(
    tmp_path: Path, llm: StubLlm
) -> None:
    """With llm.retries=1 a single HTTP 503 is retried and the person just gets the answer."""
    server = ServerProcess(tmp_path, llm, llm={"base_url": llm.base_url, "retries": 1,
                                               "retry_backoff_s": 0.0}).start()
    try:
        llm.queue(Reply({"error": "busy"}, status=503), completion("second try"))
        frames = server.connect().turn("hello")
        assert frames[-2]["blocks"] == [{"type": "text", "text": "second try"}]
        assert len(llm.requests) == 2
    finally:
        server.kill()
