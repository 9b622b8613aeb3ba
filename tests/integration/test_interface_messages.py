"""Messages from interfaces (spec/interfaces.md section 4, POST /api/messages) from outside:
the interface talks to Chalie, Chalie reasons on the interface's own channel, and what it
concludes reaches the person as a notification on `main`, live or on resume."""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.harness import Reply, ServerProcess, StubLlm, completion, wait_for
from tests.integration.stub_interface import (
    StubInterface,
    assert_error,
    bearer_client,
    capability,
    cookie_client,
    pair,
    serving,
    user_prompt,
)

MOVED = {
    "text": "Your appointment has been moved from 2:00 PM to 3:00 PM tomorrow",
    "source": "hospital-portal",
    "topic": "health",
    "metadata": {"appointment_id": "apt_12345", "new_time": "2026-03-18T15:00:00Z"},
}
CONCLUSION = "Your hospital appointment is now at 3 PM tomorrow."



def chat_requests(llm: StubLlm) -> list[dict[str, Any]]:
    """The requests of turns (those that do not ask for a JSON-schema answer)."""
    return [r for r in llm.requests if "response_format" not in r]


def send(server: ServerProcess, token: str, body: dict[str, Any]) -> str:
    with bearer_client(server.url, token) as http:
        r = http.post("/api/messages", json=body)
    assert r.status_code == 202, (r.status_code, r.text)
    assert r.json()["ok"] is True
    message_id = r.json()["message_id"]
    assert uuid.UUID(message_id)
    return str(message_id)


def test_a_message_reaches_the_person_as_a_notification_on_main(
    server: ServerProcess, llm: StubLlm, cookie: str, iface: StubInterface
) -> None:
    """202 {ok, message_id}; the model reasons about the text; the person's main channel gets
    only a `notification` with what it concluded (the turn itself runs elsewhere)."""
    _, token = pair(server.url, cookie, iface, name="hospital")
    person = server.connect(cookie)
    llm.queue(completion(CONCLUSION))
    send(server, token, MOVED)
    frames = person.recv_until(lambda f: f["type"] == "notification")
    assert [f["type"] for f in frames] == ["notification"]
    assert CONCLUSION in frames[0]["content"]
    assert frames[0]["topic"] == "health"
    assert isinstance(frames[0]["seq"], int)
    [request] = chat_requests(llm)
    assert MOVED["text"] in user_prompt(request)
    # The main channel's own conversation is untouched: the next chat there starts it.
    assert person.turn("thanks")[-2]["type"] == "message"


def test_an_offline_person_gets_the_notification_on_resume(
    server: ServerProcess, llm: StubLlm, cookie: str, iface: StubInterface
) -> None:
    """No client connected while the message is handled: a client resuming from 0 on main
    gets the notification from the event log."""
    _, token = pair(server.url, cookie, iface, name="hospital")
    llm.queue(completion(CONCLUSION))
    send(server, token, MOVED)
    wait_for(lambda: len(chat_requests(llm)) == 1)
    wait_for(lambda: any(e.get("event") == "turn_stored" for e in server.log_events()))
    late = server.connect(cookie)
    late.send({"type": "resume", "last_seq": 0})
    frames = late.recv_until(lambda f: f["type"] == "notification")
    assert frames[-1]["type"] == "notification"
    assert CONCLUSION in frames[-1]["content"]


def test_a_message_turn_can_use_the_interfaces_tools(
    server: ServerProcess, llm: StubLlm, cookie: str
) -> None:
    """The reasoning about a message may call a tool (here the interface's own) before the
    notification goes out."""
    stub = StubInterface([capability("list_appointments", "The person's appointments",
                                     read_only=True, day=("string", True))], name="hospital")
    try:
        _, token = pair(server.url, cookie, stub, name="hospital")
        stub.answers["list_appointments"] = {"text": "3:00 PM cardiology, Wing B"}
        person = server.connect(cookie)
        llm.queue(
            completion(tool_calls=[("list_appointments", json.dumps({"day": "tomorrow"}))]),
            completion("Tomorrow: cardiology at 3 PM in Wing B."),
        )
        send(server, token, MOVED)
        frames = person.recv_until(lambda f: f["type"] == "notification")
        assert "cardiology at 3 PM in Wing B" in frames[-1]["content"]
        assert stub.executions() == [
            {"capability": "list_appointments", "params": {"day": "tomorrow"}}
        ]
        assert "3:00 PM cardiology, Wing B" in user_prompt(chat_requests(llm)[1])
    finally:
        stub.stop()


def test_a_message_is_handled_as_coming_from_its_own_interface(
    server: ServerProcess, llm: StubLlm, cookie: str
) -> None:
    """With two interfaces paired, a message sent with A's token is presented as A's."""
    hospital, bank = StubInterface(name="hospital"), StubInterface(name="bank")
    try:
        _, token = pair(server.url, cookie, hospital, name="hospital")
        pair(server.url, cookie, bank, name="bank")
        person = server.connect(cookie)
        llm.queue(completion(CONCLUSION))
        send(server, token, {"text": "Lab results are ready"})
        person.recv_until(lambda f: f["type"] == "notification")
        prompt = user_prompt(chat_requests(llm)[0])
        assert "hospital" in prompt
        assert "bank" not in prompt
    finally:
        hospital.stop()
        bank.stop()


BAD_MESSAGES = {
    "no_text": ({"source": "x"}, "text"),
    "text_not_text": ({"text": 5}, "text"),
    "metadata_a_list": ({"text": "hi", "metadata": [1]}, "metadata"),
    "topic_a_number": ({"text": "hi", "topic": 3}, "topic"),
}


@pytest.mark.parametrize("case", BAD_MESSAGES.values(), ids=BAD_MESSAGES.keys())
def test_an_invalid_message_is_400_naming_the_field(
    server: ServerProcess, llm: StubLlm, cookie: str, iface: StubInterface,
    case: tuple[dict[str, Any], str],
) -> None:
    """Validation failures are 400 naming the field, and start no turn."""
    body, field = case
    _, token = pair(server.url, cookie, iface, name="hospital")
    with bearer_client(server.url, token) as http:
        assert_error(http.post("/api/messages", json=body), 400, field)
        assert_error(http.post("/api/messages", content=b"{"), 400)
    assert llm.requests == []


def test_a_message_needs_a_valid_bearer_token(
    server: ServerProcess, llm: StubLlm, cookie: str, iface: StubInterface
) -> None:
    """No credentials, a token Chalie never issued, or only the person's cookie (messages
    come from interfaces): 401 and no turn."""
    pair(server.url, cookie, iface, name="hospital")
    assert_error(httpx.post(f"{server.url}/api/messages", json=MOVED), 401)
    with cookie_client(server.url, cookie) as http:
        assert_error(http.post("/api/messages", json=MOVED), 401)
    with bearer_client(server.url, "forged-" + "y" * 40) as http:
        assert_error(http.post("/api/messages", json=MOVED), 401)
    assert llm.requests == []


def test_an_unpaired_interfaces_messages_are_refused(
    server: ServerProcess, llm: StubLlm, cookie: str, iface: StubInterface
) -> None:
    """Unpairing revokes the token at once for messages too."""
    interface_id, token = pair(server.url, cookie, iface, name="hospital")
    with cookie_client(server.url, cookie) as http:
        assert http.delete(f"/api/interfaces/{interface_id}").status_code in (200, 204)
    with bearer_client(server.url, token) as http:
        assert_error(http.post("/api/messages", json=MOVED), 401)
    assert llm.requests == []


def test_a_notification_is_replayed_after_a_server_restart(
    tmp_path: Path, llm: StubLlm, iface: StubInterface
) -> None:
    """The notification is in the durable event log: resuming after a restart replays it."""
    with serving(tmp_path, llm) as before:
        _, token = pair(before.url, before.login(), iface, name="hospital")
        person = before.connect()
        llm.queue(completion(CONCLUSION))
        send(before, token, MOVED)
        [notification] = person.recv_until(lambda f: f["type"] == "notification")
        assert before.stop() == 0
    with serving(tmp_path, llm) as after:
        late = after.connect()
        late.send({"type": "resume", "last_seq": 0})
        assert late.recv_until(lambda f: f["type"] == "notification")[-1] == notification


def test_a_message_turn_sees_the_world_state(
    server: ServerProcess, llm: StubLlm, cookie: str, iface: StubInterface
) -> None:
    """Signals go into every prompt, the prompt of a message's turn too."""
    _, token = pair(server.url, cookie, iface, name="hospital")
    with cookie_client(server.url, cookie) as http:
        r = http.post("/api/signals", json={"signal_type": "transit",
                                            "content": "Tram 4 diverted via Bellecour"})
    assert r.status_code == 202, r.text
    person = server.connect(cookie)
    llm.queue(completion(CONCLUSION))
    send(server, token, MOVED)
    person.recv_until(lambda f: f["type"] == "notification")
    assert "Tram 4 diverted via Bellecour" in user_prompt(chat_requests(llm)[0])


def test_a_message_is_handled_while_the_person_is_mid_turn(
    server: ServerProcess, llm: StubLlm, cookie: str, iface: StubInterface
) -> None:
    """The message's turn runs on its own channel: its notification reaches `main` while the
    person's own turn there is still waiting for the model."""
    _, token = pair(server.url, cookie, iface, name="hospital")
    held = threading.Event()
    llm.queue(Reply(completion("Here is my answer to you."), hold=held), completion(CONCLUSION))
    person = server.connect(cookie)
    person.send({"type": "chat", "text": "tell me a story"})
    try:
        wait_for(lambda: len(llm.requests) == 1)
        send(server, token, MOVED)
        before = person.recv_until(lambda f: f["type"] == "notification")
        assert CONCLUSION in before[-1]["content"]
        assert "message" not in [f["type"] for f in before]
    finally:
        held.set()
    rest = person.recv_until(lambda f: f["type"] == "done")
    assert rest[-2]["blocks"][0]["text"] == "Here is my answer to you."


def test_a_programs_short_thanks_is_still_reasoned_about(
    server: ServerProcess, llm: StubLlm, cookie: str, iface: StubInterface
) -> None:
    """The social fast path is the person's: a program's "ok" goes to the model like any of
    its messages, and the person's own "thanks" does not."""
    _, token = pair(server.url, cookie, iface, name="hospital")
    person = server.connect(cookie)
    llm.queue(completion("The portal confirmed."))
    send(server, token, {"text": "ok"})
    person.recv_until(lambda f: f["type"] == "notification")
    assert len(chat_requests(llm)) == 1
    assert person.turn("thanks")[-2]["blocks"] == [{"type": "text", "text": "You're welcome."}]
    assert len(chat_requests(llm)) == 1
