"""The tool catalog: innate, interface and MCP tools under unique names, online or not."""

from __future__ import annotations

from chalie.tools.catalog import MAX_NAME, ToolCatalog, safe_name
from tests.tools.test_registry import CTX, FakeTool


def names(catalog: ToolCatalog) -> list[str]:
    return [s.name for s in catalog.specs()]


def test_provided_tools_are_offered_beside_innate_ones_under_their_own_names() -> None:
    """An interface's tools appear next to the innate ones, named as the interface named them."""
    catalog = ToolCatalog([FakeTool("recall")])
    catalog.set_provider("interface:a", label="hospital", tools=[FakeTool("cancel_appointment")])
    assert names(catalog) == ["recall", "cancel_appointment"]
    assert catalog.names_of("interface:a") == ("cancel_appointment",)
    assert catalog.run("cancel_appointment", {}, CTX).text == "cancel_appointment ran for turn-1"


def test_a_name_taken_by_an_innate_tool_is_prefixed_with_the_interface_name() -> None:
    """An interface's `recall` is offered as `<interface>_recall`; the innate one keeps its name."""
    innate, theirs = FakeTool("recall"), FakeTool("recall")
    catalog = ToolCatalog([innate])
    catalog.set_provider("interface:a", label="Note Pad", tools=[theirs])
    assert names(catalog) == ["recall", "Note_Pad_recall"]
    catalog.run("Note_Pad_recall", {"q": 1}, CTX)
    assert theirs.runs == [{"q": 1}]
    assert innate.runs == []


def test_the_earlier_provider_keeps_a_shared_name_whatever_the_order_of_registration() -> None:
    """Of two interfaces with the same tool, the one paired first keeps the bare name."""
    catalog = ToolCatalog([])
    catalog.set_provider("interface:late", label="b", tools=[FakeTool("search")], order=20.0)
    catalog.set_provider("interface:early", label="a", tools=[FakeTool("search")], order=10.0)
    assert catalog.names_of("interface:early") == ("search",)
    assert catalog.names_of("interface:late") == ("b_search",)


def test_mcp_tools_are_always_prefixed_and_clashing_prefixes_get_a_number() -> None:
    """An MCP server's tools carry its name; a clash that remains is numbered, never dropped."""
    catalog = ToolCatalog([FakeTool("time_now")])
    catalog.set_provider("mcp:time", label="time", tools=[FakeTool("now")], always_prefix=True)
    assert catalog.names_of("mcp:time") == ("time_now_2",)
    assert len(set(names(catalog))) == len(names(catalog))


def test_offline_tools_leave_the_prompt_and_refuse_to_run_until_back_online() -> None:
    """A provider gone offline keeps its names but is offered nowhere and does not run."""
    tool = FakeTool("forecast")
    catalog = ToolCatalog([])
    catalog.set_provider("interface:w", label="weather", tools=[tool])
    assert catalog.set_online("interface:w", False) is True
    assert catalog.set_online("interface:w", False) is False
    assert names(catalog) == []
    outcome = catalog.run("forecast", {}, CTX)
    assert outcome.is_error
    assert "unavailable" in outcome.text
    assert tool.runs == []
    catalog.set_online("interface:w", True)
    assert names(catalog) == ["forecast"]


def test_removing_a_provider_removes_its_tools_and_a_snapshot_taken_before_stays_whole() -> None:
    """Readers keep the registry they took; the next one has no trace of the removed tools."""
    catalog = ToolCatalog([FakeTool("recall")])
    catalog.set_provider("interface:a", label="a", tools=[FakeTool("ping")])
    before = catalog.current()
    catalog.remove_provider("interface:a")
    assert [s.name for s in before.specs()] == ["recall", "ping"]
    assert names(catalog) == ["recall"]
    assert catalog.run("ping", {}, CTX).is_error


def test_configuration_confirm_and_block_apply_to_provided_tools_by_their_offered_name() -> None:
    """tools.confirm and tools.block name provided tools as the model sees them."""
    catalog = ToolCatalog([], confirm=["pay"], block=["wipe"])
    catalog.set_provider("interface:a", label="a", tools=[FakeTool("pay"), FakeTool("wipe")])
    assert catalog.danger("pay") == "confirm"
    assert names(catalog) == ["pay"]


def test_safe_names_fit_what_model_servers_accept() -> None:
    """Any text becomes a name of letters, digits, '_' and '-', at most 64 characters."""
    assert safe_name("get weather (v2)!") == "get_weather_v2"
    assert safe_name("ü" * 3) == "tool"
    assert len(safe_name("x" * 200)) == MAX_NAME
