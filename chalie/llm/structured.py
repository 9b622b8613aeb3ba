"""Structured output: a msgspec Struct as the JSON Schema a request asks for, and the reply
decoded back into that Struct.

`json_schema` flattens msgspec's schema into the shape every OpenAI-compatible server accepts:
no `$ref`/`$defs` (the grammar converters of Ollama, llama.cpp server and vLLM handle flat
schemas most reliably), every struct object closed (`additionalProperties: false`) with all of its
properties required (OpenAI strict mode asks for both), and no `title`, `default` or
`discriminator` keys. Constraints (`minimum`, `maxItems`, `minLength`, `enum`, ...) are kept.

`decode_structured` accepts what models really send around the JSON (whitespace, a Markdown
fence, a sentence before or after) and otherwise raises `StructuredOutputError` naming the path.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec

from chalie.errors import StructuredOutputError
from chalie.llm.types import JsonSchemaFormat

T = TypeVar("T")

_DROPPED = frozenset({"title", "default", "discriminator", "$defs"})
_SCHEMA_KEYS = frozenset({"items", "additionalProperties", "not", "contains"})
_SCHEMA_LIST_KEYS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_SCHEMA_MAP_KEYS = frozenset({"properties", "patternProperties"})
_REF_PREFIX = "#/$defs/"
_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_SHOWN = 200  # characters of a bad reply quoted in the error


def json_schema(kind: type[Any]) -> dict[str, Any]:
    """The flat, strict JSON Schema of the msgspec Struct `kind`.

    Raises TypeError when `kind` is recursive (a flat schema cannot describe it) or is not
    encoded as a JSON object (structured output asks for one object)."""
    raw = msgspec.json.schema(kind)
    defs: dict[str, Any] = raw.get("$defs", {})
    schema = _flatten(raw, defs, (), kind)
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise TypeError(f"{kind!r} is not encoded as a JSON object; structured output needs one")
    return schema


def structured(name: str, kind: type[Any]) -> JsonSchemaFormat:
    """The `response_format` of a request whose reply must be one `kind`."""
    return JsonSchemaFormat(name=name, schema=json_schema(kind))


def decode_structured(text: str, kind: type[T]) -> T:
    """The reply `text` as a `kind`, or StructuredOutputError saying what was wrong and where.

    Leading and trailing whitespace, a Markdown fence (```json or plain ```), and prose before
    or after the object are tolerated: the object is taken from the first `{` to the last `}`.
    When that span holds more than one object (two objects, or prose with braces around one)
    the reply is not guessed at: it is rejected."""
    body = text.strip()
    if not body:
        raise StructuredOutputError("the reply was empty")
    if not body.startswith("{"):  # a bare object may hold a fence inside one of its strings
        fenced = _FENCE.search(body)
        if fenced is not None and "{" in fenced.group(1):
            body = fenced.group(1)
    start, end = body.find("{"), body.rfind("}")
    if start < 0:
        raise _error("the reply holds no JSON object", text)
    if end < start:
        raise _error("the reply's JSON object is never closed (was it cut off?)", text)
    candidate = body[start : end + 1]
    first_end = _object_end(candidate)
    if first_end is not None and first_end < len(candidate) - 1:
        raise _error("the reply holds more than one JSON object (or braces after one)", text)
    try:
        return msgspec.json.decode(candidate, type=kind)
    except msgspec.ValidationError as e:
        raise _error(_with_path(str(e)), text) from None
    except msgspec.DecodeError as e:
        raise _error(f"the reply is not valid JSON ({e})", text) from None
    except UnicodeEncodeError:
        raise _error("the reply holds characters that are not valid Unicode", text) from None


# --- schema ---------------------------------------------------------------------------------------

def _flatten(
    node: Any, defs: dict[str, Any], expanding: tuple[str, ...], kind: type[Any]
) -> Any:
    """`node` with every `$ref` replaced by its definition, and struct objects made strict."""
    if not isinstance(node, dict):
        return node  # a boolean schema (`"items": false` after a tuple's prefixItems)
    if "$ref" in node:
        ref = node["$ref"]
        name = ref.removeprefix(_REF_PREFIX)
        if name in expanding:
            chain = " -> ".join((*expanding, name))
            raise TypeError(
                f"{kind!r} is recursive ({chain}); structured output needs a non-recursive type"
            )
        if not ref.startswith(_REF_PREFIX) or name not in defs:
            raise TypeError(f"{kind!r}: unexpected $ref {ref!r} in msgspec's schema")
        target = _flatten(defs[name], defs, (*expanding, name), kind)
        siblings = _flatten({k: v for k, v in node.items() if k != "$ref"}, defs, expanding, kind)
        return {**target, **siblings}  # the field's own description wins over the struct's
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key in _SCHEMA_KEYS:
            out[key] = _flatten(value, defs, expanding, kind)
        elif key in _SCHEMA_LIST_KEYS:
            out[key] = [_flatten(v, defs, expanding, kind) for v in value]
        elif key in _SCHEMA_MAP_KEYS:
            out[key] = {k: _flatten(v, defs, expanding, kind) for k, v in value.items()}
        else:
            out[key] = value
    if out.get("type") == "object" and "properties" in out:
        # A struct. A dict field (no properties, additionalProperties = the value schema) keeps
        # its meaning: closing it would only ever admit {}.
        out["required"] = list(out["properties"])
        out["additionalProperties"] = False
    return out


# --- decoding -------------------------------------------------------------------------------------

def _with_path(message: str) -> str:
    """msgspec's "Expected `int`, got `str` - at `$.a`" as "`$.a`: Expected `int`, got `str`"."""
    what, sep, where = message.rpartition(" - at ")
    if not sep:
        return f"`$`: {message}"
    return f"{where}: {what}"


def _error(why: str, text: str) -> StructuredOutputError:
    shown = text[:_SHOWN]
    more = " ..." if len(text) > _SHOWN else ""
    return StructuredOutputError(f"{why}; the reply began {shown!r}{more}")


def _object_end(text: str) -> int | None:
    """The index of the `}` closing the object that opens `text`, or None if it never closes."""
    depth = 0
    in_string = escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i
    return None
