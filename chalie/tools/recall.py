"""The innate `recall` tool: the model searches everything remembered, as pre-loop recall does.

Results are shown with their kind and date; what the person asked to forget stays blanked out.
Items returned gain retrieval strength like items recalled into the prompt.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from chalie.llm.types import ToolSpec
from chalie.memory.redact import Redactor
from chalie.store import memory_queries
from chalie.store.effects import Recalled
from chalie.tools.base import Danger, ToolContext, ToolOutcome, tool_description, tool_error
from chalie.values.memory import Item

DEFAULT_LIMIT = 8
MAX_LIMIT = 20
MAX_QUERY = 500
ITEM_CHARS = 600


class RecallTool:
    danger: Danger = "safe"

    @staticmethod
    def reads_only(args: dict[str, Any]) -> bool:
        return True

    spec = ToolSpec(
        name="recall",
        description=tool_description("recall"),
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "words or topic to look for"},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                          "description": f"most results to return (default {DEFAULT_LIMIT})"},
            },
            "required": ["query"],
        },
    )

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        query, limit = args.get("query"), args.get("limit", DEFAULT_LIMIT)
        if not isinstance(query, str) or not query.strip():
            return tool_error("recall needs a non-empty string `query`")
        if len(query) > MAX_QUERY:
            return tool_error(f"`query` is limited to {MAX_QUERY} characters")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            return tool_error(f"`limit` must be a whole number from 1 to {MAX_LIMIT}")
        if ctx.recall is None:
            return tool_error("recall is not available on this server")
        conn = ctx.read()
        found = ctx.recall.recall(conn, query, limit)
        if not found.hits:
            return ToolOutcome(text=f"nothing remembered matches {query!r}")
        redact = Redactor(memory_queries.forgotten(conn))
        lines = []
        for hit in found.hits:
            item = hit.item
            date = datetime.fromtimestamp(item.created_at, UTC).strftime("%Y-%m-%d")
            label = {"message": _said_by(item), "episode": "conversation",
                     "knowledge": "fact"}[item.kind]
            text = " ".join(item.text.split())
            if len(text) > ITEM_CHARS:
                text = text[:ITEM_CHARS] + "…"
            lines.append(f"- ({date}, {label}) {redact(text, item.created_at)}")
        return ToolOutcome(text="\n".join(lines),
                           effects=(Recalled(tuple(h.item.mkey for h in found.hits)),),
                           heard=tuple(h.item.text for h in found.hits
                                       if h.item.role == "program"))


def _said_by(item: Item) -> str:
    """Who said a recalled message, as the tool's result labels it."""
    if item.role == "program":
        return f"{item.speaker or 'a program'} (a paired program, not the person) said"
    return "the person said" if item.role == "user" else "you said"
