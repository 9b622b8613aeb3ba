"""Cognition over a scripted conversation, from outside: a real server, the stub LLM, a person's
socket and GET /api/state. Topics, confidence and mode in the `message` frames; a thanks that
costs no LLM call; the situation model and the conversation's state in the next prompt."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.harness import Client, ServerProcess, StubLlm, completion, wait_for

# Vectors are made in the background a second after a message is stored; with the delay this
# long no vector exists during a test, so topics are matched by their words, deterministically.
# (The cosine side is tested against real vectors in tests/cognition/test_topics.py.)
NO_VECTORS = {"index_delay_s": 3600.0}


@pytest.fixture
def server(tmp_path: Path, llm: StubLlm) -> Iterator[ServerProcess]:
    # One exchange of literal history: what was said before is found by recall, which is what
    # the feeling of knowing measures.
    proc = ServerProcess(tmp_path, llm, memory=NO_VECTORS, act={"history_turns": 1}).start()
    yield proc
    proc.kill()
    assert not proc.errors(), proc.errors()


def message_of(frames: list[dict[str, Any]]) -> dict[str, Any]:
    return next(f for f in frames if f["type"] == "message")


def state(server: ServerProcess, cookie: str) -> dict[str, Any]:
    r = httpx.get(f"{server.url}/api/state", cookies={"chalie_session": cookie})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def say(ws: Client, llm: StubLlm, text: str, answer: str = "Noted.") -> dict[str, Any]:
    llm.queue(completion(answer))
    return message_of(ws.turn(text))


def test_topics_change_when_the_subject_does_and_not_otherwise(
    server: ServerProcess, llm: StubLlm, cookie: str
) -> None:
    ws = server.connect(cookie)
    trip = [say(ws, llm, "I'm planning a weekend trip to Lisbon in May"),
            say(ws, llm, "Which neighbourhoods in Lisbon are good to stay in for the trip?"),
            say(ws, llm, "And how do I get there from the airport?")]
    code = [say(ws, llm, "My Python script crashes with a KeyError on startup"),
            say(ws, llm, "The traceback points at the config loader in that script")]
    back = say(ws, llm, "Back to the Lisbon trip: what should I eat there?")
    names = {m["topic"] for m in trip}
    assert len(names) == 1, [m["topic"] for m in trip]
    assert None not in names
    assert "lisbon" in trip[0]["topic"]
    assert code[0]["topic"] == code[1]["topic"] != trip[0]["topic"]
    assert back["topic"] == trip[0]["topic"]
    now = state(server, cookie)
    assert now["topic"]["name"] == trip[0]["topic"]
    assert [t["name"] for t in now["topics"]] == [trip[0]["topic"], code[0]["topic"]]
    assert {t["messages"] for t in now["topics"]} == {4, 2}


def test_a_shared_general_word_files_nothing_under_another_topic_and_a_subject_word_does(
    server: ServerProcess, llm: StubLlm, cookie: str
) -> None:
    """Issue 22's conversation: the stretch shares only "good" with the goldfish and the
    houseplants only "survive" with the bees, so each starts its own topic; the sourdough
    starter shares "sourdough" with the bread, and joins it."""
    ws = server.connect(cookie)
    topics = [say(ws, llm, text)["topic"] for text in (
        "What is a good name for a goldfish?",
        "What is a good stretch for the lower back?",
        "How do bees survive the winter?",
        "Which houseplants survive in a dark bathroom?",
        "I am baking sourdough bread this weekend",
        "My sourdough starter doubles in six hours on the kitchen counter",
    )]
    assert topics == ["good name goldfish", "good stretch lower", "bees survive winter",
                      "houseplants survive bathroom", "baking sourdough weekend",
                      "baking sourdough weekend"]
    assert {t["name"]: t["messages"] for t in state(server, cookie)["topics"]} == {
        "good name goldfish": 1, "good stretch lower": 1, "bees survive winter": 1,
        "houseplants survive bathroom": 1, "baking sourdough weekend": 2}


def test_confidence_rises_on_a_topic_the_person_keeps_returning_to(
    server: ServerProcess, llm: StubLlm, cookie: str
) -> None:
    """Each answer uses what recall found about the garden, so the feeling of knowing, the
    context's warmth and the confidence grow; the first turn of a new topic is discounted."""
    ws = server.connect(cookie)
    answer = "Your tomato garden needs water every morning and the tomatoes like full sun."
    confidences = [say(ws, llm, text, answer)["confidence"] for text in (
        "My tomato garden is struggling this summer",
        "How often should the tomato garden get water?",
        "Do the tomatoes in my garden need full sun?",
        "What else helps a tomato garden in summer?",
        "Should I put mulch around the tomato garden?",
        "Is it too late to plant more tomatoes in the garden?",
    )]
    assert all(isinstance(c, float) and 0 < c <= 1 for c in confidences), confidences
    assert confidences == sorted(confidences), confidences
    assert confidences[-1] > confidences[0], confidences
    assert state(server, cookie)["topics"][0]["fok"] > 1.0


def test_thanks_costs_no_llm_call(server: ServerProcess, llm: StubLlm, cookie: str) -> None:
    ws = server.connect(cookie)
    say(ws, llm, "Remind me what the capital of Portugal is")
    before = len(llm.requests)
    message = message_of(ws.turn("thanks!"))
    assert len(llm.requests) == before
    assert message["blocks"] == [{"type": "text", "text": "You're welcome."}]
    assert message["mode"] == "acknowledge"
    assert message["metrics"]["tokens_total"] == 0
    asked = message_of(ws.turn("thanks, and what about Spain?"))  # a question: the model
    assert len(llm.requests) == before + 1
    assert asked["mode"] == "respond"


def test_the_mode_says_what_the_turn_did(server: ServerProcess, llm: StubLlm,
                                         cookie: str) -> None:
    ws = server.connect(cookie)
    llm.queue(completion("Which city do you mean, Porto or Lisbon?"))
    assert message_of(ws.turn("Book me a table in the city"))["mode"] == "clarify"
    llm.queue(completion(tool_calls=[("memory", '{"action": "remember", "key": "city", '
                                                '"value": "Lisbon"}')]),
              completion("Remembered."))
    assert message_of(ws.turn("I live in Lisbon, remember that"))["mode"] == "act"


def test_the_situation_model_holds_an_open_loop_and_the_next_prompt_sees_it(
    server: ServerProcess, llm: StubLlm, cookie: str
) -> None:
    ws = server.connect(cookie)
    say(ws, llm, "I need to call the dentist tomorrow about my tooth")
    wait_for(lambda: state(server, cookie)["situation"].get("open_loops"))
    now = state(server, cookie)
    assert now["situation"]["open_loops"] == ["call the dentist tomorrow about my tooth"]
    assert now["phase"]
    assert now["exchanges"] == 1
    assert now["mode"] == "respond"
    say(ws, llm, "Meanwhile, what is a good book about Lisbon with Maria?")
    prompt = llm.requests[-1]["messages"][-1]["content"]
    assert "call the dentist tomorrow about my tooth" in prompt
    assert "Phase of the conversation:" in prompt
    assert "Your confidence in your last answer:" in prompt
    say(ws, llm, "Done, I called the dentist and booked it")
    wait_for(lambda: not state(server, cookie)["situation"].get("open_loops"))
    assert "Maria" in state(server, cookie)["situation"]["people"]


def test_state_needs_the_cookie_and_a_good_channel(server: ServerProcess, cookie: str) -> None:
    assert httpx.get(f"{server.url}/api/state").status_code == 401
    bad = httpx.get(f"{server.url}/api/state", params={"channel": "no spaces"},
                    cookies={"chalie_session": cookie})
    assert bad.status_code == 400
    assert "channel" in bad.json()["error"]
    empty = state(server, cookie)
    assert (empty["topic"], empty["phase"], empty["topics"]) == (None, None, [])


def test_concepts_from_encodings_are_shown_with_their_activation(
    tmp_path: Path, llm: StubLlm
) -> None:
    """An encoding's concepts are stored with their links; /api/state shows what the latest
    talk activates (the encoder's structured answer is the stub's filler of its schema)."""
    proc = ServerProcess(tmp_path, llm, memory={**NO_VECTORS, "encode_every_rows": 2}).start()
    try:
        cookie = proc.login()
        say(proc.connect(cookie), llm, "My tomato garden needs a trellis and some mulch")
        wait_for(lambda: state(proc, cookie)["concepts"])
        now = state(proc, cookie)
        assert all(c["name"] and c["activation"] > 0 for c in now["concepts"])
        assert now["gists"] == []
    finally:
        proc.kill()
    assert not proc.errors(), proc.errors()


def test_the_encoders_call_refreshes_the_situation_summary(tmp_path: Path, llm: StubLlm) -> None:
    """The situation's summarised part comes with the encoding of a window (no call of its
    own) and reaches the next prompt's Current State and GET /api/state."""
    proc = ServerProcess(tmp_path, llm, memory={**NO_VECTORS, "encode_every_rows": 2}).start()
    summary = "They are moving to Porto in March and still have to find a flat near the metro."
    llm.queue_structured(completion(json.dumps({
        "episodes": [{"gist": "The person is moving to Porto in March.", "intent": "plan",
                      "outcome": "left open", "entities": ["Porto"], "salience": 0.8,
                      "valence": 0.3, "open_loops": ["find a flat"], "first_line": 1,
                      "last_line": 2}],
        "facts": [], "concepts": [{"name": "Porto move", "related": []}],
        "situation": summary})))
    try:
        cookie = proc.login()
        ws = proc.connect(cookie)
        say(ws, llm, "We are moving to Porto in March, I need a flat near the metro")
        wait_for(lambda: state(proc, cookie)["summary"] == summary)

        def turn_calls() -> list[dict[str, Any]]:  # the encoder's calls carry response_format
            return [r for r in llm.requests if not r.get("response_format")]

        calls = len(turn_calls())
        say(ws, llm, "Any tips for the first week there?")
        assert len(turn_calls()) == calls + 1  # the summary cost no call of its own
        assert summary in turn_calls()[-1]["messages"][-1]["content"]
    finally:
        proc.kill()
    assert not proc.errors(), proc.errors()
