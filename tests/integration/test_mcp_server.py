"""Chalie's own MCP server at /mcp, from outside (issue 25): the SDK's streamable-HTTP client
lists and calls every tool with a scoped token, reads the resources, is refused without the
scope or the token, and loses its session and stream the moment the token is revoked."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.integration.harness import WAIT_S, ServerProcess, StubLlm, completion, wait_for
from tests.integration.stub_interface import cookie_client
from tests.integration.test_api_tokens import make_token

ALL = ("memory:read", "memory:write", "chat", "signals")


@asynccontextmanager
async def mcp_session(server: ServerProcess, token: str) -> AsyncIterator[ClientSession]:
    """An initialized MCP session to /mcp with `token`."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                  timeout=WAIT_S) as http, \
            streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


def run(server: ServerProcess, token: str,
        body: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    async def inner() -> Any:
        async with mcp_session(server, token) as session:
            return await body(session)

    return asyncio.run(inner())


def refused(r: httpx.Response, status: int, words: str) -> None:
    """A refusal before the MCP server: the status and a JSON-RPC error naming the problem."""
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert words in error["message"]
    assert error["data"] == {"status": status}


def text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def test_every_tool_is_listed_with_annotations_saying_which_only_read(
        server: ServerProcess, cookie: str) -> None:
    """tools/list offers the six tools; search_memory and list_facts only read, forget is
    destructive, remember changes memory."""
    token = make_token(server, cookie, scopes=ALL)["token"]
    tools = {t.name: t for t in run(server, token, lambda s: s.list_tools()).tools}
    assert set(tools) == {"search_memory", "list_facts", "remember", "forget", "ask_chalie",
                          "add_signal"}
    for name in ("search_memory", "list_facts"):
        assert tools[name].annotations.read_only_hint is True
    assert tools["remember"].annotations.read_only_hint is False
    assert tools["forget"].annotations.destructive_hint is True
    assert "memory:write" in (tools["remember"].description or "")
    assert tools["search_memory"].input_schema["required"] == ["query"]


def test_a_fact_remembered_over_mcp_is_known_searched_and_in_a_later_prompt(
        server: ServerProcess, cookie: str, llm: StubLlm) -> None:
    """remember supersedes like the memory tool; the fact is in /api/memory/knowledge, in
    list_facts with its ISO date, in search_memory with scores, and in the next /ws prompt;
    forget removes it."""
    token = make_token(server, cookie, scopes=ALL)["token"]

    async def body(s: ClientSession) -> dict[str, Any]:
        first = await s.call_tool("remember", {"key": "Home City", "value": "Lisbon"})
        second = await s.call_tool("remember", {"key": "home city", "value": "Porto"})
        facts = await s.call_tool("list_facts", {"history": True})
        found = await s.call_tool("search_memory", {"query": "Porto"})
        return {"first": first, "second": second, "facts": facts, "found": found}

    out = run(server, token, body)
    assert not out["first"].is_error, text(out["first"])
    assert "replaces" in text(out["second"]).lower()
    facts = json.loads(text(out["facts"]))["items"]
    by_value = {f["value"]: f for f in facts}
    assert by_value["Porto"]["key"] == "home city"
    assert by_value["Porto"]["current"]
    assert not by_value["Lisbon"]["current"]
    assert by_value["Porto"]["valid_from"].endswith("+00:00")
    hits = json.loads(text(out["found"]))["results"]
    assert any("Porto" in h["text"] and h["score"] > 0 and "T" in h["created_at"] for h in hits)
    with cookie_client(server.url, cookie) as http:
        known = http.get("/api/memory/knowledge").json()["items"]
    assert [(k["key"], k["value"]) for k in known] == [("home city", "Porto")]
    llm.queue(completion("You live in Porto."))
    server.connect(cookie).turn("What is my home city?")
    assert "Porto" in json.dumps(llm.requests[-1]["messages"])
    forgot = run(server, token, lambda s: s.call_tool("forget", {"key": "Home City"}))
    assert not forgot.is_error, text(forgot)
    with cookie_client(server.url, cookie) as http:
        assert http.get("/api/memory/knowledge").json()["items"] == []


def test_ask_chalie_answers_through_the_model_and_reports_progress(
        server: ServerProcess, cookie: str, llm: StubLlm) -> None:
    """The question runs a turn on the token's channel; a tool call first is reported as
    progress, and the model's final answer is the tool's result."""
    token = make_token(server, cookie, name="claude", scopes=ALL)["token"]
    llm.queue(completion(tool_calls=[("memory", json.dumps({"action": "recall",
                                                            "query": "plans"}))]),
              completion("You have no plans today."))
    progress: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    result = run(server, token, lambda s: s.call_tool(
        "ask_chalie", {"question": "What are my plans?"}, progress_callback=on_progress))
    assert not result.is_error, text(result)
    assert text(result) == "You have no plans today."
    assert progress
    assert all(progress)
    asked = json.dumps(llm.requests[0]["messages"])
    assert "What are my plans?" in asked
    assert "claude" in asked


def test_add_signal_reaches_world_state(server: ServerProcess, cookie: str) -> None:
    """A signal added over MCP is in world state, sent by the token."""
    token = make_token(server, cookie, scopes=ALL)["token"]
    result = run(server, token, lambda s: s.call_tool("add_signal", {
        "signal_type": "calendar_event", "content": "Dentist at 3pm", "topic": "health"}))
    assert not result.is_error, text(result)
    signal_id = json.loads(text(result))["signal_id"]

    def in_world() -> bool:
        with cookie_client(server.url, cookie) as http:
            items = http.get("/api/signals").json()["items"]
        return any(i["id"] == signal_id and i["sender"] == "token:laptop" for i in items)

    wait_for(in_world)


def test_resources_list_and_read_current_facts_and_recent_episodes(
        server: ServerProcess, cookie: str) -> None:
    """The facts and episodes resources are listed and read as JSON."""
    token = make_token(server, cookie, scopes=ALL)["token"]

    async def body(s: ClientSession) -> tuple[Any, ...]:
        await s.call_tool("remember", {"key": "pet", "value": "a cat called Miso"})
        listed = await s.list_resources()
        facts = await s.read_resource("chalie://memory/facts")
        episodes = await s.read_resource("chalie://memory/episodes")
        return listed, facts, episodes

    listed, facts, episodes = run(server, token, body)
    assert {str(r.uri) for r in listed.resources} == {"chalie://memory/facts",
                                                       "chalie://memory/episodes"}
    items = json.loads(facts.contents[0].text)["items"]
    assert [(i["key"], i["value"]) for i in items] == [("pet", "a cat called Miso")]
    assert json.loads(episodes.contents[0].text) == {"items": []}


def test_a_token_without_the_scope_gets_a_tool_error_naming_it(
        server: ServerProcess, cookie: str) -> None:
    """A memory:read token may search but not remember, ask or signal; each refusal names the
    scope it lacks, and the calls are counted by token and protocol."""
    token = make_token(server, cookie, name="reader", scopes=("memory:read",))["token"]

    async def body(s: ClientSession) -> tuple[Any, ...]:
        return (await s.call_tool("remember", {"key": "k", "value": "v"}),
                await s.call_tool("ask_chalie", {"question": "hi"}),
                await s.call_tool("list_facts", {}))

    remember, ask, facts = run(server, token, body)
    assert remember.is_error
    assert "memory:write" in text(remember)
    assert ask.is_error
    assert "`chat`" in text(ask)
    assert not facts.is_error
    metrics = httpx.get(f"{server.url}/metrics").text
    assert 'chalie_api_calls_total{protocol="mcp",result="refused",token="reader"} 2.0' in metrics
    assert 'chalie_api_calls_total{protocol="mcp",result="ok",token="reader"} 1.0' in metrics
    with cookie_client(server.url, cookie) as http:
        listed = http.get("/api/tokens").json()["items"]
    assert listed[0]["calls"]["mcp"] == 3
    assert listed[0]["last_used_at"] is not None


def test_no_token_a_wrong_one_or_another_site_is_refused_over_http(
        server: ServerProcess, cookie: str) -> None:
    """Without a valid bearer token /mcp is a 401 with WWW-Authenticate; a browser page of
    another site gets a 403."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    r = httpx.post(f"{server.url}/mcp", json=init, headers=headers)
    refused(r, 401, "token")
    assert r.headers["WWW-Authenticate"].startswith("Bearer")
    refused(httpx.post(f"{server.url}/mcp", json=init,
                       headers={**headers, "Authorization": "Bearer chalie_nope"}),
            401, "unknown or revoked")
    token = make_token(server, cookie)["token"]
    refused(httpx.post(f"{server.url}/mcp", json=init, headers={
        **headers, "Authorization": f"Bearer {token}", "Origin": "https://evil.example"}),
        403, "cross-site")
    r = httpx.post(f"{server.url}/mcp", json=init, headers={
        **headers, "Authorization": f"Bearer {token}", "Origin": server.url})
    assert r.status_code == 200, r.text


def test_revoking_a_token_refuses_its_next_call_and_ends_its_session_and_stream(
        server: ServerProcess, cookie: str) -> None:
    """With a session open (and its GET stream), DELETE /api/tokens/<id> makes the next call a
    refusal at once, ends the stream, and the session's id is gone."""
    made = make_token(server, cookie, scopes=ALL)
    token, token_id = made["token"], made["item"]["id"]
    headers = {"Authorization": f"Bearer {token}",
               "Accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}
    with httpx.Client(base_url=server.url, headers=headers, timeout=WAIT_S) as http:
        r = http.post("/mcp", json=init)
        assert r.status_code == 200, r.text
        session = r.headers["mcp-session-id"]
        http.headers["mcp-session-id"] = session
        http.headers["mcp-protocol-version"] = "2025-06-18"
        assert http.post("/mcp", json={"jsonrpc": "2.0",
                                       "method": "notifications/initialized"}).status_code == 202
        with http.stream("GET", "/mcp") as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")

            def open_now() -> int:
                with cookie_client(server.url, cookie) as admin:
                    return int(admin.get("/api/tokens").json()["items"][0]["open"])

            wait_for(lambda: open_now() >= 2)  # the session and its stream
            with cookie_client(server.url, cookie) as admin:
                assert admin.delete(f"/api/tokens/{token_id}").status_code == 200
            rest = b"".join(stream.iter_raw())  # ends: the stream was closed
            assert b"jsonrpc" not in rest
        refused(http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
                401, "revoked")
    assert any(e.get("event") == "mcp_session_ended" for e in server.log_events())
