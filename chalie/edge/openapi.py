"""GET /api/openapi.json: an OpenAPI 3.1 document of every REST route, made from the code.

The routes are the application's own (chalie/edge/app.py); each handler describes its methods
in `api` (chalie/edge/api_spec.py), and every request and response body's schema is generated
by msgspec from the Struct the handler decodes or encodes. A handler method with no description
is left out, and tests/edge/test_openapi.py fails on it.

Not described, on purpose: /ws (a WebSocket; its frames are spec/interfaces.md section 5 and
chalie/edge/frames.py), /mcp (MCP's JSON-RPC over streamable HTTP: its tools describe
themselves to an MCP client, chalie/edge/mcp_tools.py), the HTML pages (/, /brain, /login,
/cards/<channel>/<seq>) and the pages' files (/static/...): none of them is a JSON API.

The document is public, like /health: it says which routes exist and what their bodies look
like, which the open source says too, and nothing about this server's data, configuration or
credentials. A client can read how to log in before it has logged in.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable
from http import HTTPStatus
from typing import Any

import msgspec
import tornado.web
from tornado.routing import PathMatches

from chalie import __version__
from chalie.edge.api_spec import (
    API_TOKEN_AUTH,
    COOKIE_AUTH,
    INTERFACE_AUTH,
    METRICS_AUTH,
    Operation,
    Param,
    Raw,
    Streamed,
)
from chalie.edge.auth import COOKIE
from chalie.edge.rest_base import RATE_LIMITED, SAFE_METHODS, JsonHandler

PATH = "/api/openapi.json"
METHODS = ("get", "post", "put", "patch", "delete")
# Routes of make_app that are not JSON endpoints (see the module's docstring).
NOT_DESCRIBED = frozenset({"/", "/brain", "/login", "/static/(.*)", "/cards/([^/]+)/([^/]+)",
                           "/ws", "/mcp", r"/manifest\.webmanifest", r"/sw\.js"})
_GROUP = re.compile(r"\([^()]*\)")
_JSON = "application/json"

SECURITY_SCHEMES = {
    COOKIE_AUTH: {"type": "apiKey", "in": "cookie", "name": COOKIE,
                  "description": "The person's login cookie, set by POST /auth/login."},
    INTERFACE_AUTH: {"type": "http", "scheme": "bearer",
                     "description": "A paired interface's token: the `signal_token` that "
                                    "POST /api/interfaces/pair answers, shown once."},
    METRICS_AUTH: {"type": "http", "scheme": "bearer",
                   "description": "server.metrics_token, when it is set."},
    API_TOKEN_AUTH: {"type": "http", "scheme": "bearer",
                     "description": "A scoped API token, made with POST /api/tokens and shown "
                                    "once; each endpoint names the scope it needs."},
}
# The refusals any JSON endpoint may answer (JsonHandler.prepare, QueryParams, ask).
_COMMON = {
    400: "a query parameter or the body is wrong; `error` names it",
    413: "the body is larger than this endpoint takes (server.max_body_bytes)",
    503: "a part of the server is restarting or slow; try again shortly",
}
_UNAUTHORIZED = "no valid credential was sent"
_CROSS_SITE = "a change made with the login cookie from another site's page (Origin or Referer)"
_RATE = "past server.rest_rate_per_min for this credential, or too many wrong credentials " \
        "from this address; see Retry-After"

_DESCRIPTION = """Chalie's REST endpoints, generated from the code that serves them.

Not described here: /ws, the WebSocket for chat (its frames: docs/ws-protocol.md and
docs/reference/ws-frames.md), the HTML pages (/, /brain, /login, /cards/...) and their files
(/static/...).

Every error answer is `{"error": "...", "status": N}`, but on /v1/ (Chalie as an
OpenAI-compatible model), where it is OpenAI's `{"error": {"message", "type", "param",
"code"}}`. A request that changes something with the
login cookie must come from this server's own pages (or carry no Origin or Referer, as curl
sends none). /api/, /gw/ and /v1/ are limited to server.rest_rate_per_min requests a minute per
credential (429 with Retry-After)."""


def routes_of(app: tornado.web.Application) -> list[tuple[str, type[tornado.web.RequestHandler]]]:
    """(route pattern, handler class) of each route of `app`, in order."""
    out = []
    for rule in app.wildcard_router.rules:
        if isinstance(rule.matcher, PathMatches) and isinstance(rule.target, type):
            out.append((rule.matcher.regex.pattern.removesuffix("$"), rule.target))
    return out


def implemented(handler: type[tornado.web.RequestHandler]) -> list[str]:
    """The HTTP methods (lower case) `handler` answers."""
    return [m for m in METHODS
            if getattr(handler, m) is not getattr(tornado.web.RequestHandler, m)]


def path_of(pattern: str, handler: type[tornado.web.RequestHandler], method: str) -> str:
    """The route as an OpenAPI path: each group named as the handler method's argument."""
    names = [p for p in inspect.signature(getattr(handler, method)).parameters if p != "self"]
    pieces = _GROUP.split(pattern)
    if len(pieces) != len(names) + 1:
        raise ValueError(f"{pattern}: {handler.__name__}.{method} takes {len(names)} "
                         f"path arguments for {len(pieces) - 1} groups")
    return "".join(p + (f"{{{n}}}" if i < len(names) else "")
                   for i, (p, n) in enumerate(zip(pieces, [*names, ""], strict=True)))


def document(routes: Iterable[tuple[str, type[tornado.web.RequestHandler]]]) -> dict[str, Any]:
    """The OpenAPI 3.1 document of `routes` (those in NOT_DESCRIBED are left out)."""
    described: list[tuple[str, str, str, Operation]] = []
    for pattern, handler in routes:
        if pattern in NOT_DESCRIBED or not issubclass(handler, JsonHandler):
            continue
        for method in implemented(handler):
            operation = handler.api.get(method)
            if operation is not None:
                path = path_of(pattern, handler, method)
                described.append((path, method, _operation_id(handler, method), operation))
    types = _Types()
    paths: dict[str, dict[str, Any]] = {}
    for path, method, operation_id, operation in described:
        paths.setdefault(path, {})[method] = _operation(path, method, operation_id, operation,
                                                        types)
    schemas = types.resolve()
    return {
        "openapi": "3.1.0",
        "info": {"title": "Chalie", "version": __version__, "description": _DESCRIPTION},
        "paths": paths,
        "components": {"schemas": schemas, "securitySchemes": SECURITY_SCHEMES},
    }


class _Types:
    """Every body type of the document, given a placeholder now and its schema by resolve():
    msgspec makes the schemas of all of them at once, sharing components."""

    def __init__(self) -> None:
        self._types: list[Any] = []
        self._slots: list[dict[str, Any]] = []

    def schema(self, kind: Any) -> dict[str, Any]:
        slot: dict[str, Any] = {}
        self._types.append(kind)
        self._slots.append(slot)
        return slot

    def resolve(self) -> dict[str, Any]:
        schemas, components = msgspec.json.schema_components(
            self._types, ref_template="#/components/schemas/{name}")
        for slot, schema in zip(self._slots, schemas, strict=True):
            slot.update(schema)
        return dict(sorted(components.items()))


def _operation_id(handler: type, method: str) -> str:
    return method + handler.__name__.removesuffix("Handler")


def _operation(path: str, method: str, operation_id: str, op: Operation,
               types: _Types) -> dict[str, Any]:
    out: dict[str, Any] = {"operationId": operation_id, "summary": op.summary,
                           "tags": [_tag(path)]}
    if op.description:
        out["description"] = op.description
    parameters = _path_params(path, op.path) + [_param(p, "query") for p in op.query]
    if parameters:
        out["parameters"] = parameters
    if op.body is not None:
        content = _content(op.body, types)
        if op.example is not None:
            content[_JSON]["example"] = op.example
        out["requestBody"] = {"required": True, "content": content}
    out["responses"] = _responses(path, method, op, types)
    schemes: list[dict[str, list[str]]] = [{name: []} for name in op.auth]
    out["security"] = [*schemes, {}] if op.auth_optional else schemes
    return out


def _tag(path: str) -> str:
    parts = path.strip("/").split("/")
    if parts[0] == "api" and len(parts) > 1:
        return parts[1]
    return {"gw": "interfaces", "health": "ops", "metrics": "ops",
            "v1": "openai"}.get(parts[0], parts[0])


def _path_params(path: str, declared: tuple[Param, ...]) -> list[dict[str, Any]]:
    names = re.findall(r"\{([^}]+)\}", path)
    by_name = {p.name: p for p in declared}
    unknown = set(by_name) - set(names)
    if unknown:
        raise ValueError(f"{path}: path parameters {sorted(unknown)} are not in the route")
    return [_param(by_name.get(n) or Param(n, {"type": "string", "minLength": 1}), "path")
            for n in names]


def _param(param: Param, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": param.name, "in": where,
                           "required": True if where == "path" else param.required,
                           "schema": dict(param.schema)}
    if param.description:
        out["description"] = param.description
    return out


def _content(kind: Any, types: _Types) -> dict[str, Any]:
    if isinstance(kind, Raw):
        return {media: {"schema": dict(schema)} for media, schema in kind.content.items()}
    if isinstance(kind, Streamed):
        return {_JSON: {"schema": types.schema(kind.json)},
                "text/event-stream": {"schema": {
                    "type": "string", "description": "`data: <event>` lines, each event a "
                    "JSON " + kind.event.__name__ + ", then `data: [DONE]`"},
                    "x-event-schema": types.schema(kind.event)}}
    return {_JSON: {"schema": types.schema(kind)}}


def _responses(path: str, method: str, op: Operation, types: _Types) -> dict[str, Any]:
    errors: dict[int, str] = dict(_COMMON)
    if op.auth and not op.auth_optional:
        errors[401] = _UNAUTHORIZED
    if method.upper() not in SAFE_METHODS:
        errors[403] = _CROSS_SITE
    if path.startswith(RATE_LIMITED):
        errors[429] = _RATE
    for status in op.errors:
        errors.setdefault(status, HTTPStatus(status).phrase.lower())
    out: dict[int, dict[str, Any]] = {}
    for status, kind in op.responses.items():
        out[status] = _response(kind, HTTPStatus(status).phrase, types)
    for status, why in errors.items():
        out.setdefault(status, _response(op.error_body, why, types))
    return {str(status): out[status] for status in sorted(out)}


def _response(kind: Any, description: str, types: _Types) -> dict[str, Any]:
    if kind is None:
        return {"description": description}
    if isinstance(kind, Raw) and kind.description:
        description = kind.description
    return {"description": description, "content": _content(kind, types)}


class OpenApiHandler(JsonHandler):
    """GET /api/openapi.json: this server's OpenAPI document (public: see the module's
    docstring). Made on each request from the application's routes: it takes milliseconds."""

    api = {"get": Operation(
        "This document: every REST route, its auth, parameters and bodies",
        {200: Raw({_JSON: {"type": "object"}}, "an OpenAPI 3.1 document")})}

    def get(self) -> None:
        self.query_params()
        self.write_json(document(routes_of(self.application)))
