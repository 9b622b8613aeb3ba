"""GET /api/mcp: the configured MCP servers, whether each is connected, and the tools it lends
(as the model sees them: the name, the description and the danger class)."""

from __future__ import annotations

from typing import Literal

import msgspec

from chalie.edge.api_spec import COOKIE_AUTH, Operation
from chalie.edge.rest_base import AuthedHandler
from chalie.mcp.keys import provider_key
from chalie.tools.base import Danger


class McpTool(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    description: str
    danger: Danger


class McpServer(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    transport: Literal["stdio", "http"]
    online: bool
    tools: list[McpTool]


class McpServers(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    items: list[McpServer]


class McpHandler(AuthedHandler):
    api = {"get": Operation("The configured MCP servers, whether each is connected, and the "
                            "tools it lends", {200: McpServers}, auth=(COOKIE_AUTH,))}

    async def get(self) -> None:
        self.query_params()
        catalog = self.ctx.tools
        items: list[McpServer] = []
        for server in self.ctx.config.mcp.servers:
            key = provider_key(server.name)
            tools: list[McpTool] = []
            online = False
            if catalog is not None:
                online = catalog.is_online(key)
                registry = catalog.current()
                for name in registry.names_from(key):
                    tool = registry.get(name)
                    if tool is not None:
                        tools.append(McpTool(name, tool.spec.description, registry.danger(name)))
            items.append(McpServer(server.name, "stdio" if server.command else "http", online,
                                   tools))
        self.write_json(McpServers(items))
