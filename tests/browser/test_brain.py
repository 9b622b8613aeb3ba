"""The brain dashboard: a pairing key, forgetting a fact, cancelling a goal."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

from tests.browser.conftest import (
    Holds,
    api,
    find,
    gone,
    hidden,
    into_view,
    login,
    until,
    visible,
    wait_text,
)
from tests.integration.harness import Reply, ServerProcess, StubLlm, completion
from tests.integration.stub_interface import StubInterface, pair_request

Shot = Callable[[WebDriver, str], Path]
PLAN = {"steps": [
    {"id": "s1", "description": "Find the three cheapest flights to Lisbon in May",
     "depends_on": []},
    {"id": "s2", "description": "Compare their departure times and baggage allowances",
     "depends_on": ["s1"]},
], "confidence": 0.9}


def no_section_errors(driver: WebDriver) -> None:
    for error in driver.find_elements(By.CSS_SELECTOR, ".section-error"):
        assert not (error.is_displayed() and error.text.strip()), error.text


def test_a_pairing_key_is_shown_with_its_expiry_and_pairs_a_program(
    browser: WebDriver, server: ServerProcess, shot: Shot
) -> None:
    """Generate shows a key and when it expires; a program pairs with that very key and is
    listed under interfaces, with the signal types its /capabilities declare and where they
    came from."""
    login(browser, server, "/brain")
    generate = visible(browser, "#pairing button#pairing-generate")
    shot(browser, "brain")
    generate.click()
    until(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#pairing-key").text.strip(),
          "a pairing key")
    key = find(browser, "#pairing-key").text.strip()
    assert find(browser, "#pairing-expiry").text.strip()
    no_section_errors(browser)
    shot(browser, "pairing-key")

    iface = StubInterface(name="stubface", signals=["weather_update", "rain"])
    plain = StubInterface(name="plainface")
    try:
        r = pair_request(server.url, key, iface, name="stubface")
        assert r.status_code == 201, r.text
        with api(server) as http:
            other_key = http.post("/api/interfaces/pairing-key").json()["pairing_key"]
        assert pair_request(server.url, other_key, plain, name="plainface").status_code == 201
        browser.refresh()
        for name, expected in [
                ("stubface", "signals: weather_update, rain (from its /capabilities)"),
                ("plainface", "signals: any type (none declared)")]:
            item = wait_text(browser, "#interfaces li.interface", name)
            field = item.find_element(By.XPATH, ".//span[@class='field'][contains(., 'signals:')]")
            assert field.text == expected
        shot(browser, "paired")
    finally:
        iface.stop()
        plain.stop()


def test_forgetting_a_fact_asks_first_then_removes_it(
    browser: WebDriver, server: ServerProcess, shot: Shot
) -> None:
    """A fact stored by an `action` frame is listed and found by search; Forget asks, No keeps
    it, Yes removes it from the page and from the store."""
    remember = {"skill": "memory", "params": {"action": "remember", "key": "tea",
                                              "value": "green"}}
    server.connect().turn_from({"type": "action", "payload": remember})
    with api(server) as http:
        [fact] = http.get("/api/memory/knowledge").json()["items"]
    item = f'#memory li.fact[data-id="{fact["id"]}"]'
    login(browser, server, "/brain")
    into_view(browser, wait_text(browser, item, "green"))
    no_section_errors(browser)
    shot(browser, "fact-listed")

    search = visible(browser, "form#memory-search-form input#memory-search")
    search.send_keys("tea", Keys.ENTER)
    wait_text(browser, "#memory-results", "green")
    shot(browser, "search")

    find(browser, f"{item} button.forget").click()
    dialog = visible(browser, "dialog#confirm")
    assert dialog.get_attribute("open") is not None
    assert "tea" in find(browser, "#confirm-text").text
    shot(browser, "confirm-asked")
    find(browser, "button#confirm-no").click()
    hidden(browser, "dialog#confirm")
    assert browser.find_elements(By.CSS_SELECTOR, item)

    find(browser, f"{item} button.forget").click()
    visible(browser, "dialog#confirm")
    find(browser, "button#confirm-yes").click()
    hidden(browser, "dialog#confirm")
    gone(browser, item)
    into_view(browser, find(browser, "#memory"))
    with api(server) as http:
        assert http.get("/api/memory/knowledge").json()["items"] == []
    no_section_errors(browser)
    shot(browser, "forgotten")


def test_cancelling_a_goal_asks_first_and_shows_it_cancelled(
    browser: WebDriver, server: ServerProcess, llm: StubLlm, hold: Holds, shot: Shot
) -> None:
    """A goal whose plan is still being written is listed; Cancel asks, Yes cancels it, the
    page and GET /api/goals/<id> say cancelled."""
    held = hold()
    llm.queue_structured(Reply(completion(json.dumps(PLAN)), hold=held))
    with api(server) as http:
        goal = http.post("/api/goals", json={"goal": "Find flights to Lisbon"}).json()
    until(browser, lambda _: len(llm.requests) == 1, "the goal's planning request")
    item = f'#goals li.goal[data-id="{goal["id"]}"]'
    login(browser, server, "/brain")
    into_view(browser, wait_text(browser, item, "Find flights to Lisbon"))
    state = find(browser, f"{item} .state").text.strip().lower()
    assert state in ("pending", "planning"), state
    shot(browser, "goal-listed")

    find(browser, f"{item} button.cancel").click()
    visible(browser, "dialog#confirm")
    assert "Lisbon" in find(browser, "#confirm-text").text
    shot(browser, "confirm-asked")
    find(browser, "button#confirm-yes").click()
    hidden(browser, "dialog#confirm")
    until(browser, lambda d: d.find_element(By.CSS_SELECTOR, f"{item} .state").text.strip()
          .lower() == "cancelled", "the goal's state to read cancelled")
    with api(server) as http:
        assert http.get(f"/api/goals/{goal['id']}").json()["state"] == "cancelled"
    hidden(browser, f"{item} button.cancel")
    no_section_errors(browser)
    shot(browser, "cancelled")
    held.set()


def test_the_dashboard_shows_turns_their_prompts_signals_spending_and_schedules(
    browser: WebDriver, server: ServerProcess, llm: StubLlm, shot: Shot
) -> None:
    """A turn is listed and "what went in" shows its prompt; a signal is in world state; the
    chart and the budgets are drawn; a repeating prompt is scheduled from the page and then
    cancelled from it."""
    llm.queue(completion("Lisbon in May, noted.", prompt_tokens=400, completion_tokens=20))
    server.connect().turn("Plan something about Lisbon in May")
    with api(server) as http:
        r = http.post("/api/signals", json={"signal_type": "weather",
                                            "content": "Rain in Lyon tonight",
                                            "activation_energy": 0.9})
        assert r.status_code == 202, r.text
    login(browser, server, "/brain")
    turn = into_view(browser, wait_text(browser, "#turns li.turn", "Lisbon in May"))
    turn.find_element(By.CSS_SELECTOR, "button.prompts").click()
    view = visible(browser, "#prompt-view")
    until(browser, lambda _: "Plan something about Lisbon in May" in view.text,
          "the turn's prompt")
    shot(browser, "what-went-in")

    into_view(browser, wait_text(browser, "#signals li.signal", "Rain in Lyon tonight"))
    find(browser, "svg#spending-chart")
    budgets = into_view(browser, find(browser, "#budgets"))
    for path in ("dmn", "scheduled", "goal", "encoder"):
        assert path in budgets.text, budgets.text
    no_section_errors(browser)
    shot(browser, "signals-and-spending")

    form = into_view(browser, find(browser, "#schedules"))
    form.find_element(By.CSS_SELECTOR, "details summary").click()
    visible(browser, "#schedule-prompt").send_keys("Remind me to stretch")
    find(browser, "#schedule-repeating").click()
    visible(browser, "#schedule-cron").send_keys("0 9 * * 1-5")
    zone = visible(browser, "#schedule-timezone")
    zone.clear()
    zone.send_keys("Europe/Lisbon")
    find(browser, "#schedule-form button[type=submit]").click()
    item = into_view(browser, wait_text(browser, "#schedules li.schedule", "Remind me to stretch"))
    schedule_id = item.get_attribute("data-id")
    with api(server) as http:
        schedule = http.get(f"/api/schedules/{schedule_id}").json()
    assert (schedule["cron"], schedule["timezone"], schedule["state"]) == (
        "0 9 * * 1-5", "Europe/Lisbon", "active")
    shot(browser, "scheduled")
    item.find_element(By.CSS_SELECTOR, "button.cancel").click()
    visible(browser, "dialog#confirm")
    find(browser, "button#confirm-yes").click()
    gone(browser, f'#schedules li.schedule[data-id="{schedule_id}"]')
    with api(server) as http:
        assert http.get(f"/api/schedules/{schedule_id}").json()["state"] == "cancelled"
    no_section_errors(browser)
    shot(browser, "schedule-cancelled")


def test_the_conversation_section_shows_topic_phase_and_situation(
    browser: WebDriver, server: ServerProcess, llm: StubLlm, shot: Shot
) -> None:
    """What Chalie tracks of the conversation (GET /api/state) is on the dashboard: the topic,
    the phase, the last turn's confidence and an open loop the person mentioned."""
    llm.queue(completion("Good luck with the dentist."))
    frames = server.connect().turn("I need to call the dentist tomorrow about my tooth")
    topic = next(f for f in frames if f["type"] == "message")["topic"]
    assert topic
    login(browser, server, "/brain")
    section = into_view(browser, wait_text(browser, "#conversation-situation",
                                           "call the dentist tomorrow about my tooth"))
    summary = find(browser, "#conversation-summary").text
    assert topic in summary
    assert "phase" in summary
    assert "confidence" in summary
    wait_text(browser, "#topics-list li.topic", topic)
    no_section_errors(browser)
    assert section.is_displayed()
    shot(browser, "conversation")
