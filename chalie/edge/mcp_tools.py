"""What Chalie's MCP server offers (served at /mcp by edge/mcp_http.py): its tools, its
resources, and the gate every call passes.

The gate is SDK middleware: each tools/call and resources read is checked against its token
when it runs, not when the session opened, so a revoked token is refused at once even inside
an open session, and a tool the token has no scope for is a tool error (isError) that names
the scope. Every tool call and resource read is counted by token (metrics.api_calls, and the
token's `calls` on the dashboard).

`remember` and `forget` run as actions of the `memory` and `forget` skills on the token's
channel (`token.<name>`), so they normalise keys and supersede exactly as the model's memory
tool does, and are logged as turns there. `ask_chalie` runs a message through the reasoning
path on that channel, framed as a program asking on the person's behalf
(prompts/mcp_question.md), and reports the turn's narration as MCP progress.

Imported only on the first /mcp request and by `chalie mcp`: the SDK is heavy.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import msgspec
import structlog
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resources import FunctionResource
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST, CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from chalie.actors.session_messages import ActionRequest, UserMessage
from chalie.actors.world_state import SignalsIn
from chalie.edge.context import EdgeContext
from chalie.edge.rest_memory import search_hit
from chalie.edge.tokens import Scope, token_channel
from chalie.edge.turn_call import CallFailed, TurnCall
from chalie.memory.redact import Redactor
from chalie.paths import PROMPTS
from chalie.store import memory_queries as mq
from chalie.store.token_rows import TokenRow
from chalie.values.signals import Signal
from chalie.world.signals import parse

log = structlog.get_logger("chalie.edge")

TOKEN_KEY = "chalie.token_id"  # the ASGI scope's key for the calling token's id
TOOL_SCOPES: dict[str, Scope] = {
    "search_memory": "memory:read", "list_facts": "memory:read",
    "remember": "memory:write", "forget": "memory:write",
    "ask_chalie": "chat", "add_signal": "signals",
}
RESOURCE_SCOPE: Scope = "memory:read"
RECENT_EPISODES = 20  # in the recent-episodes resource
FACTS_LIMIT = 500  # in the facts resource
GRACE_S = 30.0  # ask_chalie waits this past act.timeout_s: the turn's own deadline ends it first
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False)


def iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds")


def as_json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def caller(ctx: EdgeContext, request: Any) -> TokenRow | None:
    """The token an MCP message came with, as the board has it now (None once revoked)."""
    scope = getattr(request, "scope", None)
    token_id = scope.get(TOKEN_KEY) if isinstance(scope, dict) else None
    board = ctx.tokens
    return board.get(token_id) if board is not None and isinstance(token_id, str) else None


class Gate:
    """SDK middleware: checks and counts each tool call and resource read by its token."""

    def __init__(self, ctx: EdgeContext) -> None:
        self.ctx = ctx

    async def __call__(self, ctx: ServerRequestContext[Any, Any],
                       call_next: CallNext) -> HandlerResult:
        rctx = ctx
        if rctx.method == "tools/call":
            name = str((rctx.params or {}).get("name", ""))
            scope = TOOL_SCOPES.get(name)
            return await self._checked(rctx, call_next, scope, f"tool {name}") \
                if scope is not None else await call_next(rctx)
        if rctx.method in ("resources/read", "resources/list"):
            row = caller(self.ctx, rctx.request)
            if row is None or RESOURCE_SCOPE not in row.scopes:
                self._count(row, "refused")
                raise MCPError(code=INVALID_REQUEST, message=_refusal(row, RESOURCE_SCOPE))
            result = await call_next(rctx)
            if rctx.method == "resources/read":
                self._count(row, "ok")
            return result
        return await call_next(rctx)

    async def _checked(self, rctx: ServerRequestContext[Any, Any], call_next: CallNext,
                       scope: Scope, what: str) -> HandlerResult:
        row = caller(self.ctx, rctx.request)
        if row is None or scope not in row.scopes:
            self._count(row, "refused")
            log.info("mcp_call_refused", what=what, token=row.name if row else None)
            return CallToolResult(content=[TextContent(type="text", text=_refusal(row, scope))],
                                  is_error=True)
        result = await call_next(rctx)
        failed = result.is_error if isinstance(result, CallToolResult) else \
            isinstance(result, dict) and bool(result.get("isError"))
        self._count(row, "error" if failed else "ok")
        return result

    def _count(self, row: TokenRow | None, result: str) -> None:
        if row is None:
            return  # revoked: no name to count it under (its row is gone)
        self.ctx.metrics.api_calls.labels(token=row.name, protocol="mcp", result=result).inc()
        if self.ctx.tokens is not None:
            self.ctx.tokens.used(row.id, "mcp", self.ctx.clock.time())


def _refusal(row: TokenRow | None, scope: Scope) -> str:
    if row is None:
        return "the API token is unknown or revoked; make a new one on the dashboard"
    return (f"the token {row.name!r} lacks the `{scope}` scope (it has: "
            f"{', '.join(row.scopes) or 'none'}); make a token with it on the dashboard")


class McpTools:
    """The tools' bodies. Each runs on the IOLoop (the SDK shares Tornado's asyncio loop);
    store reads go to worker threads."""

    def __init__(self, ctx: EdgeContext) -> None:
        self.ctx = ctx
        self._calls: dict[str, set[TurnCall]] = {}  # token id -> its turns being waited on

    def end_calls(self, token_id: str, why: str) -> None:
        """The token was revoked: stop waiting for its turns."""
        for call in list(self._calls.pop(token_id, ())):
            call.end(why)

    def _row(self, context: Context) -> TokenRow:
        row = caller(self.ctx, context.request_context.request)
        if row is None:  # revoked between the gate and here
            raise ToolError(_refusal(None, "chat"))
        return row

    async def _off_loop(self, work: Callable[[], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, work)

    async def search_memory(
            self, query: Annotated[str, Field(min_length=1, max_length=1000)],
            k: Annotated[int, Field(ge=1, le=50)] = 12) -> str:
        recall = self.ctx.recall
        if recall is None:
            raise ToolError("memory search is not available on this server")

        def search() -> dict[str, Any]:
            conn = self.ctx.read()
            recalled, redact = recall.recall(conn, query, k), Redactor(mq.forgotten(conn))
            hits = [msgspec.to_builtins(search_hit(hit, redact)) for hit in recalled.hits]
            for hit in hits:
                hit["created_at"] = iso(hit["created_at"])
            return {"query": query, "degraded": recalled.degraded, "results": hits}

        return as_json(await self._off_loop(search))

    async def list_facts(
            self, query: Annotated[str | None, Field(max_length=1000)] = None,
            history: bool = False, limit: Annotated[int, Field(ge=1, le=1000)] = 100,
            offset: Annotated[int, Field(ge=0)] = 0) -> str:
        rows = await self._off_loop(lambda: _facts(self.ctx, query, history, limit, offset))
        return as_json({"items": rows})

    async def remember(
            self, key: Annotated[str, Field(min_length=1, max_length=200)],
            value: Annotated[str, Field(min_length=1, max_length=4000)],
            context: Context,
            kind: Literal["fact", "trait", "preference"] = "fact") -> str:
        params = {"action": "remember", "key": key, "value": value, "kind": kind}
        return await self._action(context, "memory", params)

    async def forget(self, key: Annotated[str, Field(min_length=1, max_length=200)],
                     context: Context) -> str:
        return await self._action(context, "forget", {"key": key})

    async def _action(self, context: Context, skill: str, params: dict[str, Any]) -> str:
        row = self._row(context)
        client_id = str(uuid.uuid4())
        message = ActionRequest(skill=skill, params=params,
                                received_at=self.ctx.clock.monotonic(), client_id=client_id)
        return await self._turn(row, TurnCall(self.ctx, token_channel(row.name), client_id),
                                message)

    async def ask_chalie(self, question: Annotated[str, Field(min_length=1, max_length=20_000)],
                         context: Context) -> str:
        row = self._row(context)
        prompts = self.ctx.prompts
        if prompts is None:
            raise ToolError("asking Chalie is not available on this server")
        client_id = str(uuid.uuid4())
        steps: list[asyncio.Task[None]] = []

        def progress(text: str) -> None:  # from the hub, on the IOLoop
            steps.append(asyncio.ensure_future(
                context.report_progress(len(steps) + 1, None, text)))

        call = TurnCall(self.ctx, token_channel(row.name), client_id, on_progress=progress)
        message = UserMessage(text=prompts.render("mcp_question", program=row.name,
                                                  text=question),
                              received_at=self.ctx.clock.monotonic(), client_id=client_id)
        try:
            return await self._turn(row, call, message)
        finally:
            await asyncio.gather(*steps, return_exceptions=True)

    async def _turn(self, row: TokenRow, call: TurnCall,
                    message: UserMessage | ActionRequest) -> str:
        calls = self._calls.setdefault(row.id, set())
        calls.add(call)
        try:
            result = await call.run(message, self.ctx.config.act.timeout_s + GRACE_S)
        except CallFailed as e:
            raise ToolError(e.message) from None
        finally:
            calls.discard(call)
            if not calls and self._calls.get(row.id) is calls:
                del self._calls[row.id]
        if result.error is not None:
            raise ToolError(result.error)
        return result.text

    async def add_signal(  # noqa: PLR0917  (the tool's arguments, as MCP clients name them)
            self, signal_type: Annotated[str, Field(min_length=1, max_length=64)],
            content: Annotated[str, Field(min_length=1, max_length=4000)], context: Context,
            topic: str | None = None, source: str | None = None,
            activation_energy: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5) -> str:
        row = self._row(context)
        gate = self.ctx.gate
        if gate is None:
            raise ToolError("signals are not available on this server")
        body = {"signal_type": signal_type, "content": content, "topic": topic,
                "source": source or f"mcp:{row.name}", "activation_energy": activation_energy}
        result = gate.admit(f"token:{row.name}", None, parse(msgspec.json.encode(body)))
        reason = "accepted" if isinstance(result, Signal) else result.reason
        self.ctx.metrics.signals.labels(result=reason, via="mcp").inc()
        if not isinstance(result, Signal):
            raise ToolError(result.error)
        if not self.ctx.directory.tell("world", SignalsIn((result,))):
            raise ToolError("world state is restarting; try again shortly")
        return as_json({"ok": True, "signal_id": result.id})

    async def facts_resource(self) -> str:
        rows = await self._off_loop(lambda: _facts(self.ctx, None, False, FACTS_LIMIT, 0))
        return as_json({"items": rows})

    async def episodes_resource(self) -> str:
        def read() -> list[dict[str, Any]]:
            rows = mq.episode_rows(self.ctx.read(), ids=None, limit=RECENT_EPISODES, offset=0)
            for row in rows:
                row["happened_at"], row["created_at"] = iso(row["happened_at"]), \
                    iso(row["created_at"])
            return rows

        return as_json({"items": await self._off_loop(read)})


def _facts(ctx: EdgeContext, query: str | None, history: bool, limit: int,
           offset: int) -> list[dict[str, Any]]:
    rows = mq.knowledge_rows(ctx.read(), query=query, history=history, limit=limit,
                             offset=offset)
    for row in rows:
        row["valid_from"], row["valid_to"] = iso(row["valid_from"]), iso(row["valid_to"])
    return rows


def described(name: str) -> str:
    """What the MCP client's model reads about Chalie or one of its tools: prompts/mcp/."""
    return (PROMPTS / "mcp" / f"{name}.md").read_text(encoding="utf-8").strip()


def build_server(ctx: EdgeContext, tools: McpTools) -> MCPServer[Any]:
    """The MCP server's tools and resources, behind the token gate."""
    server: MCPServer[Any] = MCPServer("chalie", instructions=described("instructions"),
                                       middleware=[Gate(ctx)])

    def add(fn: Callable[..., Any], **kwargs: Any) -> None:
        """A tool, described by prompts/mcp/<its name>.md; its result is text (JSON or prose)."""
        server.add_tool(fn, structured_output=False, description=described(fn.__name__),
                        **kwargs)

    changes = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                              open_world_hint=False)
    add(tools.search_memory, title="Search Chalie's memory", annotations=READ_ONLY)
    add(tools.list_facts, title="List what Chalie knows", annotations=READ_ONLY)
    add(tools.remember, title="Remember a fact", annotations=changes)
    add(tools.forget, title="Forget a fact", annotations=ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=True,
        open_world_hint=False))
    add(tools.ask_chalie, title="Ask Chalie", annotations=ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=False,
        open_world_hint=True))
    add(tools.add_signal, title="Report a signal", annotations=ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=False,
        open_world_hint=False))
    server.add_resource(FunctionResource.from_function(
        tools.facts_resource, uri="chalie://memory/facts", name="facts",
        title="What Chalie knows now", mime_type="application/json",
        description="The person's current facts, traits and preferences, with dates."))
    server.add_resource(FunctionResource.from_function(
        tools.episodes_resource, uri="chalie://memory/episodes", name="episodes",
        title="Recent episodes", mime_type="application/json",
        description=f"The {RECENT_EPISODES} newest episodes: what stretches of talk were about."))
    return server
