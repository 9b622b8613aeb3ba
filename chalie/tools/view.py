"""A background path's view of the tools: the live catalog, less what the path may not use.

The DMN gets only its drift actions (memory, recall, goal, schedule); a scheduled prompt gets
everything but `schedule` and `goal` (no recursion); a goal's steps get everything but `goal`.
No background path sees a tool that needs the person's approval: nobody is there to give it.
Reads go to the catalog's current snapshot each time, so interfaces and MCP servers that come
and go are seen as they are.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from chalie.llm.types import ToolSpec
from chalie.tools.base import Danger, Tool, ToolContext, ToolOutcome, ToolSource, tool_error


class ToolView:
    def __init__(self, source: ToolSource, *, allow: Iterable[str] | None = None,
                 deny: Iterable[str] = ()) -> None:
        self._source = source
        self._allow = None if allow is None else frozenset(allow)
        self._deny = frozenset(deny)

    def _offered(self, name: str) -> bool:
        return (self._allow is None or name in self._allow) and name not in self._deny \
            and self._source.danger(name) == "safe"

    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(s for s in self._source.specs() if self._offered(s.name))

    def get(self, name: str) -> Tool | None:
        return self._source.get(name) if self._offered(name) else None

    def danger(self, name: str) -> Danger:
        return self._source.danger(name)

    def origin(self, name: str) -> str | None:
        return self._source.origin(name)

    def identity(self, name: str) -> tuple[str, str]:
        return self._source.identity(name)

    def reads_only(self, name: str, args: dict[str, Any]) -> bool:
        return self._source.reads_only(name, args)

    def run(self, name: str, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        if not self._offered(name):
            known = ", ".join(s.name for s in self.specs()) or "none"
            return tool_error(f"no tool named {name!r} here (tools: {known})")
        return self._source.run(name, args, ctx)
