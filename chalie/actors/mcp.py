"""McpSupervisor: one McpServer per configured MCP server (`[[mcp.servers]]`).

An McpServer owns its server's McpConnection (chalie/mcp): it starts it when it starts, and
when it stops it closes it (ending the session and any stdio child) and takes the server's
tools out of the catalog. The connection does its networking, its reconnecting with backoff
and its publishing on its own thread, so the mailbox never waits on the network. Only a bug in
that thread reaches the actor (ConnectionCrashed): the actor then fails, and the supervisor
starts a fresh one with a new connection.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

import msgspec
import pykka
import structlog

from chalie.actors.supervisor import ChildSpec, Directory, Link, SupervisedActor, Supervisor
from chalie.clock import Clock
from chalie.config import McpConfig, McpServerConfig, SupervisorConfig
from chalie.mcp.connection import McpConnection, describe
from chalie.metrics import Metrics
from chalie.tools.catalog import ToolCatalog

log = structlog.get_logger("chalie.mcp")

ORDER_BASE = 1e12  # MCP servers' tools come after every interface's (ordered by pairing time)


class ConnectionCrashed(msgspec.Struct, frozen=True, tag=True):
    """The connection's thread died of an unexpected error (not a server failure)."""

    server: str
    error: str


class McpConnectionCrashed(Exception):
    """Raised by an McpServer so that its supervisor restarts it."""


class McpServer(SupervisedActor):
    def __init__(self, link: Link | None, *, server: McpServerConfig, config: McpConfig,
                 catalog: ToolCatalog, order: float, metrics: Metrics) -> None:
        super().__init__(link)
        self._server = server
        self._catalog = catalog
        self._connection = McpConnection(server, config=config, catalog=catalog, order=order,
                                         metrics=metrics, on_crash=self._crashed)

    def started(self) -> None:
        log.info("mcp_server_starting", server=self._server.name,
                 transport="stdio" if self._server.command else "http")
        self._connection.start()

    def on_stop(self) -> None:
        self._close()

    def on_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._close()
        super().on_failure(exception_type, exception_value, traceback)

    def on_receive(self, message: Any) -> Any:
        match message:
            case ConnectionCrashed(server=server, error=error):
                raise McpConnectionCrashed(f"MCP server {server!r}: {error}")
            case _:
                log.warning("unexpected_message", message=type(message).__name__)
        return None

    def _close(self) -> None:
        self._connection.close()
        self._catalog.remove_provider(self._connection.key)

    def _crashed(self, error: BaseException) -> None:
        """On the connection's thread, as it dies."""
        try:
            self.actor_ref.tell(ConnectionCrashed(self._server.name, describe(error)))
        except pykka.ActorDeadError:
            pass  # stopping anyway


class McpSupervisor(Supervisor):
    def __init__(self, link: Link | None, *, servers: McpConfig, catalog: ToolCatalog,
                 config: SupervisorConfig, clock: Clock, directory: Directory,
                 metrics: Metrics) -> None:
        children = tuple(
            ChildSpec(f"mcp:{server.name}", _starter(server, servers, catalog, n, metrics),
                      register=False)
            for n, server in enumerate(servers.servers)
        )
        super().__init__(link, name="mcp", config=config, clock=clock, directory=directory,
                         metrics=metrics, children=children)


def _starter(server: McpServerConfig, config: McpConfig, catalog: ToolCatalog, index: int,
             metrics: Metrics) -> Callable[[Link], pykka.ActorRef[Any]]:
    def start(link: Link) -> pykka.ActorRef[Any]:
        return McpServer.start(link, server=server, config=config, catalog=catalog,
                               order=ORDER_BASE + index, metrics=metrics)

    return start
