"""/mcp: the Tornado route of Chalie's MCP server (edge/mcp_bridge.py has how it sits beside
Tornado).

Before the SDK sees a request this handler refuses one whose Origin is another site's (403: a
page elsewhere must not drive it; DNS rebinding included), a body over server.max_body_bytes
(413), an address past the wrong-credential limit (429), one without a valid API token (401
with `WWW-Authenticate: Bearer`) and a token past server.rest_rate_per_min (429), each with a
JSON-RPC error body naming the problem. Any valid
token may open a session; each tool's scope is checked when the tool is called. The SDK is
imported on the first request that gets this far.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import msgspec
import tornado.web
from tornado.iostream import StreamClosedError

from chalie.edge.context import EdgeContext
from chalie.edge.rest_base import same_origin, shown
from chalie.edge.tokens import Refused

REFUSED_CODE = -32001  # JSON-RPC's server-defined range: refused before the MCP server saw it


class McpServerHandler(tornado.web.RequestHandler):
    """GET (the session's SSE stream), POST (JSON-RPC messages) and DELETE (end a session)
    on /mcp, with an API token."""

    def initialize(self, ctx: EdgeContext) -> None:
        self.ctx = ctx
        self.on_gone: Callable[[], None] | None = None
        self._started = False

    async def get(self) -> None:
        await self._serve()

    async def post(self) -> None:
        await self._serve()

    async def delete(self) -> None:
        await self._serve()

    async def _serve(self) -> None:
        origin = self.request.headers.get("Origin")
        if origin is not None and not same_origin(origin, self.request.host):
            self.ctx.metrics.rest_refused.labels(reason="cross_site").inc()
            return self._error(403, f"cross-site request refused: Origin {shown(origin)} is "
                                    "not this server")
        allowed = self.ctx.config.server.max_body_bytes
        if len(self.request.body) > allowed:
            self.ctx.metrics.rest_refused.labels(reason="too_large").inc()
            return self._error(413, f"the body is {len(self.request.body)} bytes; /mcp takes "
                                    f"at most {allowed} (server.max_body_bytes)")
        limit, rate = self.ctx.rest_limit, self.ctx.config.server.rest_rate_per_min
        failed = "failed:" + (self.request.remote_ip or "unknown")
        if limit is not None and limit.wait(failed, rate) is not None:
            self.ctx.metrics.rest_refused.labels(reason="bad_credentials").inc()
            return self._error(429, "too many requests with a wrong token from "
                                    f"{self.request.remote_ip}; try again later")
        board = self.ctx.tokens
        if board is None:
            return self._error(503, "API tokens are not available on this server")
        try:
            row = board.authorize(self.request.headers.get("Authorization"), None)
        except Refused as e:
            if limit is not None:
                limit.spend(failed, rate)
            self.set_header("WWW-Authenticate", 'Bearer realm="chalie"')
            return self._error(e.status, e.message)
        wait = limit.take("token:" + row.id, rate) if limit is not None else None
        if wait is not None:
            self.ctx.metrics.rest_refused.labels(reason="rate_limited").inc()
            seconds = max(1, math.ceil(wait))
            self.set_header("Retry-After", str(seconds))
            return self._error(429, f"too many requests: server.rest_rate_per_min allows "
                                    f"{rate} a minute; try again in {seconds}s")
        if self.ctx.mcp is None:
            from chalie.edge.mcp_bridge import McpBridge  # noqa: PLC0415  (the SDK: on first use)

            self.ctx.mcp = McpBridge(self.ctx)
        await self.ctx.mcp.serve(self, row)
        return None

    def _error(self, status: int, message: str) -> None:
        """A JSON-RPC error (no request id), which MCP clients show their user as it is."""
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(msgspec.json.encode({"jsonrpc": "2.0", "id": None, "error": {
            "code": REFUSED_CODE, "message": message, "data": {"status": status}}}))

    # -- what McpBridge.serve writes through --

    def start(self, status: int, headers: Iterable[tuple[bytes, bytes]]) -> None:
        self._started = True
        self.set_status(status)
        self.clear_header("Content-Type")
        for name, value in headers:
            self.add_header(name.decode("latin-1"), value.decode("latin-1"))

    async def body(self, chunk: bytes, *, more: bool) -> bool:
        """Write a body chunk (flushed when more follow); False once the client is gone."""
        if self._finished:
            return False
        if chunk:
            self.write(chunk)
        if not more:
            return True
        try:
            await self.flush()
        except StreamClosedError:
            return False
        return True

    def ended(self, why: str | None) -> None:
        """The SDK is done with the request (or it was ended): finish what it left open."""
        if self._finished:
            return
        if not self._started:
            self._error(401 if why and "revoked" in why else 500, why or "no answer")
            return
        try:
            self.finish()
        except StreamClosedError:
            pass

    def on_connection_close(self) -> None:
        if self.on_gone is not None:
            self.on_gone()
