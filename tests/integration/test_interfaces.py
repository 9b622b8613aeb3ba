"""Pairing, managing and using interfaces (spec/interfaces.md sections 6-8), from outside: a real
server process, a stub LLM and a stub interface on loopback, and a person's /ws client."""

from __future__ import annotations

import json
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.harness import WAIT_S, ServerProcess, StubLlm, completion, wait_for
from tests.integration.stub_interface import (
    LOOKUP,
    Answer,
    StubInterface,
    assert_error,
    bearer_client,
    capability,
    cookie_client,
    interfaces_listed,
    last_tool_result,
    online,
    pair,
    pair_request,
    pairing_key,
    serving,
    tool_names,
    tool_spec,
    user_prompt,
)

HEALTH_FAST = {"health_interval_s": 0.2, "health_failures": 3, "health_timeout_s": 1.0}
INNATE = ("memory", "recall", "forget", "schedule", "goal")



def expiry(value: Any) -> float:
    """`expires_at` as a Unix time: a number of seconds (or milliseconds) or an ISO 8601 text."""
    if isinstance(value, (int, float)):
        return value / 1000 if value > 1e11 else float(value)
    assert isinstance(value, str), value
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def lookup_call(query: str) -> dict[str, Any]:
    return completion(tool_calls=[("lookup", json.dumps({"query": query}))])


# --- pairing --------------------------------------------------------------------------------------

def test_a_fresh_key_pairs_the_interface_after_checking_it(
    server: ServerProcess, cookie: str, iface: StubInterface
) -> None:
    """201 with an id and a token; Chalie called /health and /capabilities; the list shows it."""
    key = pairing_key(server.url, cookie)
    assert isinstance(key["pairing_key"], str)
    assert key["pairing_key"]
    r = pair_request(server.url, key["pairing_key"], iface, name="weather")
    assert r.status_code == 201, r.text
    interface_id, token = r.json()["interface_id"], r.json()["signal_token"]
    assert uuid.UUID(interface_id)
    assert isinstance(token, str)
    assert len(token) >= 16
    assert iface.count("/health") >= 1
    assert iface.count("/capabilities") >= 1
    [item] = interfaces_listed(server.url, cookie)
    assert item["id"] == interface_id
    assert (item["name"], item["host"], item["port"]) == ("weather", "127.0.0.1", iface.port)
    assert item["online"] is True
    with cookie_client(server.url, cookie) as http:
        detail = http.get(f"/api/interfaces/{interface_id}")
    assert detail.status_code == 200, detail.text
    assert detail.json()["id"] == interface_id
    names = [t if isinstance(t, str) else t["name"] for t in detail.json()["tools"]]
    assert names == ["lookup"]


def test_a_pairing_key_is_good_for_ten_minutes_by_default(
    server: ServerProcess, cookie: str
) -> None:
    """interfaces.pairing_key_ttl_s defaults to 600: expires_at is ten minutes from now."""
    before = time.time()
    expires = expiry(pairing_key(server.url, cookie)["expires_at"])
    assert before + 590 <= expires <= time.time() + 601


def test_a_used_key_gets_401_and_changes_nothing(
    server: ServerProcess, cookie: str, iface: StubInterface
) -> None:
    """A key pairs once: the second pairing with it is 401, calls nothing, registers nothing."""
    key = pairing_key(server.url, cookie)["pairing_key"]
    assert pair_request(server.url, key, iface, name="first").status_code == 201
    other = StubInterface()
    try:
        again = pair_request(server.url, key, other, name="second")
        assert_error(again, 401)
        assert other.requests == []
    finally:
        other.stop()
    assert [i["name"] for i in interfaces_listed(server.url, cookie)] == ["first"]


def test_a_wrong_key_gets_401_and_changes_nothing(
    server: ServerProcess, cookie: str, iface: StubInterface
) -> None:
    """A key Chalie never made is 401; the interface is never called and nothing is listed."""
    pairing_key(server.url, cookie)  # a real key exists, but is not the one sent
    r = pair_request(server.url, "not-a-key-" + "x" * 20, iface, name="weather")
    assert_error(r, 401)
    assert iface.requests == []
    assert interfaces_listed(server.url, cookie) == []


def test_an_expired_key_gets_401_and_changes_nothing(
    tmp_path: Path, llm: StubLlm, iface: StubInterface
) -> None:
    """With interfaces.pairing_key_ttl_s = 1 a key unused past its expires_at is 401."""
    with serving(tmp_path, llm, interfaces={"pairing_key_ttl_s": 1.0}) as server:
        cookie = server.login()
        key = pairing_key(server.url, cookie)
        expires = expiry(key["expires_at"])
        assert expires <= time.time() + 1.5
        wait_for(lambda: time.time() > expires + 0.2, timeout=5)  # the one wall-clock wait
        r = pair_request(server.url, key["pairing_key"], iface, name="weather")
        assert_error(r, 401)
        assert iface.requests == []
        assert interfaces_listed(server.url, cookie) == []


@pytest.mark.parametrize("failure", ["status_500", "dropped", "refused"])
def test_an_interface_failing_health_gets_502_and_the_key_stays_good(
    server: ServerProcess, cookie: str, iface: StubInterface, failure: str
) -> None:
    """/health answering 500, cutting the connection or not listening: 502 naming the health
    check; nothing is registered, and the same key pairs once the interface is well."""
    key = pairing_key(server.url, cookie)["pairing_key"]
    if failure == "status_500":
        iface.healthy = False
    elif failure == "dropped":
        iface.healthy, iface.unhealthy = False, Answer(drop=True)
    else:
        iface.stop()
    r = pair_request(server.url, key, iface, name="weather")
    assert_error(r, 502, "health")
    assert interfaces_listed(server.url, cookie) == []
    if failure == "refused":
        iface.start()
    iface.healthy = True
    ok = pair_request(server.url, key, iface, name="weather")
    assert ok.status_code == 201, ok.text
    assert len(interfaces_listed(server.url, cookie)) == 1


INVALID_CAPABILITIES = {
    "not_json": Answer(raw=b"{not json"),
    "not_a_list": Answer("lookup"),
    "object_without_tools": Answer({"signals": ["weather_update"]}),
    "bad_signal_type": Answer({"tools": [LOOKUP], "signals": ["weather update"]}),
    "no_name": Answer([{k: v for k, v in LOOKUP.items() if k != "name"}]),
    "no_description": Answer([{k: v for k, v in LOOKUP.items() if k != "description"}]),
    "bad_parameter_type": Answer([capability("lookup", query=("date", True))]),
    "status_500": Answer({"error": "down"}, status=500),
}


@pytest.mark.parametrize("answer", INVALID_CAPABILITIES.values(), ids=INVALID_CAPABILITIES.keys())
def test_invalid_capabilities_get_502_and_the_key_stays_good(
    server: ServerProcess, cookie: str, iface: StubInterface, answer: Answer
) -> None:
    """Capabilities that are not a valid tool list (or object of tools and signal types): 502
    naming the capabilities; nothing is registered; the same key pairs once they are valid."""
    key = pairing_key(server.url, cookie)["pairing_key"]
    iface.capabilities = answer
    r = pair_request(server.url, key, iface, name="weather")
    assert_error(r, 502, "capabilities")
    assert interfaces_listed(server.url, cookie) == []
    iface.capabilities = [LOOKUP]
    ok = pair_request(server.url, key, iface, name="weather")
    assert ok.status_code == 201, ok.text


def test_the_list_shows_each_interfaces_signal_types_and_where_they_came_from(
    server: ServerProcess, cookie: str
) -> None:
    """GET /api/interfaces and /api/interfaces/<id> show the types an interface may emit
    (["*"] for any) and `signals_from`: pairing, capabilities or any."""
    stubs = {"paired": StubInterface(signals=["weather_update", "rain"]),
             "declared": StubInterface(signals=["weather_update", "rain"]),
             "silent": StubInterface()}
    try:
        ids = {
            "paired": pair(server.url, cookie, stubs["paired"], name="paired",
                           signals=["rain"])[0],
            "declared": pair(server.url, cookie, stubs["declared"], name="declared")[0],
            "silent": pair(server.url, cookie, stubs["silent"], name="silent")[0],
        }
        listed = {i["name"]: (i["signals"], i["signals_from"])
                  for i in interfaces_listed(server.url, cookie)}
        assert listed == {"paired": (["rain"], "pairing"),
                          "declared": (["weather_update", "rain"], "capabilities"),
                          "silent": (["*"], "any")}
        with cookie_client(server.url, cookie) as http:
            detail = http.get(f"/api/interfaces/{ids['declared']}").json()
        assert (detail["signals"], detail["signals_from"]) == (
            ["weather_update", "rain"], "capabilities")
    finally:
        for stub in stubs.values():
            stub.stop()


# --- management -----------------------------------------------------------------------------------
# --- management -----------------------------------------------------------------------------------

def test_a_bearer_token_cannot_manage_interfaces(
    server: ServerProcess, cookie: str, iface: StubInterface
) -> None:
    """An interface's own token is refused on every management endpoint, and changes nothing."""
    interface_id, token = pair(server.url, cookie, iface, name="weather")
    with bearer_client(server.url, token) as http:
        answers = [
            http.post("/api/interfaces/pairing-key"),
            http.get("/api/interfaces"),
            http.get(f"/api/interfaces/{interface_id}"),
            http.post(f"/api/interfaces/{interface_id}/refresh"),
            http.delete(f"/api/interfaces/{interface_id}"),
            http.get(f"/gw/{interface_id}/render"),
        ]
    for r in answers:
        assert_error(r, (401, 403))
    assert [i["id"] for i in interfaces_listed(server.url, cookie)] == [interface_id]
    assert iface.count("/capabilities") == 1  # no refresh happened
    assert iface.count("/") == 0  # no render happened


def test_management_needs_the_cookie(server: ServerProcess, cookie: str,
                                     iface: StubInterface) -> None:
    """Without credentials every management endpoint is 401."""
    interface_id, _ = pair(server.url, cookie, iface, name="weather")
    with httpx.Client(base_url=server.url) as http:
        answers = [
            http.post("/api/interfaces/pairing-key"),
            http.get("/api/interfaces"),
            http.get(f"/api/interfaces/{interface_id}"),
            http.post(f"/api/interfaces/{interface_id}/refresh"),
            http.delete(f"/api/interfaces/{interface_id}"),
        ]
    for r in answers:
        assert_error(r, 401)
    assert len(interfaces_listed(server.url, cookie)) == 1


def test_an_unknown_interface_is_404(server: ServerProcess, cookie: str) -> None:
    """Detail, refresh, unpair and render of an id that was never paired: 404."""
    missing = str(uuid.uuid4())
    with cookie_client(server.url, cookie) as http:
        answers = [
            http.get(f"/api/interfaces/{missing}"),
            http.post(f"/api/interfaces/{missing}/refresh"),
            http.delete(f"/api/interfaces/{missing}"),
            http.get(f"/gw/{missing}/render"),
        ]
    for r in answers:
        assert_error(r, 404)


def test_refresh_fetches_the_capabilities_again(
    server: ServerProcess, llm: StubLlm, cookie: str, iface: StubInterface
) -> None:
    """A capability added after pairing is a tool once the person refreshes the interface."""
    interface_id, _ = pair(server.url, cookie, iface, name="weather")
    forecast = capability("forecast", "Tomorrow's weather", city=("string", True))
    iface.capabilities = [LOOKUP, forecast]
    with cookie_client(server.url, cookie) as http:
        r = http.post(f"/api/interfaces/{interface_id}/refresh")
        assert r.status_code == 200, r.text
        detail = http.get(f"/api/interfaces/{interface_id}").json()
    names = {t if isinstance(t, str) else t["name"] for t in detail["tools"]}
    assert names == {"lookup", "forecast"}
    client = server.connect(cookie)
    client.turn("what about tomorrow?")
    assert {"lookup", "forecast"} <= set(tool_names(llm.requests[-1]))
    iface.capabilities = [forecast]  # lookup withdrawn
    with cookie_client(server.url, cookie) as http:
        assert http.post(f"/api/interfaces/{interface_id}/refresh").status_code == 200
    client.turn("and the day after?")
    assert "forecast" in tool_names(llm.requests[-1])
    assert "lookup" not in tool_names(llm.requests[-1])


def test_refresh_picks_up_newly_declared_signal_types(
    server: ServerProcess, cookie: str
) -> None:
    """A type the program declares in /capabilities after pairing is 403 until the person
    refreshes it, then 202; a program that goes back to the plain array may emit any type."""
    stub = StubInterface(signals=["weather_update"])
    storm = {"signal_type": "storm", "content": "Thunder over the hills"}
    try:
        interface_id, token = pair(server.url, cookie, stub, name="weather")
        with bearer_client(server.url, token) as as_stub, \
                cookie_client(server.url, cookie) as http:
            assert_error(as_stub.post("/api/signals", json=storm), 403, "/capabilities")
            stub.signals = ["weather_update", "storm"]
            r = http.post(f"/api/interfaces/{interface_id}/refresh")
            assert r.status_code == 200, r.text
            assert (r.json()["signals"], r.json()["signals_from"]) == (
                ["weather_update", "storm"], "capabilities")
            assert as_stub.post("/api/signals", json=storm).status_code == 202
            stub.signals = None  # the plain array of tools: no types declared any more
            assert http.post(f"/api/interfaces/{interface_id}/refresh").status_code == 200
            anything = {"signal_type": "price_alert", "content": "AAPL up"}
            assert as_stub.post("/api/signals", json=anything).status_code == 202
        [item] = interfaces_listed(server.url, cookie)
        assert (item["signals"], item["signals_from"]) == (["*"], "any")
    finally:
        stub.stop()


def test_unpairing_revokes_the_token_and_removes_the_tools(
    server: ServerProcess, llm: StubLlm, cookie: str, iface: StubInterface
) -> None:
    """DELETE: the token is refused at once, the interface is gone, its tool leaves the prompt."""
    interface_id, token = pair(server.url, cookie, iface, name="weather", signals=["*"])
    signal = {"signal_type": "weather_update", "content": "rain later"}
    with bearer_client(server.url, token) as as_iface:
        assert as_iface.post("/api/signals", json=signal).status_code == 202
        with cookie_client(server.url, cookie) as http:
            gone = http.delete(f"/api/interfaces/{interface_id}")
            assert gone.status_code in (200, 204), gone.text
            assert_error(http.get(f"/api/interfaces/{interface_id}"), 404)
        assert_error(as_iface.post("/api/signals", json=signal), 401)
        assert_error(as_iface.post("/api/messages", json={"text": "hello"}), 401)
    assert interfaces_listed(server.url, cookie) == []
    server.connect(cookie).turn("anything new?")
    assert "lookup" not in tool_names(llm.requests[-1])
    assert set(INNATE) <= set(tool_names(llm.requests[-1]))


# --- interface tools in turns ---------------------------------------------------------------------

def test_interface_tools_are_offered_with_a_schema_from_their_parameters(
    server: ServerProcess, llm: StubLlm, cookie: str, iface: StubInterface
) -> None:
    """The capability is a tool beside the innate ones, its parameters a JSON schema."""
    pair(server.url, cookie, iface, name="weather")
    server.connect(cookie).turn("hello")
    request = llm.requests[-1]
    assert set(tool_names(request)) == {*INNATE, "lookup"}
    spec = tool_spec(request, "lookup")
    assert spec["description"].startswith("Look something up in the test interface")
    schema = spec["parameters"]
    assert schema["type"] == "object"
    assert schema["properties"]["query"]["type"] == "string"
    assert schema["properties"]["limit"]["type"] == "number"
    assert schema.get("required") == ["query"]


def test_the_model_calls_an_interface_tool_and_sees_its_result(
    server: ServerProcess, llm: StubLlm, cookie: str, iface: StubInterface
) -> None:
    """The interface gets POST /execute {capability, params}; its text is in the next request;
    the answer reaches the socket."""
    pair(server.url, cookie, iface, name="weather")
    iface.answers["lookup"] = {"text": "Sunny, 21 degrees in Lyon"}
    llm.queue(lookup_call("Lyon weather"), completion("It is sunny in Lyon."))
    frames = server.connect(cookie).turn("what's the weather in Lyon?")
    assert iface.executions() == [{"capability": "lookup", "params": {"query": "Lyon weather"}}]
    assert len(llm.requests) == 2
    assert "Sunny, 21 degrees in Lyon" in user_prompt(llm.requests[1])
    assert [f["type"] for f in frames][-2:] == ["message", "done"]
    assert frames[-2]["blocks"] == [{"type": "text", "text": "It is sunny in Lyon."}]
    assert frames[-2]["metrics"]["tools"] == {"lookup": 1}


RESULTS = {
    "data": ({"data": {"temperature_c": 21, "sky": "clear"}}, ["temperature_c", "21", "clear"]),
    "error": ({"error": "the weather station is offline"}, ["the weather station is offline"]),
}


@pytest.mark.parametrize("case", RESULTS.values(), ids=RESULTS.keys())
def test_data_and_error_results_reach_the_next_request(
    server: ServerProcess, llm: StubLlm, cookie: str, iface: StubInterface,
    case: tuple[dict[str, Any], list[str]],
) -> None:
    """`data` and `error` of an /execute answer are the tool result the model sees next."""
    answer, expected = case
    pair(server.url, cookie, iface, name="weather")
    iface.answers["lookup"] = answer
    llm.queue(lookup_call("Lyon"), completion("Done."))
    frames = server.connect(cookie).turn("weather?")
    assert frames[-2]["type"] == "message"
    result = last_tool_result(user_prompt(llm.requests[1]))
    for text in expected:
        assert text in result
    if "error" in answer:
        assert "error" in result.lower()


def test_blocks_become_a_card_rendered_and_escaped_by_chalie(
    server: ServerProcess, llm: StubLlm, cookie: str, iface: StubInterface
) -> None:
    """`blocks` come to the person as a card frame whose html escapes every string;
    `openUrl` is its open_url."""
    pair(server.url, cookie, iface, name="weather")
    iface.answers["lookup"] = {
        "text": "forecast shown",
        "blocks": [{"type": "text", "text": "<script>alert('pwned')</script> Rain & wind"}],
        "openUrl": "https://example.com/forecast",
    }
    llm.queue(lookup_call("forecast"), completion("Shown."))
    frames = server.connect(cookie).turn("show me the forecast")
    cards = [f for f in frames if f["type"] == "card"]
    assert len(cards) == 1, frames
    card = cards[0]
    assert "<script" not in card["html"].lower()
    assert "&lt;script&gt;" in card["html"]
    assert "&amp;" in card["html"]
    assert card["open_url"] == "https://example.com/forecast"
    assert card["tool_name"] == "lookup"
    assert isinstance(card["seq"], int)
    assert frames[-2]["type"] == "message"
    assert "forecast shown" in user_prompt(llm.requests[1])


FAILURES = ["slow", "garbage", "not_an_object", "wrong_types", "status_500", "dropped", "refused",
            "too_big"]


@pytest.mark.parametrize("failure", FAILURES)
def test_a_failing_interface_gives_the_model_an_error_and_the_turn_is_answered(
    tmp_path: Path, llm: StubLlm, iface: StubInterface, failure: str
) -> None:
    """Slow past interfaces.execute_timeout_s, garbage, 500, a cut connection, nothing
    listening or an answer over interfaces.max_response_bytes: the model gets an error result
    and the person still gets an answer."""
    limits = {"execute_timeout_s": 0.5, "max_response_bytes": 65536}
    with serving(tmp_path, llm, interfaces=limits) as server:
        cookie = server.login()
        pair(server.url, cookie, iface, name="weather")
        answers: dict[str, dict[str, Any] | bytes | Answer] = {
            "slow": Answer({"text": "too late"}, hold=iface.hold()),
            "garbage": b"\x00\xffnot json at all",
            "not_an_object": b"[1, 2, 3]",
            "wrong_types": {"text": ["a", "list"], "blocks": "not blocks", "openUrl": 7},
            "status_500": Answer({"error": "boom"}, status=500),
            "dropped": Answer(drop=True),
            "too_big": {"text": "too late " * 20_000},
        }
        if failure == "refused":
            iface.stop()
        else:
            iface.answers["lookup"] = answers[failure]
        llm.queue(lookup_call("Lyon"), completion("Sorry, the weather service failed."))
        frames = server.connect(cookie).turn("weather?")
        assert [f["type"] for f in frames][-2:] == ["message", "done"]
        assert frames[-2]["blocks"][0]["text"] == "Sorry, the weather service failed."
        assert len(llm.requests) == 2
        result = last_tool_result(user_prompt(llm.requests[1]))
        assert "error" in result.lower()
        assert "too late" not in result
        assert server.proc is not None
        assert server.proc.poll() is None
        assert server.connect(cookie).turn("still there?")[-2]["type"] == "message"


def test_a_name_taken_by_an_innate_tool_is_prefixed_with_the_interface_name(
    server: ServerProcess, llm: StubLlm, cookie: str
) -> None:
    """A capability called `recall` is offered as `calendar_recall`; calling it sends the
    interface its own name for it."""
    stub = StubInterface([capability("recall", "Find calendar entries", read_only=True,
                                     query=("string", True))])
    try:
        pair(server.url, cookie, stub, name="calendar")
        stub.answers["recall"] = {"text": "dentist on Friday at 10"}
        llm.queue(completion(tool_calls=[("calendar_recall", json.dumps({"query": "dentist"}))]),
                  completion("Friday at 10."))
        frames = server.connect(cookie).turn("when is the dentist?")
        names = tool_names(llm.requests[0])
        assert "calendar_recall" in names
        assert names.count("recall") == 1  # the innate one, still there once
        assert stub.executions() == [{"capability": "recall", "params": {"query": "dentist"}}]
        assert "dentist on Friday at 10" in user_prompt(llm.requests[1])
        assert frames[-2]["blocks"][0]["text"] == "Friday at 10."
    finally:
        stub.stop()


# --- health ---------------------------------------------------------------------------------------

def test_a_stopped_interface_goes_offline_and_comes_back(
    tmp_path: Path, llm: StubLlm, iface: StubInterface
) -> None:
    """Stopped: after failed checks it is listed offline and its tool leaves the prompt;
    listening again: the first good check restores both."""
    with serving(tmp_path, llm, interfaces=HEALTH_FAST) as server:
        cookie = server.login()
        interface_id, _ = pair(server.url, cookie, iface, name="weather")
        client = server.connect(cookie)
        client.turn("one")
        assert "lookup" in tool_names(llm.requests[-1])
        iface.stop()
        wait_for(lambda: online(server.url, cookie, interface_id) is False)
        llm.queue(lookup_call("anyway"), completion("It is away."))  # a model that insists
        frames = client.turn("two")
        assert "lookup" not in tool_names(llm.requests[-2])
        assert set(INNATE) <= set(tool_names(llm.requests[-2]))
        assert "error" in last_tool_result(user_prompt(llm.requests[-1])).lower()
        assert frames[-2]["blocks"][0]["text"] == "It is away."
        iface.start()
        wait_for(lambda: online(server.url, cookie, interface_id) is True)
        client.turn("three")
        assert "lookup" in tool_names(llm.requests[-1])


def test_fewer_failed_checks_than_the_limit_keep_an_interface_online(
    tmp_path: Path, llm: StubLlm, iface: StubInterface
) -> None:
    """Two failed checks in a row leave it online; the third (interfaces.health_failures = 3)
    takes it offline."""
    # A long timeout: the held third check must not fail on its own while the test looks.
    with serving(tmp_path, llm, interfaces={**HEALTH_FAST, "health_timeout_s": 10.0}) as server:
        cookie = server.login()
        interface_id, _ = pair(server.url, cookie, iface, name="weather")
        gate = iface.hold()
        broken = {"status": "broken"}
        before = iface.queue_health(Answer(broken, status=500), Answer(broken, status=500),
                                    Answer(broken, status=500, hold=gate))
        wait_for(lambda: iface.count("/health") >= before + 3)  # the third is held unanswered
        assert online(server.url, cookie, interface_id) is True
        client = server.connect(cookie)
        client.turn("still there?")
        assert "lookup" in tool_names(llm.requests[-1])
        iface.healthy = False
        gate.set()
        wait_for(lambda: online(server.url, cookie, interface_id) is False)
        client.turn("and now?")
        assert "lookup" not in tool_names(llm.requests[-1])


# --- the gateway ----------------------------------------------------------------------------------

def test_the_gateway_proxies_the_interface_ui_with_a_gateway_field(
    server: ServerProcess, cookie: str, iface: StubInterface
) -> None:
    """GET /gw/<id>/render with the cookie answers the interface's GET / plus `gateway`."""
    interface_id, _ = pair(server.url, cookie, iface, name="weather")
    iface.render = [{"type": "text", "text": "Today: sunny"}]
    with cookie_client(server.url, cookie) as http:
        r = http.get(f"/gw/{interface_id}/render")
    assert r.status_code == 200, r.text
    body = r.json()
    assert "gateway" in body
    assert body["blocks"] == [{"type": "text", "text": "Today: sunny"}]
    assert iface.seen("/", "GET")
    anonymous = httpx.get(f"{server.url}/gw/{interface_id}/render")
    assert_error(anonymous, 401)
    assert len(iface.seen("/", "GET")) == 1


# --- more of the contract -------------------------------------------------------------------------

def test_a_name_taken_by_another_interface_is_prefixed_with_the_newcomers_name(
    server: ServerProcess, llm: StubLlm, cookie: str, iface: StubInterface
) -> None:
    """Two interfaces with a `lookup`: the first keeps the name, the second's is
    `atlas_lookup`, and each call goes to its own interface."""
    pair(server.url, cookie, iface, name="weather")
    atlas = StubInterface()
    try:
        pair(server.url, cookie, atlas, name="atlas")
        atlas.answers["lookup"] = {"text": "Lyon is on the Rhone"}
        llm.queue(completion(tool_calls=[("atlas_lookup", json.dumps({"query": "Lyon"}))]),
                  completion("On the Rhone."))
        server.connect(cookie).turn("where is Lyon?")
        names = tool_names(llm.requests[0])
        assert names.count("lookup") == 1
        assert "atlas_lookup" in names
        assert atlas.executions() == [{"capability": "lookup", "params": {"query": "Lyon"}}]
        assert iface.executions() == []
        assert "Lyon is on the Rhone" in user_prompt(llm.requests[1])
    finally:
        atlas.stop()


def test_an_interfaces_own_html_never_reaches_the_person(
    server: ServerProcess, llm: StubLlm, cookie: str, iface: StubInterface
) -> None:
    """Markup an interface puts in its answer (an `html` block, an `html` field) is never sent
    to the person as markup; the turn is still answered."""
    pair(server.url, cookie, iface, name="weather")
    iface.answers["lookup"] = {
        "text": "shown",
        "blocks": [{"type": "text", "text": "plain words"},
                   {"type": "html", "html": "<iframe src='https://evil.example'></iframe>"}],
        "html": "<img src=x onerror=alert(1)>",
    }
    llm.queue(lookup_call("x"), completion("Done."))
    frames = server.connect(cookie).turn("show it")
    assert frames[-2]["type"] == "message"
    wire = json.dumps(frames)
    assert "<iframe" not in wire
    assert "<img" not in wire


def test_a_paired_interface_survives_a_restart(
    tmp_path: Path, llm: StubLlm, iface: StubInterface
) -> None:
    """After a restart the interface is still listed, its tool offered and its token good for
    the signal types its /capabilities declared (and for those only)."""
    iface.signals = ["x"]
    with serving(tmp_path, llm) as before:
        interface_id, token = pair(before.url, before.login(), iface, name="weather")
        assert before.stop() == 0
    with serving(tmp_path, llm) as after:
        cookie = after.login()
        assert [(i["id"], i["signals"], i["signals_from"])
                for i in interfaces_listed(after.url, cookie)] == [
            (interface_id, ["x"], "capabilities")]
        wait_for(lambda: online(after.url, cookie, interface_id) is True)
        after.connect(cookie).turn("hello again")
        assert "lookup" in tool_names(llm.requests[-1])
        with bearer_client(after.url, token) as http:
            r = http.post("/api/signals", json={"signal_type": "x", "content": "back"})
            assert r.status_code == 202, r.text
            other = http.post("/api/signals", json={"signal_type": "y", "content": "no"})
            assert_error(other, 403)


def test_two_pairings_racing_with_one_key_pair_once(
    server: ServerProcess, cookie: str, iface: StubInterface
) -> None:
    """While one pairing waits for its interface's capabilities, another uses the same key:
    exactly one of them gets 201, the other 401, and one interface is listed."""
    key = pairing_key(server.url, cookie)["pairing_key"]
    gate = iface.hold()
    iface.capabilities = Answer([LOOKUP], hold=gate)
    slow: list[httpx.Response] = []
    racer = threading.Thread(
        target=lambda: slow.append(pair_request(server.url, key, iface, name="slow")))
    racer.start()
    other = StubInterface()
    try:
        wait_for(lambda: iface.count("/capabilities") == 1)  # the first pairing is mid-check
        fast = pair_request(server.url, key, other, name="fast")
    finally:
        gate.set()
        racer.join(WAIT_S)
        other.stop()
    [late] = slow
    # Either may win (the key used up first, or reserved by the first caller); one only.
    assert sorted([fast.status_code, late.status_code]) == [201, 401], (fast.text, late.text)
    winner = "fast" if fast.status_code == 201 else "slow"
    assert [i["name"] for i in interfaces_listed(server.url, cookie)] == [winner]


def test_an_unpaired_interface_is_no_longer_checked(
    tmp_path: Path, llm: StubLlm, iface: StubInterface
) -> None:
    """After DELETE its /health is no longer called (while another interface's still is)."""
    with serving(tmp_path, llm, interfaces=HEALTH_FAST) as server:
        cookie = server.login()
        other = StubInterface()
        try:
            interface_id, _ = pair(server.url, cookie, iface, name="weather")
            pair(server.url, cookie, other, name="atlas")
            wait_for(lambda: iface.count("/health") >= 3)
            with cookie_client(server.url, cookie) as http:
                assert http.delete(f"/api/interfaces/{interface_id}").status_code in (200, 204)
            checked = iface.count("/health")
            seen_other = other.count("/health")
            wait_for(lambda: other.count("/health") >= seen_other + 4)
            assert iface.count("/health") <= checked + 1  # at most one already under way
        finally:
            other.stop()
