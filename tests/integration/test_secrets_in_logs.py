"""No secret reaches the logs: a full run at log level debug, grepped for every one of them."""

from __future__ import annotations

import secrets
from pathlib import Path

import httpx

from tests.integration.harness import WAIT_S, ServerProcess, StubLlm, wait_for
from tests.integration.stub_interface import (
    StubInterface,
    assert_error,
    bearer_client,
    pair_request,
    pairing_key,
)


def secret(name: str) -> str:
    return f"{name}-{secrets.token_hex(12)}"


def test_a_full_run_at_debug_logs_no_password_token_or_api_key(
    tmp_path: Path, llm: StubLlm, iface: StubInterface
) -> None:
    """Log in, fail a login, pair an interface, send it signals and messages, chat, scrape
    /metrics and log out: no line the server wrote holds any secret it saw."""
    password, wrong = secret("password"), secret("wrong-password")
    api_key, embed_key, mcp_header = secret("llm-key"), secret("embed-key"), secret("mcp")
    metrics_token = secret("metrics")
    server = ServerProcess(
        tmp_path, llm, password=password,
        log={"level": "debug"},
        llm={"api_key": api_key},
        memory={"embed_api_key": embed_key},
        server={"metrics_token": metrics_token},
    )
    with server.config_path.open("a") as config:  # an MCP server nobody answers for
        config.write(f'[[mcp.servers]]\nname = "remote"\nurl = "http://127.0.0.1:9/mcp"\n'
                     f'headers = {{ Authorization = "Bearer {mcp_header}" }}\n')
    server.start()
    try:
        cookie = server.login()
        assert_error(httpx.post(f"{server.url}/auth/login", json={"password": wrong}), 401)
        key = pairing_key(server.url, cookie)["pairing_key"]
        paired = pair_request(server.url, key, iface, name="secrets", signals=["note"])
        assert paired.status_code == 201, paired.text
        token = paired.json()["signal_token"]
        with bearer_client(server.url, token) as http:
            signal = {"signal_type": "note", "content": "the kettle is on"}
            assert http.post("/api/signals", json=signal).status_code == 202
            assert http.post("/api/signals/batch", json=[signal]).status_code == 200
            assert http.post("/api/messages", json={"text": "build finished"}).status_code == 202
        frames = server.connect(cookie).turn("hello there")
        assert frames[-1]["type"] == "done", frames
        scraped = httpx.get(f"{server.url}/metrics",
                            headers={"Authorization": f"Bearer {metrics_token}"})
        assert scraped.status_code == 200, scraped.text
        wait_for(lambda: len(llm.requests) >= 2)  # the chat and the interface's message
        logout = httpx.post(f"{server.url}/auth/logout", cookies={"chalie_session": cookie},
                            timeout=WAIT_S)
        assert logout.status_code == 200, logout.text
    finally:
        server.stop()
    lines = server.lines
    assert any('"level": "debug"' in line for line in lines)  # debug was on
    values = {"password": password, "wrong password": wrong, "llm.api_key": api_key,
              "memory.embed_api_key": embed_key, "MCP header": mcp_header,
              "metrics token": metrics_token, "cookie": cookie, "pairing key": key,
              "interface token": token}
    leaks = {name: [line for line in lines if value in line] for name, value in values.items()}
    assert {name: found for name, found in leaks.items() if found} == {}
