"""Memory as a person sees it, over a real socket, against a stub LLM that never calls a tool
and answers the Encoder with schema-valid filler: what was said long ago reaches the prompt,
a name costs no model call, a changed fact keeps its history, forgetting is for good, search
operators are only words, and every prompt can be inspected afterwards."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.integration.harness import ServerProcess, StubLlm, db_rows, wait_for

OPERATORS = ('"quoted" AND (NOT this) OR that* NEAR(a b) col:term ^start -minus + '
             '{x} [y] \' " : ; \\ % _ ~')


class Person:
    """One person chatting on one channel and looking at their memory over REST."""

    def __init__(self, server: ServerProcess, llm: StubLlm) -> None:
        self.server = server
        self.llm = llm
        cookie = server.login()
        self.client = server.connect(cookie)
        self.http = httpx.Client(base_url=server.url, cookies={"chalie_session": cookie})

    def say(self, text: str) -> list[dict[str, Any]]:
        return self.client.turn(text)

    def chat_requests(self) -> list[dict[str, Any]]:
        """The stub's requests for user turns (the Encoder's carry a response_format)."""
        return [r for r in list(self.llm.requests) if "response_format" not in r]

    def last_prompt(self) -> str:
        """The last chat request as the model reads it: the system prompt (who the person is
        at its end), then the user message."""
        return "\n\n".join(str(m["content"]) for m in self.chat_requests()[-1]["messages"])

    def get(self, path: str, **params: Any) -> Any:
        r = self.http.get(path, params=params)
        assert r.status_code == 200, r.text
        return r.json()


@pytest.fixture
def person(server: ServerProcess, llm: StubLlm) -> Any:
    p = Person(server, llm)
    yield p
    p.http.close()


def answer(frames: list[dict[str, Any]]) -> str:
    assert frames[-2]["type"] == "message", frames
    return str(frames[-2]["blocks"][0]["text"])


def test_a_conversation_of_dozens_of_turns_remembers_what_matters(
    person: Person, server: ServerProcess
) -> None:
    """A fact from the first turn is in the last turn's prompt; "call me Sam" is answered with
    no model call and the name is in later prompts; episodes are written once the transcript
    has grown; the turn's prompt is stored exactly as the model got it."""
    person.say("My favourite colour is teal, like the sea at Brighton.")
    before = len(person.chat_requests())
    frames = person.say("call me Sam")
    assert [f["type"] for f in frames] == ["status", "message", "done"]
    assert answer(frames) == "Nice to meet you, Sam."
    assert frames[1]["metrics"]["tokens_total"] == 0
    assert len(person.chat_requests()) == before  # no LLM call
    for n in range(30):
        person.say(f"Here is filler message number {n} about gardening and the weather.")
    assert "Their name is Sam." in person.last_prompt()
    frames = person.say("What is my favourite colour?")
    prompt = person.last_prompt()
    assert "teal" in prompt
    assert "Their name is Sam." in prompt
    wait_for(lambda: len(person.get("/api/memory/episodes")["items"]) > 0)
    episode = person.get("/api/memory/episodes")["items"][0]
    assert episode["channel"] == "main"
    assert episode["transcript_from"] <= episode["transcript_to"]
    turn_id = frames[-1]["exchange_id"]
    (snapshot,) = person.get(f"/api/turns/{turn_id}/prompts")["prompts"]
    sent = person.chat_requests()[-1]
    assert snapshot["purpose"] == "act"
    assert snapshot["system"] == sent["messages"][0]["content"]
    assert snapshot["messages"] == [{"role": "user", "content": sent["messages"][1]["content"]}]
    assert [t["name"] for t in snapshot["tools"]] == [t["function"]["name"]
                                                      for t in sent["tools"]]
    assert server.errors() == []


def test_a_longer_message_with_a_name_stores_it_and_still_asks_the_model(
    person: Person,
) -> None:
    """"My name is Sam and ..." stores the name and goes on to the model, whose prompt already
    has it."""
    before = len(person.chat_requests())
    assert answer(person.say("My name is Sam and I need help planning a trip")) == "stub answer"
    assert len(person.chat_requests()) == before + 1
    assert "Their name is Sam." in person.last_prompt()
    (fact,) = person.get("/api/memory/knowledge")["items"]
    assert (fact["key"], fact["value"], fact["kind"], fact["source"]) == (
        "name", "Sam", "trait", "identity")


def test_a_changed_fact_supersedes_the_old_one_and_history_lists_both(person: Person) -> None:
    """A new name replaces the old as the current value; with history=1 both are listed, the
    old one with the time it stopped being true."""
    person.say("call me Sam")
    assert answer(person.say("Actually, call me Samuel")) == (
        "Got it, I'll call you Samuel from now on.")
    current = person.get("/api/memory/knowledge")["items"]
    assert [(i["key"], i["value"], i["current"]) for i in current] == [("name", "Samuel", True)]
    history = person.get("/api/memory/knowledge", history=1)["items"]
    assert [(i["value"], i["current"]) for i in history] == [("Samuel", True), ("Sam", False)]
    new, old = history
    assert old["valid_to"] == new["valid_from"]
    assert old["superseded_by"] == new["id"]
    assert "Their name is Samuel." in (person.say("hello") and person.last_prompt())


def test_a_forgotten_item_is_in_no_later_prompt(person: Person, server: ServerProcess) -> None:
    """After DELETE of a knowledge item its value is in no later prompt: not in the identity
    section, not in the history where it was said, not in what recall finds."""
    person.say("call me Sam")
    person.say("I had lunch with my sister today")
    (fact,) = person.get("/api/memory/knowledge")["items"]
    r = person.http.delete(f"/api/memory/knowledge/{fact['id']}")
    assert r.status_code == 200
    assert r.json() == {"forgotten": {"kind": "knowledge", "id": fact["id"]}}
    assert person.http.delete(f"/api/memory/knowledge/{fact['id']}").status_code == 404
    for question in ("What is my name?", "Do you remember what I told you to call me, Sam?"):
        person.say(question)
        prompt = person.last_prompt()
        before_message = prompt.split("# The person's message")[0]
        assert "Sam" not in before_message
        assert "[forgotten]" in before_message  # where "call me Sam" was said
    assert person.get("/api/memory/knowledge")["items"] == []
    assert db_rows(server.db_path, "SELECT count(*) FROM knowledge") == [(0,)]
    shown = [hit["text"] for hit in person.get("/api/memory/search", q="call me")["results"]]
    assert "call me [forgotten]" in shown  # search shows what the model would see
    assert "call me Sam" not in shown


def test_search_operators_in_a_message_are_only_words(
    person: Person, server: ServerProcess
) -> None:
    """A message full of FTS operators and punctuation is answered normally, stored, found by
    search, and the server logs no error or warning about it."""
    assert answer(person.say(OPERATORS)) == "stub answer"
    assert answer(person.say(f"and again: {OPERATORS}")) == "stub answer"
    found = person.get("/api/memory/search", q=OPERATORS)
    assert found["results"], found
    assert any("quoted" in hit["text"] for hit in found["results"])
    problems = [e for e in server.log_events() if e.get("level") in ("warning", "error")]
    assert problems == []


def test_search_shows_why_an_item_was_remembered(person: Person) -> None:
    """The fused recall lists each hit with its full-text and vector ranks and its weights."""
    person.say("My dentist appointment is on the 14th of March at noon")
    person.say("unrelated chatter about football")
    results = person.get("/api/memory/search", q="when is the dentist?")["results"]
    top = results[0]
    assert top["kind"] == "message"
    assert "dentist" in top["text"]
    assert top["fts_rank"] == 1
    assert top["score"] > 0
    assert 0 < top["recency"] <= 1
    assert top["strength"] > 0
