"""Signals (spec/interfaces.md section 3) from outside: what an interface and the person's
cookie may send, every answer code, batches, the rate limit, and the world state the model
sees, persisted across a restart."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.harness import WAIT_S, ServerProcess, StubLlm
from tests.integration.stub_interface import (
    StubInterface,
    assert_error,
    bearer_client,
    cookie_client,
    pair,
    pairing_key,
    serving,
    user_prompt,
)

RAIN = {
    "signal_type": "weather_forecast",
    "content": "Heavy rain expected this evening, 80% chance",
    "source": "weather-service",
    "topic": "weather",
    "activation_energy": 0.4,
    "metadata": {"precipitation_chance": 0.8, "temperature_high": 18},
}



def signal(content: str, signal_type: str = "weather_forecast", **extra: Any) -> dict[str, Any]:
    return {"signal_type": signal_type, "content": content, **extra}


def chat_requests(llm: StubLlm) -> list[dict[str, Any]]:
    """The requests of turns (those that do not ask for a JSON-schema answer)."""
    return [r for r in llm.requests if "response_format" not in r]


def assert_accepted(r: httpx.Response) -> str:
    assert r.status_code == 202, (r.status_code, r.text)
    body = r.json()
    assert body["ok"] is True
    assert uuid.UUID(body["signal_id"])
    return str(body["signal_id"])


# --- one signal -----------------------------------------------------------------------------------

def test_a_paired_interface_sends_a_declared_signal(
    server: ServerProcess, cookie: str, iface: StubInterface
) -> None:
    """Bearer token, a declared type, every field: 202 {"ok": true, "signal_id"}."""
    _, token = pair(server.url, cookie, iface, name="weather", signals=["weather_forecast"])
    with bearer_client(server.url, token) as http:
        first = assert_accepted(http.post("/api/signals", json=RAIN))
        second = assert_accepted(http.post("/api/signals", json=signal("only required fields")))
    assert first != second


def test_optional_fields_take_nulls_and_energy_its_bounds(
    server: ServerProcess, cookie: str
) -> None:
    """topic, metadata and source may be null; activation_energy may be 0, 1 or a whole 1."""
    with cookie_client(server.url, cookie) as http:
        for body in (signal("a", topic=None, metadata=None, source=None),
                     signal("b", activation_energy=0.0), signal("c", activation_energy=1.0),
                     signal("d", activation_energy=1), signal("e", metadata={})):
            assert_accepted(http.post("/api/signals", json=body))


def test_the_chat_ui_cookie_may_send_any_signal_type(server: ServerProcess, cookie: str) -> None:
    """The session cookie counts as the interface __chat_ui__, which may send any type."""
    with cookie_client(server.url, cookie) as http:
        assert_accepted(http.post("/api/signals", json=signal("made up", "anything_at_all")))


BAD_SIGNALS = {
    "no_signal_type": ({"content": "x"}, "signal_type"),
    "no_content": ({"signal_type": "weather_forecast"}, "content"),
    "signal_type_not_text": ({"signal_type": 5, "content": "x"}, "signal_type"),
    "content_not_text": ({"signal_type": "weather_forecast", "content": ["x"]}, "content"),
    "energy_above_1": (signal("x", activation_energy=1.5), "activation_energy"),
    "energy_below_0": (signal("x", activation_energy=-0.1), "activation_energy"),
    "energy_not_a_number": (signal("x", activation_energy="high"), "activation_energy"),
    "metadata_a_list": (signal("x", metadata=[1, 2]), "metadata"),
    "metadata_text": (signal("x", metadata="k=v"), "metadata"),
    "topic_a_number": (signal("x", topic=7), "topic"),
    "source_a_number": (signal("x", source=7), "source"),
}


@pytest.mark.parametrize("case", BAD_SIGNALS.values(), ids=BAD_SIGNALS.keys())
def test_an_invalid_signal_is_400_naming_the_field(
    server: ServerProcess, cookie: str, iface: StubInterface, case: tuple[dict[str, Any], str]
) -> None:
    """Each validation failure is a 400 whose error names the field at fault."""
    body, field = case
    _, token = pair(server.url, cookie, iface, name="weather", signals=["*"])
    with bearer_client(server.url, token) as http:
        assert_error(http.post("/api/signals", json=body), 400, field)


def test_a_body_that_is_not_a_json_object_is_400(server: ServerProcess, cookie: str) -> None:
    """Broken JSON, or JSON that is not an object, is a 400."""
    with cookie_client(server.url, cookie) as http:
        assert_error(http.post("/api/signals", content=b"{"), 400)
        assert_error(http.post("/api/signals", json=[signal("x")]), 400)


def test_a_signal_without_credentials_is_401(
    server: ServerProcess, cookie: str, iface: StubInterface
) -> None:
    """No cookie and no token, a token Chalie never issued, a bearer without a token, other
    schemes: 401."""
    pair(server.url, cookie, iface, name="weather", signals=["*"])
    assert_error(httpx.post(f"{server.url}/api/signals", json=RAIN), 401)
    with bearer_client(server.url, "not-a-token-" + "x" * 30) as http:
        assert_error(http.post("/api/signals", json=RAIN), 401)
    for header in ("Bearer", "Basic dXNlcjpzZWNyZXQ=", "Token abc"):
        r = httpx.post(f"{server.url}/api/signals", json=RAIN, headers={"Authorization": header})
        assert_error(r, 401)


def test_a_signal_type_not_declared_at_pairing_is_403(
    server: ServerProcess, cookie: str
) -> None:
    """Declared ["weather_forecast"]: another type is 403, naming what was declared. None
    declared (and none in /capabilities): any type is accepted. Declared "*": any type too."""
    stubs = [StubInterface() for _ in range(3)]
    try:
        _, narrow = pair(server.url, cookie, stubs[0], name="narrow", signals=["weather_forecast"])
        _, silent = pair(server.url, cookie, stubs[1], name="silent")
        _, wide = pair(server.url, cookie, stubs[2], name="wide", signals=["*"])
        with bearer_client(server.url, narrow) as http:
            assert_accepted(http.post("/api/signals", json=signal("ok", "weather_forecast")))
            assert_error(http.post("/api/signals", json=signal("no", "price_alert")), 403,
                         "'price_alert' is not among the types declared at pairing: "
                         "weather_forecast")
        with bearer_client(server.url, silent) as http:
            assert_accepted(http.post("/api/signals", json=signal("ok", "weather_forecast")))
            assert_accepted(http.post("/api/signals", json=signal("ok", "price_alert")))
        with bearer_client(server.url, wide) as http:
            assert_accepted(http.post("/api/signals", json=signal("ok", "price_alert")))
            assert_accepted(http.post("/api/signals", json=signal("ok", "weather_forecast")))
    finally:
        for stub in stubs:
            stub.stop()


def test_a_program_pairing_to_the_letter_emits_the_types_its_capabilities_declare(
    server: ServerProcess, cookie: str
) -> None:
    """A program that pairs with exactly the contract's fields (no `signals`) and answers
    /capabilities {"tools", "signals"}: its declared types are 202, alone or in a batch, and
    another type is 403 saying the types came from its /capabilities."""
    stub = StubInterface(signals=["weather_update", "rain"])
    try:
        key = pairing_key(server.url, cookie)["pairing_key"]
        r = httpx.post(f"{server.url}/api/interfaces/pair", timeout=WAIT_S, json={
            "pairing_key": key, "name": "weather", "host": stub.host, "port": stub.port})
        assert r.status_code == 201, r.text
        with bearer_client(server.url, r.json()["signal_token"]) as http:
            assert_accepted(http.post("/api/signals", json=signal("Clear skies", "weather_update")))
            assert_accepted(http.post("/api/signals", json=signal("Drizzle at six", "rain")))
            assert_error(http.post("/api/signals", json=signal("AAPL up", "price_alert")), 403,
                         "'price_alert' is not among the types declared in its /capabilities: "
                         "rain, weather_update")
            batch = http.post("/api/signals/batch", json=[
                signal("Wind from the west", "weather_update"), signal("AAPL down", "stock")])
        assert batch.status_code == 200, batch.text
        assert (batch.json()["accepted"], batch.json()["rejected"]) == (1, 1)
        assert [(e["index"], e["status"]) for e in batch.json()["errors"]] == [(1, 403)]
    finally:
        stub.stop()


def test_pairing_without_signals_against_a_plain_array_may_emit_any_type(
    server: ServerProcess, cookie: str, iface: StubInterface
) -> None:
    """/capabilities answering the contract's plain array of tools declares no types, so a
    pairing without `signals` may emit any type."""
    _, token = pair(server.url, cookie, iface, name="weather")
    with bearer_client(server.url, token) as http:
        for kind in ("weather_forecast", "price_alert", "anything.at:all"):
            assert_accepted(http.post("/api/signals", json=signal("ok", kind)))


def test_signals_in_the_pair_request_narrow_what_capabilities_declare(
    server: ServerProcess, cookie: str
) -> None:
    """/capabilities declares two types, the pair request one: the other is 403, and the
    answer says the types were declared at pairing."""
    stub = StubInterface(signals=["weather_update", "rain"])
    try:
        _, token = pair(server.url, cookie, stub, name="weather", signals=["weather_update"])
        with bearer_client(server.url, token) as http:
            assert_accepted(http.post("/api/signals", json=signal("Clear", "weather_update")))
            assert_error(http.post("/api/signals", json=signal("Drizzle", "rain")), 403,
                         "'rain' is not among the types declared at pairing: weather_update")
    finally:
        stub.stop()


def test_the_rate_limit_is_429_per_interface(tmp_path: Path, llm: StubLlm) -> None:
    """With signals.rate_per_min = 3 the fourth signal in a minute is 429; another interface
    and the chat UI keep their own allowance."""
    stubs = [StubInterface(), StubInterface()]
    try:
        with serving(tmp_path, llm, signals={"rate_per_min": 3}) as server:
            cookie = server.login()
            _, token_a = pair(server.url, cookie, stubs[0], name="a", signals=["*"])
            _, token_b = pair(server.url, cookie, stubs[1], name="b", signals=["*"])
            with bearer_client(server.url, token_a) as a:
                for n in range(3):
                    assert_accepted(a.post("/api/signals", json=signal(f"a{n}")))
                assert_error(a.post("/api/signals", json=signal("a3")), 429)
                assert_error(a.post("/api/signals", json=signal("a4")), 429)
            with bearer_client(server.url, token_b) as b:
                assert_accepted(b.post("/api/signals", json=signal("b0")))
            with cookie_client(server.url, cookie) as ui:
                assert_accepted(ui.post("/api/signals", json=signal("ui0")))
    finally:
        for stub in stubs:
            stub.stop()


def test_a_token_speaks_only_for_its_own_interface(server: ServerProcess, cookie: str) -> None:
    """A's token cannot send B's declared type, and unpairing A leaves B's token working."""
    stub_a, stub_b = StubInterface(), StubInterface()
    try:
        id_a, token_a = pair(server.url, cookie, stub_a, name="a", signals=["a_event"])
        _, token_b = pair(server.url, cookie, stub_b, name="b", signals=["b_event"])
        with bearer_client(server.url, token_a) as a, bearer_client(server.url, token_b) as b:
            assert_error(a.post("/api/signals", json=signal("as b", "b_event")), 403)
            assert_accepted(b.post("/api/signals", json=signal("as b", "b_event")))
            with cookie_client(server.url, cookie) as http:
                assert http.delete(f"/api/interfaces/{id_a}").status_code in (200, 204)
            assert_error(a.post("/api/signals", json=signal("as a", "a_event")), 401)
            assert_accepted(b.post("/api/signals", json=signal("still b", "b_event")))
    finally:
        stub_a.stop()
        stub_b.stop()


# --- batches --------------------------------------------------------------------------------------

def test_a_batch_validates_each_signal_on_its_own(
    server: ServerProcess, llm: StubLlm, cookie: str, iface: StubInterface
) -> None:
    """200 with accepted/rejected counts and an error per failed index; the valid ones are
    kept even though others failed."""
    _, token = pair(server.url, cookie, iface, name="weather", signals=["weather_forecast"])
    batch = [
        signal("Fog on the ring road until nine"),
        {"signal_type": "weather_forecast"},
        signal("AAPL up 10%", "price_alert"),
        signal("Pollen count very high today", activation_energy=0.9),
        signal("x", activation_energy=2),
    ]
    with bearer_client(server.url, token) as http:
        r = http.post("/api/signals/batch", json=batch)
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["accepted"], body["rejected"]) == (2, 3)
    errors = {e["index"]: e["error"] for e in body["errors"]}
    assert sorted(errors) == [1, 2, 4]
    assert "content" in errors[1]
    assert "activation_energy" in errors[4]
    server.connect(cookie).turn("anything I should know?")
    prompt = user_prompt(llm.requests[-1])
    assert "Fog on the ring road until nine" in prompt
    assert "Pollen count very high today" in prompt
    assert "AAPL up 10%" not in prompt


def test_a_batch_item_that_is_not_an_object_is_rejected_alone(
    server: ServerProcess, cookie: str
) -> None:
    """Items that are not signal objects are rejected by index; the rest are accepted."""
    with cookie_client(server.url, cookie) as http:
        r = http.post("/api/signals/batch", json=[signal("fine"), "text", 5, None, [signal("x")]])
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["accepted"], body["rejected"]) == (1, 4)
    assert [e["index"] for e in body["errors"]] == [1, 2, 3, 4]


def test_a_batch_rate_limits_each_signal(tmp_path: Path, llm: StubLlm) -> None:
    """With signals.rate_per_min = 3, a batch of five keeps three; the rest are rejected by
    index, and the next single signal is 429."""
    with serving(tmp_path, llm, signals={"rate_per_min": 3}) as server:
        cookie = server.login()
        with cookie_client(server.url, cookie) as http:
            r = http.post("/api/signals/batch", json=[signal(f"s{n}") for n in range(5)])
            assert r.status_code == 200, r.text
            body = r.json()
            assert (body["accepted"], body["rejected"]) == (3, 2)
            assert [e["index"] for e in body["errors"]] == [3, 4]
            assert_error(http.post("/api/signals", json=signal("one more")), 429)


def test_a_batch_of_more_than_50_or_not_a_list_is_400(server: ServerProcess, cookie: str) -> None:
    """At most 50 signals a batch, and a batch is a JSON array; 50 are fine."""
    with cookie_client(server.url, cookie) as http:
        assert_error(http.post("/api/signals/batch", json=[signal("x")] * 51), 400)
        assert_error(http.post("/api/signals/batch", json=signal("x")), 400)
        assert_error(http.post("/api/signals/batch", content=b"[{"), 400)
        fifty = http.post("/api/signals/batch", json=[signal(f"s{n}") for n in range(50)])
    assert fifty.status_code == 200, fifty.text
    assert (fifty.json()["accepted"], fifty.json()["rejected"]) == (50, 0)


def test_a_batch_without_credentials_is_401(server: ServerProcess) -> None:
    assert_error(httpx.post(f"{server.url}/api/signals/batch", json=[signal("x")]), 401)


# --- world state ----------------------------------------------------------------------------------

def test_a_signal_reaches_the_next_prompt_as_data_and_costs_no_llm_call(
    server: ServerProcess, llm: StubLlm, cookie: str, iface: StubInterface
) -> None:
    """The signal alone makes no LLM request; the next turn's single request carries it,
    after the prompt says what follows is data."""
    _, token = pair(server.url, cookie, iface, name="weather", signals=["*"])
    with bearer_client(server.url, token) as http:
        assert_accepted(http.post("/api/signals", json=RAIN))
    assert llm.requests == []
    frames = server.connect(cookie).turn("should I take an umbrella?")
    assert frames[-2]["type"] == "message"
    assert len(chat_requests(llm)) == 1
    prompt = user_prompt(chat_requests(llm)[0])
    at = prompt.find(RAIN["content"])
    assert at >= 0, prompt
    assert "data" in prompt[:at].lower()


def test_the_five_most_salient_signals_go_into_the_prompt(
    server: ServerProcess, llm: StubLlm, cookie: str
) -> None:
    """Seven signals: the five with the highest activation energy are in the prompt."""
    energies = [0.9, 0.2, 0.8, 0.7, 0.3, 0.6, 0.5]
    with cookie_client(server.url, cookie) as http:
        for energy in energies:
            body = signal(f"signal with energy {energy:.1f}", activation_energy=energy)
            assert_accepted(http.post("/api/signals", json=body))
    server.connect(cookie).turn("what is going on?")
    prompt = user_prompt(llm.requests[-1])
    shown = {e for e in energies if f"signal with energy {e:.1f}" in prompt}
    assert shown == {0.9, 0.8, 0.7, 0.6, 0.5}


def test_activation_energy_defaults_to_one_half(
    server: ServerProcess, llm: StubLlm, cookie: str
) -> None:
    """A signal without activation_energy ranks as 0.5: above 0.45, below 0.55."""
    energies: list[float | None] = [0.9, 0.8, 0.7, 0.55, None, 0.45, 0.3]
    with cookie_client(server.url, cookie) as http:
        for energy in energies:
            body = signal(f"signal with energy {energy}")
            if energy is not None:
                body["activation_energy"] = energy
            assert_accepted(http.post("/api/signals", json=body))
    server.connect(cookie).turn("what is going on?")
    prompt = user_prompt(llm.requests[-1])
    shown = {e for e in energies if f"signal with energy {e}" in prompt}
    assert shown == {0.9, 0.8, 0.7, 0.55, None}


def test_a_signal_stays_in_every_prompt(server: ServerProcess, llm: StubLlm, cookie: str) -> None:
    """A signal is not used up by the turn that saw it: the next turn's prompt has it too."""
    with cookie_client(server.url, cookie) as http:
        assert_accepted(http.post("/api/signals", json=RAIN))
    client = server.connect(cookie)
    client.turn("one")
    client.turn("two")
    assert [RAIN["content"] in user_prompt(r) for r in chat_requests(llm)] == [True, True]


def test_world_state_survives_a_restart(tmp_path: Path, llm: StubLlm) -> None:
    """Signals accepted before a restart are in the first prompt after it."""
    with serving(tmp_path, llm) as before:
        with cookie_client(before.url, before.login()) as http:
            assert_accepted(http.post("/api/signals", json=RAIN))
            assert_accepted(http.post("/api/signals", json=signal("Tram 4 diverted via Bellecour",
                                                                  "transit")))
        assert before.stop() == 0
    assert llm.requests == []
    with serving(tmp_path, llm) as after:
        after.connect().turn("anything new?")
        prompt = user_prompt(llm.requests[-1])
        assert RAIN["content"] in prompt
        assert "Tram 4 diverted via Bellecour" in prompt
