"""SIGHUP on the real server process: the config file is read again, what can change while
running takes effect, what cannot is named as needing a restart, and a broken file is refused."""

from __future__ import annotations

import signal
import tomllib
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import write_config
from tests.integration.harness import ServerProcess, StubLlm, completion, db_rows, wait_for

DAY = 86400.0


def rewrite(proc: ServerProcess, /, **sections: dict[str, Any]) -> None:
    """The server's config file with `sections`' keys changed (the rest as it was)."""
    with proc.config_path.open("rb") as f:
        current = tomllib.load(f)
    for name, values in sections.items():
        current.setdefault(name, {}).update(values)
    assert write_config(proc.config_path.parent, current) == proc.config_path


def hangup(server: ServerProcess, event: str) -> dict[str, Any]:
    """Send SIGHUP and wait for the reload's `event` line (config_reloaded, reload_refused)."""
    seen = len(events(server, event))
    assert server.proc is not None
    server.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: len(events(server, event)) > seen)
    return events(server, event)[-1]


def events(server: ServerProcess, event: str) -> list[dict[str, Any]]:
    return [e for e in server.log_events() if e.get("event") == event]


def dmn_budget(server: ServerProcess, cookie: str) -> int:
    r = httpx.get(f"{server.url}/api/spending", cookies={"chalie_session": cookie})
    assert r.status_code == 200, r.text
    return int(r.json()["paths"]["dmn"]["tokens_per_day"])


def session_days(server: ServerProcess) -> list[float]:
    """Each stored login session's lifetime, in days, oldest first."""
    rows = db_rows(server.db_path,
                   "SELECT expires_at - created_at FROM auth_sessions ORDER BY created_at")
    return [round(float(r[0]) / DAY, 3) for r in rows]


def test_sighup_applies_live_keys_and_names_the_ones_that_need_a_restart(
    tmp_path: Path, llm: StubLlm
) -> None:
    """After a SIGHUP the new log level, budget, session lifetime and metrics token are in
    effect at once; the port is reported as changed but the server keeps listening where it
    was."""
    server = ServerProcess(tmp_path, llm, governor={"dmn_tokens_per_day": 1000},
                           auth={"password": "secret", "session_days": 30}).start()
    try:
        cookie = server.login()
        assert dmn_budget(server, cookie) == 1000
        llm.queue(completion("Hello."))
        server.connect(cookie, channel="before").turn("hi")
        assert not [e for e in server.log_events() if e.get("level") == "debug"]
        assert httpx.get(f"{server.url}/metrics").status_code == 200

        rewrite(server, log={"level": "debug"}, governor={"dmn_tokens_per_day": 5000},
                auth={"session_days": 2}, server={"port": 1, "metrics_token": "t0ken"},
                store={"backups_kept": 3})
        done = hangup(server, "config_reloaded")

        assert done["applied"] == ["auth.session_days", "governor.dmn_tokens_per_day",
                                   "log.level", "server.metrics_token", "store.backups_kept"]
        assert done["needs_restart"] == ["server.port"]
        restart = events(server, "reload_needs_restart")
        assert [(e["key"], e["note"]) for e in restart] == [
            ("server.port", "server.port changed: takes effect after a restart")]
        assert dmn_budget(server, cookie) == 5000
        assert httpx.get(f"{server.url}/metrics").status_code == 401
        assert httpx.get(f"{server.url}/metrics",
                         headers={"Authorization": "Bearer t0ken"}).status_code == 200
        server.login()
        assert session_days(server) == [30.0, 2.0]
        llm.queue(completion("Hello."))
        server.connect(cookie, channel="after").turn("hi")  # pykka logs a Session's start at debug
        wait_for(lambda: any(e.get("level") == "debug" for e in server.log_events()))
        assert httpx.get(f"{server.url}/health").status_code == 200  # still on its old port
    finally:
        code = server.stop()
    assert code == 0  # SIGTERM after a SIGHUP still stops the server cleanly
    assert not server.errors()


def test_a_config_that_does_not_load_is_refused_and_the_old_one_stays(
    tmp_path: Path, llm: StubLlm
) -> None:
    """A bad value on reload is a log line naming the key; the server goes on as it was."""
    server = ServerProcess(tmp_path, llm, governor={"dmn_tokens_per_day": 1000}).start()
    try:
        cookie = server.login()
        rewrite(server, governor={"dmn_tokens_per_day": -5, "goal_tokens_per_day": 7})
        refused = hangup(server, "reload_refused")
        assert refused["key"] == "governor.dmn_tokens_per_day"
        assert "must not be negative" in refused["problem"]
        assert dmn_budget(server, cookie) == 1000
        assert httpx.get(f"{server.url}/health").status_code == 200

        server.config_path.write_text("[governor\n")  # not TOML at all
        refused = hangup(server, "reload_refused")
        assert refused["key"] == str(server.config_path)
        assert not events(server, "config_reloaded")
    finally:
        code = server.stop()
    assert code == 0
