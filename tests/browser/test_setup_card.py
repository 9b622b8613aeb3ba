"""From install to a working assistant without editing a file: a server whose model cannot be
reached shows the setup card on the chat page; a model server started only then is set up from
the card (its models listed, the checks run, saved) and answers the next message, with no
restart; the settings are still there after one; the API key is in no answer, page or log."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from tests.browser.conftest import (
    Servers,
    api,
    connected,
    find,
    finished,
    hidden,
    into_view,
    login,
    say,
    visible,
    wait_text,
)
from tests.integration.harness import WAIT_S, ServerProcess, StubLlm, completion, wait_for

Shot = Callable[[WebDriver, str], Path]
CLOSED = "http://127.0.0.1:9/v1"  # the discard port: nothing listens there
API_KEY = "sk-setup-card-0123456789abcdef"
ECHO = json.dumps({"text": "marmalade"})


def queue_doctor(stub: StubLlm) -> None:
    """What the checks' tool round trip needs: a call of echo, then a text answer."""
    stub.queue(completion(tool_calls=[("echo", ECHO)]), completion("marmalade"))


def point_at(browser: WebDriver, stub: StubLlm) -> None:
    """In the form of [llm]: another OpenAI-compatible server, at the stub's address."""
    Select(visible(browser, "#llm-preset")).select_by_visible_text(
        "Another OpenAI-compatible server")
    address = visible(browser, "#llm-base-url")
    address.clear()
    address.send_keys(stub.base_url)


def key_is_nowhere(browser: WebDriver, server: ServerProcess) -> None:
    """The API key shows only as set: in no answer, page or log line."""
    with api(server) as client:
        listed = client.get("/api/settings").text
    key = next(s for s in json.loads(listed)["settings"] if s["key"] == "llm.api_key")
    assert key["set"] is True
    assert key["value"] is None
    assert find(browser, "#llm-api-key-state").get_attribute("textContent") == "set"
    assert find(browser, "#llm-api-key").get_attribute("value") == ""
    with api(server) as client:
        health = client.get("/health").text  # the details the person sees
    pages = [browser.page_source, listed, health]
    assert not [p for p in pages if API_KEY in p]
    assert not [line for line in server.lines if API_KEY in line]


def model_state(server: ServerProcess) -> str:
    """The primary model's state as /health shows it to the person (logged in)."""
    with api(server) as client:
        return str(client.get("/health").json()["llm"]["primary"]["state"])


def test_a_first_run_is_set_up_from_the_card_and_the_next_message_is_answered(
    browser: WebDriver, serve: Servers, shot: Shot
) -> None:
    """Model unreachable: the card stands where the message box was, and the banner says why.
    A stub model server started now is chosen in the card, tested (each check ok, its models
    listed), saved with an API key: the card goes, the next message is answered by that model,
    the key shows only as set, and it appears in no answer, page or log line."""
    server = serve(llm={"base_url": CLOSED})
    login(browser, server)
    visible(browser, "#setup")
    hidden(browser, "#composer")
    assert "no model that answers" in find(browser, "#setup-why").text
    assert "[llm]" in find(browser, "#setup-table").text
    banner = visible(browser, "#health-banner li[data-cause='model-primary-light']")
    assert "cannot be reached" in banner.text
    assert banner.find_element(By.CSS_SELECTOR, "a").get_attribute("href").endswith(
        "/brain#settings-models")
    assert visible(browser, "#llm-api-key-state").text == "not set"
    shot(browser, "setup-card")

    stub = StubLlm()  # the model server starts only now
    try:
        point_at(browser, stub)
        visible(browser, "#llm-api-key").send_keys(API_KEY)
        queue_doctor(stub)
        visible(browser, "#llm-test").click()
        wait_text(browser, "#llm-checks", "Every check passed")
        checks = find(browser, "#llm-checks").text
        assert "primary model: openai llama3.1 at " + stub.base_url in checks
        assert "reachable, tool call, structured output" in checks
        models = Select(visible(browser, "#llm-model-list"))
        assert [o.text for o in models.options][1:] == ["llama3.1", "stub-model"]
        models.select_by_visible_text("stub-model")
        assert find(browser, "#llm-model").get_attribute("value") == "stub-model"
        into_view(browser, find(browser, "#llm-checks"))
        shot(browser, "tested")

        visible(browser, "#llm-save").click()
        wait_text(browser, "#llm-result", "In effect now: llm.api_key, llm.base_url, llm.model")
        hidden(browser, "#setup")
        visible(browser, "#composer")
        hidden(browser, "#health-banner")
        assert model_state(server) == "ok"
        key_is_nowhere(browser, server)
        shot(browser, "saved")

        stub.queue(completion("Hello from the model you just set up."))
        connected(browser)
        say(browser, "Hello?")
        answer = finished(browser)[-1].find_element(By.CSS_SELECTOR, ".answer")
        assert answer.text == "Hello from the model you just set up."
        assert stub.requests[-1]["model"] == "stub-model"
        shot(browser, "answered")
    finally:
        stub.close()


def test_settings_saved_from_the_card_are_there_after_a_restart(
    browser: WebDriver, serve: Servers, shot: Shot
) -> None:
    """Saved from the card, then the server restarts with the same (unchanged) config file:
    the model saved is the one in use, no card, and /brain shows the values as saved here."""
    server = serve(llm={"base_url": CLOSED})
    stub = StubLlm()
    try:
        login(browser, server)
        visible(browser, "#setup")
        point_at(browser, stub)
        model = visible(browser, "#llm-model")
        model.clear()
        model.send_keys("stub-model")
        visible(browser, "#llm-save").click()
        wait_text(browser, "#llm-result", "In effect now: llm.base_url, llm.model")
        hidden(browser, "#setup")
        browser.get("about:blank")  # not to see the server go

        server.stop()
        again = serve(llm={"base_url": CLOSED})
        wait_for(lambda: model_state(again) == "ok")
        browser.execute_cdp_cmd("Network.clearBrowserCookies", {})
        login(browser, again, "/brain")
        visible(browser, "#settings-llm summary")
        wait_text(browser, "#settings-llm .table-summary", f"openai stub-model at {stub.base_url}")
        meta = find(browser, "#llm-base-url-meta").text
        assert "From saved here." in meta
        assert find(browser, "#llm-base-url").get_attribute("value") == stub.base_url
        hidden(browser, "#health-banner")
        into_view(browser, find(browser, "#settings"))
        shot(browser, "after-restart")
        browser.get(again.url + "/")
        connected(browser)
        visible(browser, "#composer")
        hidden(browser, "#setup")
    finally:
        stub.close()


def test_a_model_still_unknown_leaves_the_message_box_until_the_check_answers(
    browser: WebDriver, serve: Servers, shot: Shot
) -> None:
    """While the start-up check waits on a model server that has not finished answering,
    /health says "unknown": the message box stays and no card shows; once the check fails
    ("unreachable"), the card takes the message box's place, until the person asks for the
    message box anyway."""
    with Trickle() as slow:
        server = serve(llm={"base_url": f"http://127.0.0.1:{slow.port}/v1"})
        login(browser, server)
        connected(browser)
        visible(browser, "#input")
        assert model_state(server) == "unknown"
        hidden(browser, "#setup")
        shot(browser, "unknown")
    visible(browser, "#setup")
    hidden(browser, "#composer")
    assert model_state(server) == "unreachable"
    shot(browser, "unreachable")
    visible(browser, "#setup-dismiss").click()  # "Use the message box anyway"
    hidden(browser, "#setup")
    assert browser.switch_to.active_element.get_attribute("id") == "input"


class Trickle:
    """A model server that starts its answer and never finishes it: a byte of chunked body
    every tenth of a second (each read well inside the check's timeout) until the test ends it, when
    it hangs up mid-answer."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        conns = []
        self.listener.settimeout(0.1)
        while not self.done.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                conns = [c for c in conns if self._drip(c)]
                continue
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n")
            conns.append(conn)
        for conn in conns:
            conn.close()

    def _drip(self, conn: socket.socket) -> bool:
        try:
            conn.sendall(b"1\r\n \r\n")
        except OSError:
            return False
        return True

    def __enter__(self) -> Trickle:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join(WAIT_S)
        self.listener.close()
