"""A tool server that stops answering mid-call (an MCP server stuck in a tool): the turn gets
an error result for the model at mcp.call_timeout_s and is answered; nothing waits for good,
and the next call to the same server works. (An interface that hangs past
interfaces.execute_timeout_s: tests/integration/test_interfaces.py.)"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.harness import ServerProcess, StubLlm, completion, wait_for

TOY = Path(__file__).resolve().parents[1] / "mcp" / "toy_server.py"


@pytest.fixture
def toy_server(tmp_path: Path, llm: StubLlm) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path, llm, mcp={"call_timeout_s": 1.0, "restart_initial_s": 0.1})
    with proc.config_path.open("a") as config:  # an array of tables, as the harness cannot
        config.write(f'\n[[mcp.servers]]\nname = "toy"\ncommand = {json.dumps(sys.executable)}'
                     f'\nargs = [{json.dumps(str(TOY))}]\n')
    proc.start()
    try:
        wait_for(lambda: any(e.get("event") == "mcp_server_up" for e in proc.log_events()))
        yield proc
    finally:  # a clean stop ends the MCP server too, nap and all
        assert proc.stop() == 0


def test_a_tool_server_that_hangs_costs_the_turn_its_call_not_its_answer(
    toy_server: ServerProcess, llm: StubLlm
) -> None:
    llm.queue(completion(tool_calls=[("toy_nap", json.dumps({"seconds": 60}))]),
              completion("The nap tool did not answer; here is what I know."))
    client = toy_server.connect()
    frames = client.turn("Take a nap, then tell me.")
    assert frames[-2]["type"] == "message"
    assert frames[-2]["blocks"][0]["text"].startswith("The nap tool did not answer")
    result = llm.requests[1]["messages"][1]["content"]
    assert "did not answer" in result
    llm.queue(completion(tool_calls=[("toy_echo", json.dumps({"text": "still here"}))]),
              completion("It echoed."))
    assert client.turn("Echo something.")[-2]["type"] == "message"
    assert "echo: still here" in llm.requests[3]["messages"][1]["content"]
    metrics = httpx.get(f"{toy_server.url}/metrics").text
    assert 'chalie_mcp_tool_calls_total{result="failed",server="toy"} 1.0' in metrics
