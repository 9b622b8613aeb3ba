"""The dashboard in words: a paired program's name where the server keeps its id (world state,
recent turns), "What went in" only on turns that asked the model, live counters that move on
their own, and sections that pack into columns without big gaps."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser.conftest import Servers, api, find, into_view, login, wait_text
from tests.integration.harness import ServerProcess, StubLlm, completion, wait_for
from tests.integration.stub_interface import StubInterface, bearer_client, pair
from tests.integration.test_streams import Feed, closed_signal

Shot = Callable[[WebDriver, str], Path]
POLL_WAIT_S = 45  # the dashboard's live sections reload every 15 s


def test_world_state_and_turns_name_the_program_and_only_model_turns_offer_prompts(
    browser: WebDriver, server: ServerProcess, llm: StubLlm, shot: Shot
) -> None:
    """A signal and a message from a paired program read "from: Weather station", not its id;
    a social "thanks" (answered without the model) has no "What went in", a modelled turn has."""
    iface = StubInterface()
    try:
        interface_id, token = pair(server.url, server.login(), iface, name="Weather station",
                                   signals=["weather"])
        with bearer_client(server.url, token) as http:
            r = http.post("/api/signals", json={"signal_type": "weather",
                                                "content": "Rain in Lyon tonight",
                                                "activation_energy": 0.9})
            assert r.status_code == 202, r.text
            llm.queue(completion("Noted: the storm comes at nine."))
            r = http.post("/api/messages", json={"text": "A storm is coming at nine",
                                                 "source": "radar"})
            assert r.status_code == 202, r.text
        server.connect().turn("thanks")
        with api(server) as http:
            wait_for(lambda: len(http.get("/api/turns").json()["items"]) >= 2)
            turns = {t["user_text"]: t for t in http.get("/api/turns").json()["items"]}
        assert turns["thanks"]["llm_calls"] == 0

        login(browser, server, "/brain")
        signal = into_view(browser, wait_text(browser, "#signals li.signal", "Rain in Lyon"))
        meta = signal.find_element(By.CSS_SELECTOR, ".meta").text
        assert "from: Weather station" in meta, meta
        assert interface_id not in (signal.get_attribute("textContent") or "")

        # the program's message, as the turn read it
        storm = into_view(browser, wait_text(browser, "#turns li.turn", "Weather station"))
        text = storm.get_attribute("textContent") or ""
        assert "from: Weather station" in text, text
        assert f"interface.{interface_id}" not in text
        assert storm.find_elements(By.CSS_SELECTOR, "button.prompts")
        thanks = wait_text(browser, "#turns li.turn", "thanks")
        assert thanks.find_elements(By.CSS_SELECTOR, "button.prompts") == []
        shot(browser, "names")
    finally:
        iface.stop()


def accepted(driver: WebDriver) -> str:
    """The shown accepted count (read in one go: the list is rebuilt when it changes)."""
    return str(driver.execute_script(
        "const f = [...document.querySelectorAll('#subscriptions li.subscription .meta .field')]"
        ".find((f) => f.textContent.startsWith('accepted:'));"
        "return f ? f.querySelector('.field-value').textContent : '';"))


def test_a_subscriptions_accepted_count_moves_without_refresh(
    browser: WebDriver, serve: Servers, shot: Shot
) -> None:
    """The subscription's counters are live: a signal from its stream shows as accepted 1
    without anyone pressing Refresh."""
    feed = Feed()
    try:
        server = serve(subscriptions={"reconnect_initial_s": 0.05, "reconnect_max_s": 0.2})
        with api(server) as http:
            r = http.post("/api/subscriptions", json={"name": "luigis", "url": feed.url,
                                                      "signals": ["restaurant"]})
            assert r.status_code == 201, r.text
            wait_for(lambda: http.get("/api/subscriptions").json()["items"][0]["connected"])
        login(browser, server, "/brain")
        find(browser, "#subscriptions li.subscription")
        assert accepted(browser) == "0"
        feed.send(closed_signal("Luigi's is closed tonight"))
        WebDriverWait(browser, POLL_WAIT_S, poll_frequency=0.2).until(
            lambda d: accepted(d) == "1", "the accepted count to move on its own")
        into_view(browser, find(browser, "#subscriptions"))
        shot(browser, "accepted")
    finally:
        feed.stop()


def section_boxes(driver: WebDriver) -> list[dict[str, Any]]:
    boxes: list[dict[str, Any]] = driver.execute_script(
        "return [...document.querySelectorAll('#brain > section')]"
        ".filter((s) => s.offsetParent !== null).map((s) => {"
        " const r = s.getBoundingClientRect();"
        " return {id: s.id, wide: s.classList.contains('wide'), left: r.left, right: r.right,"
        " top: r.top + scrollY, bottom: r.bottom + scrollY}; })")
    return boxes


def test_sections_pack_into_columns_on_a_desktop(browser: WebDriver, server: ServerProcess) -> None:
    """At 1280 px the sections stand in more than one column, each under the one before it in
    its column with no more than a small gap; the page reads in the order of the document."""
    login(browser, server, "/brain")
    find(browser, "#settings-models-list *")
    boxes = section_boxes(browser)
    narrow = [b for b in boxes if not b["wide"]]
    assert len({round(b["left"]) for b in narrow}) >= 2, narrow
    for box in narrow:
        below = [b for b in boxes if b is not box and b["top"] >= box["bottom"] - 1
                 and b["left"] < box["right"] and b["right"] > box["left"]]
        if not below:
            continue
        nearest = min(below, key=lambda b: b["top"])
        if nearest["wide"]:
            continue  # a wide section starts a new run of columns under the tallest
        assert nearest["top"] - box["bottom"] <= 32, (box, nearest)
