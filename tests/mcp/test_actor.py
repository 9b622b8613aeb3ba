"""McpSupervisor and its McpServer children, with real servers over stdio."""

from __future__ import annotations

from typing import Any

import pykka
import pytest

from chalie.actors.mcp import ConnectionCrashed, McpSupervisor
from chalie.actors.supervisor import Directory
from chalie.clock import ManualClock
from chalie.config import McpConfig, SupervisorConfig
from chalie.metrics import Metrics
from tests.mcp.test_connection import (
    TIME,
    TOY_STDIO,
    RecordingCatalog,
    sample,
    wait_until,
)
from tests.tools.test_registry import CTX

MCP = McpConfig(servers=(TIME, TOY_STDIO), connect_timeout_s=20.0, call_timeout_s=20.0,
                restart_initial_s=0.05, restart_max_s=0.5)
SUPERVISION = SupervisorConfig(backoff_initial_s=1.0, backoff_max_s=5.0, max_restarts=5,
                               within_s=60.0)


def start(catalog: RecordingCatalog, metrics: Metrics, clock: ManualClock) -> Any:
    return McpSupervisor.start(None, servers=MCP, catalog=catalog, config=SUPERVISION,
                               clock=clock, directory=Directory(), metrics=metrics)


def both_up(metrics: Metrics) -> bool:
    return sample(metrics, "chalie_mcp_servers_up") == 2


def test_each_configured_server_lends_its_tools_in_config_order() -> None:
    """Two servers in the config: both started, their tools offered, the first one's first."""
    catalog, metrics = RecordingCatalog(), Metrics()
    start(catalog, metrics, ManualClock())
    wait_until(lambda: both_up(metrics), "both servers to come up")
    assert catalog.names() == ["time_get_current_time", "time_convert_time", "toy_echo",
                               "toy_add_tool", "toy_crash", "toy_pid", "toy_nap", "toy_header"]
    assert catalog.run("toy_echo", {"text": "hi"}, CTX).text == "echo: hi"


def test_stopping_the_supervisor_ends_the_servers_and_takes_their_tools_away() -> None:
    """Shutdown: every server's tools leave the catalog and the up gauge is back to 0."""
    catalog, metrics = RecordingCatalog(), Metrics()
    supervisor = start(catalog, metrics, ManualClock())
    wait_until(lambda: both_up(metrics), "both servers to come up")
    supervisor.stop(block=True, timeout=20)
    assert catalog.names() == []
    assert catalog.names_of("mcp:time") == ()
    assert sample(metrics, "chalie_mcp_servers_up") == 0


@pytest.mark.allow_error_logs
def test_a_connection_that_dies_of_a_bug_is_restarted_by_the_supervisor() -> None:
    """The connection thread reports a crash: the actor fails, and after the supervisor's
    backoff a fresh actor connects again and the tools come back."""
    catalog, metrics, clock = RecordingCatalog(), Metrics(), ManualClock()
    supervisor = start(catalog, metrics, clock)
    wait_until(lambda: both_up(metrics), "both servers to come up")
    child: pykka.ActorRef[Any] = supervisor.proxy().child("mcp:toy").get()
    child.tell(ConnectionCrashed("toy", "RuntimeError: a bug"))
    wait_until(lambda: "toy_echo" not in catalog.names(), "the toy tools to be taken away")
    wait_until(lambda: clock.pending() > 0, "the supervisor to schedule the restart")
    clock.advance(SUPERVISION.backoff_initial_s)
    wait_until(lambda: "toy_echo" in catalog.names(), "the toy tools to come back")
    assert catalog.run("toy_echo", {"text": "back"}, CTX).text == "echo: back"
    assert sample(metrics, "chalie_actor_restarts_total", actor="mcp") == 1
    assert "time_get_current_time" in catalog.names()
