"""Chalie noticing in time, from outside: a program that follows the contract to the letter
(it pairs without `signals` and declares its types in /capabilities) sends signals of several
saliences, and only the salient ones wake a thought, which reaches the person within seconds;
no thought fires while the person is in a conversation; and whatever reached the person on its
own (a program's message, a thought, a goal's result, a scheduled prompt's answer) is in the
history their reply is read with."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from tests.integration.harness import (
    Client,
    Reply,
    ServerProcess,
    StubLlm,
    completion,
    wait_for,
)
from tests.integration.stub_interface import (
    StubInterface,
    bearer_client,
    capability,
    cookie_client,
    pair,
    serving,
    user_prompt,
)
from tests.integration.test_background import metric, seed_episode

WARNING = "Luigi's is closed tonight, and you have a table there at 8. Shall I find another?"
# Only what a test sends wakes the DMN: no boot, cadence or idle thought in the way.
ATTENTIVE = {"enabled": True, "quiet_hours": "", "timezone": "UTC", "boot_delay_s": 1e6,
             "idle_s": 1e7, "cadence_s": 1e7, "signal_debounce_s": 0.3, "busy_s": 1.5}


@contextmanager
def stopping(stub: StubInterface) -> Iterator[StubInterface]:
    """The stub interface, stopped after the test."""
    try:
        yield stub
    finally:
        stub.stop()


def chat_requests(llm: StubLlm) -> list[dict[str, Any]]:
    """The requests of turns (not the structured ones: encodings, plans)."""
    return [r for r in llm.requests if "response_format" not in r]


def signal(http: httpx.Client, kind: str, content: str, energy: float) -> int:
    r = http.post("/api/signals", json={"signal_type": kind, "content": content,
                                        "activation_energy": energy})
    return r.status_code


def why(request: dict[str, Any]) -> str:
    """A DMN prompt's "Why you are thinking now" section."""
    return user_prompt(request).split("# Why you are thinking now\n\n")[1].split("\n\n# ")[0]


def logged_at(server: ServerProcess, event: str, **fields: Any) -> list[datetime]:
    """When the server logged `event` (with these fields), by its own clock."""
    return [datetime.fromisoformat(e["timestamp"]) for e in server.log_events()
            if e.get("event") == event and all(e.get(k) == v for k, v in fields.items())]


def test_a_contract_program_s_salient_signal_wakes_a_thought_and_a_faint_one_costs_nothing(
    tmp_path: Path, llm: StubLlm,
) -> None:
    """Paired with the contract's four fields, the program may send the types its
    /capabilities declares (another is a 403). A faint signal, then a salient one: one thought,
    about the salient one, reaches the person as a notification; /metrics counts the faint one
    unattended and the thought as a `signal` trigger."""
    seed_episode(tmp_path, "Booked Luigi's for tonight at 8")
    stub = StubInterface([capability("book_table", "Book a table", when=("string", True))],
                         name="luigis", signals=["closure", "stock"])
    with serving(tmp_path, llm, dmn=ATTENTIVE) as server, stopping(stub):
        cookie = server.login()
        _, token = pair(server.url, cookie, stub, name="luigis")
        person = server.connect(cookie)
        llm.queue(completion(WARNING))
        with bearer_client(server.url, token) as http:
            assert signal(http, "weather", "Rain later", 0.9) == 403
            assert signal(http, "stock", "AAPL up 0.3%", 0.3) == 202
            assert signal(http, "closure", "Luigi's is closed tonight", 0.9) == 202
        note = person.recv_until(lambda f: f["type"] == "notification")[-1]
        assert (note["content"], note["source"]) == (WARNING, "dmn")
        [thought] = chat_requests(llm)
        assert "Luigi's is closed tonight" in why(thought)
        assert "AAPL" not in why(thought)
        assert "Booked Luigi's for tonight at 8" in user_prompt(thought)
        assert metric(server, "chalie_signals_unattended_total") == 1
        assert metric(server, "chalie_dmn_triggers_total", trigger="signal", result="ran") == 1


def test_the_dmn_stays_silent_while_a_conversation_runs_and_thinks_once_after(
    tmp_path: Path, llm: StubLlm,
) -> None:
    """A salient signal arrives while the person's turn is out: the signal's thought is held
    (logged), and runs once, dmn.busy_s after the turn was stored, by the server's own
    clock."""
    seed_episode(tmp_path, "Booked Luigi's for tonight at 8")
    with serving(tmp_path, llm, dmn=ATTENTIVE) as server:
        cookie = server.login()
        person = server.connect(cookie)
        out = threading.Event()
        llm.queue(Reply(completion("Let me look."), hold=out), completion(WARNING))
        person.send({"type": "chat", "text": "where are we eating tonight?"})
        wait_for(lambda: len(chat_requests(llm)) == 1)  # the person's turn is out
        with cookie_client(server.url, cookie) as http:
            assert signal(http, "closure", "Luigi's is closed tonight", 0.9) == 202
        wait_for(lambda: bool(logged_at(server, "dmn_trigger_held", trigger="signal")))
        assert len(chat_requests(llm)) == 1
        out.set()
        frames = person.recv_until(lambda f: f["type"] == "notification")
        assert [f["type"] for f in frames].index("done") < len(frames) - 1
        [stored] = logged_at(server, "turn_finished")
        [thinking] = logged_at(server, "dmn_thinking", trigger="signal")
        assert thinking - stored >= timedelta(seconds=ATTENTIVE["busy_s"])
        assert len(chat_requests(llm)) == 2
        assert metric(server, "chalie_dmn_triggers_total", trigger="signal", result="ran") == 1


# --- what reached the person is what their reply is read with --------------------------------

def reply_prompt(person: Client, llm: StubLlm, text: str) -> str:
    """The person replies; the prompt their reply was read with."""
    before = len(chat_requests(llm))
    frames = person.turn(text)
    assert frames[-2]["type"] == "message", frames
    return user_prompt(chat_requests(llm)[before])


def test_a_programs_message_and_the_answer_are_in_the_history_of_the_persons_reply(
    tmp_path: Path, llm: StubLlm,
) -> None:
    """"Your appointment moved", then the person's "yes, cancel it": its prompt holds the
    program's message, marked as the program's, and what Chalie told the person."""
    stub = StubInterface(name="hospital")
    with serving(tmp_path, llm) as server, stopping(stub):
        cookie = server.login()
        _, token = pair(server.url, cookie, stub, name="hospital")
        person = server.connect(cookie)
        conclusion = "Your appointment moved to 3 PM tomorrow; shall I cancel it?"
        llm.queue(completion(conclusion))
        with bearer_client(server.url, token) as http:
            r = http.post("/api/messages", json={"text": "Appointment moved to 3:00 PM"})
            assert r.status_code == 202
        note = person.recv_until(lambda f: f["type"] == "notification")[-1]
        assert (note["content"], note["program"]) == (conclusion, "hospital")
        prompt = reply_prompt(person, llm, "yes, cancel it")
        assert ("<<<data from hospital, a paired program (its message)\n"
                f"Appointment moved to 3:00 PM\ndata>>>\nYou: {conclusion}") in prompt
        assert "Person: Appointment moved" not in prompt


def test_a_thought_the_person_was_told_is_in_the_history_of_their_reply(
    tmp_path: Path, llm: StubLlm,
) -> None:
    """The DMN's warning reaches the person; their "yes please, ..." is read with it."""
    seed_episode(tmp_path, "Booked Luigi's for tonight at 8")
    llm.queue(completion(WARNING))  # before the start: the DMN may think before we connect
    with serving(tmp_path, llm, dmn={**ATTENTIVE, "boot_delay_s": 0.2}) as server:
        person = server.connect()
        person.send({"type": "resume", "last_seq": 0})  # it may have come before the connect
        person.recv_until(lambda f: f["type"] == "notification")
        assert f"You: {WARNING}" in reply_prompt(person, llm, "yes please, find another place")


def test_a_goals_result_is_in_the_history_of_the_persons_reply(
    tmp_path: Path, llm: StubLlm,
) -> None:
    """A goal's result arrives as a notification; the reply about it is read with it."""
    plan = {"steps": [
        {"id": "s1", "description": "Find the three cheapest flights to Lisbon in May",
         "depends_on": []},
        {"id": "s2", "description": "Write a short recommendation with the prices for the person",
         "depends_on": ["s1"]}], "confidence": 0.9}
    result = "Take easyJet: 60 euros with a bag, leaving at noon."
    with serving(tmp_path, llm) as server:
        cookie = server.login()
        person = server.connect(cookie)
        llm.queue_structured(completion(json.dumps(plan)))
        llm.queue(completion("TAP 89, Ryanair 45, easyJet 60."), completion(result))
        with cookie_client(server.url, cookie) as http:
            assert http.post("/api/goals", json={"goal": "Find me a flight"}).status_code == 201
        note = person.recv_until(lambda f: f["type"] == "notification")[-1]
        assert note["content"] == result
        assert f"You: {result}" in reply_prompt(person, llm, "book the easyJet one")


def test_a_scheduled_prompts_answer_is_in_the_history_of_the_persons_reply(
    tmp_path: Path, llm: StubLlm,
) -> None:
    """A scheduled prompt's answer arrives as a notification; the reply is read with it."""
    answer = "Time to call your mum: it is her birthday."
    with serving(tmp_path, llm) as server:
        cookie = server.login()
        person = server.connect(cookie)
        llm.queue(completion(answer))
        due = (datetime.now(UTC) + timedelta(seconds=1)).isoformat()
        with cookie_client(server.url, cookie) as http:
            r = http.post("/api/schedules", json={"prompt": "Remind me to call mum", "at": due})
            assert r.status_code == 201, r.text
        note = person.recv_until(lambda f: f["type"] == "notification")[-1]
        assert note["content"] == answer
        assert f"You: {answer}" in reply_prompt(person, llm, "can you remind me again tomorrow?")

