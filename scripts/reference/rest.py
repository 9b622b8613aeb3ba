"""docs/reference/rest.md from the OpenAPI document that GET /api/openapi.json serves.

The document is made the way its handler makes it (chalie.edge.openapi.document over the routes
of chalie.edge.app.make_app) without starting a server: building the application only needs a
context that holds a config (the shipped defaults, no environment), as tests/edge/test_openapi.py
builds it. The page follows the document: one section per tag, one per path and method in it
(summary, description, auth, parameters, request body fields, responses), then every schema.
"""

from __future__ import annotations

import inspect
import json
from types import SimpleNamespace
from typing import Any

from .markdown import GENERATED, code, escape, heading, page, prose, slug, table

SOURCE = "GET /api/openapi.json"
METHOD_ORDER = ("get", "post", "put", "patch", "delete")
_BOUNDS = (("minimum", "≥ {}"), ("exclusiveMinimum", "> {}"), ("maximum", "≤ {}"),
           ("exclusiveMaximum", "< {}"), ("minLength", "at least {} character"),
           ("maxLength", "at most {} character"), ("minItems", "at least {} item"),
           ("maxItems", "at most {} item"))


def openapi_document() -> dict[str, Any]:
    """The document GET /api/openapi.json answers with."""
    from chalie.config_load import load_config  # noqa: PLC0415 (imported when needed)
    from chalie.edge.app import make_app  # noqa: PLC0415
    from chalie.edge.openapi import document, routes_of  # noqa: PLC0415

    app = make_app(SimpleNamespace(config=load_config()))  # type: ignore[arg-type]
    return document(routes_of(app))


def schema_anchor(name: str) -> str:
    return slug(f"schema-{name}")


def op_anchor(method: str, path: str) -> str:
    return slug(f"{method}-{path}")


def schema_text(s: dict[str, Any]) -> str:
    """A schema's type in words, with links to the named schemas (Markdown, one line)."""
    if "$ref" in s:
        name = s["$ref"].rsplit("/", 1)[1]
        return f"[{escape(name, in_table=True)}](#{schema_anchor(name)})"
    for union in ("anyOf", "oneOf"):
        if union in s:
            return " or ".join(schema_text(part) for part in s[union])
    if "const" in s:
        return code(json.dumps(s["const"]))
    if "enum" in s:
        return "one of " + ", ".join(code(json.dumps(v)) for v in s["enum"])
    kind = s.get("type")
    if isinstance(kind, list):
        return " or ".join(schema_text({**s, "type": k}) for k in kind)
    if kind == "array":
        return "array of " + schema_text(s.get("items", {}))
    if kind == "object":
        if s.get("properties"):
            fields = ", ".join(f"{code(k)}: {schema_text(v)}" for k, v in s["properties"].items())
            return f"object ({fields})"
        extra = s.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            return "object whose values are " + schema_text(extra)
        return "object"
    if kind:
        return f"{kind} ({s['format']})" if "format" in s else str(kind)
    return "any JSON value"


def notes(s: dict[str, Any]) -> list[str]:
    """A schema's constraints, default and description (Markdown pieces)."""
    out: list[str] = []
    for part in s.get("anyOf", ()):
        out += [n for n in notes(part) if n not in out]
    out += [template.format(s[key]) + ("s" if template.endswith(("character", "item"))
                                        and s[key] != 1 else "")
            for key, template in _BOUNDS if key in s]
    if "pattern" in s:
        out.append("pattern " + code(s["pattern"]))
    if "default" in s:
        out.append("default " + code(json.dumps(s["default"], ensure_ascii=False)))
    if s.get("description") and "$ref" not in s:
        out.append(escape(" ".join(s["description"].split()), in_table=True))
    return out


def _resolve(doc: dict[str, Any], s: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    if "$ref" in s:
        name = s["$ref"].rsplit("/", 1)[1]
        return name, doc["components"]["schemas"][name]
    return None, s


def fields_table(schema: dict[str, Any]) -> list[str]:
    """The properties of an object schema: field, type, required, notes."""
    required = set(schema.get("required", ()))
    rows = [[code(name), schema_text(prop), "yes" if name in required else "no",
             "; ".join(notes(prop))]
            for name, prop in schema.get("properties", {}).items()]
    if not rows:
        return ["", "No fields.", ""]
    return table(("Field", "Type", "Required", "Notes"), rows)


def _auth(op: dict[str, Any]) -> str:
    names = [next(iter(s)) for s in op.get("security", []) if s]
    if not names:
        return "none: public"
    text = " or ".join(f"[{code(n)}](#authentication)" for n in names)
    return text + (", or none" if {} in op["security"] else "")


def _parameters(op: dict[str, Any]) -> list[str]:
    rows = [[code(p["name"]), p["in"], schema_text(p["schema"]),
             "yes" if p.get("required") else "no",
             "; ".join([*notes(p["schema"]),
                        *([escape(p["description"], in_table=True)] if "description" in p
                          else [])])]
            for p in op.get("parameters", ())]
    if not rows:
        return []
    return ["", "**Parameters**", *table(("Name", "In", "Type", "Required", "Notes"), rows)]


def _body(doc: dict[str, Any], op: dict[str, Any]) -> list[str]:
    body = op.get("requestBody")
    if not body:
        return []
    out = ["", "**Request body**", ""]
    for media, content in body["content"].items():
        name, schema = _resolve(doc, content["schema"])
        if name is not None:
            out += ["", f"{code(media)}: {schema_text(content['schema'])}", ""]
            out += fields_table(schema)
        else:
            extra = "; ".join(notes(schema))
            out += ["", f"{code(media)}: {schema_text(schema)}" + (f" ({extra})" if extra else ""),
                    ""]
        if "example" in content:
            example = json.dumps(content["example"], indent=2, ensure_ascii=False)
            out += ["", "Example:", "", "```json", example, "```", ""]
    return out


def _response_body(response: dict[str, Any]) -> str:
    pieces = []
    for media, content in response.get("content", {}).items():
        text = schema_text(content["schema"])
        if "x-event-schema" in content:
            text = "events, each " + schema_text(content["x-event-schema"])
        pieces.append(text if media == "application/json" else f"{code(media)}: {text}")
    return "; ".join(pieces) or "none"


def _responses(op: dict[str, Any]) -> list[str]:
    rows = [[code(status), escape(" ".join(r["description"].split()), in_table=True),
             _response_body(r)] for status, r in op["responses"].items()]
    return ["", "**Responses**", *table(("Status", "Meaning", "Body"), rows)]


def operation(doc: dict[str, Any], path: str, method: str, op: dict[str, Any]) -> list[str]:
    out = heading(3, f"{code(method.upper() + ' ' + path)}", op_anchor(method, path))
    summary = escape(op["summary"])
    out += ["", summary if summary.endswith((".", "?", "!")) else summary + ".", ""]
    out += prose(op.get("description", "").splitlines())
    out += ["", f"**Auth:** {_auth(op)}", ""]
    return out + _parameters(op) + _body(doc, op) + _responses(op)


def _operations(doc: dict[str, Any]) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(tag, path, method, operation), by tag, then path, then method."""
    found = [(op["tags"][0], path, method, op) for path, methods in doc["paths"].items()
             for method, op in methods.items()]
    return sorted(found, key=lambda o: (o[0], o[1], METHOD_ORDER.index(o[2])))


def _scheme_how(scheme: dict[str, Any]) -> str:
    if scheme["type"] == "apiKey":
        return f"{scheme['in']} {code(scheme['name'])}"
    return code("Authorization: Bearer <token>")


def render(doc: dict[str, Any]) -> str:
    """rest.md for the OpenAPI document `doc`."""
    ops = _operations(doc)
    schemas = doc["components"]["schemas"]
    tags = sorted({o[0] for o in ops})
    out = [GENERATED.format(source=f"the OpenAPI document of {SOURCE}"), "", "# REST endpoints",
           "", f"Every REST endpoint of Chalie. This page is generated from the OpenAPI "
           f"{escape(doc['openapi'])} document that {code(SOURCE)} serves (public, like "
           f"{code('/health')}), which the server makes from the code that answers each request.",
           *prose(doc["info"]["description"].splitlines())]
    out += [*heading(2, "Authentication", "authentication"),
            "Where an endpoint names more than one, any one of them lets the request in.",
            *table(("Scheme", "How it is sent", "What it is"),
                   [[code(name), _scheme_how(s), escape(s.get("description", ""), in_table=True)]
                    for name, s in sorted(doc["components"]["securitySchemes"].items())])]
    out += [*heading(2, "Endpoints", "endpoints"),
            *table(("Group", "Endpoint", "Summary"),
                   [[f"[{escape(t, in_table=True)}](#{slug(t)})",
                     f"[{code(m.upper() + ' ' + p)}](#{op_anchor(m, p)})",
                     escape(op["summary"], in_table=True)] for t, p, m, op in ops])]
    for tag in tags:
        out += heading(2, escape(tag), slug(tag))
        for t, path, method, op in ops:
            if t == tag:
                out += operation(doc, path, method, op)
    out += [*heading(2, "Schemas", "schemas"),
            "The bodies named above, by name. A field that is not required may be left out.", ""]
    for name, schema in schemas.items():
        out += heading(3, escape(name), schema_anchor(name))
        out += prose(inspect.cleandoc(schema.get("description") or "").splitlines())
        out += fields_table(schema)
        if schema.get("additionalProperties") is False:
            out += ["", "Other fields are refused.", ""]
    return page(out)
