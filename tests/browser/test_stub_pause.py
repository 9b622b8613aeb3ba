"""The stub LLM's `pause` (tests/integration/harness.py), which the chat test uses to see an
answer half-written: it needs the server, not a browser."""

from __future__ import annotations

from typing import Any

from tests.browser.conftest import Holds
from tests.integration.harness import Reply, ServerProcess, StubLlm, completion, wait_for


def test_a_paused_stream_sends_its_first_pieces_then_the_rest(
    server: ServerProcess, llm: StubLlm, hold: Holds
) -> None:
    """With pause_after=2 the client gets the first two 4-character pieces as deltas and no
    message until the pause is released; then the rest, and the whole message."""
    go_on = hold()
    text = "Teal is a blue-green colour."
    reply = Reply(completion(text), pause=go_on, pause_after=2)
    llm.queue(reply)
    client = server.connect(deltas=True)
    client.send({"type": "chat", "text": "What is teal?"})
    wait_for(reply.paused.is_set)
    deltas: list[dict[str, Any]] = []
    while "".join(d["text"] for d in deltas) != "Teal is":  # a trailing space waits for more
        frame = client.recv()
        assert frame["type"] not in ("message", "done"), frame
        if frame["type"] == "message_delta":
            deltas.append(frame)
    go_on.set()
    rest = client.recv_until(lambda f: f["type"] == "done")
    deltas += [f for f in rest if f["type"] == "message_delta"]
    assert "".join(d["text"] for d in deltas) == text
    assert next(f for f in rest if f["type"] == "message")["blocks"][0]["text"] == text
