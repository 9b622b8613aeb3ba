"""Every tool a turn may call, from every provider, published as one immutable snapshot.

Innate tools are fixed; paired interfaces and MCP servers add and remove theirs while the
server runs, and go offline and back. Their owners (the InterfaceHealth and Mcp actors, the
pairing endpoint) write here; a turn takes `current()` (an atomic read of one reference, never
a lock or an ask) and uses that registry for its prompt. Offline tools stay registered, so
names do not shift, but are offered to no prompt and refuse to run.

Names are what the model sees, so they must be unique: an interface's tool keeps its own name
unless an innate tool or an earlier provider has it, and is then prefixed with the interface's
name (`weather_forecast`); an MCP server's tools are always prefixed with the server's name.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from chalie.tools.base import Danger, Tool, ToolContext, ToolOutcome
from chalie.tools.base import reads_only as tool_reads_only
from chalie.tools.registry import ToolRegistry

MAX_NAME = 64  # what OpenAI-compatible servers accept: ^[a-zA-Z0-9_-]{1,64}$
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def safe_name(text: str) -> str:
    """`text` as a tool name: runs of other characters become '_', cut to 64 characters."""
    name = _UNSAFE.sub("_", text).strip("_") or "tool"
    return name[:MAX_NAME]


class _Named:
    """A provider's tool under the name the catalog gave it."""

    def __init__(self, tool: Tool, name: str) -> None:
        self.tool = tool
        self.spec = msgspec.structs.replace(tool.spec, name=name)
        self.danger: Danger = tool.danger

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        return self.tool.run(args, ctx)

    def reads_only(self, args: dict[str, Any]) -> bool:
        return tool_reads_only(self.tool, args)


@dataclass(frozen=True)
class Provider:
    key: str  # "interface:<id>" or "mcp:<name>"
    label: str  # the prefix of its tools' names when one is needed
    tools: tuple[Tool, ...]
    online: bool
    always_prefix: bool
    order: float  # earlier providers keep bare names when two collide (pairing time)


class ToolCatalog:
    """Thread-safe writes, lock-free reads of the current ToolRegistry."""

    def __init__(self, innate: Iterable[Tool], *, confirm: Iterable[str] = (),
                 block: Iterable[str] = (), allowed: Iterable[tuple[str, str]] = ()) -> None:
        self._innate = tuple(innate)
        self._confirm = tuple(confirm)
        self._block = tuple(block)
        self._allowed = frozenset(allowed)
        self._lock = threading.Lock()
        self._providers: dict[str, Provider] = {}
        self._current = self._build()

    # -- readers --

    def current(self) -> ToolRegistry:
        return self._current

    def names_of(self, key: str) -> tuple[str, ...]:
        """The names the model sees for a provider's tools, in the provider's order."""
        return self._current.names_from(key)

    def is_online(self, key: str) -> bool:
        """Whether a provider is known and answering (False for one not connected yet)."""
        provider = self._providers.get(key)
        return provider is not None and provider.online

    # A catalog stands wherever a registry did: these read the current snapshot.
    def specs(self) -> tuple[Any, ...]:
        return self._current.specs()

    def get(self, name: str) -> Tool | None:
        return self._current.get(name)

    def danger(self, name: str) -> Danger:
        return self._current.danger(name)

    def origin(self, name: str) -> str | None:
        return self._current.origin(name)

    def identity(self, name: str) -> tuple[str, str]:
        return self._current.identity(name)

    def reads_only(self, name: str, args: dict[str, Any]) -> bool:
        return self._current.reads_only(name, args)

    def run(self, name: str, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        return self._current.run(name, args, ctx)

    # -- writers --

    def set_provider(self, key: str, *, label: str, tools: Sequence[Tool], online: bool = True,
                     always_prefix: bool = False, order: float = 0.0) -> None:
        """Add a provider's tools, or replace them (a refresh, a `tools/list_changed`)."""
        with self._lock:
            self._providers[key] = Provider(key, label, tuple(tools), online, always_prefix,
                                            order)
            self._current = self._build()

    def set_online(self, key: str, online: bool) -> bool:
        """Mark a provider online or offline; False when it is unknown or already so."""
        with self._lock:
            provider = self._providers.get(key)
            if provider is None or provider.online == online:
                return False
            self._providers[key] = Provider(provider.key, provider.label, provider.tools,
                                            online, provider.always_prefix, provider.order)
            self._current = self._build()
            return True

    def set_rules(self, *, confirm: Iterable[str], block: Iterable[str]) -> None:
        """New `tools.confirm` and `tools.block` (a config reload), for calls from now on."""
        with self._lock:
            self._confirm = tuple(confirm)
            self._block = tuple(block)
            self._current = self._build()

    def set_allowed(self, allowed: Iterable[tuple[str, str]]) -> None:
        """The tools the person always allows, as (provider key, own name), from now on."""
        with self._lock:
            self._allowed = frozenset(allowed)
            self._current = self._build()

    def remove_provider(self, key: str) -> None:
        with self._lock:
            if self._providers.pop(key, None) is not None:
                self._current = self._build()

    def _build(self) -> ToolRegistry:
        tools: list[Tool] = list(self._innate)
        taken = {t.spec.name for t in tools}
        offline: list[str] = []
        origin: dict[str, str] = {}
        own: dict[str, str] = {}
        labels = {p.key: _described(p) for p in self._providers.values()}
        for provider in sorted(self._providers.values(), key=lambda p: (p.order, p.key)):
            label = safe_name(provider.label)
            for tool in provider.tools:
                base = safe_name(tool.spec.name)
                prefixed = safe_name(f"{label}_{base}")
                name = prefixed if provider.always_prefix or base in taken else base
                n = 2
                while name in taken:
                    suffix = f"_{n}"
                    name = prefixed[:MAX_NAME - len(suffix)] + suffix
                    n += 1
                taken.add(name)
                tools.append(_Named(tool, name))
                origin[name] = provider.key
                own[name] = tool.spec.name
                if not provider.online:
                    offline.append(name)
        return ToolRegistry(tools, confirm=self._confirm, block=self._block, offline=offline,
                            origin=origin, labels=labels, own=own, allowed=self._allowed)


def _described(provider: Provider) -> str:
    """How a prompt names a provider: "hospital, a paired program", "time, an MCP server"."""
    kind = "an MCP server" if provider.key.startswith("mcp:") else "a paired program"
    return f"{provider.label}, {kind}"
