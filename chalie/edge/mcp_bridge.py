"""/mcp: Chalie's MCP server over streamable HTTP, beside Tornado (the handler is edge/mcp_http.py).

How it sits beside Tornado: Tornado 6 runs on asyncio, and the SDK's streamable-HTTP session
manager is an ASGI app on anyio's asyncio backend, so both share the one IOLoop. `McpServerHandler`
is an ordinary Tornado route: it checks the bearer token and the Origin itself, then hands the
request to the manager as ASGI (a scope built from the Tornado request, `receive` giving its
body and then waiting for a disconnect, `send` writing the status, headers and body chunks back
through Tornado, flushing each SSE chunk). The manager's lifetime (`manager.run()`, its task
group of sessions) is held open by one task, started on the first /mcp request so that the SDK
(half a second and ~25 MiB) is never imported by a server nobody reaches over MCP.

Sessions are owned per token: the ASGI scope's `user` is the SDK's `AuthenticatedUser` for the
token's id, so a session made with one token answers 404 to another. Each token's open requests
and session ids are kept here, watched on the TokenBoard: revoking the token ends its open
requests (SSE streams included) at once and terminates its sessions through the manager's own
DELETE path, and stops waiting for its turns. Calls inside a session are checked again as they
run (edge/mcp_tools.py `Gate`).

DNS rebinding: the SDK's Host/Origin allow-list is left off, because a bearer token is required
(a rebinding page cannot know it) and a Host list would break a server reached by a LAN name or
through a proxy; instead a request with an Origin that is not this server (a page of another
site) is refused here with a 403, as the REST API refuses cross-site changes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Message, Scope
from tornado.httputil import HTTPServerRequest

from chalie.edge.context import EdgeContext
from chalie.edge.mcp_tools import TOKEN_KEY, McpTools, build_server
from chalie.store.token_rows import TokenRow

log = structlog.get_logger("chalie.edge")

SESSION_HEADER = "mcp-session-id"
STOP_TIMEOUT_S = 5.0


class Answer(Protocol):
    """What a request is answered through (edge/mcp_http.py's handler)."""

    request: HTTPServerRequest
    on_gone: Callable[[], None] | None

    def start(self, status: int, headers: Iterable[tuple[bytes, bytes]]) -> None: ...
    async def body(self, chunk: bytes, *, more: bool) -> bool: ...
    def ended(self, why: str | None) -> None: ...


@dataclass(eq=False)
class _Open:
    """One /mcp request being served: its ASGI task and whether its client is gone."""

    task: asyncio.Task[None]
    session: str | None  # the session it is part of (the one it opened, for an initialize)
    gone: asyncio.Event = field(default_factory=asyncio.Event)


class McpBridge:
    """The MCP server at /mcp (kept as ctx.mcp): the SDK's session manager, and each token's
    open requests and sessions."""

    def __init__(self, ctx: EdgeContext) -> None:
        self.ctx = ctx
        self.tools = McpTools(ctx)
        server = build_server(ctx, self.tools)
        # Builds the manager (the Starlette app around it is not used): the public way to
        # get a manager for an MCPServer. See the module docstring for the security settings.
        server.streamable_http_app(transport_security=TransportSecuritySettings(
            enable_dns_rebinding_protection=False))
        self.manager = server.session_manager
        self._open: dict[str, set[_Open]] = {}  # token id -> requests being served
        self._sessions: dict[str, dict[str, Any]] = {}  # token id -> session id -> unwatch
        # session id -> when a request of it last ended: the SDK ends a session idle for its
        # session_idle_timeout without telling anyone, so the record drops it then too.
        self._last_seen: dict[str, float] = {}
        self._ready = asyncio.Event()
        self._stopping = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None
        self._ending: set[asyncio.Task[None]] = set()

    @staticmethod
    def _user(token_id: str) -> AuthenticatedUser:
        """Who owns a session: the token, by id (the SDK answers 404 to any other)."""
        return AuthenticatedUser(AccessToken(token=token_id, client_id=token_id, scopes=[]))

    async def started(self) -> None:
        if self._runner is None:
            self._runner = asyncio.ensure_future(self._run())
        await self._ready.wait()

    async def _run(self) -> None:
        async with self.manager.run():
            self._ready.set()
            log.info("mcp_server_started")
            await self._stopping.wait()

    async def stop(self) -> None:
        for token_id in list(self._open):
            self._end_requests(token_id)
        self._stopping.set()
        if self._runner is not None:
            await asyncio.wait([self._runner], timeout=STOP_TIMEOUT_S)

    async def serve(self, handler: Answer, row: TokenRow) -> None:
        """Answer one /mcp request through the SDK, on behalf of `row`'s token."""
        await self.started()
        request = handler.request
        asked_session = request.headers.get(SESSION_HEADER)
        self._forget_idle()
        scope = self._scope(request, row)
        body_sent = False
        opened: _Open | None = None
        answered: list[int] = []

        async def receive() -> Message:
            nonlocal body_sent
            if not body_sent:
                body_sent = True
                return {"type": "http.request", "body": request.body, "more_body": False}
            assert opened is not None
            await opened.gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = message.get("headers", ())
                handler.start(message["status"], headers)
                answered.append(message["status"])
                made = next((v.decode("latin-1") for k, v in headers
                             if k.lower() == SESSION_HEADER.encode()), None)
                if made is not None and made != asked_session:
                    self._session_opened(row.id, made)
                    assert opened is not None
                    opened.session = made
            elif message["type"] == "http.response.body" and not await handler.body(
                    message.get("body", b""), more=bool(message.get("more_body"))):
                assert opened is not None
                opened.gone.set()

        opened = _Open(asyncio.ensure_future(self.manager.handle_request(scope, receive, send)),
                       asked_session)
        handler.on_gone = opened.gone.set
        self._open.setdefault(row.id, set()).add(opened)
        unwatch = self._watch(row.id)
        try:
            await asyncio.wait([opened.task])
        finally:
            unwatch()
            requests = self._open.get(row.id)
            if requests is not None:
                requests.discard(opened)
                if not requests:
                    del self._open[row.id]
        ended = answered[:1] == [404] or (request.method == "DELETE" and answered[:1] == [200])
        if asked_session and ended:  # the client ended it, or the SDK had (idle, unknown)
            self._session_closed(row.id, asked_session)
        if opened.session in self._last_seen:
            self._last_seen[opened.session] = self.ctx.clock.monotonic()
        self._answered(handler, opened)

    @staticmethod
    def _answered(handler: Answer, opened: _Open) -> None:
        if opened.task.cancelled():
            handler.ended("the API token was revoked")
        elif opened.task.exception() is not None:
            log.error("mcp_request_failed", error=repr(opened.task.exception()))
            handler.ended("the MCP server failed to answer")
        else:
            handler.ended(None)

    def _scope(self, request: HTTPServerRequest, row: TokenRow) -> Scope:
        """The ASGI scope of a Tornado request, owned by `row`'s token."""
        return {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": request.method, "scheme": request.protocol, "path": request.path,
            "raw_path": request.path.encode(), "root_path": "",
            "query_string": request.query.encode("latin-1"),
            "headers": [(k.lower().encode("latin-1"), v.encode("latin-1"))
                        for k, v in request.headers.get_all()],
            "client": (request.remote_ip or "", 0), "server": None,
            "user": self._user(row.id), TOKEN_KEY: row.id,
        }

    def _forget_idle(self) -> None:
        """Drop from the record the sessions the SDK has ended for idling (no request in
        flight for its session_idle_timeout), so a token's `open` count stays true."""
        idle_s = self.manager.session_idle_timeout
        if idle_s is None:
            return
        now = self.ctx.clock.monotonic()
        busy = {o.session for requests in self._open.values() for o in requests}
        for token_id, sessions in list(self._sessions.items()):
            for session_id in list(sessions):
                seen = self._last_seen.get(session_id, now)
                if session_id not in busy and now - seen > idle_s:
                    self._session_closed(token_id, session_id)

    def _watch(self, token_id: str) -> Any:
        """Watch the token while a request of it is open: the board counts each watcher as
        one of the token's open streams, and calls each when the token is revoked."""
        board = self.ctx.tokens
        assert board is not None
        return board.watch(token_id, lambda: self._revoked(token_id))

    def _session_opened(self, token_id: str, session_id: str) -> None:
        board = self.ctx.tokens
        assert board is not None
        sessions = self._sessions.setdefault(token_id, {})
        sessions[session_id] = board.watch(token_id, lambda: self._revoked(token_id))
        self._last_seen[session_id] = self.ctx.clock.monotonic()
        log.info("mcp_session_opened", token_id=token_id, session=session_id[:8])

    def _session_closed(self, token_id: str, session_id: str) -> None:
        sessions = self._sessions.get(token_id, {})
        unwatch = sessions.pop(session_id, None)
        self._last_seen.pop(session_id, None)
        if unwatch is not None:
            unwatch()
            log.info("mcp_session_closed", token_id=token_id, session=session_id[:8])
        if not sessions:
            self._sessions.pop(token_id, None)

    def _revoked(self, token_id: str) -> None:
        """Every watcher of the token is called; the first ends everything it has open."""
        self.tools.end_calls(token_id, "the API token was revoked")
        self._end_requests(token_id)
        sessions = self._sessions.pop(token_id, {})
        if sessions:
            task = asyncio.ensure_future(self._terminate(token_id, tuple(sessions)))
            self._ending.add(task)
            task.add_done_callback(self._ending.discard)

    def _end_requests(self, token_id: str) -> None:
        for opened in self._open.pop(token_id, set()):
            opened.gone.set()
            opened.task.cancel()

    async def _terminate(self, token_id: str, sessions: tuple[str, ...]) -> None:
        """End the sessions through the manager's DELETE path, as their client would."""
        user = self._user(token_id)
        for session_id in sessions:
            scope: Scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                     "method": "DELETE", "scheme": "http", "path": "/mcp", "raw_path": b"/mcp",
                     "root_path": "", "query_string": b"", "client": None, "server": None,
                     "headers": [(SESSION_HEADER.encode(), session_id.encode())], "user": user}

            async def receive() -> Message:
                return {"type": "http.request", "body": b"", "more_body": False}

            async def send(message: Message) -> None:
                pass

            await self.manager.handle_request(scope, receive, send)
            log.info("mcp_session_ended", token_id=token_id, session=session_id[:8],
                     why="revoked")


