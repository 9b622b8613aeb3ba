"""A model whose stream stops sending: the attempt ends after llm.stall_timeout_s and is classed
like a dropped connection (retried, or answered by the fallback, while none of it was shown);
text already shown is never sent twice; and the turn never outlasts act.timeout_s."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.harness import Reply, ServerProcess, StubLlm, completion

ANSWER = "Your dog is called Rex."


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of a test: a stalled stub stream may then finish (to nobody)."""
    event = threading.Event()
    yield event
    event.set()


def start(tmp_path: Path, llm: StubLlm, **llm_settings: Any) -> ServerProcess:
    return ServerProcess(tmp_path, llm, llm={"base_url": llm.base_url, "retries": 0,
                                             **llm_settings}).start()


def deltas_of(frames: list[dict[str, Any]]) -> str:
    return "".join(f["text"] for f in frames if f["type"] == "message_delta")


def test_a_stream_that_stalls_before_any_text_is_answered_by_the_fallback(
    tmp_path: Path, llm: StubLlm, release: threading.Event
) -> None:
    """The stream sends its role chunk and then nothing: after the stall timeout the fallback
    answers, and the person sees its answer once."""
    server = start(tmp_path, llm, stall_timeout_s=0.5,
                   primary={"fallback": {"model": "stub-model"}})
    try:
        llm.queue(Reply(completion("never sent"), pause=release, pause_after=0),
                  completion(ANSWER))
        frames = server.connect(deltas=True).turn("What is my dog called?")
        message = next(f for f in frames if f["type"] == "message")
        assert message["blocks"] == [{"type": "text", "text": ANSWER}]
        assert deltas_of(frames) == ANSWER
        assert [r["model"] for r in llm.requests] == ["llama3.1", "stub-model"]
    finally:
        server.kill()
    assert server.errors() == []
    stalls = [e for e in server.log_events() if e.get("event") == "llm_attempt"
              and "stalled" in e.get("error", "")]
    assert [s["outcome"] for s in stalls] == ["unreachable"]


def test_a_stream_that_stalls_mid_answer_ends_the_turn_without_doubling_its_text(
    tmp_path: Path, llm: StubLlm, release: threading.Event
) -> None:
    """Two pieces are shown, then the stream stalls: no retry (it would show them again), an
    error frame naming the stall and the setting, and the next turn works."""
    server = start(tmp_path, llm, stall_timeout_s=0.5, retries=2, retry_backoff_s=0.0)
    try:
        llm.queue(Reply(completion(ANSWER), pause=release, pause_after=2))
        client = server.connect(deltas=True)
        frames = client.turn("What is my dog called?")
        assert [f["type"] for f in frames if f["type"] != "message_delta"] == [
            "status", "status", "error", "done"]
        error = next(f for f in frames if f["type"] == "error")
        assert "stalled" in error["message"]
        assert "llm.stall_timeout_s" in error["message"]
        assert error["recoverable"] is True
        assert deltas_of(frames) == ANSWER[:8]  # "Your dog": the two pieces, once
        assert len(llm.requests) == 1
        assert client.turn("And now?")[-2]["type"] == "message"
    finally:
        server.kill()
    assert server.errors() == []


def test_the_turn_ends_at_its_wall_clock_when_the_stall_timeout_is_longer(
    tmp_path: Path, llm: StubLlm, release: threading.Event
) -> None:
    """With act.timeout_s shorter than the stall timeout, a stalled stream ends at the turn's
    budget, and the next turn is answered (the worker was not left hanging)."""
    server = ServerProcess(tmp_path, llm, llm={"base_url": llm.base_url, "retries": 0,
                                               "stall_timeout_s": 600.0},
                           act={"timeout_s": 1.5}).start()
    try:
        llm.queue(Reply(completion(ANSWER), pause=release, pause_after=2))
        client = server.connect(deltas=True)
        began = time.monotonic()
        frames = client.turn("What is my dog called?")
        took = time.monotonic() - began
        error = next(f for f in frames if f["type"] == "error")
        assert "longer than 1.5s" in error["message"]
        assert took < 10.0  # the turn's budget, not the stall timeout's ten minutes
        assert deltas_of(frames) == ANSWER[:8]
        assert client.turn("And now?")[-2]["type"] == "message"
    finally:
        server.kill()
    assert server.errors() == []
