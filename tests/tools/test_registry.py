"""The tool registry: which tools are offered, and how a call's failure is contained."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from chalie.clock import ManualClock
from chalie.llm.types import ToolSpec
from chalie.tools.base import Danger, ToolContext, ToolOutcome
from chalie.tools.memory import MemoryTool
from chalie.tools.registry import ToolRegistry


class FakeTool:
    """A tool that answers with a fixed text, or raises, and counts its runs."""

    def __init__(self, name: str, *, danger: Danger = "safe", fails: bool = False) -> None:
        self.spec = ToolSpec(name, f"the {name} tool", {"type": "object"})
        self.danger = danger
        self._fails = fails
        self.runs: list[dict[str, Any]] = []

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        self.runs.append(args)
        if self._fails:
            raise RuntimeError("disk on fire")
        return ToolOutcome(text=f"{self.spec.name} ran for {ctx.turn_id}")


def _no_store() -> Any:
    raise AssertionError("these tools never read the store")


CTX = ToolContext(channel="default", turn_id="turn-1", read=_no_store, clock=ManualClock())


def test_specs_offer_every_tool_that_is_not_blocked() -> None:
    """Safe and confirm tools are offered to the model in registration order; blocked ones not."""
    registry = ToolRegistry(
        [FakeTool("clock"), FakeTool("shell", danger="block"), FakeTool("mail", danger="confirm")]
    )
    assert [s.name for s in registry.specs()] == ["clock", "mail"]
    assert registry.specs()[0] == ToolSpec("clock", "the clock tool", {"type": "object"})


def test_a_known_tool_runs_with_its_arguments() -> None:
    """Running a registered tool returns its outcome and passes it the arguments."""
    clock = FakeTool("clock")
    outcome = ToolRegistry([clock]).run("clock", {"zone": "UTC"}, CTX)
    assert outcome == ToolOutcome(text="clock ran for turn-1")
    assert clock.runs == [{"zone": "UTC"}]


def test_unknown_tool_name_is_an_error_outcome_listing_the_tools() -> None:
    """A call to a tool that does not exist tells the model which tools there are."""
    registry = ToolRegistry([MemoryTool(), FakeTool("clock")])
    outcome = registry.run("weather", {}, CTX)
    assert outcome == ToolOutcome(
        text="error: no tool named 'weather' (tools: clock, memory)", is_error=True
    )


def test_a_tool_that_raises_gives_an_error_outcome_and_a_warning(
    log_records: list[logging.LogRecord],
) -> None:
    """A crashing tool becomes an "error:" result for the model, logged as a warning."""
    outcome = ToolRegistry([FakeTool("broken", fails=True)]).run("broken", {}, CTX)
    assert outcome == ToolOutcome(
        text="error: tool 'broken' failed: RuntimeError: disk on fire", is_error=True
    )
    warnings = [r for r in log_records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "tool_crashed" in warnings[0].getMessage()


def test_a_blocked_tool_never_runs() -> None:
    """A call to a blocked tool is refused with an error outcome and the tool is not run."""
    shell = FakeTool("shell", danger="block")
    registry = ToolRegistry([shell])
    assert registry.run("shell", {"cmd": "rm -rf /"}, CTX) == ToolOutcome(
        text="error: tool 'shell' is blocked and never runs", is_error=True
    )
    assert shell.runs == []
    assert registry.specs() == ()


def test_two_tools_with_one_name_are_refused() -> None:
    """Registering two tools under the same name fails at start-up."""
    with pytest.raises(ValueError, match="two tools are named 'clock'"):
        ToolRegistry([FakeTool("clock"), FakeTool("clock")])


def test_get_returns_the_registered_tool_or_none() -> None:
    """Looking a tool up by name gives the tool itself, or None for an unknown name."""
    memory = MemoryTool()
    registry = ToolRegistry([memory])
    assert registry.get("memory") is memory
    assert registry.get("nope") is None
