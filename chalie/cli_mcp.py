"""`chalie mcp [--url URL] [--token-file FILE] [--config FILE]`: Chalie's MCP server over stdio,
for MCP clients that only launch commands (Claude Desktop, editors).

It is a relay, not a second server: it opens no store and runs no actors. It connects to the
running server's /mcp with the SDK's streamable-HTTP client and an API token (from
`--token-file`, else the environment's CHALIE_TOKEN), then answers its stdio client's
tools/list, tools/call (progress passed on), resources/list and resources/read by asking that
session. So the token's scopes, revocation and metrics are the running server's, as over HTTP.
The URL defaults to the config's server host and port (127.0.0.1 when it listens on every
address).

Exits 0 when its client closes stdin, 1 when the server cannot be reached or the session ends
(one line on stderr says which), 2 for a usage error (no token, unreadable token file).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import ClientSession, MCPError, types
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

from chalie.config import Config

TOKEN_ENV = "CHALIE_TOKEN"
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 600.0  # a long ask_chalie turn answers within act.timeout_s; keep well past it
ANY_ADDRESS = ("0.0.0.0", "::", "")


class Unusable(Exception):
    """Why the relay cannot start: `code` is the exit status."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def run(args: argparse.Namespace, config: Config, *, env: Mapping[str, str]) -> int:
    try:
        token = _token(args.token_file, env)
        url = args.url or _default_url(config)
        anyio.run(_relay, url, token)
    except Unusable as e:
        print(f"chalie mcp: {e}", file=sys.stderr)
        return e.code
    return 0


def _token(token_file: Path | None, env: Mapping[str, str]) -> str:
    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as e:
            raise Unusable(2, f"cannot read the token file {token_file}: {e.strerror}") from None
    else:
        token = env.get(TOKEN_ENV, "").strip()
    if not token:
        raise Unusable(2, f"no API token: set {TOKEN_ENV} or pass --token-file (make a token "
                          "on the dashboard or with POST /api/tokens)")
    return token


def _default_url(config: Config) -> str:
    host = config.server.host
    host = "127.0.0.1" if host in ANY_ADDRESS else host
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{config.server.port}/mcp"


async def _relay(url: str, token: str) -> None:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, trust_env=False,
                              timeout=httpx2.Timeout(CONNECT_TIMEOUT_S, read=READ_TIMEOUT_S))
    try:
        async with http, streamable_http_client(url, http_client=http) as (read, write), \
                ClientSession(read, write) as upstream:
            try:
                with anyio.fail_after(CONNECT_TIMEOUT_S):
                    await upstream.initialize()
            except MCPError as e:
                raise Unusable(1, f"{url} refused the MCP session: {e}") from None
            except TimeoutError:
                raise Unusable(1, f"{url} did not open an MCP session within "
                                  f"{CONNECT_TIMEOUT_S:.0f}s") from None
            server = _server(upstream)
            async with stdio_server() as (stdin, stdout):
                await server.run(stdin, stdout, server.create_initialization_options())
    except Unusable:
        raise
    except BaseExceptionGroup as group:
        raise Unusable(1, _why(url, group)) from None
    except httpx2.HTTPError as e:
        raise Unusable(1, f"cannot reach {url}: {e}") from None


def _why(url: str, group: BaseExceptionGroup[Any]) -> str:
    """One line for what ended the relay (the SDK's task groups wrap it)."""
    leaves: list[BaseException] = []

    def walk(e: BaseException) -> None:
        if isinstance(e, BaseExceptionGroup):
            for inner in e.exceptions:
                walk(inner)
        else:
            leaves.append(e)

    walk(group)
    for leaf in leaves:
        if isinstance(leaf, Unusable):
            return str(leaf)
        if isinstance(leaf, httpx2.HTTPStatusError) and leaf.response.status_code == 401:
            return f"{url} refused the token (unknown or revoked)"
        if isinstance(leaf, httpx2.HTTPError):
            return f"cannot reach {url}: {leaf}"
    return f"the session with {url} ended: {leaves[0] if leaves else group}"


def _server(upstream: ClientSession) -> Server[Any]:
    """A stdio server whose every answer is the upstream session's."""

    async def list_tools(ctx: ServerRequestContext[Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return await upstream.list_tools(params=params)

    async def call_tool(ctx: ServerRequestContext[Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        async def progress(progress: float, total: float | None, message: str | None) -> None:
            await ctx.session.report_progress(progress, total, message)

        return await upstream.call_tool(params.name, params.arguments,
                                        progress_callback=progress)

    async def list_resources(ctx: ServerRequestContext[Any],
                             params: types.PaginatedRequestParams | None
                             ) -> types.ListResourcesResult:
        return await upstream.list_resources(params=params)

    async def read_resource(ctx: ServerRequestContext[Any],
                            params: types.ReadResourceRequestParams
                            ) -> types.ReadResourceResult:
        return await upstream.read_resource(params.uri)

    return Server("chalie", instructions=upstream.initialize_result.instructions
                  if upstream.initialize_result else None,
                  on_list_tools=list_tools, on_call_tool=call_tool,
                  on_list_resources=list_resources, on_read_resource=read_resource)
