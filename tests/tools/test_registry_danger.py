"""Configured danger: tools.confirm raises a tool to "confirm", tools.block stops it for good."""

from __future__ import annotations

from chalie.tools.base import ToolOutcome
from chalie.tools.registry import ToolRegistry
from tests.tools.test_registry import CTX, FakeTool


def test_confirm_raises_a_safe_tool_and_it_is_still_offered() -> None:
    """A safe tool named in confirm needs approval, stays offered, and other tools stay safe."""
    registry = ToolRegistry([FakeTool("clock"), FakeTool("mail")], confirm=["clock"])
    assert (registry.danger("clock"), registry.danger("mail")) == ("confirm", "safe")
    assert [s.name for s in registry.specs()] == ["clock", "mail"]


def test_confirm_never_lowers_a_tool() -> None:
    """Naming a blocked or confirm tool in confirm leaves it as dangerous as it was."""
    registry = ToolRegistry(
        [FakeTool("shell", danger="block"), FakeTool("wipe", danger="confirm")],
        confirm=["shell", "wipe"],
    )
    assert (registry.danger("shell"), registry.danger("wipe")) == ("block", "confirm")
    assert [s.name for s in registry.specs()] == ["wipe"]


def test_block_hides_a_tool_and_refuses_to_run_it() -> None:
    """A tool named in block is not offered, and a call to it is an error that runs nothing."""
    clock, mail = FakeTool("clock"), FakeTool("mail", danger="confirm")
    registry = ToolRegistry([clock, mail], block=["clock", "mail"], confirm=["clock"])
    assert (registry.danger("clock"), registry.danger("mail")) == ("block", "block")
    assert registry.specs() == ()
    assert registry.run("clock", {}, CTX) == ToolOutcome(
        text="error: tool 'clock' is blocked and never runs", is_error=True
    )
    assert clock.runs == []


def test_unknown_names_in_confirm_and_block_are_ignored() -> None:
    """Names that match no tool change nothing and do not stop the registry from starting."""
    clock = FakeTool("clock")
    registry = ToolRegistry([clock], confirm=["weather"], block=["shell"])
    assert registry.danger("clock") == "safe"
    assert registry.specs() == (clock.spec,)
    assert registry.run("clock", {}, CTX) == ToolOutcome(text="clock ran for turn-1")


def test_an_unknown_tool_counts_as_safe() -> None:
    """danger() of a name no tool has is "safe": running it only says it does not exist."""
    registry = ToolRegistry([FakeTool("clock")], block=["weather"])
    assert registry.danger("weather") == "safe"
    assert registry.run("weather", {}, CTX) == ToolOutcome(
        text="error: no tool named 'weather' (tools: clock)", is_error=True
    )
