"""Every REST operation of GET /api/openapi.json fuzzed by schemathesis against a real server.

One server (a stub LLM, a paired stub interface, a few goals, schedules, turns and an image
made first) answers every operation of its own document: valid requests (`positive`) and
requests the document says are wrong (`negative`), CHALIE_OPENAPI_EXAMPLES of each per
operation (12 by default), drawn deterministically (derandomized, no shrinking, no deadline).
Every answer must be no 5xx, of a status the operation documents, of its documented content
type and matching its documented schema; at the end the server's log has no ERROR line (an
unhandled exception in a handler is logged at ERROR with its traceback).

Each request carries the credential its operation names: the login cookie, the interface's
bearer token, a scoped API token or server.metrics_token. POST /auth/logout ends the session
every other request uses, so it runs last (its later calls find no session, and answer 200 all
the same: there is nothing left to end). Operations with an id in their path run twice: with
drawn ids, and (all but DELETE, which would remove what the rest needs) with the id of
something that exists, so the found path is checked too. Besides the drawn bodies, an
operation's example body in the document is sent (schemathesis's explicit phase): a drawn one
is seldom one a handler takes (a cron expression, a signal type). A subscription's URL, and a
model's address saved or tested in the settings, and a device's push endpoint, are pointed at
loopback whatever was drawn: nothing leaves this machine.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.integration.harness import ServerProcess, StubLlm
from tests.integration.stub_interface import StubInterface, pair
from tests.push_service import PushService

EXAMPLES = int(os.environ.get("CHALIE_OPENAPI_EXAMPLES", "12"))
METRICS_TOKEN = "metrics-token-for-the-fuzz"
LAST = "POST /auth/logout"  # ends the session the others use
SELF = "GET /api/openapi.json"  # schemathesis leaves out the operation that serves the document
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]
# A 1x1 PNG, uploaded so GET /api/images/{image_id} has one to find.
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChw"
                       "GA60e6kgAAAABJRU5ErkJggg==")
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck))


@dataclass
class Served:
    server: ServerProcess
    llm: StubLlm
    cookie: str
    token: str  # the paired stub interface's bearer token
    api_token: str  # a scoped API token with every scope (POST /api/tokens)
    known: dict[str, str]  # path parameter -> the id of something that exists
    push: PushService  # where every device subscribed by the fuzz points (unknown there: 404)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    llm, iface, push = StubLlm(), StubInterface(), PushService()
    bot_api = f"http://127.0.0.1:{llm.port}"  # a fuzzed telegram.token reaches nothing else
    server = ServerProcess(Path(tmp_path_factory.mktemp("openapi")), llm, server={
        "rest_rate_per_min": 0, "metrics_token": METRICS_TOKEN}, telegram={
        "base_url": f"{bot_api}/bot", "base_file_url": f"{bot_api}/file/bot"}).start()
    try:
        cookie = server.login()
        interface_id, token = pair(server.url, cookie, iface, name="fuzzed", signals=["*"])
        known = {"interface_id": interface_id, **_made(server, cookie)}
        with httpx.Client(base_url=server.url, cookies={"chalie_session": cookie}) as http:
            api_token = http.post("/api/tokens", json={
                "name": "fuzzed", "scopes": ["memory:read", "memory:write", "chat",
                                             "signals"]}).json()["token"]
        yield Served(server, llm, cookie, token, api_token, known, push)
    finally:
        server.kill()
        iface.stop()
        llm.close()
        push.close()


def _made(server: ServerProcess, cookie: str) -> dict[str, str]:
    """A turn, a goal, a schedule and an image, by their path parameters' names."""
    server.connect(cookie).turn("hello there")
    with httpx.Client(base_url=server.url, cookies={"chalie_session": cookie}) as http:
        turn_id = http.get("/api/turns").json()["items"][0]["id"]
        goal = http.post("/api/goals", json={"goal": "tidy the notes"}).json()
        schedule = http.post("/api/schedules", json={"prompt": "stretch",
                                                     "cron": "0 9 * * 1"}).json()
        image = http.post("/api/images", content=PNG).json()
    return {"turn_id": turn_id, "goal_id": goal["id"], "schedule_id": schedule["id"],
            "image_id": image["image_id"]}


def test_the_document_is_served_without_a_login(served: Served) -> None:
    """GET /api/openapi.json needs no credential, and describes itself."""
    r = httpx.get(f"{served.server.url}/api/openapi.json")
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    assert r.json()["paths"]["/api/openapi.json"]["get"]["security"] == []


def test_every_operation_answers_as_documented(served: Served) -> None:
    """No 5xx and no undocumented answer for any drawn request, and no ERROR in the log."""
    raw = httpx.get(f"{served.server.url}/api/openapi.json").json()
    fuzz = Fuzz(served, raw)
    schema = schemathesis.openapi.from_url(f"{served.server.url}/api/openapi.json")
    operations = sorted((result.ok() for result in schema.get_all_operations()),
                        key=lambda operation: operation.label == LAST)
    for operation in operations:
        fuzz.operation(operation)
    documented = {f"{m.upper()} {p}" for p, methods in raw["paths"].items() for m in methods}
    assert fuzz.failures == [], "\n\n".join(fuzz.failures)
    assert [o.label for o in operations][-1] == LAST
    assert {o.label for o in operations} == documented - {SELF}
    assert len(operations) == 62
    assert served.server.errors() == [], served.server.errors()[:3]
    assert not [line for line in served.server.lines if "Traceback" in line]


class Fuzz:
    """Runs an operation's drawn requests, with its credential, on one kept-alive session, and
    keeps what failed (every operation's, for one report)."""

    def __init__(self, served: Served, document: dict[str, Any]) -> None:
        self.served = served
        self.document = document
        self.session = requests.Session()
        self.failures: list[str] = []

    def operation(self, operation: Any) -> None:
        positive, negative = (schemathesis.GenerationMode.POSITIVE,
                              schemathesis.GenerationMode.NEGATIVE)
        runs: list[tuple[Any, dict[str, Any]]] = [(positive, {}), (negative, {})]
        names = [p.name for p in operation.path_parameters]
        if names and operation.method.upper() != "DELETE" \
                and all(n in self.served.known for n in names):
            known = {"path_parameters": {n: self.served.known[n] for n in names}}
            runs += [(positive, known), (negative, known)]
        for mode, fixed in runs:
            try:
                self.run(operation, mode, fixed)
            except Unsatisfiable:  # nothing in the request to make wrong (GET /health)
                assert mode is negative, operation.label
            except (Exception, FailureGroup) as e:
                self.failures.append(f"{operation.label} ({mode.value}, {fixed or 'drawn'}): "
                                     f"{_described(e)}"[:3000])

    def described(self, operation: Any) -> dict[str, Any]:
        """The operation as the document describes it."""
        found: dict[str, Any] = self.document["paths"][operation.path][operation.method.lower()]
        return found

    def run(self, operation: Any, mode: Any, fixed: dict[str, Any]) -> None:
        credentials = self.credentials(self.described(operation)["security"])

        @FUZZ
        @given(case=operation.as_strategy(generation_mode=mode, **fixed))
        def check(case: Any) -> None:
            self.to_loopback(case)
            case.call_and_validate(base_url=self.served.server.url, session=self.session,
                                   checks=CHECKS, timeout=30, **credentials)

        check()

    def credentials(self, security: list[dict[str, list[str]]]) -> dict[str, Any]:
        """The cookie or bearer token the operation names first, as call() arguments."""
        schemes = [name for requirement in security for name in requirement]
        if not schemes:
            return {}
        if schemes[0] == "loginCookie":
            return {"cookies": {"chalie_session": self.served.cookie}}
        token = {"interfaceToken": self.served.token,
                 "apiToken": self.served.api_token}.get(schemes[0], METRICS_TOKEN)
        return {"headers": {"Authorization": f"Bearer {token}"}}

    def to_loopback(self, case: Any) -> None:
        """Point a drawn subscription URL at the stub LLM (no WebSocket there: the stream fails
        and retries), and a drawn push endpoint at the push service stand-in, so no connection
        leaves this machine."""
        body = case.body
        if case.operation.label == "POST /api/subscriptions" and isinstance(body, dict) \
                and isinstance(body.get("url"), str):
            body["url"] = f"ws://127.0.0.1:{self.served.llm.port}/feed"
        # A device's push endpoint: the push service stand-in's, whatever was drawn.
        if case.operation.label == "POST /api/push/subscriptions" and isinstance(body, dict) \
                and isinstance(body.get("endpoint"), str):
            body["endpoint"] = self.served.push.endpoint("fuzzed")
        # A notification service: a json:// hook on the stub, whatever was drawn.
        hook = f"json://127.0.0.1:{self.served.llm.port}/hook"
        if case.operation.label == "POST /api/notify/test" and isinstance(body, dict) \
                and isinstance(body.get("url"), str):
            body["url"] = hook
        if case.operation.label == "PATCH /api/settings" and isinstance(body, dict) \
                and isinstance(body.get("notify.urls"), list):
            body["notify.urls"] = [hook for _ in body["notify.urls"]]
        # A model's address, saved or tested: the stub's, whatever was drawn.
        if case.operation.label in ("PATCH /api/settings", "POST /api/settings/test") \
                and isinstance(body, dict):
            for key in [k for k in body if isinstance(k, str) and k.endswith("base_url")]:
                if isinstance(body[key], str):
                    body[key] = f"http://127.0.0.1:{self.served.llm.port}/v1"


def _described(error: BaseException) -> str:
    """What schemathesis found, with its curl line to reproduce it."""
    if isinstance(error, FailureGroup):
        return str(error) + "".join(f"\n  - {type(e).__name__}: {e}" for e in error.exceptions)
    return f"{type(error).__name__}: {error}"
