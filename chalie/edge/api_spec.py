"""How a REST handler describes its operations for GET /api/openapi.json (chalie/edge/openapi.py).

Each handler class names, in `api`, an `Operation` per HTTP method it answers: a summary, the
security schemes that let a request in, the query and path parameters, the request body's type
and each status's response type. Bodies are the msgspec types the handler decodes and encodes,
so the document is generated from the code that validates and writes them; an error answer is
an `ErrorBody` (on /v1/, OpenAI's error shape). The common refusals of `JsonHandler.prepare`
(400 for a bad query, 413, 403 cross-site, 429 past the rate, 401 without a credential, 503
while an actor restarts) are added by the document's builder, not repeated here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

# Security schemes (their definitions: chalie/edge/openapi.py).
COOKIE_AUTH = "loginCookie"  # the person's login cookie, from POST /auth/login
INTERFACE_AUTH = "interfaceToken"  # a paired interface's bearer token
METRICS_AUTH = "metricsToken"  # server.metrics_token, when it is set
API_TOKEN_AUTH = "apiToken"  # a scoped API token (POST /api/tokens)


class ErrorBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Every error answer: what went wrong (naming the field, where one is at fault)."""

    error: str
    status: int


class Ok(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    ok: Literal[True] = True


@dataclass(frozen=True)
class Param:
    """A query or path parameter: its name and JSON schema (as sent: text on the wire)."""

    name: str
    schema: Mapping[str, Any]
    description: str = ""
    required: bool = False


@dataclass(frozen=True)
class Raw:
    """A body that is not JSON: each media type and the schema of its content."""

    content: Mapping[str, Mapping[str, Any]]
    description: str = ""


@dataclass(frozen=True)
class Streamed:
    """A JSON answer, or with the request's `stream` server-sent events whose `data` is each
    an `event` (text/event-stream)."""

    json: Any
    event: Any


@dataclass(frozen=True)
class Operation:
    """One method of one route. `responses` maps a status to the type of its body (a msgspec
    Struct, a list of one, ...), to `Raw`, or to None for an empty body; `errors` are the
    statuses this operation answers with an ErrorBody besides the common ones. `auth` lists the
    security schemes of which any one lets the request in (empty: public); `auth_optional`
    lets a request without any in too (GET /metrics without server.metrics_token). `example`
    is a request body the operation accepts, shown in the document. `error_body`: the type of
    every error answer (OpenAI's shape on /v1/)."""

    summary: str
    responses: Mapping[int, Any]
    auth: tuple[str, ...] = ()
    auth_optional: bool = False
    body: Any = None
    query: tuple[Param, ...] = ()
    path: tuple[Param, ...] = ()
    errors: tuple[int, ...] = ()
    description: str = ""
    example: Any = None  # a JSON body that the operation accepts
    error_body: Any = ErrorBody


# Query parameters several endpoints share.
def limit_param(default: int, hi: int) -> Param:
    return Param("limit", {"type": "integer", "minimum": 1, "maximum": hi, "default": default},
                 "how many items at most")


OFFSET = Param("offset", {"type": "integer", "minimum": 0, "default": 0},
               "how many items to skip")


def text_param(name: str, max_chars: int, description: str, *, required: bool = False) -> Param:
    return Param(name, {"type": "string", "minLength": 1, "maxLength": max_chars},
                 description, required=required)


def one_of(name: str, values: tuple[str, ...], description: str) -> Param:
    return Param(name, {"type": "string", "enum": list(values)}, description)


def path_id(name: str, description: str, *, max_chars: int | None = None) -> Param:
    schema: dict[str, Any] = {"type": "string", "minLength": 1, "pattern": "^[^/]+$"}
    if max_chars is not None:
        schema["maxLength"] = max_chars
    return Param(name, schema, description, required=True)
