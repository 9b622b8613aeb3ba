"""The tools a turn can call, and the one place a call is run and its failure contained."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import structlog

from chalie.llm.types import ToolSpec
from chalie.tools.base import INNATE, Danger, Tool, ToolContext, ToolOutcome, tool_error
from chalie.tools.base import reads_only as tool_reads_only

log = structlog.get_logger("chalie.tools")


class ToolRegistry:
    """Tools by name, each with its danger class: the tool's own, unless configuration raises it
    (`tools.confirm`, `tools.block` name tools that must be approved first, or never run) or
    the person always allows it (`allowed`: (provider key, own name) pairs; a `confirm` tool
    runs without asking, a blocked one still never runs). `offline` tools belong to a provider
    that is not answering: no prompt offers them and they do not run. `origin` maps the names
    of provided tools to their provider's key, `labels` a provider's key to how a prompt names
    it, `own` a provided tool's name to the provider's own name for it."""

    def __init__(self, tools: Iterable[Tool], *, confirm: Iterable[str] = (),
                 block: Iterable[str] = (), offline: Iterable[str] = (),
                 origin: dict[str, str] | None = None, labels: dict[str, str] | None = None,
                 own: dict[str, str] | None = None,
                 allowed: Iterable[tuple[str, str]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.spec.name in self._tools:
                raise ValueError(f"two tools are named {tool.spec.name!r}")
            self._tools[tool.spec.name] = tool
        self._origin = dict(origin or {})
        self._labels = dict(labels or {})
        self._own = dict(own or {})
        self._danger: dict[str, Danger] = {n: t.danger for n, t in self._tools.items()}
        for name in confirm:
            if self._danger.get(name) == "safe":
                self._danger[name] = "confirm"
        always = frozenset(allowed)
        for name, danger in self._danger.items():
            if danger == "confirm" and self.identity(name) in always:
                self._danger[name] = "safe"
        for name in block:
            if name in self._danger:
                self._danger[name] = "block"
        self._offline = frozenset(offline)
        self._specs = tuple(t.spec for n, t in self._tools.items()
                            if self._danger[n] != "block" and n not in self._offline)

    def specs(self) -> tuple[ToolSpec, ...]:
        """What a prompt offers: every tool that may run and whose provider is online."""
        return self._specs

    def names_from(self, provider: str) -> tuple[str, ...]:
        return tuple(n for n in self._tools if self._origin.get(n) == provider)

    def is_offline(self, name: str) -> bool:
        return name in self._offline

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def danger(self, name: str) -> Danger:
        """Unknown tools count as safe: running one only tells the model it does not exist."""
        return self._danger.get(name, "safe")

    def origin(self, name: str) -> str | None:
        key = self._origin.get(name)
        return None if key is None else self._labels.get(key, key)

    def identity(self, name: str) -> tuple[str, str]:
        return self._origin.get(name, INNATE), self._own.get(name, name)

    def reads_only(self, name: str, args: dict[str, Any]) -> bool:
        """Unknown tools only read: running one only tells the model it does not exist."""
        tool = self._tools.get(name)
        return tool is None or tool_reads_only(tool, args)

    def run(self, name: str, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        """Run one call. Whatever goes wrong comes back as an error outcome for the model."""
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self._tools)) or "none"
            return tool_error(f"no tool named {name!r} (tools: {known})")
        if self._danger[name] == "block":
            return tool_error(f"tool {name!r} is blocked and never runs")
        if name in self._offline:
            return tool_error(f"tool {name!r} is unavailable: the program that provides it is "
                              "not answering")
        try:
            return tool.run(args, ctx)
        except Exception as e:  # a broken tool must not take the turn down
            log.warning("tool_crashed", tool=name, error=repr(e))
            return tool_error(f"tool {name!r} failed: {type(e).__name__}: {e}")
