"""An MCP server's tool as a Chalie tool: its spec, its danger class, its calls."""

from __future__ import annotations

from typing import Any

from mcp import types

from chalie.mcp.tools import McpTool
from chalie.tools.base import ToolOutcome
from tests.tools.test_registry import CTX


class Caller:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def call(self, name: str, args: dict[str, Any]) -> ToolOutcome:
        self.calls.append((name, args))
        return ToolOutcome(text=f"{name} done")


def listed(schema: dict[str, Any], **kw: Any) -> types.Tool:
    return types.Tool(name="lookup", input_schema=schema, **kw)


def test_the_spec_keeps_the_servers_name_description_and_schema() -> None:
    """The model is told what the server says; the arguments schema is passed on whole."""
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    tool = McpTool(listed(schema, description="Look a word up."), Caller())
    assert (tool.spec.name, tool.spec.description) == ("lookup", "Look a word up.")
    assert tool.spec.parameters == schema


def test_a_schema_that_is_not_an_object_schema_becomes_one() -> None:
    """No `type` gets "object"; a missing `properties` is added; a non-object schema is
    replaced by an empty object schema."""
    def parameters(schema: dict[str, Any]) -> dict[str, Any]:
        return McpTool(listed(schema), Caller()).spec.parameters

    word = {"q": {"type": "string"}}
    assert parameters({"properties": word}) == {"type": "object", "properties": word}
    assert parameters({"type": "object"}) == {"type": "object", "properties": {}}
    assert parameters({"type": "string"}) == {"type": "object", "properties": {}}


def test_only_a_read_only_tool_runs_without_asking() -> None:
    """readOnlyHint true -> "safe" (and only reads); destructiveHint true, or anything else
    (no annotations, destructiveHint false without readOnlyHint) -> "confirm"."""
    def tool(annotations: types.ToolAnnotations | None) -> McpTool:
        return McpTool(listed({"type": "object"}, annotations=annotations), Caller())

    assert tool(types.ToolAnnotations(read_only_hint=True)).danger == "safe"
    assert tool(types.ToolAnnotations(read_only_hint=True)).reads_only({}) is True
    assert tool(types.ToolAnnotations(destructive_hint=True)).danger == "confirm"
    assert tool(types.ToolAnnotations(destructive_hint=False)).danger == "confirm"
    assert tool(None).danger == "confirm"
    assert tool(None).reads_only({}) is False


def test_running_the_tool_calls_the_server_by_its_own_name() -> None:
    """Whatever the catalog calls it, the call goes out under the server's name for it."""
    caller = Caller()
    outcome = McpTool(listed({"type": "object"}), caller).run({"q": "teal"}, CTX)
    assert outcome.text == "lookup done"
    assert caller.calls == [("lookup", {"q": "teal"})]
