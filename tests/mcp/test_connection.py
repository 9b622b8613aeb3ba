"""One MCP server kept connected: real servers over stdio and streamable HTTP on loopback.

`mcp-server-time` is a real server nobody here wrote; toy_server.py is ours, to crash it, change
its tools and serve it over HTTP.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from chalie.config import McpConfig, McpServerConfig
from chalie.mcp.connection import McpConnection
from chalie.metrics import Metrics
from chalie.tools.catalog import ToolCatalog
from tests.tools.test_registry import CTX

TIME_SERVER = Path(sys.executable).parent / "mcp-server-time"
TOY = Path(__file__).with_name("toy_server.py")
TOY_STDIO = McpServerConfig(name="toy", command=sys.executable, args=(str(TOY),))
TIME = McpServerConfig(name="time", command=str(TIME_SERVER))
WAIT_S = 20.0  # upper bound for a server to start; a passing test never waits this long


class RecordingCatalog(ToolCatalog):
    """A ToolCatalog that remembers what its providers did: listed (with names), offline."""

    def __init__(self) -> None:
        super().__init__([])
        self.events: list[tuple[str, ...]] = []
        self._cond = threading.Condition()

    def set_provider(self, key: str, **kw: Any) -> None:
        super().set_provider(key, **kw)
        with self._cond:
            self.events.append(("listed", key, *self.names_of(key)))
            self._cond.notify_all()

    def set_online(self, key: str, online: bool) -> bool:
        changed = super().set_online(key, online)
        with self._cond:
            if changed:
                self.events.append(("online" if online else "offline", key))
            self._cond.notify_all()
        return changed

    def names(self) -> list[str]:
        """The tool names a prompt is offered now."""
        return [s.name for s in self.specs()]


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up after {WAIT_S}s waiting for {what}")
        time.sleep(0.01)


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
def catalog() -> RecordingCatalog:
    return RecordingCatalog()


@pytest.fixture
def connect(catalog: RecordingCatalog, metrics: Metrics) -> Iterator[Callable[..., McpConnection]]:
    """Start a connection to `server` (config overrides as keywords); closed after the test."""
    made: list[McpConnection] = []

    def start(server: McpServerConfig, **overrides: Any) -> McpConnection:
        settings: dict[str, Any] = {"connect_timeout_s": 20.0, "call_timeout_s": 20.0,
                                    "restart_initial_s": 0.05, "restart_max_s": 0.5}
        settings.update(overrides)
        connection = McpConnection(server, config=McpConfig(servers=(server,), **settings),
                                   catalog=catalog, order=1e12, metrics=metrics)
        made.append(connection)
        connection.start()
        return connection

    yield start
    for connection in made:
        connection.close()


@pytest.fixture
def http_toy() -> Iterator[Callable[[int], None]]:
    """Start toy_server.py over streamable HTTP on 127.0.0.1:<port>; stopped after the test."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(port: int) -> None:
        procs.append(subprocess.Popen([sys.executable, str(TOY), "--port", str(port)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(WAIT_S)


def test_the_time_servers_tools_are_offered_with_the_server_name_as_prefix(
    connect: Callable[..., McpConnection], catalog: RecordingCatalog, metrics: Metrics
) -> None:
    """mcp-server-time's tools are published as time_<tool>, with their JSON-schema arguments."""
    connection = connect(TIME)
    wait_until(lambda: connection.up, "the time server to come up")
    assert catalog.names() == ["time_get_current_time", "time_convert_time"]
    tool = catalog.get("time_get_current_time")
    assert tool is not None
    spec = tool.spec
    assert spec.description == "Get current time in a specific timezone"
    assert spec.parameters["type"] == "object"
    assert spec.parameters["required"] == ["timezone"]
    assert catalog.danger("time_get_current_time") == "safe"
    assert sample(metrics, "chalie_mcp_servers_up") == 1


def test_a_call_to_the_time_server_answers_json_with_the_time(
    connect: Callable[..., McpConnection], catalog: RecordingCatalog, metrics: Metrics
) -> None:
    """get_current_time for UTC runs end to end: the model reads JSON with a UTC datetime."""
    connection = connect(TIME)
    wait_until(lambda: connection.up, "the time server to come up")
    outcome = catalog.run("time_get_current_time", {"timezone": "UTC"}, CTX)
    assert not outcome.is_error
    answer = json.loads(outcome.text)
    assert answer["timezone"] == "UTC"
    assert datetime.fromisoformat(answer["datetime"]).utcoffset() == timedelta(0)
    assert sample(metrics, "chalie_mcp_tool_calls_total", server="time", result="ok") == 1


def test_a_bad_timezone_is_an_error_outcome_for_the_model(
    connect: Callable[..., McpConnection], catalog: RecordingCatalog, metrics: Metrics
) -> None:
    """The tool's own error (isError) comes back as an error result, not an exception."""
    connection = connect(TIME)
    wait_until(lambda: connection.up, "the time server to come up")
    outcome = catalog.run("time_get_current_time", {"timezone": "Mars/Olympus_Mons"}, CTX)
    assert outcome.is_error
    assert outcome.text.startswith("error: ")
    assert "Invalid timezone" in outcome.text
    assert sample(metrics, "chalie_mcp_tool_calls_total", server="time", result="error") == 1


def test_a_server_that_crashes_goes_offline_and_is_restarted_with_its_tools(
    connect: Callable[..., McpConnection], catalog: RecordingCatalog, metrics: Metrics
) -> None:
    """The process exits: its tools leave the prompt, a new process starts after the backoff,
    and the tools come back and work."""
    connection = connect(TOY_STDIO)
    wait_until(lambda: connection.up, "the toy server to come up")
    first_pid = catalog.run("toy_pid", {}, CTX).text
    crashed = catalog.run("toy_crash", {}, CTX)
    assert crashed.is_error
    assert "did not answer" in crashed.text
    wait_until(lambda: ("offline", "mcp:toy") in catalog.events, "the tools to go offline")
    wait_until(lambda: connection.up, "the toy server to come back")
    listed = ("listed", "mcp:toy", "toy_echo", "toy_add_tool", "toy_crash", "toy_pid",
              "toy_nap", "toy_header")
    assert catalog.events == [listed, ("offline", "mcp:toy"), listed]
    assert "toy_echo" in catalog.names()
    assert catalog.run("toy_echo", {"text": "again"}, CTX).text == "echo: again"
    assert catalog.run("toy_pid", {}, CTX).text != first_pid
    assert sample(metrics, "chalie_mcp_restarts_total", server="toy") == 1
    assert sample(metrics, "chalie_mcp_servers_up") == 1
    assert sample(metrics, "chalie_mcp_tool_calls_total", server="toy", result="failed") == 1


def test_a_tool_added_with_list_changed_is_offered(
    connect: Callable[..., McpConnection], catalog: RecordingCatalog, metrics: Metrics
) -> None:
    """The server adds a tool and says so: the catalog lists it and it runs, no restart."""
    connection = connect(TOY_STDIO)
    wait_until(lambda: connection.up, "the toy server to come up")
    assert "toy_zap" not in catalog.names()
    assert catalog.run("toy_add_tool", {"name": "zap"}, CTX).text == "added zap"
    wait_until(lambda: "toy_zap" in catalog.names(), "toy_zap to be listed")
    assert catalog.run("toy_zap", {}, CTX).text == "I am zap"
    assert sample(metrics, "chalie_mcp_restarts_total", server="toy") == 0


def test_a_call_that_takes_too_long_is_an_error_and_the_server_stays_usable(
    connect: Callable[..., McpConnection], catalog: RecordingCatalog, metrics: Metrics
) -> None:
    """Past call_timeout_s the model gets an error result; the next call still works."""
    connection = connect(TOY_STDIO, call_timeout_s=0.3)
    wait_until(lambda: connection.up, "the toy server to come up")
    started = time.monotonic()
    outcome = catalog.run("toy_nap", {"seconds": 5}, CTX)
    assert time.monotonic() - started < 2.0
    assert outcome.is_error
    assert "did not answer" in outcome.text
    assert catalog.run("toy_echo", {"text": "still here"}, CTX).text == "echo: still here"
    assert connection.up
    assert sample(metrics, "chalie_mcp_tool_calls_total", server="toy", result="failed") == 1


def test_tools_over_streamable_http_are_listed_and_called_with_the_configured_headers(
    connect: Callable[..., McpConnection], catalog: RecordingCatalog,
    http_toy: Callable[[int], None],
) -> None:
    """A server on 127.0.0.1 over streamable HTTP: tools listed, calls answered, and every
    request carries the headers from the config."""
    port = free_port()
    http_toy(port)
    server = McpServerConfig(name="web", url=f"http://127.0.0.1:{port}/mcp",
                             headers={"X-Api-Key": "k-123"})
    connection = connect(server)
    wait_until(lambda: connection.up, "the HTTP server to come up")
    assert catalog.names_of("mcp:web")[:2] == ("web_echo", "web_add_tool")
    assert catalog.run("web_echo", {"text": "over http"}, CTX).text == "echo: over http"
    assert catalog.run("web_header", {"name": "x-api-key"}, CTX).text == "k-123"
    assert catalog.run("web_add_tool", {"name": "zap"}, CTX).text == "added zap"
    wait_until(lambda: "web_zap" in catalog.names(), "web_zap to be listed")


def test_an_unreachable_server_stays_offline_without_errors_and_comes_up_when_it_starts(
    connect: Callable[..., McpConnection], catalog: RecordingCatalog, metrics: Metrics,
    http_toy: Callable[[int], None], log_records: list[logging.LogRecord],
) -> None:
    """Nothing listens at the url: no tools, no exception, retries with backoff; once the
    server starts, its tools are offered."""
    port = free_port()
    connection = connect(McpServerConfig(name="web", url=f"http://127.0.0.1:{port}/mcp"))
    wait_until(lambda: sample(metrics, "chalie_mcp_restarts_total", server="web") >= 2,
               "two retries")
    assert not connection.up
    assert catalog.names() == []
    outcome = connection.call("echo", {"text": "anyone?"})
    assert outcome.is_error
    assert "not connected" in outcome.text
    downs = [r.msg for r in log_records
             if isinstance(r.msg, dict) and r.msg.get("event") == "mcp_server_down"]
    assert downs[0]["server"] == "web"
    assert "connect" in downs[0]["reason"].lower()
    http_toy(port)
    wait_until(lambda: connection.up, "the server to come up once started")
    assert catalog.run("web_echo", {"text": "hello"}, CTX).text == "echo: hello"


def test_a_server_that_never_answers_times_out_and_is_retried(
    connect: Callable[..., McpConnection], metrics: Metrics,
    log_records: list[logging.LogRecord],
) -> None:
    """A process that never speaks MCP: after connect_timeout_s it counts as down."""
    silent = McpServerConfig(name="mute", command=sys.executable,
                             args=("-c", "import time; time.sleep(60)"))
    connection = connect(silent, connect_timeout_s=0.3)

    def reasons() -> list[str]:
        return [r.msg["reason"] for r in log_records
                if isinstance(r.msg, dict) and r.msg.get("event") == "mcp_server_down"]

    wait_until(lambda: bool(reasons()), "the first attempt to fail")
    assert reasons()[0] == "no answer within connect_timeout_s (0.3 s)"
    assert not connection.up


def test_close_ends_the_session_and_the_server_process(
    connect: Callable[..., McpConnection], catalog: RecordingCatalog, metrics: Metrics
) -> None:
    """close() ends the stdio child and the thread within a few seconds; calls after it are
    error results."""
    connection = connect(TOY_STDIO)
    wait_until(lambda: connection.up, "the toy server to come up")
    pid = int(catalog.run("toy_pid", {}, CTX).text)
    started = time.monotonic()
    connection.close()
    assert time.monotonic() - started < 5.0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not connection.up
    assert sample(metrics, "chalie_mcp_servers_up") == 0
    assert "toy_echo" not in catalog.names()
    assert connection.call("echo", {"text": "late"}).is_error
