"""Scoped API tokens from outside (issue 25): POST/GET/DELETE /api/tokens with the login
cookie; a token is shown once, listed without itself, kept across a restart, revoked at once,
and never manages tokens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.integration.harness import ServerProcess, StubLlm, db_rows
from tests.integration.stub_interface import assert_error, bearer_client, cookie_client


def make_token(server: ServerProcess, cookie: str, name: str = "laptop",
               scopes: tuple[str, ...] = ("memory:read", "chat")) -> dict[str, Any]:
    with cookie_client(server.url, cookie) as http:
        r = http.post("/api/tokens", json={"name": name, "scopes": list(scopes)})
    assert r.status_code == 201, r.text
    made: dict[str, Any] = r.json()
    return made


def test_a_token_is_shown_once_listed_without_itself_and_stored_hashed(
        server: ServerProcess, cookie: str) -> None:
    made = make_token(server, cookie, scopes=("chat", "memory:read"))
    token, item = made["token"], made["item"]
    assert token.startswith("chalie_")
    assert len(token) > 40
    assert item["name"] == "laptop"
    assert item["scopes"] == ["memory:read", "chat"]
    assert item["channel"] == "token.laptop"
    assert item["last_used_at"] is None
    assert item["calls"] == {"mcp": 0, "openai": 0}
    with cookie_client(server.url, cookie) as http:
        listed = http.get("/api/tokens").json()["items"]
    assert [t["id"] for t in listed] == [item["id"]]
    assert token not in str(listed)
    rows = db_rows(server.db_path, "SELECT name, token_hash FROM api_tokens")
    assert rows[0][0] == "laptop"
    assert token not in str(rows)
    assert len(rows[0][1]) == 64


def test_bad_bodies_name_the_field_and_a_taken_name_is_a_409(
        server: ServerProcess, cookie: str) -> None:
    make_token(server, cookie)
    with cookie_client(server.url, cookie) as http:
        assert_error(http.post("/api/tokens", json={"name": "a b", "scopes": ["chat"]}),
                     400, "name")
        assert_error(http.post("/api/tokens", json={"name": "x", "scopes": []}), 400, "scopes")
        assert_error(http.post("/api/tokens", json={"name": "x", "scopes": ["admin"]}),
                     400, "scopes")
        assert_error(http.post("/api/tokens", json={"name": "x", "scopes": ["chat", "chat"]}),
                     400, "twice")
        assert_error(http.post("/api/tokens", json={"name": "laptop", "scopes": ["chat"]}),
                     409, "laptop")
        assert_error(http.delete("/api/tokens/nope"), 404, "nope")


def test_a_token_never_manages_tokens(server: ServerProcess, cookie: str) -> None:
    token = make_token(server, cookie)["token"]
    with bearer_client(server.url, token) as http:
        assert_error(http.get("/api/tokens"), 401)
        assert_error(http.post("/api/tokens", json={"name": "more", "scopes": ["chat"]}), 401)
        item_id = make_token(server, cookie, name="other")["item"]["id"]
        assert_error(http.delete(f"/api/tokens/{item_id}"), 401)
        assert_error(http.get("/api/settings"), 401)
        assert_error(http.post("/api/interfaces/pairing-key"), 401)
    assert_error(httpx.get(f"{server.url}/api/tokens"), 401)


def test_tokens_outlive_a_restart_and_a_revoked_one_stays_revoked(
        tmp_path: Path, llm: StubLlm) -> None:
    server = ServerProcess(tmp_path, llm).start()
    try:
        cookie = server.login()
        kept = make_token(server, cookie, name="kept")["item"]["id"]
        gone = make_token(server, cookie, name="gone")["item"]["id"]
        with cookie_client(server.url, cookie) as http:
            r = http.delete(f"/api/tokens/{gone}")
            assert r.status_code == 200
            assert r.json() == {"id": gone, "revoked": True}
            assert_error(http.delete(f"/api/tokens/{gone}"), 404)
        assert server.stop() == 0
    finally:
        server.kill()
    server = ServerProcess(tmp_path, llm).start()
    try:
        with cookie_client(server.url, server.login()) as http:
            assert [t["id"] for t in http.get("/api/tokens").json()["items"]] == [kept]
    finally:
        server.kill()
