"""MCP tools over a real socket: the server runs mcp-server-time over stdio and lends its tools
to the model."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.harness import ServerProcess, StubLlm, completion, wait_for

TIME_SERVER = Path(sys.executable).parent / "mcp-server-time"


@pytest.fixture
def mcp_server(tmp_path: Path, llm: StubLlm) -> Iterator[ServerProcess]:
    """The real server with `[[mcp.servers]] name = "time"`, once the time server is up."""
    proc = ServerProcess(tmp_path, llm, mcp={"restart_initial_s": 0.1})
    # The harness writes plain tables only; the server list is an array of tables.
    with proc.config_path.open("a") as config:
        command = json.dumps(str(TIME_SERVER))  # a JSON string is a TOML basic string
        config.write(f'\n[[mcp.servers]]\nname = "time"\ncommand = {command}\n')
    proc.start()
    try:
        wait_for(lambda: any(e.get("event") == "mcp_server_up" for e in proc.log_events()))
        yield proc
    finally:
        proc.stop()
    errors = proc.errors()
    assert not errors, f"server logged errors: {errors}"


def test_the_model_calls_an_mcp_tool_and_answers_with_its_result(
    mcp_server: ServerProcess, llm: StubLlm
) -> None:
    """time_get_current_time is offered, runs in the real time server, and its JSON is in the
    next prompt; the answer arrives on the socket."""
    llm.queue(
        completion(tool_calls=[("time_get_current_time", json.dumps({"timezone": "UTC"}))]),
        completion("It is morning in UTC."),
    )
    frames = mcp_server.connect().turn("What time is it in UTC?")
    first, second = llm.requests
    offered = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert "time_get_current_time" in offered
    assert "time_convert_time" in offered
    assert offered["time_get_current_time"]["parameters"]["required"] == ["timezone"]
    prompt = second["messages"][1]["content"]
    assert '"timezone": "UTC"' in prompt
    assert '"datetime": "' in prompt
    message = frames[-2]
    assert message["type"] == "message"
    assert message["blocks"] == [{"type": "text", "text": "It is morning in UTC."}]
    assert message["metrics"]["tools"] == {"time_get_current_time": 1}
    metrics = httpx.get(f"{mcp_server.url}/metrics").text
    assert 'chalie_mcp_servers_up 1.0' in metrics
    assert 'chalie_mcp_tool_calls_total{result="ok",server="time"} 1.0' in metrics


def test_the_dashboard_lists_the_server_online_with_its_tools(mcp_server: ServerProcess) -> None:
    """GET /api/mcp: each configured server, connected or not, with the tools it lends."""
    r = httpx.get(f"{mcp_server.url}/api/mcp", cookies={"chalie_session": mcp_server.login()})
    assert r.status_code == 200
    (item,) = r.json()["items"]
    assert (item["name"], item["transport"], item["online"]) == ("time", "stdio", True)
    tools = {t["name"]: t for t in item["tools"]}
    assert {"time_get_current_time", "time_convert_time"} <= set(tools)
    assert tools["time_get_current_time"]["description"]
    assert tools["time_get_current_time"]["danger"] == "safe"
