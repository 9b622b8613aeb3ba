"""One MCP server, kept connected on its own thread and asyncio loop.

The loop starts the server (or reaches it), initializes a ClientSession, lists its tools
(every page) and publishes them in the ToolCatalog as provider `mcp:<name>`. While connected it
re-lists on `notifications/tools/list_changed` and pings when idle. When the connection fails
(the process exits, the server cannot be reached, no answer within `connect_timeout_s`) the
tools go offline and the server is tried again after a backoff: `restart_initial_s`, doubling
with each failure in a row up to `restart_max_s`, plus up to 10% jitter. A connection that
stayed up for `restart_max_s` starts the doubling over.

Tool calls come from worker threads: `call` submits to the loop and waits at most
`call_timeout_s`. It never raises; a timeout or a dead connection is an error outcome.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import random
import threading
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

import anyio
import structlog
from mcp import ClientSession, MCPError, types
from mcp.client.session import IncomingMessage

from chalie.config import McpConfig, McpServerConfig
from chalie.mcp.keys import provider_key
from chalie.mcp.results import call_outcome
from chalie.mcp.tools import McpTool
from chalie.mcp.transport import WatchedStream, open_transport
from chalie.metrics import Metrics
from chalie.tools.base import ToolOutcome, tool_error
from chalie.tools.catalog import ToolCatalog

log = structlog.get_logger("chalie.mcp")

PING_INTERVAL_S = 30.0  # an idle connection is pinged, so a server that went away shows
MAX_PAGES = 100  # of tools/list: a server whose cursor never ends cannot hang us
CLOSE_TIMEOUT_S = 6.0  # the SDK gives a stdio child 2 s to exit, then SIGTERM, then SIGKILL
JITTER = 0.1
CLIENT_INFO = types.Implementation(name="chalie", version="0.1.0")
_LOST = (types.CONNECTION_CLOSED, types.REQUEST_TIMEOUT)


class McpConnection:
    def __init__(self, server: McpServerConfig, *, config: McpConfig, catalog: ToolCatalog,
                 order: float, metrics: Metrics, ping_interval_s: float = PING_INTERVAL_S,
                 jitter: Callable[[], float] = random.random,
                 on_crash: Callable[[BaseException], None] | None = None) -> None:
        self.server = server
        self.key = provider_key(server.name)
        self._config = config
        self._catalog = catalog
        self._order = order
        self._metrics = metrics
        self._ping_interval_s = ping_interval_s
        self._jitter = jitter
        self._on_crash = on_crash
        self._transport = "stdio" if server.command else "http"
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._scope: anyio.CancelScope | None = None
        self._closing = False
        self._up = False
        # Loop-thread state of the current attempt.
        self._session: ClientSession | None = None
        self._wake = asyncio.Event()
        self._ended = False
        self._relist = False

    @property
    def up(self) -> bool:
        """Connected, with its tools listed and offered."""
        return self._up

    # -- life cycle (the owner's thread) --

    def start(self) -> None:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True,
                                        name=f"chalie-mcp-{self.server.name}")
        self._thread.start()
        ready.wait()  # the loop exists: `call` and `close` can reach it

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """End the session (and the stdio child) and join the thread."""
        self._closing = True
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._cancel)
            except RuntimeError:
                pass  # the loop has already finished
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.warning("mcp_close_timeout", server=self.server.name, timeout_s=timeout_s)

    def _run(self, ready: threading.Event) -> None:
        try:
            with asyncio.Runner() as runner:
                self._loop = runner.get_loop()
                ready.set()
                runner.run(self._main())
        except BaseException as e:  # a bug, not a server failure: those are handled inside
            if self._on_crash is None:
                raise
            self._on_crash(e)
        finally:
            ready.set()

    def _cancel(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    # -- the loop --

    async def _main(self) -> None:
        config = self._config
        delay = config.restart_initial_s
        first = True
        with anyio.CancelScope() as self._scope:
            if self._closing:
                self._scope.cancel()
            while True:
                reason, up_for = await self._attempt()
                if up_for >= config.restart_max_s:
                    delay = config.restart_initial_s
                wait = min(delay, config.restart_max_s) * (1 + JITTER * self._jitter())
                # The change to down is a warning; each further failed try is only info.
                level = logging.WARNING if self._set_down() or first else logging.INFO
                log.log(level, "mcp_server_down", server=self.server.name,
                        transport=self._transport, reason=reason, retry_in_s=round(wait, 3))
                first = False
                await anyio.sleep(wait)
                self._metrics.mcp_restarts.labels(server=self.server.name).inc()
                delay = min(delay * 2, config.restart_max_s)
        if self._set_down():
            log.info("mcp_server_closed", server=self.server.name)

    async def _attempt(self) -> tuple[str, float]:
        """Connect and serve until the connection fails: (why, seconds it was up)."""
        timeout_s = self._config.connect_timeout_s
        self._wake.clear()
        self._ended = self._relist = False
        up_at: float | None = None
        connecting = anyio.CancelScope(deadline=anyio.current_time() + timeout_s)
        try:
            with connecting:
                async with AsyncExitStack() as stack:
                    read, write = await open_transport(
                        self.server, stack, connect_timeout_s=timeout_s,
                        call_timeout_s=self._config.call_timeout_s)
                    session = await stack.enter_async_context(ClientSession(
                        WatchedStream(read, self._stream_ended), write,
                        message_handler=self._on_message, client_info=CLIENT_INFO))
                    await session.initialize()
                    listed = await self._list_tools(session)
                    connecting.deadline = math.inf
                    up_at = anyio.current_time()
                    self._session = session
                    self._publish(listed, came_up=True)
                    return await self._serve(session), anyio.current_time() - up_at
            reason = f"no answer within connect_timeout_s ({timeout_s:g} s)"
        except Exception as e:
            reason = describe(e)
        finally:
            self._session = None
        return reason, 0.0 if up_at is None else anyio.current_time() - up_at

    async def _serve(self, session: ClientSession) -> str:
        timeout_s = self._config.connect_timeout_s
        while True:
            with anyio.move_on_after(self._ping_interval_s) as idle:
                await self._wake.wait()
            self._wake.clear()
            if self._ended:
                return ("the server process exited" if self._transport == "stdio"
                        else "the server closed the connection")
            if self._relist:
                self._relist = False
                with anyio.fail_after(timeout_s):
                    listed = await self._list_tools(session)
                self._publish(listed)
            elif idle.cancelled_caught:
                with anyio.fail_after(timeout_s):
                    await session.send_ping()

    async def _list_tools(self, session: ClientSession) -> list[types.Tool]:
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            params = None if cursor is None else types.PaginatedRequestParams(cursor=cursor)
            page = await session.list_tools(params=params)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._relist = True
            self._wake.set()

    def _stream_ended(self) -> None:
        self._ended = True
        self._wake.set()

    # -- publishing --

    def _publish(self, listed: list[types.Tool], *, came_up: bool = False) -> None:
        tools = [McpTool(tool, self) for tool in listed]
        self._catalog.set_provider(self.key, label=self.server.name, tools=tools, online=True,
                                   always_prefix=True, order=self._order)
        if came_up and not self._up:
            self._up = True
            self._metrics.mcp_servers_up.inc()
        log.info("mcp_server_up" if came_up else "mcp_tools_changed", server=self.server.name,
                 transport=self._transport, tools=len(tools))

    def _set_down(self) -> bool:
        """Take the tools offline; whether the server was up."""
        if not self._up:
            return False
        self._up = False
        self._metrics.mcp_servers_up.dec()
        self._catalog.set_online(self.key, False)
        return True

    # -- calls (worker threads) --

    def call(self, name: str, args: dict[str, Any]) -> ToolOutcome:
        """Call the server's tool `name`; wait at most call_timeout_s. Never raises."""
        timeout_s = self._config.call_timeout_s
        loop = self._loop
        if loop is None or self._closing or not self._up:
            return self._failed("it is not connected")
        coro = self._call(name, args, timeout_s)
        try:
            future = asyncio.run_coroutine_threadsafe(coro, loop)
        except RuntimeError:  # the loop has finished (closed just now)
            coro.close()
            return self._failed("it is not connected")
        try:
            result = future.result(timeout=timeout_s)
        except TimeoutError:
            future.cancel()
            return self._failed(f"no answer within {timeout_s:g} s")
        except concurrent.futures.CancelledError:
            return self._failed("the connection was closed")
        except MCPError as e:
            if e.error.code in _LOST:
                return self._failed(e.error.message)
            self._count("error")
            return tool_error(f"MCP server {self.server.name!r} refused the call: "
                              f"{e.error.message}")
        except Exception as e:
            return self._failed(describe(e))
        outcome = call_outcome(result)
        self._count("error" if outcome.is_error else "ok")
        return outcome

    async def _call(self, name: str, args: dict[str, Any],
                    timeout_s: float) -> types.CallToolResult:
        session = self._session
        if session is None:
            raise MCPError(code=types.CONNECTION_CLOSED, message="it is not connected")
        return await session.call_tool(name, args, read_timeout_seconds=timeout_s)

    def _failed(self, why: str) -> ToolOutcome:
        self._count("failed")
        return tool_error(f"MCP server {self.server.name!r} did not answer: {why}")

    def _count(self, result: str) -> None:
        self._metrics.mcp_calls.labels(server=self.server.name, result=result).inc()


def describe(error: BaseException) -> str:
    """One line on why a connection failed (the first error of an exception group)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, TimeoutError):
        return "timed out"
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
