"""Opening a server's transport with the SDK (stdio child process or streamable HTTP), and
noticing when it ends: the SDK's session does not say when its stream closed, so the read side
is wrapped and calls back at end of stream (a stdio server that exited, a closed connection)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any, Protocol

import anyio
import httpx2
from mcp import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from chalie.config import McpServerConfig

SSE_READ_TIMEOUT_S = 300.0  # the SDK's own default: a server may hold a stream open, quietly

Item = SessionMessage | Exception


class Receiving(Protocol):
    async def receive(self) -> Item: ...
    async def aclose(self) -> None: ...


Streams = tuple[Receiving, Any]  # (read, write) as the SDK's transports yield them


async def open_transport(server: McpServerConfig, stack: AsyncExitStack, *,
                         connect_timeout_s: float, call_timeout_s: float) -> Streams:
    """Start the stdio server or reach the HTTP one; `stack` closes it (and ends the child)."""
    if server.command:
        params = StdioServerParameters(command=server.command, args=list(server.args),
                                       env=dict(server.env) or None)
        return await stack.enter_async_context(stdio_client(params))
    # Our own client: the configured headers on every request, no proxies from the
    # environment (like every other outgoing client here), and timeouts from the config.
    client = httpx2.AsyncClient(
        headers=dict(server.headers), trust_env=False,
        timeout=httpx2.Timeout(connect_timeout_s,
                               read=max(SSE_READ_TIMEOUT_S, call_timeout_s)),
    )
    await stack.enter_async_context(client)
    return await stack.enter_async_context(streamable_http_client(server.url, http_client=client))


class WatchedStream:
    """A transport's read stream that calls `on_end` once it ends."""

    def __init__(self, inner: Receiving, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    @property
    def last_context(self) -> Any:  # the dispatcher reads it when the transport has one
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Item:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> WatchedStream:
        return self

    async def __anext__(self) -> Item:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> WatchedStream:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc_val: BaseException | None, exc_tb: TracebackType | None) -> None:
        await self.aclose()
