"""One MCP server's tool as a Chalie Tool: the spec the server lists, run through its connection.

The spec keeps the server's own name; the ToolCatalog prefixes it with the server's name
(`time_get_current_time`) when it builds what the model sees.
"""

from __future__ import annotations

from typing import Any, Protocol

from mcp import types

from chalie.llm.types import ToolSpec
from chalie.tools.base import Danger, ToolContext, ToolOutcome

EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


class ToolCaller(Protocol):
    def call(self, name: str, args: dict[str, Any]) -> ToolOutcome:
        """Call the server's tool `name`; errors come back as error outcomes, never raised."""
        ...


class McpTool:
    def __init__(self, listed: types.Tool, caller: ToolCaller) -> None:
        self.name = listed.name  # the server's name for it, whatever the catalog shows
        self.spec = ToolSpec(
            name=listed.name,
            description=listed.description or listed.title or "",
            parameters=input_schema(listed.input_schema),
        )
        self.danger: Danger = danger_of(listed)
        self._read_only = read_only(listed)
        self._caller = caller

    def reads_only(self, args: dict[str, Any]) -> bool:
        return self._read_only

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        return self._caller.call(self.name, args)


def input_schema(raw: Any) -> dict[str, Any]:
    """The tool's arguments as a JSON-schema object, whatever the server sent."""
    if not isinstance(raw, dict) or raw.get("type", "object") != "object":
        return dict(EMPTY_SCHEMA)
    schema = {"type": "object", **raw}
    if not isinstance(schema.get("properties"), dict):
        schema["properties"] = {}
    return schema


def read_only(listed: types.Tool) -> bool:
    """The server says the tool only reads (`readOnlyHint: true`)."""
    annotations = listed.annotations
    return annotations is not None and annotations.read_only_hint is True


def danger_of(listed: types.Tool) -> Danger:
    """"safe" when the server says the tool only reads (`readOnlyHint: true`); "confirm"
    otherwise: when it says it is destructive (`destructiveHint: true`), and when it says
    nothing (MCP reads a missing hint as possibly destructive). The person may always allow a
    tool; `tools.confirm` and `tools.block` still apply by name."""
    return "safe" if read_only(listed) else "confirm"
