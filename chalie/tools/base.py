"""What a tool is, what it gets when it runs, and what it gives back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol

import apsw
import msgspec

from chalie.clock import Clock
from chalie.frames import Card
from chalie.llm.types import ToolSpec
from chalie.memory.recall import Recall
from chalie.paths import PROMPTS
from chalie.store.effects import Effect

# safe: runs at once; confirm: the person approves first; block: never runs.
Danger = Literal["safe", "confirm", "block"]
INNATE = "chalie"  # the provider of the innate tools, as an always-allow names it


class ToolContext(msgspec.Struct, frozen=True):
    """A tool's view of the world for one call. `pending` holds the effects earlier calls of
    this turn asked for, not yet stored, so a tool can read its own turn's writes."""

    channel: str
    turn_id: str
    read: Callable[[], apsw.Connection]
    clock: Clock
    pending: tuple[Effect, ...] = ()
    recall: Recall | None = None  # hybrid recall over everything remembered (the recall tool)
    path: str = "user"  # the path running the turn: user, dmn, scheduled, goal


class ToolOutcome(msgspec.Struct, frozen=True):
    """What the model reads (`text`), what the turn stores (`effects`), and a `card` frame for
    the person when the tool's result has something to show (an interface's blocks).
    `heard`: what other programs said that the result repeats (a recalled message of one)."""

    text: str
    is_error: bool = False
    effects: tuple[Effect, ...] = ()
    card: Card | None = None
    heard: tuple[str, ...] = ()


class Tool(Protocol):
    """A tool. One may also say which calls only read (`reads_only(args) -> bool`): those run
    whatever words they came from; a tool that does not say never only reads."""

    spec: ToolSpec
    danger: Danger

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        """Do the work. Raise nothing on purpose: a bad argument is an error outcome."""
        ...


def reads_only(tool: Tool, args: dict[str, Any]) -> bool:
    """Whether this call of `tool` only reads (changes nothing for the person)."""
    said = getattr(tool, "reads_only", None)
    return bool(said(args)) if callable(said) else False


def options(tool: Tool) -> frozenset[str]:
    """The values the tool's schema lists (enums, consts): naming one is choosing, not
    carrying data."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "enum" and isinstance(value, list):
                    found.update(str(v) for v in value)
                elif key == "const":
                    found.add(str(value))
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(tool.spec.parameters)
    return frozenset(found)


class ToolSource(Protocol):
    """Where a turn finds its tools: a registry, the live catalog, or a path's view of it."""

    def specs(self) -> tuple[ToolSpec, ...]:
        """The tools a prompt offers."""
        ...

    def get(self, name: str) -> Tool | None: ...

    def danger(self, name: str) -> Danger: ...

    def origin(self, name: str) -> str | None:
        """Who provides the tool, as a prompt names it ("hospital, a paired program"); None
        for an innate tool."""
        ...

    def identity(self, name: str) -> tuple[str, str]:
        """(provider key, the provider's own name for the tool): what an always-allow is
        remembered by. The provider key is "interface:<id>", "mcp:<name>" or INNATE."""
        ...

    def reads_only(self, name: str, args: dict[str, Any]) -> bool:
        """Whether this call only reads (see `reads_only` below)."""
        ...

    def run(self, name: str, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        """Run one call; whatever goes wrong is an error outcome."""
        ...


def tool_description(name: str) -> str:
    """What the model is told a tool does: prompts/tools/<name>.md."""
    return (PROMPTS / "tools" / f"{name}.md").read_text(encoding="utf-8").strip()


def tool_error(text: str) -> ToolOutcome:
    return ToolOutcome(text=f"error: {text}", is_error=True)
