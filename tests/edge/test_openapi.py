"""GET /api/openapi.json's document: every REST route of the app is in it, and it is valid
OpenAPI 3.1 (the fuzz test against a real server: tests/integration/test_openapi_fuzz.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import tornado.web
from openapi_spec_validator import OpenAPIV31SpecValidator

from chalie.config_load import load_config
from chalie.edge.api_spec import COOKIE_AUTH
from chalie.edge.app import make_app
from chalie.edge.openapi import NOT_DESCRIBED, PATH, document, implemented, path_of, routes_of


@pytest.fixture(scope="module")
def routes() -> list[tuple[str, type[tornado.web.RequestHandler]]]:
    return routes_of(make_app(SimpleNamespace(config=load_config())))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def doc(routes: list[tuple[str, type[tornado.web.RequestHandler]]]) -> dict[str, Any]:
    return document(routes)


def test_every_rest_route_and_method_of_the_app_is_in_the_document(
    routes: list[tuple[str, type[tornado.web.RequestHandler]]], doc: dict[str, Any]
) -> None:
    """A route added to make_app without a description (in its handler's `api`) fails here."""
    missing = [f"{method.upper()} {pattern}" for pattern, handler in routes
               if pattern not in NOT_DESCRIBED for method in implemented(handler)
               if method not in doc["paths"].get(path_of(pattern, handler, method), {})]
    assert missing == []


def test_only_the_websocket_and_the_html_pages_are_left_out(
    routes: list[tuple[str, type[tornado.web.RequestHandler]]], doc: dict[str, Any]
) -> None:
    """What the document leaves out is still served (the list cannot go stale), and all else
    is in it: 53 paths, 63 operations."""
    assert {pattern for pattern, _ in routes} >= NOT_DESCRIBED
    assert len(doc["paths"]) == len(routes) - len(NOT_DESCRIBED) == 53
    assert sum(len(methods) for methods in doc["paths"].values()) == 63
    assert "/ws" not in doc["paths"]
    assert not any(p.startswith("/static") for p in doc["paths"])


def test_the_document_is_valid_openapi_3_1(doc: dict[str, Any]) -> None:
    """openapi-spec-validator finds nothing wrong with it, every $ref included."""
    errors = [e.message for e in OpenAPIV31SpecValidator(doc).iter_errors()]
    assert errors == []
    assert doc["openapi"] == "3.1.0"


def test_bodies_are_the_structs_the_handlers_decode_and_encode(doc: dict[str, Any]) -> None:
    """A request body's schema is its msgspec Struct (unknown fields refused); answers are too,
    and every error is an ErrorBody."""
    post = doc["paths"]["/api/goals"]["post"]
    body = post["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/GoalBody"}
    goal_body = doc["components"]["schemas"]["GoalBody"]
    assert goal_body["required"] == ["goal"]
    assert goal_body["additionalProperties"] is False
    created = post["responses"]["201"]["content"]["application/json"]["schema"]
    assert created == {"$ref": "#/components/schemas/GoalCreated"}
    for status in ("400", "401", "403", "413", "429", "503"):
        schema = post["responses"][status]["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/ErrorBody"}, status


def test_auth_is_described_as_security_schemes(doc: dict[str, Any]) -> None:
    """The login cookie, an interface's bearer token and the metrics token; the public
    endpoints (login, pairing, this document) need none, and /health takes any of the
    person's or an interface's credentials but needs none."""
    schemes = doc["components"]["securitySchemes"]
    assert schemes[COOKIE_AUTH] == {"type": "apiKey", "in": "cookie", "name": "chalie_session",
                                    "description": schemes[COOKIE_AUTH]["description"]}
    paths = doc["paths"]
    assert paths["/api/goals"]["get"]["security"] == [{COOKIE_AUTH: []}]
    assert paths["/api/signals"]["post"]["security"] == [{"interfaceToken": []},
                                                          {COOKIE_AUTH: []}]
    assert paths["/api/messages"]["post"]["security"] == [{"interfaceToken": []}]
    assert paths["/metrics"]["get"]["security"] == [{"metricsToken": []}, {}]
    assert paths["/health"]["get"]["security"] == [{COOKIE_AUTH: []}, {"apiToken": []},
                                                   {"interfaceToken": []}, {}]
    assert "401" not in paths["/health"]["get"]["responses"]
    for path, method in [("/auth/login", "post"), ("/api/interfaces/pair", "post"),
                         (PATH, "get")]:
        assert paths[path][method]["security"] == [], path


def test_path_parameters_are_named_as_the_handlers_name_them(doc: dict[str, Any]) -> None:
    """A route's groups become {name} from the handler method's arguments."""
    assert "/api/turns/{turn_id}/prompts" in doc["paths"]
    assert "/api/memory/knowledge/{id}" in doc["paths"]
    (param,) = doc["paths"]["/api/memory/knowledge/{id}"]["delete"]["parameters"]
    assert param == {"name": "id", "in": "path", "required": True,
                     "schema": {"type": "integer", "minimum": 1}, "description": "the item's id"}
