"""Chalie as an OpenAI-compatible model (issue 25), driven by the official `openai` SDK: models,
chat at once and streamed, a growing conversation never doubled in the transcript, images,
tools kept inside the turn, errors in OpenAI's shape, and revoked tokens refused at once."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from tests.integration.harness import (
    WAIT_S,
    Reply,
    ServerProcess,
    StubLlm,
    completion,
    db_rows,
    wait_for,
)
from tests.integration.stub_interface import cookie_client
from tests.integration.test_api_tokens import make_token

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=")
REMEMBER = json.dumps({"action": "remember", "key": "favourite colour", "value": "teal"})


@pytest.fixture
def token(server: ServerProcess, cookie: str) -> str:
    made: str = make_token(server, cookie, name="laptop", scopes=("chat",))["token"]
    return made


@pytest.fixture
def client(server: ServerProcess, token: str) -> Iterator[OpenAI]:
    with OpenAI(base_url=server.url + "/v1", api_key=token, max_retries=0,
                timeout=WAIT_S) as sdk:
        yield sdk


def transcript(server: ServerProcess, channel: str = "token.laptop") -> list[tuple[Any, ...]]:
    return db_rows(server.db_path, "SELECT role, text FROM transcript WHERE channel = ? "
                                   "ORDER BY id", channel)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def test_the_models_are_chalie_and_chalie_light(client: OpenAI) -> None:
    """GET /v1/models lists the two models, in OpenAI's list shape."""
    models = client.models.list()
    assert [m.id for m in models.data] == ["chalie", "chalie-light"]
    assert {m.owned_by for m in models.data} == {"chalie"}


def test_a_chat_answers_in_openais_shape_with_usage(
        server: ServerProcess, llm: StubLlm, client: OpenAI, cookie: str) -> None:
    """A non-streamed chat: chat.completion with the answer, and the tokens the model reported;
    the call counts for the token by protocol."""
    llm.queue(completion("Hello from Chalie.", prompt_tokens=70, completion_tokens=6))
    answer = client.chat.completions.create(
        model="chalie", messages=[{"role": "system", "content": "You are a pirate."},
                                  user("hi there")], temperature=0.3, max_tokens=200)
    assert answer.object == "chat.completion"
    assert answer.id.startswith("chatcmpl-")
    assert answer.model == "chalie"
    assert answer.choices[0].message.role == "assistant"
    assert answer.choices[0].message.content == "Hello from Chalie."
    assert answer.choices[0].finish_reason == "stop"
    assert answer.choices[0].message.tool_calls is None
    assert answer.usage is not None
    assert answer.usage.completion_tokens >= 6
    assert answer.usage.prompt_tokens >= 70
    assert answer.usage.total_tokens == answer.usage.prompt_tokens + \
        answer.usage.completion_tokens
    assert "pirate" not in json.dumps(llm.requests)  # Chalie's identity, not the client's
    assert transcript(server) == [("user", "hi there"), ("assistant", "Hello from Chalie.")]
    with cookie_client(server.url, cookie) as http:
        listed = http.get("/api/tokens").json()["items"][0]
        metrics = http.get("/metrics").text
    assert listed["calls"]["openai"] == 1
    assert listed["last_used_at"] is not None
    assert 'chalie_api_calls_total{protocol="openai",result="ok",token="laptop"} 1.0' in metrics


def test_a_streamed_chat_sends_the_answer_in_chunks_then_usage(
        llm: StubLlm, client: OpenAI) -> None:
    """stream=True: a role chunk, content chunks that add up to the answer, a stop chunk, and
    with include_usage a last chunk of usage without choices."""
    llm.queue(completion("A streamed answer, in pieces.", prompt_tokens=40,
                         completion_tokens=8))
    chunks = list(client.chat.completions.create(
        model="chalie", messages=[user("stream please")], stream=True,
        stream_options={"include_usage": True}))
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "A streamed answer, in pieces."
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 1
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens >= 8
    assert all(c.usage is None for c in chunks[:-1])


def test_a_growing_conversation_is_not_doubled_in_the_transcript(
        server: ServerProcess, llm: StubLlm, client: OpenAI) -> None:
    """Each request resends the whole conversation: only its last message is new. The same
    request again (a retry, a Regenerate) gets the answer already given and runs no turn."""
    llm.queue(completion("One."), completion("Two."), completion("Three."))
    messages: list[dict[str, Any]] = []
    for text in ("first", "second", "third"):
        messages.append(user(text))
        answer = client.chat.completions.create(model="chalie", messages=messages)
        messages.append({"role": "assistant", "content": answer.choices[0].message.content})
    assert [m["content"] for m in messages[1::2]] == ["One.", "Two.", "Three."]
    calls = len(llm.requests)
    again = client.chat.completions.create(model="chalie", messages=messages[:-1])
    assert again.choices[0].message.content == "Three."
    streamed = client.chat.completions.create(model="chalie", messages=messages[:-1],
                                              stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == "Three."
    assert len(llm.requests) == calls
    assert transcript(server) == [("user", "first"), ("assistant", "One."),
                                  ("user", "second"), ("assistant", "Two."),
                                  ("user", "third"), ("assistant", "Three.")]


def test_the_user_field_names_a_channel_under_the_tokens(
        server: ServerProcess, llm: StubLlm, client: OpenAI) -> None:
    """`user` gives each of a program's people a conversation of its own, under the token's."""
    llm.queue(completion("Hi Ann."), completion("Hi, whoever you are."))
    client.chat.completions.create(model="chalie", messages=[user("hello")], user="ann")
    client.chat.completions.create(model="chalie", messages=[user("hello")],
                                   user="someone with spaces/slashes")
    channels = {c for (c,) in db_rows(server.db_path, "SELECT DISTINCT channel FROM turns")}
    assert "token.laptop.ann" in channels
    hashed = channels - {"token.laptop.ann"}
    assert len(hashed) == 1
    assert next(iter(hashed)).startswith("token.laptop.u")


def test_tool_calls_stay_inside_the_turn(
        server: ServerProcess, llm: StubLlm, client: OpenAI) -> None:
    """The model calls Chalie's memory tool, then answers: the client sees only the answer."""
    llm.queue(completion(tool_calls=[("memory", REMEMBER)]), completion("Noted: teal."),
              completion(tool_calls=[("memory", REMEMBER)]), completion("Teal it is."))
    answer = client.chat.completions.create(model="chalie", messages=[user("I like teal")])
    assert answer.choices[0].message.content == "Noted: teal."
    assert answer.choices[0].message.tool_calls is None
    chunks = list(client.chat.completions.create(
        model="chalie", messages=[user("I like teal"), {"role": "assistant",
                                                        "content": "Noted: teal."},
                                  user("really teal")], stream=True))
    assert all(c.choices[0].delta.tool_calls is None for c in chunks if c.choices)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.endswith("Teal it is.")
    assert db_rows(server.db_path, "SELECT count(*) FROM tool_calls")[0][0] >= 2


def test_an_image_in_a_data_url_reaches_the_model(
        server: ServerProcess, llm: StubLlm, client: OpenAI) -> None:
    """An image_url part with a data: URL goes to the model as the person's image."""
    llm.queue(completion("A single pixel."))
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    answer = client.chat.completions.create(model="chalie", messages=[{
        "role": "user", "content": [{"type": "text", "text": "What is this?"},
                                    {"type": "image_url", "image_url": {"url": url}}]}])
    assert answer.choices[0].message.content == "A single pixel."
    parts = [p for m in llm.requests[-1]["messages"] if isinstance(m["content"], list)
             for p in m["content"]]
    assert [p["image_url"]["url"] for p in parts if p["type"] == "image_url"] == [url]
    with pytest.raises(openai.BadRequestError) as fetched:
        client.chat.completions.create(model="chalie", messages=[{
            "role": "user", "content": [{"type": "image_url",
                                         "image_url": {"url": "https://example.com/a.png"}}]}])
    assert "does not fetch" in fetched.value.message


def error_of(e: openai.APIStatusError) -> dict[str, Any]:
    body = e.response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    detail: dict[str, Any] = body["error"]
    return detail


def test_errors_come_in_openais_shape(server: ServerProcess, cookie: str,
                                      client: OpenAI) -> None:
    """A bad token is a 401, a bad body a 400 naming the field, an unknown model a 404, a
    token without `chat` a 403: each in OpenAI's error shape, as the SDK's error classes."""
    with OpenAI(base_url=server.url + "/v1", api_key="chalie_wrong", max_retries=0) as bad, \
            pytest.raises(openai.AuthenticationError) as e401:
        bad.chat.completions.create(model="chalie", messages=[user("hi")])
    assert error_of(e401.value)["type"] == "authentication_error"
    with pytest.raises(openai.BadRequestError) as empty:
        client.chat.completions.create(model="chalie", messages=[])
    assert error_of(empty.value)["param"] == "messages"
    with pytest.raises(openai.BadRequestError) as last:
        client.chat.completions.create(model="chalie", messages=[
            user("hi"), {"role": "assistant", "content": "hello"}])
    assert "last message" in error_of(last.value)["message"]
    with pytest.raises(openai.BadRequestError) as typed:
        client.chat.completions.create(model="chalie", messages=[{"role": "user",
                                                                  "content": 42}])
    assert error_of(typed.value)["param"] == "messages[0].content"
    with pytest.raises(openai.BadRequestError) as several:
        client.chat.completions.create(model="chalie", messages=[user("hi")], n=2)
    assert error_of(several.value)["param"] == "n"
    with pytest.raises(openai.NotFoundError) as e404:
        client.chat.completions.create(model="gpt-4o", messages=[user("hi")])
    assert error_of(e404.value)["code"] == "model_not_found"
    memory_only = make_token(server, cookie, name="reader", scopes=("memory:read",))["token"]
    with OpenAI(base_url=server.url + "/v1", api_key=memory_only, max_retries=0) as reader, \
            pytest.raises(openai.PermissionDeniedError) as e403:
        reader.models.list()
    assert "chat" in error_of(e403.value)["message"]
    r = httpx.post(f"{server.url}/v1/chat/completions", content=b"{not json",
                   headers={"Authorization": f"Bearer {client.api_key}"})
    assert r.status_code == 400
    assert r.json()["error"]["type"] == "invalid_request_error"


def revoke(server: ServerProcess, cookie: str, name: str = "laptop") -> None:
    with cookie_client(server.url, cookie) as http:
        token_id = next(t["id"] for t in http.get("/api/tokens").json()["items"]
                        if t["name"] == name)
        assert http.delete(f"/api/tokens/{token_id}").status_code == 200


def test_a_revoked_token_is_refused_at_once(server: ServerProcess, cookie: str,
                                            client: OpenAI) -> None:
    """The request after DELETE /api/tokens/<id> is a 401."""
    assert len(client.models.list().data) == 2
    revoke(server, cookie)
    with pytest.raises(openai.AuthenticationError) as e:
        client.models.list()
    assert "revoked" in error_of(e.value)["message"]


def test_revoking_a_token_ends_its_stream(server: ServerProcess, llm: StubLlm, cookie: str,
                                          client: OpenAI) -> None:
    """A stream open while its token is revoked ends at once, with an error event, though the
    model has not finished."""
    pause = threading.Event()
    reply = Reply(completion("A long answer that is cut short by the revocation."),
                  pause=pause, pause_after=2)
    llm.queue(reply)
    try:
        stream = client.chat.completions.create(model="chalie", messages=[user("talk")],
                                                stream=True)
        seen: list[str] = []

        def read() -> None:
            for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    seen.append(chunk.choices[0].delta.content)
                    if len(seen) == 1:
                        reply.paused.wait(WAIT_S)
                        revoke(server, cookie)

        with pytest.raises(openai.APIError) as ended:
            read()
        assert not pause.is_set()  # ended while the model was still answering
        assert "revoked" in str(ended.value)
        assert seen
    finally:
        pause.set()
    with cookie_client(server.url, cookie) as http:
        wait_for(lambda: 'result="refused",token="laptop"' in http.get("/metrics").text)


def test_a_client_that_hangs_up_mid_stream_leaves_the_turn_to_finish(
        server: ServerProcess, llm: StubLlm, token: str, client: OpenAI) -> None:
    """The stream's client goes away half-way: the turn goes on and its answer is kept, and the
    same request sent again gets that answer without a second turn."""
    pause = threading.Event()
    reply = Reply(completion("Kept though nobody was listening."), pause=pause, pause_after=2)
    llm.queue(reply)
    body = {"model": "chalie", "messages": [user("are you there")], "stream": True}
    try:
        with httpx.Client(base_url=server.url, timeout=WAIT_S) as http, http.stream(
                "POST", "/v1/chat/completions", json=body,
                headers={"Authorization": f"Bearer {token}"}) as r:
            assert r.headers["content-type"] == "text/event-stream"
            lines = r.iter_lines()
            assert next(line for line in lines if '"content"' in line)
    finally:
        pause.set()
    wait_for(lambda: ("assistant", "Kept though nobody was listening.") in transcript(server))
    calls = len(llm.requests)
    again = client.chat.completions.create(model="chalie", messages=[user("are you there")])
    assert again.choices[0].message.content == "Kept though nobody was listening."
    assert len(llm.requests) == calls


def test_chalie_light_is_answered_by_the_light_model(tmp_path: Any, llm: StubLlm) -> None:
    """`chalie-light` runs the turn on [llm.light]'s model; `chalie` on the primary's."""
    server = ServerProcess(tmp_path, llm, llm={"base_url": llm.base_url, "retries": 0,
                                               "light": {"model": "small-model"}}).start()
    try:
        key = make_token(server, server.login(), name="laptop", scopes=("chat",))["token"]
        llm.queue(completion("Light answer."), completion("Full answer."))
        with OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0,
                    timeout=WAIT_S) as sdk:
            light = sdk.chat.completions.create(model="chalie-light", messages=[user("a")])
            full = sdk.chat.completions.create(model="chalie", messages=[user("b")])
        assert light.model == "chalie-light"
        assert light.choices[0].message.content == "Light answer."
        assert full.choices[0].message.content == "Full answer."
        turns = [r for r in llm.requests if "response_format" not in r]
        assert [r["model"] for r in turns] == ["small-model", "llama3.1"]  # the default model
    finally:
        server.kill()
    assert not server.errors()
