"""REST hardening seen from outside: every body has a size limit and a schema, a change made
with the login cookie must come from this server's pages, and REST has a rate per credential."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import tornado.routing
import tornado.web
import websocket

from chalie.config_load import load_config
from chalie.edge.app import make_app
from tests.integration.harness import WAIT_S, ServerProcess, StubLlm, db_rows
from tests.integration.stub_interface import (
    StubInterface,
    assert_error,
    bearer_client,
    cookie_client,
    pair,
)

LIMIT = 4096  # server.max_body_bytes here
IMAGE_LIMIT = 8192  # images.max_bytes here
EVIL = "http://evil.example"


@dataclass(frozen=True)
class Case:
    """A JSON body endpoint: who may call it, and bodies with an unknown field, a field of the
    wrong type, and a JSON value of the wrong kind, with the statuses each gets."""

    auth: str  # "none", "cookie" or "bearer"
    unknown: Any
    wrong_type: Any
    wrong_kind: Any
    statuses: tuple[int, int, int] = (400, 400, 400)


SIGNAL = {"signal_type": "note", "content": "c"}
PUSH = {"endpoint": "http://127.0.0.1:9/push/1",
        "keys": {"p256dh": "B" + "A" * 86, "auth": "A" * 22}}
JSON_BODIES: dict[tuple[str, str], Case] = {
    ("POST", "/auth/login"): Case("none", {"password": "x", "bogus": 1}, {"password": 5}, []),
    ("POST", "/api/interfaces/pair"): Case(
        "none", {"pairing_key": "k", "name": "n", "host": "h", "port": 1, "bogus": 1},
        {"pairing_key": "k", "name": "n", "host": "h", "port": "eighty"}, "pair me"),
    ("POST", "/api/messages"): Case("bearer", {"text": "hi", "bogus": 1}, {"text": 5}, [1]),
    ("POST", "/api/signals"): Case("cookie", {**SIGNAL, "bogus": 1}, {**SIGNAL, "content": 5},
                                   []),
    # A batch is checked item by item: a bad item is rejected by index in a 200.
    ("POST", "/api/signals/batch"): Case("cookie", [{**SIGNAL, "bogus": 1}],
                                         [{**SIGNAL, "content": 5}], {"items": []},
                                         statuses=(200, 200, 400)),
    ("POST", "/api/goals"): Case("cookie", {"goal": "g", "bogus": 1}, {"goal": 5}, 5),
    ("POST", "/api/schedules"): Case("cookie", {"prompt": "p", "cron": "0 9 * * *", "bogus": 1},
                                     {"prompt": 5, "cron": "0 9 * * *"}, "daily"),
    ("POST", "/api/subscriptions"): Case(
        "cookie", {"name": "n", "url": "ws://127.0.0.1:9/", "signals": ["a"], "bogus": 1},
        {"name": "n", "url": "ws://127.0.0.1:9/", "signals": "a"}, None),
    # Dotted setting keys: one that is not a setting is named like an unknown field.
    ("PATCH", "/api/settings"): Case("cookie", {"dmn.daily_cap": 2, "bogus": 1},
                                     {"dmn.daily_cap": {"n": 2}}, ["dmn.daily_cap"]),
    ("POST", "/api/settings/test"): Case("cookie", {"llm.model": "m", "bogus": 1},
                                         {"llm.model": {"n": 2}}, "llm.model"),
    ("POST", "/api/tokens"): Case("cookie", {"name": "n", "scopes": ["chat"], "bogus": 1},
                                  {"name": 5, "scopes": ["chat"]}, []),
    ("POST", "/api/push/subscriptions"): Case(
        "cookie", {**PUSH, "bogus": 1}, {**PUSH, "keys": {"p256dh": 5, "auth": "a"}}, [PUSH]),
    ("POST", "/api/notify/test"): Case("cookie", {"bogus": 1}, {"url": 5}, ["json://x"]),
    ("POST", "/api/approvals/([^/]+)"): Case("cookie", {"approve": True, "bogus": 1},
                                             {"approve": "yes"}, [True]),
}
NO_BODY = {
    ("POST", "/auth/logout"),
    ("POST", "/api/interfaces/pairing-key"),
    ("POST", "/api/interfaces/([^/]+)/refresh"),
    ("DELETE", "/api/interfaces/([^/]+)"),
    ("DELETE", "/api/memory/knowledge/(.*)"),
    ("DELETE", "/api/memory/episodes/(.*)"),
    ("DELETE", "/api/subscriptions/(.*)"),
    ("DELETE", "/api/schedules/([^/]+)"),
    ("DELETE", "/api/goals/([^/]+)"),
    ("DELETE", "/api/tokens/([^/]+)"),
    ("DELETE", "/api/tools/allowances/([^/]+)"),
    ("DELETE", "/api/push/subscriptions/([^/]+)"),
    ("POST", "/api/push/subscriptions/([^/]+)/test"),
    ("POST", "/api/telegram/pairing-code"),
    ("DELETE", "/api/telegram/chats/([^/]+)"),
}
RAW_BODY = {("POST", "/api/images")}  # an image's bytes, up to images.max_bytes
# OpenAI's clients send fields Chalie ignores: unknown fields pass (tests/integration/
# test_openai_api.py), and its errors are in OpenAI's shape (below).
OPENAI_BODY = {("POST", "/v1/chat/completions")}
# MCP's JSON-RPC (the SDK decodes it); a body over server.max_body_bytes is refused first.
MCP_BODY = {("POST", "/mcp"), ("DELETE", "/mcp")}


def changing_routes() -> set[tuple[str, str]]:
    """(method, route) for every POST, PUT, PATCH and DELETE the app serves."""
    app = make_app(SimpleNamespace(config=load_config()))  # type: ignore[arg-type]
    found = set()
    for rule in app.wildcard_router.rules:
        handler = rule.target
        assert isinstance(rule.matcher, tornado.routing.PathMatches)
        route = rule.matcher.regex.pattern.removesuffix("$")
        for method in ("post", "put", "patch", "delete"):
            if getattr(handler, method) is not getattr(tornado.web.RequestHandler, method):
                found.add((method.upper(), route))
    return found


def url_of(route: str) -> str:
    return re.sub(r"\([^)]*\)", "x", route)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    """One server with small body limits, a login cookie and a paired interface's token."""
    llm, iface = StubLlm(), StubInterface()
    server = ServerProcess(Path(tmp_path_factory.mktemp("limits")), llm,
                           server={"max_body_bytes": LIMIT, "rest_rate_per_min": 0},
                           images={"max_bytes": IMAGE_LIMIT}).start()
    cookie = server.login()
    _, token = pair(server.url, cookie, iface, name="limits", signals=["note"])
    yield SimpleNamespace(server=server, cookie=cookie, token=token)
    server.kill()
    iface.stop()
    llm.close()
    assert server.errors() == [], f"server logged errors: {server.errors()[:3]}"


def client(served: SimpleNamespace, auth: str) -> httpx.Client:
    if auth == "cookie":
        return cookie_client(served.server.url, served.cookie)
    if auth == "bearer":
        return bearer_client(served.server.url, served.token)
    return httpx.Client(base_url=served.server.url, timeout=WAIT_S)


def test_every_route_that_takes_a_change_is_listed_here() -> None:
    """A new POST/PUT/PATCH/DELETE route fails this test until its body is tested below."""
    listed = set(JSON_BODIES) | NO_BODY | RAW_BODY | OPENAI_BODY | MCP_BODY
    assert changing_routes() == listed


@pytest.mark.parametrize(("method", "route"), sorted(JSON_BODIES))
def test_a_json_body_with_an_unknown_field_a_wrong_type_or_kind_is_refused(
    served: SimpleNamespace, method: str, route: str
) -> None:
    """An unknown field is a 400 naming it; a wrong type or a body of the wrong JSON kind is a
    400 with a JSON error (a batch rejects a bad item by index instead)."""
    case = JSON_BODIES[(method, route)]
    with client(served, case.auth) as http:
        answers = [http.request(method, url_of(route), json=body)
                   for body in (case.unknown, case.wrong_type, case.wrong_kind)]
    for answer, status in zip(answers, case.statuses, strict=True):
        if status == 200:
            assert answer.status_code == 200, answer.text
            assert answer.json()["rejected"] == 1, answer.text
        else:
            assert_error(answer, status)
    assert "bogus" in answers[0].text


@pytest.mark.parametrize(("method", "route"), sorted(set(JSON_BODIES) | NO_BODY))
def test_a_body_over_max_body_bytes_is_413_naming_the_limit(
    served: SimpleNamespace, method: str, route: str
) -> None:
    """One byte over server.max_body_bytes is refused before the handler, with or without
    credentials."""
    body = b'{"text": "' + b"a" * (LIMIT - 11) + b'"}'
    assert len(body) == LIMIT + 1
    for auth in ("none", "cookie"):
        with client(served, auth) as http:
            answer = http.request(method, url_of(route), content=body,
                                  headers={"Content-Type": "application/json"})
        assert_error(answer, 413, "server.max_body_bytes", str(LIMIT))


def test_an_image_may_be_larger_than_max_body_bytes_but_not_than_images_max_bytes(
    served: SimpleNamespace
) -> None:
    """POST /api/images keeps images.max_bytes: a 5 KB PNG is stored, a huge body is 413."""
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * (LIMIT + 1000)
    with client(served, "cookie") as http:
        stored = http.post("/api/images", content=png)
        huge = http.post("/api/images", content=png + b"\0" * 100_000)
    assert stored.status_code == 201, stored.text
    assert_error(huge, 413, "images.max_bytes")


def test_a_chat_completion_takes_a_conversation_and_an_image_but_no_more(
    served: SimpleNamespace
) -> None:
    """POST /v1/chat/completions takes server.max_body_bytes and an image as base64; past it,
    a 413 in OpenAI's error shape, before the token is looked at."""
    body = b'{"model": "chalie", "messages": [], "x": "' + b"a" * (LIMIT + IMAGE_LIMIT * 2) + b'"}'
    with client(served, "none") as http:
        answer = http.post("/v1/chat/completions", content=body)
        fits = http.post("/v1/chat/completions", content=body[:LIMIT + IMAGE_LIMIT])
    assert answer.status_code == 413, answer.text
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["code"] == "request_too_large"
    assert "images.max_bytes" in error["message"]
    assert fits.status_code == 401  # not too large: refused for want of a token
    assert fits.json()["error"]["type"] == "authentication_error"


def test_a_body_larger_than_any_endpoint_takes_is_cut_off_by_tornado(
    served: SimpleNamespace
) -> None:
    """Past every limit plus slack, the server does not read the body: never a 2xx."""
    with client(served, "cookie") as http:
        try:
            status = http.post("/api/goals", content=b"x" * 2_000_000).status_code
        except httpx.TransportError:
            status = 0  # the connection was closed before an answer
    assert status in (0, 400, 413)


# --- the Origin check ---------------------------------------------------------------------------

def pairing_keys(served: SimpleNamespace) -> int:
    return len(db_rows(served.server.db_path, "SELECT 1 FROM pairing_keys"))


def test_a_cross_site_post_with_the_cookie_is_403_and_changes_nothing(
    served: SimpleNamespace
) -> None:
    """Another site's page cannot make a pairing key with the person's cookie, whether it
    shows its Origin or only its Referer."""
    before = pairing_keys(served)
    with client(served, "cookie") as http:
        by_origin = http.post("/api/interfaces/pairing-key", headers={"Origin": EVIL})
        by_referer = http.post("/api/interfaces/pairing-key",
                               headers={"Referer": EVIL + "/page.html"})
        null = http.post("/api/interfaces/pairing-key", headers={"Origin": "null"})
    assert_error(by_origin, 403, "cross-site request refused", "evil.example")
    assert_error(by_referer, 403, "Referer", "evil.example")
    assert_error(null, 403, "cross-site")
    assert pairing_keys(served) == before


def test_a_same_origin_post_or_one_without_origin_goes_through(
    served: SimpleNamespace
) -> None:
    """The server's own pages (Origin = its own scheme://host, http or https behind a proxy),
    and clients like curl that send no Origin, may change things."""
    host = served.server.url.removeprefix("http://")
    with client(served, "cookie") as http:
        for headers in ({"Origin": served.server.url}, {"Origin": f"https://{host}"},
                        {"Referer": f"{served.server.url}/brain"}, {}):
            answer = http.post("/api/interfaces/pairing-key", headers=headers)
            assert answer.status_code == 200, (headers, answer.text)


def test_a_bearer_token_request_is_not_subject_to_the_origin_check(
    served: SimpleNamespace
) -> None:
    """An interface's token is never sent by a browser on its own: its Origin is not checked."""
    with client(served, "bearer") as http:
        answer = http.post("/api/signals", json={**SIGNAL, "content": "from afar"},
                           headers={"Origin": EVIL})
    assert answer.status_code == 202, answer.text


def test_login_and_logout_from_another_site_are_refused(served: SimpleNamespace) -> None:
    """Another site can neither log the browser in (no cookie set) nor log it out."""
    server = served.server
    login = httpx.post(f"{server.url}/auth/login", json={"password": server.password},
                       headers={"Origin": EVIL})
    assert_error(login, 403, "cross-site")
    assert "chalie_session" not in login.cookies
    with client(served, "cookie") as http:
        assert_error(http.post("/auth/logout", headers={"Origin": EVIL}), 403, "cross-site")
        assert http.get("/api/interfaces").status_code == 200  # still logged in


def test_a_websocket_from_another_origin_is_refused(served: SimpleNamespace) -> None:
    """/ws with the person's cookie but another site's Origin gets 403, no socket."""
    server = served.server
    with pytest.raises(websocket.WebSocketBadStatusException) as refused:
        websocket.create_connection(f"ws://127.0.0.1:{server.port}/ws",
                                    cookie=f"chalie_session={served.cookie}",
                                    origin=EVIL, timeout=WAIT_S)
    assert refused.value.status_code == 403
    ws = websocket.create_connection(f"ws://127.0.0.1:{server.port}/ws",
                                     cookie=f"chalie_session={served.cookie}",
                                     origin=server.url, timeout=WAIT_S)
    ws.close()


# --- the REST rate ------------------------------------------------------------------------------

def test_rest_past_the_rate_is_429_per_credential_and_spares_other_paths(
    tmp_path: Path, llm: StubLlm
) -> None:
    """With rest_rate_per_min = 1, a cookie's second /api call is 429 with Retry-After and a
    JSON error; another login, /health and the pages still answer; the refusal is counted."""
    server = ServerProcess(tmp_path, llm, server={"rest_rate_per_min": 1}).start()
    try:
        first, second = server.login(), server.login()
        with cookie_client(server.url, first) as http:
            assert http.get("/api/interfaces").status_code == 200
            refused = http.get("/api/interfaces")
            assert [http.get("/health").status_code for _ in range(3)] == [200] * 3
            assert http.get("/").status_code == 200
        assert_error(refused, 429, "server.rest_rate_per_min")
        assert int(refused.headers["Retry-After"]) >= 1
        with cookie_client(server.url, second) as http:
            assert http.get("/api/interfaces").status_code == 200
        metrics = httpx.get(f"{server.url}/metrics").text
        assert 'chalie_rest_refused_total{reason="rate_limited"} 1.0' in metrics
    finally:
        server.kill()
    assert server.errors() == []


def test_made_up_credentials_cannot_outrun_the_rate(tmp_path: Path, llm: StubLlm) -> None:
    """Each request with a new made-up cookie would get a bucket of its own: a wrong
    credential (401) is also counted against its address, which is then refused with 429
    before its credential is even read; the refusal names the reason."""
    server = ServerProcess(tmp_path, llm, server={"rest_rate_per_min": 2}).start()
    try:
        answers = [httpx.get(f"{server.url}/api/interfaces",
                             cookies={"chalie_session": f"made-up-{n}"}).status_code
                   for n in range(3)]
        refused = httpx.get(f"{server.url}/api/interfaces",
                            cookies={"chalie_session": "made-up-4"})
        assert answers == [401, 401, 429]
        assert_error(refused, 429, "wrong login or token")
        assert int(refused.headers["Retry-After"]) >= 1
        metrics = httpx.get(f"{server.url}/metrics").text
        assert 'chalie_rest_refused_total{reason="bad_credentials"} 2.0' in metrics
    finally:
        server.kill()
    assert server.errors() == []


@pytest.mark.parametrize("trusted", [False, True])
def test_proxy_headers_name_the_client_only_when_trusted(
    tmp_path: Path, llm: StubLlm, trusted: bool
) -> None:
    """Behind a proxy every request comes from the proxy's address. With
    server.trust_proxy_headers the login throttle counts the client X-Forwarded-For names, so a
    stranger's wrong passwords do not lock the person out; without it the header is ignored
    (anyone could forge it) and both share the proxy's address."""
    server = ServerProcess(tmp_path, llm, auth={"max_failures": 2},
                           server={"trust_proxy_headers": trusted}).start()
    try:
        def login(password: str, client: str) -> int:
            return httpx.post(f"{server.url}/auth/login", json={"password": password},
                              headers={"X-Forwarded-For": client}).status_code

        assert [login("wrong", "203.0.113.9") for _ in range(3)] == [401, 401, 429]
        assert login(server.password, "198.51.100.7") == (200 if trusted else 429)
    finally:
        server.kill()


def test_an_mcp_message_over_the_body_limit_is_a_413_naming_the_key(
        served: SimpleNamespace) -> None:
    with cookie_client(served.server.url, served.cookie) as http:
        made = http.post("/api/tokens", json={"name": "limits", "scopes": ["memory:read"]})
    assert made.status_code == 201, made.text
    token = made.json()["token"]
    r = httpx.post(f"{served.server.url}/mcp", content=b"x" * (LIMIT + 1), timeout=WAIT_S,
                   headers={"Authorization": f"Bearer {token}",
                            "Content-Type": "application/json"})
    assert r.status_code == 413
    assert "server.max_body_bytes" in r.json()["error"]["message"]
