"""Property-based fuzzing of /ws frames and REST bodies against one real server.

Bounded (CHALIE_FUZZ_EXAMPLES, 120 by default) so CI stays fast. For every input: no 5xx, no
closed socket, an answer of the right kind; at the end, no ERROR in the server's log and a
normal chat still works.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.harness import Client, ServerProcess, StubLlm

EXAMPLES = int(os.environ.get("CHALIE_FUZZ_EXAMPLES", "120"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner,
                                                               max_size=4),
    max_leaves=12,
)
odd_text = st.text(max_size=300) | st.sampled_from(
    ["", " ", "cancel", "never mind", "\x00", "😀" * 50, "<script>alert(1)</script>",
     '{"type": "chat"}', "a" * 5000, "\u202e\u200b", "$trail $history ${user_text}"]
)
FIELDS = ["text", "source", "image_ids", "client_id", "payload", "last_seq", "skill", "params"]


@st.composite
def frames(draw: st.DrawFn) -> Any:
    """Well-formed frames with odd content, frames with wrong fields, and non-frames."""
    kind = draw(st.sampled_from(["chat", "chat", "act_steer", "action", "resume", "pong",
                                 "mixed", "junk"]))
    if kind == "chat":
        frame: dict[str, Any] = {"type": "chat", "text": draw(odd_text)}
        if draw(st.booleans()):
            frame["source"] = draw(st.sampled_from(["text", "voice", "smoke", 3]))
        if draw(st.booleans()):
            frame["client_id"] = draw(st.text(max_size=20) | st.integers())
        return frame
    if kind == "act_steer":
        return {"type": "act_steer", "text": draw(odd_text)}
    if kind == "action":
        skill = draw(st.sampled_from(["memory", "forget", "approval", "nope", ""]))
        params = draw(st.dictionaries(st.sampled_from(["action", "key", "value", "query",
                                                       "approval_id", "approve"]),
                                      json_values, max_size=4))
        return {"type": "action", "payload": {"skill": skill, "params": params}}
    if kind == "resume":
        return {"type": "resume", "last_seq": draw(st.integers(min_value=-5, max_value=10**12)
                                                   | st.text(max_size=5))}
    if kind == "pong":
        return {"type": "pong"}
    if kind == "mixed":
        return {"type": draw(st.text(max_size=12) | json_scalars),
                **draw(st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=3))}
    return draw(json_values)


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    llm = StubLlm()
    server = ServerProcess(Path(tmp_path_factory.mktemp("fuzz")), llm,
                           server={"max_frame_bytes": 4096}).start()
    yield server
    server.kill()
    llm.close()
    assert server.errors() == [], f"server logged errors: {server.errors()[:3]}"


@pytest.fixture(scope="module")
def fuzz_client(fuzz_server: ServerProcess) -> Client:
    return fuzz_server.connect()


def ends_a_turn(frame: dict[str, Any]) -> bool:
    return frame["type"] == "done"


class Seen:
    high = 0  # the highest seq this socket has received


def read_answer(client: Client, sent: Any) -> None:
    """Read what the server owes for one frame: a whole turn, a replay, or one error frame."""
    kind = sent.get("type") if isinstance(sent, dict) else None
    if kind == "pong" and set(sent) == {"type"}:
        return
    last = sent.get("last_seq") if kind == "resume" else None
    if kind == "resume" and set(sent) == {"type", "last_seq"} and isinstance(last, int) and \
            not isinstance(last, bool) and last >= 0:
        if last < Seen.high:  # the replay runs up to the newest frame this socket has seen
            replay = client.recv_until(lambda f: f.get("seq") == Seen.high)
            assert [f["seq"] for f in replay if "seq" in f] == list(range(last + 1, Seen.high + 1))
        return
    frames = client.recv_until(lambda f: f["type"] in ("done", "error") and (
        f["type"] == "done" or not f.get("exchange_id")))
    Seen.high = max([Seen.high, *(f["seq"] for f in frames if "seq" in f)])
    assert all(f["type"] != "error" or f["recoverable"] in (True, False) for f in frames)


@FUZZ
@given(frame=frames())
def test_no_frame_closes_the_socket_or_goes_unanswered(fuzz_client: Client, frame: Any) -> None:
    """Whatever a client sends, it gets an answer on the same open socket."""
    fuzz_client.send(json.dumps(frame))
    read_answer(fuzz_client, frame)


@FUZZ
@given(body=json_values | st.binary(max_size=200).map(lambda b: b.hex()))
def test_login_bodies_never_get_a_server_error(fuzz_server: ServerProcess, body: Any) -> None:
    """POST /auth/login with any body answers 200, 400, 401 or 429, with a JSON error body."""
    content = body.encode() if isinstance(body, str) and not body.startswith("{") else \
        json.dumps(body).encode()
    r = httpx.post(f"{fuzz_server.url}/auth/login", content=content)
    assert r.status_code in (200, 400, 401, 429)
    if r.status_code != 200:
        assert "error" in r.json()


def test_after_the_fuzzing_a_normal_chat_is_answered(
    fuzz_server: ServerProcess, fuzz_client: Client
) -> None:
    """Runs last in this module: the server still answers a plain chat on a fresh socket."""
    frames = fuzz_server.connect().turn("are you still fine?")
    assert frames[-2]["type"] == "message"
    assert httpx.get(f"{fuzz_server.url}/health").json()["status"] == "ok"
