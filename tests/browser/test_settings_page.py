"""The settings at /brain: a model changed while a turn runs answers from the next message on
(the running turn finishes with the old one); each value shows its source; a key set by the
environment is locked, with its variable, and PATCH refuses it; a change that needs a restart
says so; a bad value is refused beside its field, naming the key."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from tests.browser.conftest import (
    Console,
    Holds,
    Servers,
    api,
    find,
    into_view,
    login,
    visible,
    wait_text,
)
from tests.integration.harness import Reply, ServerProcess, StubLlm, completion, wait_for

Shot = Callable[[WebDriver, str], Path]
ECHO = json.dumps({"text": "marmalade"})


def answer_of(frames: list[dict[str, object]]) -> str:
    message = next(f for f in frames if f["type"] == "message")
    return str(message["blocks"][0]["text"])  # type: ignore[index]


def test_a_model_changed_while_a_turn_runs_answers_the_next_message(
    browser: WebDriver, server: ServerProcess, llm: StubLlm, hold: Holds, shot: Shot
) -> None:
    """Half-way through an answer, the model is changed at /brain (tested: its models listed;
    saved: applied at once). The running turn is finished by the old model; the next message
    goes to the new one, and every job's table shows what it now inherits."""
    new = StubLlm()
    try:
        go_on = hold()
        running = Reply(completion("The old model finishes this answer."), pause=go_on)
        llm.queue(running)
        client = server.connect()
        client.send({"type": "chat", "text": "First question"})
        wait_for(running.paused.is_set)

        login(browser, server, "/brain")
        wait_text(browser, "#settings-llm .table-summary", f"openai llama3.1 at {llm.base_url}")
        assert "From the config file." in find(browser, "#llm-base-url-meta").text
        Select(visible(browser, "#llm-preset")).select_by_visible_text(
            "Another OpenAI-compatible server")
        address = visible(browser, "#llm-base-url")
        address.clear()
        address.send_keys(new.base_url)
        new.queue(completion(tool_calls=[("echo", ECHO)]), completion("marmalade"))
        visible(browser, "#llm-test").click()
        wait_text(browser, "#llm-checks", "Every check passed")
        Select(visible(browser, "#llm-model-list")).select_by_visible_text("stub-model")
        visible(browser, "#llm-save").click()
        wait_text(browser, "#llm-result", "In effect now: llm.base_url, llm.model")
        assert "From saved here." in find(browser, "#llm-base-url-meta").text
        wait_text(browser, "#settings-llm-primary .table-summary",
                  f"openai stub-model at {new.base_url}")
        into_view(browser, find(browser, "#settings-llm"))
        shot(browser, "model-changed")

        go_on.set()
        assert answer_of(client.recv_until(lambda f: f["type"] == "done")) == \
            "The old model finishes this answer."
        new.queue(completion("The new model answers."))
        assert answer_of(client.turn("Second question")) == "The new model answers."
        assert new.requests[-1]["model"] == "stub-model"
        assert not [r for r in llm.requests if "Second question" in json.dumps(r)]
    finally:
        new.close()


def test_locked_restart_and_refused_settings_say_so(
    browser: WebDriver, serve: Servers, console: Console, shot: Shot
) -> None:
    """CHALIE_DMN__DAILY_CAP and CHALIE_LLM__API_KEY lock their fields (with the variable
    named) and PATCH answers 409; quiet hours apply at once, the time zone waits for a
    restart (and says so); a bad value is refused beside its field and nothing is saved."""
    console.allow(r"/api/settings - Failed to load resource: .* status of 400")
    server = serve(env={"CHALIE_DMN__DAILY_CAP": "4", "CHALIE_LLM__API_KEY": "sk-env-locked-42"})
    login(browser, server, "/brain")
    cap = visible(browser, "#setting-dmn-daily-cap-input")
    assert cap.get_attribute("disabled") is not None
    assert cap.get_attribute("value") == "4"
    assert "set by the environment (CHALIE_DMN__DAILY_CAP)" in \
        find(browser, "#setting-dmn-daily-cap-input-meta").text
    assert find(browser, "#llm-api-key").get_attribute("disabled") is not None
    assert "set by the environment (CHALIE_LLM__API_KEY)" in find(browser, "#llm-api-key-meta").text
    assert find(browser, "#llm-api-key-state").get_attribute("textContent") == "set"
    with api(server) as client:
        refused = client.patch("/api/settings", json={"dmn.daily_cap": 2})
    assert refused.status_code == 409
    assert "CHALIE_DMN__DAILY_CAP" in refused.json()["error"]
    into_view(browser, cap)
    shot(browser, "locked")

    quiet = visible(browser, "#setting-dmn-quiet-hours-input")
    quiet.send_keys("25:00-07:00")
    visible(browser, "#settings-save").click()
    error = wait_text(browser, "#setting-dmn-quiet-hours-input-error", "dmn.quiet_hours: ")
    assert quiet.get_attribute("aria-invalid") == "true"
    assert "dmn.quiet_hours" in find(browser, "#settings-error").text
    into_view(browser, error)
    shot(browser, "refused")

    quiet.clear()
    quiet.send_keys("22:30-07:00")
    zone = visible(browser, "#setting-dmn-timezone-input")
    zone.clear()
    zone.send_keys("Europe/Lisbon")
    visible(browser, "#settings-save").click()
    result = wait_text(browser, "#settings-result", "In effect now: dmn.quiet_hours.")
    assert "Saved, in effect after a restart: dmn.timezone." in result.text
    assert quiet.get_attribute("aria-invalid") is None
    zone_meta = find(browser, "#setting-dmn-timezone-input-meta").text
    assert "From saved here." in zone_meta
    assert "in effect after a restart" in zone_meta
    reset = visible(browser, "#setting-dmn-quiet-hours button.reset")
    into_view(browser, result)
    shot(browser, "saved")

    reset.click()
    wait_text(browser, "#settings-result", "In effect now: dmn.quiet_hours.")
    assert find(browser, "#setting-dmn-quiet-hours-input").get_attribute("value") == ""
    assert "From the config file." in find(browser, "#setting-dmn-quiet-hours-input-meta").text
    assert not [e for e in browser.find_elements(By.CSS_SELECTOR, ".field-error")
                if e.text.strip()]
    html = browser.page_source
    assert "sk-env-locked-42" not in html
    assert not [line for line in server.lines if "sk-env-locked-42" in line]


def test_a_fallback_is_set_in_its_own_table(
    browser: WebDriver, server: ServerProcess, llm: StubLlm, shot: Shot
) -> None:
    """The primary job's fallback, not set: its form says so; given an address and a model it
    is saved in [llm.primary.fallback] alone, and /health shows it beside the primary model."""
    login(browser, server, "/brain")
    table = visible(browser, "#settings-llm-primary-fallback summary")
    wait_text(browser, "#settings-llm-primary-fallback .table-summary", "not set")
    table.click()
    assert "Not set." in visible(browser, "#llm-primary-fallback-model-meta").text
    visible(browser, "#llm-primary-fallback-save").click()
    wait_text(browser, "#llm-primary-fallback-result", "Nothing changed.")
    address = visible(browser, "#llm-primary-fallback-base-url")
    address.send_keys(llm.base_url)
    visible(browser, "#llm-primary-fallback-model").send_keys("stub-model")
    visible(browser, "#llm-primary-fallback-save").click()
    result = wait_text(browser, "#llm-primary-fallback-result",
                       "In effect now: llm.primary.fallback.")  # the new table, whole
    wait_text(browser, "#settings-llm-primary-fallback .table-summary",
              f"openai stub-model at {llm.base_url}")
    into_view(browser, result)
    shot(browser, "fallback-saved")
    with api(server) as client:
        fallback = client.get("/health").json()["llm"]["primary"]["fallback"]
        saved = {s["key"]: s for s in client.get("/api/settings").json()["settings"]}
    assert (fallback["model"], fallback["address"]) == ("stub-model", llm.base_url)
    assert saved["llm.primary.fallback.model"]["source"] == "settings"
    assert saved["llm.model"]["source"] == "default"


def test_away_settings_keep_the_bots_token_secret_and_the_choice_a_yes_or_no(
    browser: WebDriver, serve: Servers, llm: StubLlm, shot: Shot
) -> None:
    """"Away from the page": the Telegram bot's token is typed into a password field, saved,
    then shown only as set (never sent back; an empty field keeps it); whether to send while a
    page is visible is a yes or no, saved as a boolean."""
    bot_api = f"http://127.0.0.1:{llm.port}"  # the token is tried there, never on the internet
    server = serve(telegram={"base_url": f"{bot_api}/bot", "base_file_url": f"{bot_api}/file/bot"})
    login(browser, server, "/brain")
    token = visible(browser, "#setting-telegram-token-input")
    assert token.get_attribute("type") == "password"
    assert token.get_attribute("placeholder") == "not set"
    token.send_keys("123456:secret-bot-token-xyz")
    Select(visible(browser, "#setting-notify-skip-when-visible-input")).select_by_visible_text(
        "No: send it anyway")
    visible(browser, "#settings-save").click()
    wait_text(browser, "#settings-result", "In effect now: notify.skip_when_visible, "
                                           "telegram.token.")
    token = find(browser, "#setting-telegram-token-input")
    assert token.get_attribute("value") == ""
    assert token.get_attribute("placeholder") == "set (type a new one to replace it)"
    with api(server) as client:
        listed = {s["key"]: s for s in client.get("/api/settings").json()["settings"]}
    assert listed["telegram.token"]["value"] is None
    assert listed["telegram.token"]["set"] is True
    assert listed["notify.skip_when_visible"]["value"] is False
    into_view(browser, token)
    shot(browser, "away-settings")
    visible(browser, "#settings-save").click()  # nothing typed: the token stays
    wait_text(browser, "#settings-result", "Nothing changed.")
    assert "secret-bot-token-xyz" not in browser.page_source
    assert not [line for line in server.lines if "secret-bot-token-xyz" in line]
