"""GET /health and GET /capabilities answers (a plain array of tools, or an object of tools and
signal types), checked, stored, and offered to the model."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from chalie.interfaces.capabilities import (
    Capabilities,
    Capability,
    Health,
    Parameter,
    decode_capabilities,
    encode_capabilities,
    parse_capabilities,
    parse_health,
    tool_spec,
)
from chalie.interfaces.errors import InterfaceError


def cap(name: str = "forecast", **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name, "description": "The weather for a city.",
        "parameters": [{"name": "city", "type": "string", "required": True,
                        "description": "City name"}],
    }
    body.update(fields)
    return body


def caps_error(value: Any) -> str:
    with pytest.raises(InterfaceError) as e:
        parse_capabilities(msgspec.json.encode(value))
    return str(e.value)


def tools(value: Any) -> tuple[Capability, ...]:
    """The tools of a /capabilities answer given as a JSON value."""
    return parse_capabilities(msgspec.json.encode(value)).tools


def test_a_good_health_answer_gives_name_and_version() -> None:
    """`{"status": "ok", ...}` reads as the interface's name and version; extra fields are fine."""
    raw = b'{"status": "ok", "name": "Weather", "version": "1.2.0", "uptime_s": 12}'
    assert parse_health(raw) == Health(status="ok", name="Weather", version="1.2.0")


@pytest.mark.parametrize(("raw", "message"), [
    (b'{"status": "degraded", "name": "W", "version": "1"}',
     'health.status: must be "ok", got "degraded"'),
    (b'{"name": "W", "version": "1"}', 'health.status: must be "ok", got nothing'),
    (b'{"status": "ok", "name": " ", "version": "1"}', "health.name: must not be blank"),
    (b'{"status": "ok", "name": "W", "version": 2}', "health.version: must be a string, got 2"),
    (b'["ok"]', "health: must be a JSON object, got an array"),
    (b"<html>", "health: not JSON (JSON is malformed: invalid character (byte 0))"),
])
def test_a_bad_health_answer_names_what_failed(raw: bytes, message: str) -> None:
    """Each broken /health answer fails with a message pointing at the broken field."""
    with pytest.raises(InterfaceError) as e:
        parse_health(raw)
    assert str(e.value) == message


def test_good_capabilities_are_read_in_order_with_optional_fields() -> None:
    """Capabilities keep the interface's order; documentation and returns are kept when sent."""
    raw = msgspec.json.encode([
        cap("forecast", documentation="Uses the nearest station.", returns={"type": "object"}),
        cap("alerts", parameters=[], surprise="ignored"),
    ])
    forecast, alerts = parse_capabilities(raw).tools
    assert forecast == Capability(
        name="forecast", description="The weather for a city.",
        parameters=(Parameter("city", "string", True, "City name"),),
        documentation="Uses the nearest station.", returns={"type": "object"},
    )
    assert alerts.name == "alerts"
    assert alerts.parameters == ()
    assert alerts.documentation is None


@pytest.mark.parametrize(("value", "message"), [
    ("tools", 'capabilities: must be a JSON array of tools or an object {"tools": [...], '
              '"signals": [...]}, got a string'),
    ([cap(), "x"], 'capabilities[1]: must be a JSON object, got a string'),
    ([cap(), cap(), cap("a"), cap("forecast")],
     'capabilities[1].name: "forecast" is used twice (also capabilities[0])'),
    ([cap(""), ], "capabilities[0].name: must not be blank"),
    ([cap("x" * 65)], "capabilities[0].name: at most 64 characters, got 65"),
    ([cap(description="  ")], "capabilities[0].description: must not be blank"),
    ([cap(description=None)], "capabilities[0].description: must be a string, got null"),
    ([cap(parameters={"city": "string"})],
     'capabilities[0].parameters: must be an array, got {"city":"string"}'),
    ([cap(), cap("b"), cap("c", parameters=[{"name": "n", "type": "int", "required": True,
                                              "description": "d"}])],
     'capabilities[2].parameters[0].type: must be string, number, boolean or object, '
     'got "int"'),
    ([cap(parameters=[{"name": "n", "type": "number", "required": "yes",
                       "description": "d"}])],
     'capabilities[0].parameters[0].required: must be true or false, got "yes"'),
    ([cap(parameters=[{"name": "n", "type": "number", "required": True}])],
     "capabilities[0].parameters[0].description: must be a string, got nothing"),
    ([cap(parameters=[{"name": "n", "type": "number", "required": True, "description": "d"},
                      {"name": "n", "type": "string", "required": False, "description": "e"}])],
     'capabilities[0].parameters[1].name: "n" is used twice (also parameters[0])'),
    ([cap(documentation=["a"])], 'capabilities[0].documentation: must be a string, got ["a"]'),
    ([cap(returns=3)], "capabilities[0].returns: must be an object or a string, got 3"),
])
def test_bad_capabilities_name_the_field_that_failed(value: Any, message: str) -> None:
    """The message says where the answer breaks the contract, down to the parameter."""
    assert caps_error(value) == message


def test_a_plain_array_of_tools_declares_no_signal_types() -> None:
    """The contract's array form gives the tools and no signal types (None, not an empty
    list), so the pairing falls back to any type."""
    assert parse_capabilities(msgspec.json.encode([cap()])) == Capabilities(
        tools=tools([cap()]), signals=None)


def test_the_object_form_gives_tools_and_declared_signal_types() -> None:
    """{"tools", "signals"}: the tools as the array form reads them, the signal types in order
    with duplicates dropped; keys Chalie does not read are ignored."""
    answer = parse_capabilities(msgspec.json.encode({
        "tools": [cap("forecast"), cap("alerts")],
        "signals": ["weather_update", "rain", "weather_update", "*"],
        "homepage": "https://weather.example",
    }))
    assert [t.name for t in answer.tools] == ["forecast", "alerts"]
    assert answer.tools == tools([cap("forecast"), cap("alerts")])
    assert answer.signals == ("weather_update", "rain", "*")


@pytest.mark.parametrize("value", [{"tools": [cap()]}, {"tools": [cap()], "signals": None}])
def test_an_object_without_signals_declares_none(value: dict[str, Any]) -> None:
    """An object whose `signals` is missing or null declares no signal types."""
    assert parse_capabilities(msgspec.json.encode(value)).signals is None


def test_an_empty_signals_list_declares_that_it_emits_none() -> None:
    """`"signals": []` is a declaration: no signal type at all, unlike a missing list."""
    assert parse_capabilities(msgspec.json.encode({"tools": [], "signals": []})) == (
        Capabilities(tools=(), signals=()))


def test_at_most_100_signal_types_are_accepted() -> None:
    """100 declared signal types are read; 101 refuse the answer, naming the field."""
    hundred = [f"type_{n}" for n in range(100)]
    answer = parse_capabilities(msgspec.json.encode({"tools": [], "signals": hundred}))
    assert answer.signals == tuple(hundred)
    assert caps_error({"tools": [], "signals": [*hundred, "one_more"]}) == (
        "capabilities.signals: at most 100 signal types, got 101")


SIGNAL_RULE = "a signal type (1-64 letters, digits or '_', '.', ':', '-') or \"*\""


@pytest.mark.parametrize(("value", "message"), [
    ({"signals": ["rain"]},
     "capabilities.tools: required (the array of tools) when the answer is an object"),
    ({"tools": {"forecast": cap()}}, "capabilities.tools: must be a JSON array, got an object"),
    ({"tools": [cap(), cap("b"), cap("c", description=" ")]},
     "capabilities.tools[2].description: must not be blank"),
    ({"tools": [cap(""), cap()]}, "capabilities.tools[0].name: must not be blank"),
    ({"tools": [cap(), cap()]},
     'capabilities.tools[1].name: "forecast" is used twice (also tools[0])'),
    ({"tools": [cap(parameters=[{"name": "n", "type": "int", "required": True,
                                 "description": "d"}])]},
     'capabilities.tools[0].parameters[0].type: must be string, number, boolean or object, '
     'got "int"'),
    ({"tools": [], "signals": "rain"},
     'capabilities.signals: must be an array of signal types, got "rain"'),
    ({"tools": [], "signals": ["rain", "snow", "heavy rain"]},
     f'capabilities.signals[2]: {SIGNAL_RULE}, got "heavy rain"'),
    ({"tools": [], "signals": ["rain", 7]}, f"capabilities.signals[1]: {SIGNAL_RULE}, got 7"),
    ({"tools": [], "signals": [""]}, f'capabilities.signals[0]: {SIGNAL_RULE}, got ""'),
    ({"tools": [], "signals": ["x" * 65]},
     f'capabilities.signals[0]: {SIGNAL_RULE}, got "{"x" * 38}…'),
    ({"tools": [], "signals": [None]}, f"capabilities.signals[0]: {SIGNAL_RULE}, got null"),
])
def test_a_bad_object_form_names_the_field_that_failed(value: Any, message: str) -> None:
    """Each broken object answer fails with a message pointing at the broken field, under
    `capabilities.tools` or `capabilities.signals`."""
    assert caps_error(value) == message


def test_at_most_200_capabilities_are_accepted() -> None:
    """200 capabilities pair; 201 are refused as a whole."""
    assert len(tools([cap(f"c{i}") for i in range(200)])) == 200
    assert caps_error([cap(f"c{i}") for i in range(201)]) == (
        "capabilities: at most 200 capabilities, got 201")


def test_a_64_character_name_is_accepted() -> None:
    """The longest allowed name pairs."""
    assert tools([cap("n" * 64)])[0].name == "n" * 64


def test_stored_capabilities_read_back_the_same() -> None:
    """encode then decode gives back equal capabilities, optional fields and all."""
    caps = tools([
        cap("forecast", documentation="Docs.", returns="a forecast"), cap("alerts", parameters=[]),
    ])
    stored = encode_capabilities(caps)
    assert isinstance(stored, str)
    assert msgspec.json.decode(stored)[1] == {
        "name": "alerts", "description": "The weather for a city.", "parameters": []}
    assert decode_capabilities(stored) == caps


def test_a_corrupt_stored_value_is_an_interface_error() -> None:
    """Stored text that no longer passes the checks fails the same way an answer would."""
    with pytest.raises(InterfaceError, match=r"^capabilities\[0\]\.parameters: must be an array"):
        decode_capabilities('[{"name": "x", "description": "d"}]')


def test_tool_spec_is_a_closed_json_schema_with_required_parameters() -> None:
    """Every parameter becomes a typed property; required ones are listed; no others allowed."""
    capability = tools([cap(parameters=[
        {"name": "city", "type": "string", "required": True, "description": "City"},
        {"name": "days", "type": "number", "required": False, "description": "Days ahead"},
        {"name": "metric", "type": "boolean", "required": True, "description": "Celsius?"},
        {"name": "where", "type": "object", "required": False, "description": "Lat/lon"},
    ])])[0]
    spec = tool_spec(capability)
    assert spec.name == "forecast"
    assert spec.description == "The weather for a city."
    assert spec.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City"},
            "days": {"type": "number", "description": "Days ahead"},
            "metric": {"type": "boolean", "description": "Celsius?"},
            "where": {"type": "object", "description": "Lat/lon"},
        },
        "required": ["city", "metric"],
        "additionalProperties": False,
    }


def test_documentation_follows_the_description_as_a_new_paragraph() -> None:
    """The model reads the description, a blank line, then the documentation."""
    capability = tools([cap(documentation="Cities outside Europe are slower.")])[0]
    assert tool_spec(capability).description == (
        "The weather for a city.\n\nCities outside Europe are slower.")


def test_blank_documentation_adds_nothing() -> None:
    """Whitespace documentation is treated as none."""
    capability = tools([cap(documentation="  \n")])[0]
    assert capability.documentation is None
    assert tool_spec(capability).description == "The weather for a city."


@pytest.mark.parametrize(("fields", "danger", "read_only"), [
    ({}, "confirm", False),
    ({"read_only": True}, "safe", True),
    ({"danger": "safe"}, "safe", False),
    ({"danger": "confirm", "read_only": True}, "confirm", True),
    ({"danger": "block"}, "block", False),
], ids=["undeclared", "read_only", "safe", "confirm_read_only", "block"])
def test_a_capability_declares_its_danger_or_that_it_only_reads(
    fields: dict[str, Any], danger: str, read_only: bool,
) -> None:
    """`danger` is taken as declared; `read_only: true` alone is safe; a capability that
    declares neither needs the person's approval; both survive being stored."""
    [parsed] = tools([cap(**fields)])
    assert (parsed.effective_danger, parsed.read_only) == (danger, read_only)
    [stored] = decode_capabilities(encode_capabilities([parsed]))
    assert (stored.effective_danger, stored.read_only) == (danger, read_only)


@pytest.mark.parametrize(("fields", "message"), [
    ({"danger": "maybe"}, 'capabilities[0].danger: must be safe, confirm or block, got "maybe"'),
    ({"read_only": "yes"}, 'capabilities[0].read_only: must be true or false, got "yes"'),
], ids=["danger", "read_only"])
def test_a_bad_danger_declaration_names_the_field(fields: dict[str, Any], message: str) -> None:
    """A danger that is not one of the three, or a read_only that is not a boolean, is refused
    naming the field."""
    assert caps_error([cap(**fields)]) == message
