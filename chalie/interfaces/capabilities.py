"""What a paired interface says about itself: its GET /health and GET /capabilities, checked.

GET /capabilities answers either the contract's JSON array of tools, or an object
{"tools": [...], "signals": [...]} whose `signals` are the signal types the interface will emit
(checked as a pair request's `signals` are, see `signal_types`); a pairing that declares no
types of its own takes these.

An answer is decoded as plain JSON and then checked field by field, so an error names the exact
place that failed: "capabilities[2].parameters[0].type: must be string, number, boolean or
object, got \"int\"", "capabilities.signals[1]: a signal type ...". Fields the contract does
not name are ignored (an interface may say more than Chalie reads); the fields it names must have
their types. The rules beyond the spec's table: capability names are 1-64 characters and unique
within the interface, at most 200 capabilities, descriptions not blank, parameter names unique
within their capability.

Checked tools are stored as a JSON array (`encode_capabilities`) and read back through the same
checks (`decode_capabilities`), and become the tools the model sees (`tool_spec`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from chalie.interfaces.errors import InterfaceError, shown
from chalie.llm.types import ToolSpec
from chalie.world.signals import ANY_TYPE, MAX_TYPE, TYPE_RE

MAX_CAPABILITIES = 200
MAX_NAME = 64
MAX_SIGNAL_TYPES = 100
PARAM_TYPES = ("string", "number", "boolean", "object")
DANGERS = ("safe", "confirm", "block")

ParamType = Literal["string", "number", "boolean", "object"]

_MISSING = object()


class Health(msgspec.Struct, frozen=True):
    """GET /health: `status` is always "ok" (any other answer is a failed check)."""

    status: str
    name: str
    version: str


class Parameter(msgspec.Struct, frozen=True):
    name: str
    type: ParamType
    required: bool
    description: str


class Capability(msgspec.Struct, frozen=True, omit_defaults=True):
    """One tool of an interface. `returns` is the interface's own description of its result
    (a JSON object or a string), kept as it came. `danger` is what the interface declared
    (safe: runs at once; confirm: the person approves each call; block: never runs), or None;
    `read_only`: it only reads (it changes nothing for the person)."""

    name: str
    description: str
    parameters: tuple[Parameter, ...]
    documentation: str | None = None
    returns: Any = None
    danger: Literal["safe", "confirm", "block"] | None = None
    read_only: bool = False

    @property
    def effective_danger(self) -> Literal["safe", "confirm", "block"]:
        """Its danger class: as declared; safe when it only reads; else confirm (a tool that
        says nothing may change anything, so the person approves it)."""
        if self.danger is not None:
            return self.danger
        return "safe" if self.read_only else "confirm"


def parse_health(raw: bytes) -> Health:
    """GET /health's body -> Health, or InterfaceError naming the field that failed."""
    return health_from_json(decode_json(raw, "health"))


def health_from_json(value: Any) -> Health:
    body = _object(value, "health")
    status = body.get("status", _MISSING)
    if status != "ok":
        raise InterfaceError(f'health.status: must be "ok", got {_shown(status)}')
    return Health(status="ok", name=_text(body, "name", "health"),
                  version=_string(body, "version", "health"))


class Capabilities(msgspec.Struct, frozen=True):
    """GET /capabilities, checked: the tools in the interface's order, and the signal types it
    declared (None when it declared none, as the plain array of tools does)."""

    tools: tuple[Capability, ...]
    signals: tuple[str, ...] | None = None


def parse_capabilities(raw: bytes) -> Capabilities:
    """GET /capabilities' body, in either form -> Capabilities, or InterfaceError."""
    return capabilities_from_json(decode_json(raw, "capabilities"))


def capabilities_from_json(value: Any) -> Capabilities:
    """A JSON array of tools, or an object {"tools", "signals"} (other keys are ignored)."""
    if isinstance(value, list):
        return Capabilities(_tools(value, "capabilities", "capabilities"))
    if not isinstance(value, dict):
        raise InterfaceError('capabilities: must be a JSON array of tools or an object '
                             f'{{"tools": [...], "signals": [...]}}, got {_kind(value)}')
    if "tools" not in value:
        raise InterfaceError("capabilities.tools: required (the array of tools) when the "
                             "answer is an object")
    raw_signals = value.get("signals")
    return Capabilities(
        _tools(value["tools"], "capabilities.tools", "tools"),
        None if raw_signals is None else signal_types(raw_signals, "capabilities.signals"))


def signal_types(value: Any, where: str) -> tuple[str, ...]:
    """Declared signal types, in order without duplicates, or InterfaceError naming the one at
    fault: each 1-64 letters, digits or '_', '.', ':', '-', or "*" (any type); at most 100."""
    if not isinstance(value, list):
        raise InterfaceError(f"{where}: must be an array of signal types, got {_shown(value)}")
    if len(value) > MAX_SIGNAL_TYPES:
        raise InterfaceError(
            f"{where}: at most {MAX_SIGNAL_TYPES} signal types, got {len(value)}")
    for n, kind in enumerate(value):
        if kind != ANY_TYPE and not (isinstance(kind, str) and 0 < len(kind) <= MAX_TYPE
                                     and TYPE_RE.match(kind)):
            raise InterfaceError(f"{where}[{n}]: a signal type (1-{MAX_TYPE} letters, digits or "
                                 f"'_', '.', ':', '-') or \"*\", got {_shown(kind)}")
    return tuple(dict.fromkeys(value))


def encode_capabilities(capabilities: Sequence[Capability]) -> str:
    """Checked tools as the JSON array that is stored with the interface."""
    return msgspec.json.encode(tuple(capabilities)).decode()


def decode_capabilities(text: str) -> tuple[Capability, ...]:
    """The stored JSON array back, through the same checks it passed when it was stored."""
    return _tools(decode_json(text.encode(), "capabilities"), "capabilities", "capabilities")


def tool_spec(capability: Capability) -> ToolSpec:
    """The capability as the model sees it: its description (and documentation, a paragraph
    below) and a JSON schema of its parameters that allows no others."""
    properties = {p.name: {"type": p.type, "description": p.description}
                  for p in capability.parameters}
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": [p.name for p in capability.parameters if p.required],
        "additionalProperties": False,
    }
    description = capability.description
    if capability.documentation:
        description = f"{description}\n\n{capability.documentation}"
    return ToolSpec(name=capability.name, description=description, parameters=schema)


def decode_json(raw: bytes, where: str) -> Any:
    """Bytes -> a JSON value, or InterfaceError "<where>: not JSON (...)"."""
    try:
        return msgspec.json.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise InterfaceError(f"{where}: not JSON ({e})") from None


# --- checks -------------------------------------------------------------------------------------

def _tools(value: Any, where: str, label: str) -> tuple[Capability, ...]:
    """The array of tools at `where` ("capabilities", or "capabilities.tools" in the object
    form); `label` names the array in a duplicate's message."""
    if not isinstance(value, list):
        raise InterfaceError(f"{where}: must be a JSON array, got {_kind(value)}")
    if len(value) > MAX_CAPABILITIES:
        raise InterfaceError(f"{where}: at most {MAX_CAPABILITIES} capabilities, got {len(value)}")
    capabilities = [_capability(item, f"{where}[{i}]") for i, item in enumerate(value)]
    _unique([c.name for c in capabilities], where, label)
    return tuple(capabilities)


def _capability(value: Any, where: str) -> Capability:
    body = _object(value, where)
    name = _text(body, "name", where)
    if len(name) > MAX_NAME:
        raise InterfaceError(f"{where}.name: at most {MAX_NAME} characters, got {len(name)}")
    raw_params = body.get("parameters", _MISSING)
    if not isinstance(raw_params, list):
        raise InterfaceError(f"{where}.parameters: must be an array, got {_shown(raw_params)}")
    parameters = [_parameter(item, f"{where}.parameters[{j}]")
                  for j, item in enumerate(raw_params)]
    _unique([p.name for p in parameters], f"{where}.parameters", "parameters")
    documentation = body.get("documentation")
    if documentation is not None and not isinstance(documentation, str):
        raise InterfaceError(
            f"{where}.documentation: must be a string, got {_shown(documentation)}")
    returns = body.get("returns")
    if returns is not None and not isinstance(returns, (dict, str)):
        raise InterfaceError(
            f"{where}.returns: must be an object or a string, got {_shown(returns)}")
    danger = body.get("danger")
    if danger is not None and danger not in DANGERS:
        raise InterfaceError(
            f"{where}.danger: must be safe, confirm or block, got {_shown(danger)}")
    read_only = body.get("read_only", False)
    if not isinstance(read_only, bool):
        raise InterfaceError(f"{where}.read_only: must be true or false, got {_shown(read_only)}")
    return Capability(
        name=name, description=_text(body, "description", where), parameters=tuple(parameters),
        documentation=documentation if documentation and documentation.strip() else None,
        returns=returns, danger=danger, read_only=read_only,
    )


def _parameter(value: Any, where: str) -> Parameter:
    body = _object(value, where)
    name = _text(body, "name", where)
    kind = body.get("type", _MISSING)
    if kind not in PARAM_TYPES:
        raise InterfaceError(
            f"{where}.type: must be string, number, boolean or object, got {_shown(kind)}")
    required = body.get("required", _MISSING)
    if not isinstance(required, bool):
        raise InterfaceError(f"{where}.required: must be true or false, got {_shown(required)}")
    return Parameter(name=name, type=kind, required=required,
                     description=_text(body, "description", where))


def _unique(names: list[str], where: str, label: str) -> None:
    """A name used twice in a list is refused at its second place."""
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in seen:
            raise InterfaceError(f"{where}[{i}].name: {_shown(name)} is used twice "
                                 f"(also {label}[{seen[name]}])")
        seen[name] = i


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InterfaceError(f"{where}: must be a JSON object, got {_kind(value)}")
    return value


def _string(body: dict[str, Any], key: str, where: str) -> str:
    value = body.get(key, _MISSING)
    if not isinstance(value, str):
        raise InterfaceError(f"{where}.{key}: must be a string, got {_shown(value)}")
    return value


def _text(body: dict[str, Any], key: str, where: str) -> str:
    """A string field that must not be blank."""
    value = _string(body, key, where)
    if not value.strip():
        raise InterfaceError(f"{where}.{key}: must not be blank")
    return value


def _shown(value: Any) -> str:
    return "nothing" if value is _MISSING else shown(value)


def _kind(value: Any) -> str:
    kinds = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             type(None): "null"}
    return kinds.get(type(value), "a number")
