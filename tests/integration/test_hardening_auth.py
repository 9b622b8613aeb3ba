"""Login hardening from outside: `chalie passwd` against a running server, logout, expired and
rotated session cookies, the pairing throttle and the /metrics token, with a real server
process and real sockets on 127.0.0.1."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import httpx
import pytest
import websocket

from chalie.edge.auth import token_hash
from tests.integration.harness import ROOT, WAIT_S, ServerProcess, db_rows
from tests.integration.stub_interface import assert_error, pairing_key

COOKIE = "chalie_session"


@pytest.fixture
def servers() -> Iterator[list[ServerProcess]]:
    """Servers a test starts; killed after it, and none may have logged an error."""
    started: list[ServerProcess] = []
    yield started
    for server in started:
        server.kill()
    for server in started:
        assert not server.errors(), f"server logged errors: {server.errors()}"


def start(servers: list[ServerProcess], workdir: Path, password: str = "secret",
          **sections: dict[str, Any]) -> ServerProcess:
    server = ServerProcess(workdir, None, password=password, **sections)
    servers.append(server)
    return server.start()


def passwd(server: ServerProcess, new: str,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`chalie passwd --config FILE` with `new` piped in, as a script would run it."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CHALIE_")}
    return subprocess.run(
        [sys.executable, "-m", "chalie", "passwd", "--config", str(server.config_path)],
        input=new + "\n", capture_output=True, text=True, cwd=ROOT, env={**clean, **(env or {})},
        timeout=WAIT_S, check=False,
    )


def login(server: ServerProcess, password: str) -> httpx.Response:
    return httpx.post(f"{server.url}/auth/login", json={"password": password}, timeout=WAIT_S)


def session_status(server: ServerProcess, cookie: str) -> int:
    r = httpx.get(f"{server.url}/auth/session", cookies={COOKIE: cookie}, timeout=WAIT_S)
    return r.status_code


def test_passwd_while_running_logs_every_browser_out_and_only_the_new_password_works(
    servers: list[ServerProcess], tmp_path: Path,
) -> None:
    """Both logged-in browsers get 401 at once; the old password is refused, the new one in."""
    server = ServerProcess(tmp_path, None, password="")
    first = passwd(server, "first password")
    assert first.returncode == 0, first.stderr
    servers.append(server)
    server.start()
    cookies = [login(server, "first password").cookies[COOKIE] for _ in range(2)]
    assert [session_status(server, c) for c in cookies] == [200, 200]

    done = passwd(server, "second password")

    assert done.returncode == 0, done.stderr
    assert "2 login session(s) ended" in done.stdout
    assert [session_status(server, c) for c in cookies] == [401, 401]
    assert login(server, "first password").status_code == 401
    assert login(server, "second password").status_code == 200
    said = done.stdout + done.stderr + first.stdout + first.stderr + "".join(server.lines)
    assert "first password" not in said
    assert "second password" not in said


def test_passwd_is_refused_while_auth_password_is_configured(tmp_path: Path) -> None:
    """With auth.password in the file or the environment, passwd says where and changes nothing."""
    server = ServerProcess(tmp_path, None, password="configured secret")
    in_file = passwd(server, "another password")
    assert in_file.returncode == 1
    assert (f"auth.password is set in {server.config_path}: change it there"
            in in_file.stderr)
    (tmp_path / "env").mkdir()
    unset = ServerProcess(tmp_path / "env", None, password="")
    in_env = passwd(unset, "another password", env={"CHALIE_AUTH__PASSWORD": "x" * 10})
    assert in_env.returncode == 1
    assert "auth.password is set in the environment (CHALIE_AUTH__PASSWORD)" in in_env.stderr
    assert not (tmp_path / "data").exists()
    assert not (tmp_path / "env" / "data").exists()
    assert "another password" not in in_file.stderr + in_env.stderr


def test_passwd_refuses_a_short_password(tmp_path: Path) -> None:
    """Under 8 characters, or nothing at all: exit 1 naming the problem, nothing stored."""
    server = ServerProcess(tmp_path, None, password="")
    short, empty = passwd(server, "short"), passwd(server, "")
    assert (short.returncode, empty.returncode) == (1, 1)
    assert "at least 8 characters" in short.stderr
    assert "no password given" in empty.stderr
    assert not (tmp_path / "data").exists()


def test_logout_ends_only_that_session_and_clears_the_cookie(
    servers: list[ServerProcess], tmp_path: Path,
) -> None:
    """The logged-out cookie gets 401, the other browser stays in; repeating it is harmless."""
    server = start(servers, tmp_path)
    mine, other = server.login(), server.login()

    r = httpx.post(f"{server.url}/auth/logout", cookies={COOKIE: mine}, timeout=WAIT_S)

    assert (r.status_code, r.json()) == (200, {"ok": True})
    cleared = r.headers["Set-Cookie"]
    assert cleared.startswith((f'{COOKIE}=""', f"{COOKIE}=;"))
    assert "expires=" in cleared.lower()
    assert session_status(server, mine) == 401
    assert session_status(server, other) == 200
    assert db_rows(server.db_path, "SELECT token_hash FROM auth_sessions") == [
        (token_hash(other),)]
    again = httpx.post(f"{server.url}/auth/logout", cookies={COOKIE: mine}, timeout=WAIT_S)
    bare = httpx.post(f"{server.url}/auth/logout", timeout=WAIT_S)
    assert [(x.status_code, x.json()) for x in (again, bare)] == [(200, {"ok": True})] * 2
    assert session_status(server, other) == 200


def add_session(server: ServerProcess, token: str, *, expires_in: float) -> None:
    """A session row written as the server would, expiring `expires_in` seconds from now."""
    conn = apsw.Connection(str(server.db_path))
    try:
        conn.set_busy_timeout(5000)
        now = time.time()
        conn.execute("INSERT INTO auth_sessions (token_hash, created_at, expires_at) "
                     "VALUES (?, ?, ?)", (token_hash(token), now - 100, now + expires_in))
    finally:
        conn.close()


def refusals(server: ServerProcess, token: str) -> list[int]:
    """What REST, a page, /auth/session and /ws answer to `token`."""
    with httpx.Client(base_url=server.url, cookies={COOKIE: token}, timeout=WAIT_S) as http:
        codes = [http.get("/api/memory/knowledge").status_code,
                 http.get("/", follow_redirects=False).status_code,
                 http.get("/auth/session").status_code]
    try:
        ws = websocket.create_connection(f"ws://127.0.0.1:{server.port}/ws",
                                         cookie=f"{COOKIE}={token}", timeout=WAIT_S)
    except websocket.WebSocketBadStatusException as e:
        codes.append(e.status_code)
    else:
        ws.close()
        codes.append(101)
    return codes


def test_an_expired_cookie_is_refused_on_rest_pages_session_and_ws(
    servers: list[ServerProcess], tmp_path: Path,
) -> None:
    """A session past its expiry gets 401 (a page: the login redirect) wherever it is sent."""
    server = start(servers, tmp_path)
    add_session(server, "expired-token", expires_in=-1.0)
    add_session(server, "live-token", expires_in=3600.0)
    assert refusals(server, "live-token") == [200, 200, 200, 101]
    assert refusals(server, "expired-token") == [401, 302, 401, 401]


def test_an_old_cookie_is_replaced_on_its_next_use_and_keeps_the_login_expiry(
    servers: list[ServerProcess], tmp_path: Path,
) -> None:
    """Past auth.rotate_days a request gets a new cookie (same attributes, same expiry); the
    old one still works at once, without being replaced a second time."""
    server = start(servers, tmp_path, auth={"password": "secret", "rotate_days": 1e-9})
    old = server.login()
    (login_expiry,) = db_rows(server.db_path, "SELECT expires_at FROM auth_sessions")[0]

    r = httpx.get(f"{server.url}/auth/session", cookies={COOKIE: old}, timeout=WAIT_S)

    assert r.status_code == 200
    new = r.cookies[COOKIE]
    assert new != old
    attributes = r.headers["Set-Cookie"].lower()
    assert all(a in attributes for a in ("httponly", "samesite=strict", "path=/", "expires="))
    assert "secure" not in attributes  # auth.secure_cookie is off in tests
    rows = dict(db_rows(server.db_path, "SELECT token_hash, expires_at FROM auth_sessions"))
    assert rows[token_hash(new)] == login_expiry
    assert rows[token_hash(old)] < login_expiry  # cut to a minute from the rotation
    again = httpx.get(f"{server.url}/auth/session", cookies={COOKIE: old}, timeout=WAIT_S)
    assert (again.status_code, "set-cookie" in again.headers) == (200, False)
    assert session_status(server, new) == 200


def test_pages_and_rest_rotate_an_old_cookie_too(
    servers: list[ServerProcess], tmp_path: Path,
) -> None:
    """A page load and a REST call each hand back a new cookie for an old one."""
    server = start(servers, tmp_path, auth={"password": "secret", "rotate_days": 1e-9})
    for path in ("/", "/api/memory/knowledge"):
        old = server.login()
        r = httpx.get(f"{server.url}{path}", cookies={COOKIE: old}, timeout=WAIT_S)
        assert r.status_code == 200, (path, r.text)
        assert r.cookies[COOKIE] != old, path


def test_wrong_pairing_keys_lock_the_address_out_even_for_a_right_key(
    servers: list[ServerProcess], tmp_path: Path,
) -> None:
    """After pair_max_failures wrong keys: 429 with Retry-After, and a good key waits too."""
    server = start(servers, tmp_path,
                   interfaces={"pair_max_failures": 3, "pair_lockout_s": 300.0})
    good = pairing_key(server.url, server.login())["pairing_key"]

    def pair(key: str) -> httpx.Response:
        body = {"pairing_key": key, "name": "lamp", "host": "127.0.0.1", "port": 9}
        return httpx.post(f"{server.url}/api/interfaces/pair", json=body, timeout=WAIT_S)

    for _ in range(3):
        assert_error(pair("wrong key"), 401, "pairing_key")
    locked = pair("wrong key")
    right = pair(good)
    for r in (locked, right):
        assert_error(r, 429, "too many wrong pairing keys")
        assert 1 <= int(r.headers["Retry-After"]) <= 300
    metrics = httpx.get(f"{server.url}/metrics", timeout=WAIT_S).text
    assert 'chalie_auth_locked_out_total{what="pairing"} 2.0' in metrics


def test_metrics_need_the_bearer_token_when_one_is_configured(
    servers: list[ServerProcess], tmp_path: Path,
) -> None:
    """Without the header or with a wrong token: 401 naming what to send; with it: the text."""
    server = start(servers, tmp_path, server={"port": 0, "metrics_token": "scrape-me-123"})
    url = f"{server.url}/metrics"
    assert_error(httpx.get(url, timeout=WAIT_S), 401, "Authorization: Bearer",
                 "server.metrics_token")
    wrong = httpx.get(url, headers={"Authorization": "Bearer nope"}, timeout=WAIT_S)
    assert_error(wrong, 401, "server.metrics_token")
    right = httpx.get(url, headers={"Authorization": "Bearer scrape-me-123"}, timeout=WAIT_S)
    assert right.status_code == 200
    assert "# HELP chalie_auth_sessions_rotated_total" in right.text
    assert "scrape-me-123" not in "".join(server.lines)


def closed_by_server(ws: websocket.WebSocket) -> tuple[int, str]:
    """Read until the server closes the socket (pings aside); its close code and reason."""
    while True:
        opcode, data = ws.recv_data(control_frame=True)
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            return int.from_bytes(data[:2], "big"), data[2:].decode()


def test_open_sockets_close_when_their_login_ends(
    servers: list[ServerProcess], tmp_path: Path,
) -> None:
    """Logging out, and then `chalie passwd`, also close the /ws sockets those logins opened
    (1008 "logged out", at the next keepalive beat), while a socket of a live login stays."""
    server = ServerProcess(tmp_path, None, password="",
                           server={"ping_interval_s": 0.2, "ping_misses": 1000})
    assert passwd(server, "the first password").returncode == 0
    servers.append(server)
    server.start()
    mine, other = (login(server, "the first password").cookies[COOKIE] for _ in range(2))
    sockets = {cookie: websocket.create_connection(
        f"ws://127.0.0.1:{server.port}/ws", cookie=f"{COOKIE}={cookie}", timeout=WAIT_S)
        for cookie in (mine, other)}
    try:
        httpx.post(f"{server.url}/auth/logout", cookies={COOKIE: mine}, timeout=WAIT_S)
        assert closed_by_server(sockets[mine]) == (1008, "logged out")
        sockets[other].send('{"type": "pong"}')  # still open
        assert passwd(server, "a brand new password").returncode == 0
        assert closed_by_server(sockets[other]) == (1008, "logged out")
    finally:
        for ws in sockets.values():
            ws.close(timeout=1)
            ws.shutdown()  # close() leaves the socket open when the server closed first
