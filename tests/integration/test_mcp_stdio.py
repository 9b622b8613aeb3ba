"""`chalie mcp`: Chalie's MCP server over stdio for clients that only launch commands, relayed
to the running server's /mcp with a token; it never opens the store."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.integration.harness import ROOT, WAIT_S, ServerProcess, StubLlm, completion
from tests.integration.stub_interface import cookie_client
from tests.integration.test_api_tokens import make_token

ALL = ("memory:read", "memory:write", "chat", "signals")


def relay(server_url: str, token: str | None) -> StdioServerParameters:
    env = {"CHALIE_TOKEN": token} if token is not None else {}
    return StdioServerParameters(command=sys.executable,
                                 args=["-m", "chalie", "mcp", "--url", f"{server_url}/mcp"],
                                 env=env, cwd=ROOT)


def test_the_stdio_command_lists_and_calls_tools_through_the_running_server(
        server: ServerProcess, cookie: str, llm: StubLlm) -> None:
    """The SDK's stdio client sees the six tools; remember lands in the server's memory, and
    ask_chalie answers through the model with its progress passed on."""
    token = make_token(server, cookie, name="desktop", scopes=ALL)["token"]
    llm.queue(completion(tool_calls=[("memory", json.dumps({"action": "recall",
                                                            "query": "tea"}))]),
              completion("Green tea."))
    progress: list[str] = []

    async def on_progress(progress_: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async def body() -> tuple[Any, ...]:
        async with stdio_client(relay(server.url, token)) as (read, write), \
                ClientSession(read, write) as session:
            await asyncio.wait_for(session.initialize(), WAIT_S)
            tools = await session.list_tools()
            remembered = await session.call_tool(
                "remember", {"key": "drink", "value": "green tea", "kind": "preference"})
            answer = await session.call_tool("ask_chalie", {"question": "What do I drink?"},
                                             progress_callback=on_progress)
            resources = await session.list_resources()
            facts = await session.read_resource("chalie://memory/facts")
            return tools, remembered, answer, resources, facts

    tools, remembered, answer, resources, facts = asyncio.run(body())
    assert {t.name for t in tools.tools} >= {"search_memory", "remember", "ask_chalie"}
    assert not remembered.is_error
    assert answer.content[0].text == "Green tea."
    assert progress
    assert len(resources.resources) == 2
    assert "green tea" in facts.contents[0].text
    with cookie_client(server.url, cookie) as http:
        known = http.get("/api/memory/knowledge").json()["items"]
        assert [(k["key"], k["value"]) for k in known] == [("drink", "green tea")]
        assert http.get("/api/tokens").json()["items"][0]["calls"]["mcp"] == 3  # 2 tools, 1 read


def test_without_a_token_or_a_server_the_command_says_why_in_one_line(
        server: ServerProcess) -> None:
    """No token: exit 2; a server that is not there: exit 1; each with one line on stderr."""
    base = [sys.executable, "-m", "chalie", "mcp", "--url"]
    env = {"PATH": "/usr/bin:/bin"}
    no_token = subprocess.run([*base, f"{server.url}/mcp"], env=env, cwd=ROOT, input="",
                              capture_output=True, text=True, timeout=WAIT_S, check=False)
    assert no_token.returncode == 2
    assert no_token.stderr.strip().count("\n") == 0
    assert "CHALIE_TOKEN" in no_token.stderr
    down = subprocess.run([*base, "http://127.0.0.1:9/mcp"], env={**env, "CHALIE_TOKEN": "x"},
                          cwd=ROOT, input="", capture_output=True, text=True, timeout=WAIT_S,
                          check=False)
    assert down.returncode == 1, down.stderr
    assert "127.0.0.1:9" in down.stderr.strip().splitlines()[-1]
    wrong = subprocess.run([*base, f"{server.url}/mcp"], env={**env, "CHALIE_TOKEN": "nope"},
                           cwd=ROOT, input="", capture_output=True, text=True, timeout=WAIT_S,
                           check=False)
    assert wrong.returncode == 1, wrong.stderr
    assert "unknown or revoked" in wrong.stderr
