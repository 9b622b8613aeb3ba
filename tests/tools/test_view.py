"""A background path's view of the tools: only what the path may use is offered, nothing that
needs the person's approval ever is (nobody is there to give it), a call to anything else is
an error naming what is offered, and tools that come and go are seen as they are."""

from __future__ import annotations

from typing import Any

import apsw
import pytest

from chalie.clock import ManualClock
from chalie.llm.types import ToolSpec
from chalie.tools.base import Danger, ToolContext, ToolOutcome
from chalie.tools.catalog import ToolCatalog
from chalie.tools.goal import GoalTool
from chalie.tools.memory import ForgetTool, MemoryTool
from chalie.tools.registry import ToolRegistry
from chalie.tools.schedule import ScheduleTool
from chalie.tools.view import ToolView


class Echo:
    """A tool that says what it was called with."""

    def __init__(self, name: str, danger: Danger = "safe") -> None:
        self.spec = ToolSpec(name=name, description=f"{name} things", parameters={})
        self.danger: Danger = danger

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        return ToolOutcome(text=f"{self.spec.name} ran with {args} on {ctx.path}")


def no_store() -> apsw.Connection:
    raise AssertionError("the view must not read the store")


CTX = ToolContext(channel="main", turn_id="t1", read=no_store, clock=ManualClock(),
                  path="dmn")


def innate(**config: Any) -> ToolRegistry:
    """The innate tools as a registry: memory, forget (confirm), goal, schedule, echo."""
    return ToolRegistry([MemoryTool(), ForgetTool(), GoalTool(), ScheduleTool("UTC"),
                         Echo("echo")], **config)


def offered(view: ToolView) -> list[str]:
    return [s.name for s in view.specs()]


def test_allow_limits_the_tools_offered() -> None:
    """With `allow`, only those tools are offered (in the source's order)."""
    view = ToolView(innate(), allow=["schedule", "memory", "not_a_tool"])
    assert offered(view) == ["memory", "schedule"]
    assert view.get("memory") is not None
    assert view.get("goal") is None


def test_deny_removes_tools_from_everything_else() -> None:
    """With `deny` (a scheduled prompt denies schedule and goal), every other safe tool is
    offered."""
    view = ToolView(innate(), deny=["schedule", "goal"])
    assert offered(view) == ["memory", "echo"]
    assert view.get("schedule") is None


def test_deny_wins_over_allow() -> None:
    """A tool both allowed and denied is not offered."""
    assert offered(ToolView(innate(), allow=["memory", "goal"], deny=["goal"])) == ["memory"]


@pytest.mark.parametrize("allow", [None, ["forget", "memory"]], ids=["everything", "allowed"])
def test_a_tool_that_needs_approval_is_never_offered(allow: list[str] | None) -> None:
    """Forget needs the person's approval: no background view offers it, even when allowed,
    and it cannot be fetched."""
    view = ToolView(innate(), allow=allow)
    assert "forget" not in offered(view)
    assert view.get("forget") is None
    assert view.danger("forget") == "confirm"


def test_a_tool_configured_to_need_approval_is_not_offered() -> None:
    """tools.confirm raising a safe tool to confirm takes it out of every background view; a
    blocked tool is never offered either."""
    view = ToolView(innate(confirm=["schedule"], block=["goal"]))
    assert offered(view) == ["memory", "echo"]


def test_running_an_offered_tool_runs_it() -> None:
    """A call to an offered tool runs it with the path's context."""
    outcome = ToolView(innate(), allow=["echo"]).run("echo", {"x": 1}, CTX)
    assert outcome == ToolOutcome(text="echo ran with {'x': 1} on dmn")


@pytest.mark.parametrize("name", ["forget", "goal", "no_such_tool"])
def test_running_a_tool_not_offered_is_an_error_listing_what_is(name: str) -> None:
    """A call to a tool the view does not offer (needs approval, not allowed, or unknown) runs
    nothing and tells the model which tools it has."""
    view = ToolView(innate(), allow=["memory", "echo", "forget"])
    outcome = view.run(name, {"key": "pet"}, CTX)
    assert outcome == ToolOutcome(
        text=f"error: no tool named {name!r} here (tools: memory, echo)", is_error=True)


def test_a_view_with_nothing_offered_says_none() -> None:
    """With no tool offered, the error says there are none."""
    outcome = ToolView(innate(), allow=[]).run("memory", {}, CTX)
    assert outcome.text == "error: no tool named 'memory' here (tools: none)"


def test_the_view_follows_tools_that_come_and_go() -> None:
    """A program's tool added to the catalog after the view was made is offered at once, and
    is gone once the program is removed; one that needs approval is never offered."""
    catalog = ToolCatalog([MemoryTool(), ForgetTool()])
    view = ToolView(catalog, deny=["goal"])
    assert offered(view) == ["memory"]
    catalog.set_provider("interface:w", label="weather",
                         tools=[Echo("forecast"), Echo("buy_umbrella", danger="confirm")])
    assert offered(view) == ["memory", "forecast"]
    assert view.run("forecast", {}, CTX).text == "forecast ran with {} on dmn"
    catalog.remove_provider("interface:w")
    assert offered(view) == ["memory"]
    assert view.run("forecast", {}, CTX).is_error is True
