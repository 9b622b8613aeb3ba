"""/api/settings against a real server: the layers and where each value comes from, changes
saved to settings.toml and applied while running when they can be, bad ones refused whole,
keys the environment sets locked, secrets never sent back."""

from __future__ import annotations

import stat
import threading
import tomllib
from pathlib import Path
from typing import Any

import httpx

from tests.integration.harness import Reply, ServerProcess, StubLlm, completion


def api(server: ServerProcess) -> httpx.Client:
    return httpx.Client(base_url=server.url, cookies={"chalie_session": server.login()},
                        timeout=30)


def by_key(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["key"]: s for s in body["settings"]}


def test_settings_are_listed_saved_applied_and_kept_across_a_restart(
    tmp_path: Path, llm: StubLlm
) -> None:
    server = ServerProcess(tmp_path, llm).start()
    try:
        with api(server) as client:
            listed = by_key(client.get("/api/settings").json())
            assert listed["llm.base_url"]["source"] == "file"  # the harness's config file
            assert listed["dmn.daily_cap"]["source"] == "default"
            assert listed["dmn.daily_cap"]["live"] is True
            assert listed["llm.model"]["live"] is True
            assert listed["llm.context_window"]["live"] is False
            saved = client.patch("/api/settings", json={
                "dmn.daily_cap": 5, "tools.confirm": ["forget"], "llm.context_window": 16384})
            assert saved.status_code == 200, saved.text
            body = saved.json()
            assert body["applied"] == ["dmn.daily_cap", "tools.confirm"]
            assert body["restart_needed"] == ["llm.context_window"]
            listed = by_key(body)
            assert (listed["dmn.daily_cap"]["value"], listed["dmn.daily_cap"]["source"]) == (
                5, "settings")
            assert listed["dmn.daily_cap"]["pending"] is False  # applied
            assert (listed["llm.context_window"]["value"],
                    listed["llm.context_window"]["pending"]) == (16384, True)  # next start
        file = tmp_path / "data" / "settings.toml"
        assert stat.S_IMODE(file.stat().st_mode) == 0o600
        assert tomllib.loads(file.read_text()) == {
            "dmn": {"daily_cap": 5}, "tools": {"confirm": ["forget"]},
            "llm": {"context_window": 16384}}
    finally:
        assert server.stop() == 0
    again = ServerProcess(tmp_path, llm).start()
    try:
        with api(again) as client:
            listed = by_key(client.get("/api/settings").json())
            assert (listed["llm.context_window"]["value"],
                    listed["llm.context_window"]["source"],
                    listed["llm.context_window"]["pending"]) == (16384, "settings", False)
            # null removes a saved value: back to the lower layers.
            assert client.patch("/api/settings", json={"dmn.daily_cap": None}).status_code == 200
            listed = by_key(client.get("/api/settings").json())
            assert listed["dmn.daily_cap"]["source"] == "default"
    finally:
        again.stop()


def test_bad_changes_are_refused_whole_naming_each_key(tmp_path: Path, llm: StubLlm) -> None:
    server = ServerProcess(tmp_path, llm).start()
    try:
        with api(server) as client:
            assert client.patch("/api/settings", json={"dmn.daily_cap": 2}).status_code == 200
            file = tmp_path / "data" / "settings.toml"
            before = file.read_text()
            refused = client.patch("/api/settings", json={
                "dmn.daily_cap": 7, "governor.dmn_tokens_per_day": -5,
                "store.path": "/elsewhere", "no.such_key": 1, "dmn.quiet_hours": "25-99"})
            assert refused.status_code == 400
            error = refused.json()["error"]
            for key in ("governor.dmn_tokens_per_day", "store.path", "no.such_key",
                        "dmn.quiet_hours"):
                assert key in error
            assert "dmn.daily_cap" not in error  # a good one among bad ones: not named
            assert file.read_text() == before  # nothing saved, nothing applied
            assert by_key(client.get("/api/settings").json())["dmn.daily_cap"]["value"] == 2
    finally:
        server.stop()


def test_keeping_what_was_said_is_the_default_and_deleting_it_a_choice_saved_live(
        tmp_path: Path, llm: StubLlm) -> None:
    """store.transcript_days shows 0 (keep every line) by default; a number of days is saved and
    applied while running, 0 again too, and a negative one is refused naming the key."""
    server = ServerProcess(tmp_path, llm).start()
    try:
        with api(server) as client:
            listed = by_key(client.get("/api/settings").json())["store.transcript_days"]
            assert (listed["value"], listed["source"], listed["live"]) == (0, "default", True)
            for days in (365, 0):
                saved = client.patch("/api/settings", json={"store.transcript_days": days})
                assert saved.status_code == 200, saved.text
                assert saved.json()["applied"] == ["store.transcript_days"]
                assert by_key(saved.json())["store.transcript_days"]["value"] == days
            refused = client.patch("/api/settings", json={"store.transcript_days": -1})
            assert refused.status_code == 400
            assert "store.transcript_days" in refused.json()["error"]
    finally:
        server.stop()


def test_a_key_the_environment_sets_is_locked_and_a_secret_is_never_sent_back(
    tmp_path: Path, llm: StubLlm
) -> None:
    server = ServerProcess(tmp_path, llm, env={"CHALIE_DMN__DAILY_CAP": "4"}).start()
    try:
        with api(server) as client:
            listed = by_key(client.get("/api/settings").json())
            assert (listed["dmn.daily_cap"]["source"], listed["dmn.daily_cap"]["locked"]) == (
                "environment", True)
            locked = client.patch("/api/settings", json={"dmn.daily_cap": 9})
            assert locked.status_code == 409
            assert "CHALIE_DMN__DAILY_CAP" in locked.json()["error"]
            secret = "sk-test-4f1c9e-do-not-show"
            saved = client.patch("/api/settings", json={"llm.light.api_key": secret})
            assert saved.status_code == 200
            assert secret not in saved.text
            listed = by_key(client.get("/api/settings").json())
            assert listed["llm.light.api_key"] == {
                "key": "llm.light.api_key", "value": None, "source": "settings", "live": True,
                "locked": False, "secret": True, "set": True, "pending": False}
            assert secret not in client.get("/api/settings").text
    finally:
        server.stop()
    assert not any(secret in line for line in server.lines)


def test_a_model_saved_while_running_answers_the_next_message_and_not_the_running_one(
    tmp_path: Path, llm: StubLlm
) -> None:
    """The model's address changed while a turn streams from the old one: that turn finishes
    with the old model, the next message is answered by the new one; no restart."""
    other = StubLlm()
    release = threading.Event()
    server = ServerProcess(tmp_path, llm).start()
    try:
        llm.queue(Reply(completion("from the first model"), pause=release, pause_after=1))
        other.queue(completion("from the second model"))
        chat = server.connect(deltas=True)
        chat.send({"type": "chat", "text": "a long question"})
        chat.recv_until(lambda f: f["type"] == "message_delta")  # it is streaming now
        with api(server) as client:
            saved = client.patch("/api/settings", json={"llm.base_url": other.base_url})
            assert saved.status_code == 200, saved.text
            assert saved.json()["applied"] == ["llm.base_url"]
        release.set()
        running = chat.recv_until(lambda f: f["type"] == "done")
        assert text_of(running) == "from the first model"
        assert text_of(chat.turn("and now?")) == "from the second model"
        assert len(other.requests) == 1
        with api(server) as client:
            health = client.get("/health").json()
        assert health["llm"]["primary"]["address"] == other.base_url
    finally:
        release.set()
        server.stop()
        other.close()


def text_of(frames: list[dict[str, Any]]) -> str:
    message = next(f for f in frames if f["type"] == "message")
    return "".join(b["text"] for b in message["blocks"] if b["type"] == "text")


def test_a_model_setting_is_tested_live_before_it_is_saved(tmp_path: Path, llm: StubLlm) -> None:
    """POST /api/settings/test runs the doctor's checks against the settings as they would be,
    lists the models the server offers, and saves nothing; an unreachable address fails,
    naming the setting to change."""
    other = StubLlm()
    server = ServerProcess(tmp_path, llm).start()
    try:
        with api(server) as client:
            other.queue(completion(tool_calls=[("memory", '{"action": "recall", "query": "x"}')]))
            tested = client.post("/api/settings/test", json={"llm.base_url": other.base_url,
                                                             "llm.model": "stub-model"})
            assert tested.status_code == 200, tested.text
            body = tested.json()
            assert body["models"] == sorted(other.models)
            assert body["checks"][0]["what"].startswith("primary model: openai stub-model at ")
            assert other.requests  # it really asked the other server
            down = client.post("/api/settings/test", json={"llm.base_url": "http://127.0.0.1:9/v1"})
            failed = down.json()
            assert failed["ok"] is False
            assert failed["models"] is None
            assert any(c["level"] == "FAIL" and "llm.base_url" in c["problem"]
                       for c in failed["checks"])
            assert client.post("/api/settings/test", json={"dmn.daily_cap": 3}).status_code == 400
        assert not (tmp_path / "data" / "settings.toml").exists()  # nothing saved
    finally:
        server.stop()
        other.close()
