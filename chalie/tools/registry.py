"""The tools a turn can call, and the one place a call is run and its failure contained."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import structlog

from chalie.llm.types import ToolSpec
from chalie.tools.base import Danger, Tool, ToolContext, ToolOutcome, tool_error

log = structlog.get_logger("chalie.tools")


class ToolRegistry:
    """Tools by name, each with its danger class: the tool's own, unless configuration raises it
    (`tools.confirm`, `tools.block` name tools that must be approved first, or never run)."""

    def __init__(self, tools: Iterable[Tool], *, confirm: Iterable[str] = (),
                 block: Iterable[str] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.spec.name in self._tools:
                raise ValueError(f"two tools are named {tool.spec.name!r}")
            self._tools[tool.spec.name] = tool
        self._danger: dict[str, Danger] = {n: t.danger for n, t in self._tools.items()}
        for name in confirm:
            if self._danger.get(name) == "safe":
                self._danger[name] = "confirm"
        for name in block:
            if name in self._danger:
                self._danger[name] = "block"

    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(t.spec for n, t in self._tools.items() if self._danger[n] != "block")

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def danger(self, name: str) -> Danger:
        """Unknown tools count as safe: running one only tells the model it does not exist."""
        return self._danger.get(name, "safe")

    def run(self, name: str, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        """Run one call. Whatever goes wrong comes back as an error outcome for the model."""
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self._tools)) or "none"
            return tool_error(f"no tool named {name!r} (tools: {known})")
        if self._danger[name] == "block":
            return tool_error(f"tool {name!r} is blocked and never runs")
        try:
            return tool.run(args, ctx)
        except Exception as e:  # a broken tool must not take the turn down
            log.warning("tool_crashed", tool=name, error=repr(e))
            return tool_error(f"tool {name!r} failed: {type(e).__name__}: {e}")
