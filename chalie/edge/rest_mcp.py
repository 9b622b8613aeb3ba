"""GET /api/mcp: the configured MCP servers, whether each is connected, and the tools it lends
(as the model sees them: the name, the description and the danger class)."""

from __future__ import annotations

from typing import Any

from chalie.edge.rest_base import AuthedHandler
from chalie.mcp.keys import provider_key


class McpHandler(AuthedHandler):
    async def get(self) -> None:
        self.query_params()
        catalog = self.ctx.tools
        items: list[dict[str, Any]] = []
        for server in self.ctx.config.mcp.servers:
            key = provider_key(server.name)
            tools: list[dict[str, Any]] = []
            online = False
            if catalog is not None:
                online = catalog.is_online(key)
                registry = catalog.current()
                for name in registry.names_from(key):
                    tool = registry.get(name)
                    if tool is not None:
                        tools.append({"name": name, "description": tool.spec.description,
                                      "danger": registry.danger(name)})
            items.append({"name": server.name, "transport": "stdio" if server.command else "http",
                          "online": online, "tools": tools})
        self.write_json({"items": items})
