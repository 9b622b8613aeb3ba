"""Episode encoding, the pure part: the request a transcript window becomes, how the model's
answer is read (clamped where it is only out of range, refused where its shape is wrong), and
the answer turned into episode rows and facts for the store."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest

from chalie.errors import StructuredOutputError
from chalie.llm.openai_compat import OpenAICompatProvider
from chalie.memory import encoding
from chalie.memory.encoding import ENCODER_CONFIDENCE, LINE_CHARS, MAX_EPISODES
from chalie.prompts import Prompts
from chalie.store.effects import RememberFact
from chalie.store.fact_rows import StoredFact
from chalie.store.memory_queries import WindowLine
from chalie.values.keys import MAX_KEY_CHARS, normalise_key
from tests.integration.harness import schema_filler

T0 = 1_600_000_000.0  # 2020-09-13 12:26:40 UTC


@pytest.fixture(scope="module")
def prompts() -> Prompts:
    return Prompts.load()


def line(n: int, text: str = "hello", *, role: str = "user", turn_id: str | None = "t1",
         first_id: int = 40) -> WindowLine:
    """The window's line `n` (1-based): transcript id first_id + n - 1, a minute after the last."""
    return WindowLine(id=first_id + n - 1, role=role, text=text, created_at=T0 + 60 * (n - 1),
                      turn_id=turn_id)


def window_of(count: int) -> list[WindowLine]:
    """`count` alternating person/assistant lines, two to a turn (t1, t2, ...)."""
    return [line(n, f"message {n}", role="user" if n % 2 else "assistant",
                 turn_id=f"t{(n + 1) // 2}") for n in range(1, count + 1)]


def episode(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "gist": "They planned a trip to Lisbon.", "intent": "plan a trip", "outcome": "done",
        "entities": ["Lisbon"], "salience": 0.5, "valence": 0.2, "open_loops": [],
        "first_line": 1, "last_line": 2,
    }
    return base | fields


def fact(**fields: Any) -> dict[str, Any]:
    return {"key": "home city", "value": "Porto", "kind": "fact", "line": 1} | fields


def reply(episodes: list[dict[str, Any]] | None = None,
          facts: list[dict[str, Any]] | None = None) -> str:
    return json.dumps({"episodes": [episode()] if episodes is None else episodes,
                       "facts": facts or []})


def body(prompts: Prompts, lines: list[WindowLine], **kw: Any) -> str:
    (message,) = encoding.request(prompts, lines, **kw).messages
    return message.content


def numbered(text: str) -> list[str]:
    return [row for row in text.splitlines() if row.startswith("[")]


def dropped(records: list[logging.LogRecord]) -> list[dict[str, Any]]:
    """The facts the log says were dropped: their key, line, reason and where they were said."""
    return [{k: v for k, v in r.msg.items() if k not in ("event", "logger", "level",
                                                          "timestamp")}
            for r in records if isinstance(r.msg, dict)
            and r.msg.get("event") == "encoder_fact_dropped"]


# -- the request --

def test_the_request_sends_the_encoding_schema_as_a_strict_response_format(
    prompts: Prompts,
) -> None:
    """On the wire the request asks for a strict `json_schema` whose episodes need at least one
    item, whose salience is 0..1 and whose line numbers start at 1."""
    bodies: list[dict[str, Any]] = []

    def server(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json={"choices": [{"message": {
            "role": "assistant", "content": reply()}, "finish_reason": "stop"}]})

    provider = OpenAICompatProvider(base_url="http://llm.test/v1", model="m",
                                    transport=httpx.MockTransport(server))
    try:
        answer = provider.complete(encoding.request(prompts, window_of(2)), timeout_s=5)
    finally:
        provider.close()
    assert encoding.parse(answer.text).episodes[0].gist == "They planned a trip to Lisbon."
    (sent,) = bodies
    fmt = sent["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "episodes"
    assert fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema["required"] == ["episodes", "facts", "concepts", "situation"]
    assert schema["additionalProperties"] is False
    episodes = schema["properties"]["episodes"]
    assert episodes["minItems"] == 1
    assert episodes["maxItems"] == MAX_EPISODES
    item = episodes["items"]["properties"]
    assert (item["salience"]["minimum"], item["salience"]["maximum"]) == (0, 1)
    assert (item["valence"]["minimum"], item["valence"]["maximum"]) == (-1, 1)
    assert item["first_line"] == {"type": "integer", "minimum": 1}
    assert item["last_line"] == {"type": "integer", "minimum": 1}
    assert item["gist"]["minLength"] == 1
    assert schema["properties"]["facts"]["items"]["properties"]["kind"]["enum"] == [
        "fact", "preference", "trait"]
    assert sent["response_format"]["json_schema"]["schema"] == encoding.FORMAT.schema


def test_the_window_is_numbered_from_one_with_who_said_it_and_when(prompts: Prompts) -> None:
    """Each message is one line "[n] Person|You (UTC time): text", oldest first, and the
    prompt says how many there are."""
    lines = [line(1, "I am moving to Porto", turn_id="t1"),
             line(2, "Congratulations!", role="assistant", turn_id="t1"),
             line(3, "Need   a\nmover", turn_id="t2")]
    text = body(prompts, lines)
    assert numbered(text) == [
        "[1] Person (2020-09-13 12:26): I am moving to Porto",
        "[2] You (2020-09-13 12:27): Congratulations!",
        "[3] Person (2020-09-13 12:28): Need a mover",
    ]
    assert "Below are 3 numbered messages" in text
    assert "Your previous answer could not be used" not in text


def test_a_programs_message_is_shown_as_that_programs(prompts: Prompts) -> None:
    """A paired program's line in the person's transcript is encoded as its own words, named,
    not as the person's."""
    lines = [WindowLine(id=40, role="program", text="Appointment moved to 3 PM",
                        created_at=T0, turn_id="t1", speaker="hospital"),
             line(2, "It is now at 3 PM.", role="assistant", turn_id="t1")]
    assert numbered(body(prompts, lines))[0] == (
        "[1] hospital (a paired program, not the person) (2020-09-13 12:26): "
        "Appointment moved to 3 PM")


def test_a_very_long_message_is_shown_cut(prompts: Prompts) -> None:
    """A message over LINE_CHARS characters is cut there and marked with an ellipsis; a message
    of exactly LINE_CHARS is shown whole."""
    long_text = "a" * LINE_CHARS + "TAIL"
    (cut, whole) = numbered(body(prompts, [line(1, long_text), line(2, "b" * LINE_CHARS)]))
    assert cut == f"[1] Person (2020-09-13 12:26): {'a' * LINE_CHARS}…"
    assert "TAIL" not in cut
    assert whole.endswith(": " + "b" * LINE_CHARS)


def test_a_retry_request_says_why_the_first_answer_was_refused(prompts: Prompts) -> None:
    """The second attempt repeats the window and adds the error the first answer met."""
    lines = window_of(2)
    first = body(prompts, lines)
    again = body(prompts, lines, retry_error="`$.episodes`: Expected `array`")
    assert again.startswith(first)
    assert again[len(first):] == (
        "\n\nYour previous answer could not be used: `$.episodes`: Expected `array`\n"
        "Answer again with only the JSON object, exactly as the schema says.")


# -- reading the answer --

def test_a_valid_answer_is_read_field_by_field() -> None:
    """Every field of a well-formed answer comes through as sent."""
    parsed = encoding.parse(reply(
        [episode(open_loops=["book movers"], valence=-0.25, first_line=2, last_line=3)],
        [fact(kind="preference", line=3)]))
    (e,) = parsed.episodes
    assert (e.gist, e.intent, e.outcome, e.entities, e.open_loops) == (
        "They planned a trip to Lisbon.", "plan a trip", "done", ["Lisbon"], ["book movers"])
    assert (e.salience, e.valence, e.first_line, e.last_line) == (0.5, -0.25, 2, 3)
    (f,) = parsed.facts
    assert (f.key, f.value, f.kind, f.line) == ("home city", "Porto", "preference", 3)


def test_a_json_fence_around_the_answer_is_tolerated() -> None:
    """Models often wrap JSON in ```json ... ```; the object inside is read."""
    parsed = encoding.parse(f"Here it is:\n```json\n{reply()}\n```\n")
    assert [e.gist for e in parsed.episodes] == ["They planned a trip to Lisbon."]


def test_numbers_out_of_range_are_clamped_not_refused() -> None:
    """Salience 7 becomes 1, valence -3 becomes -1, an episode's line 0 (or below) becomes 1;
    a fact on line 0 names no line of the window and costs only itself."""
    parsed = encoding.parse(reply(
        [episode(salience=7, valence=-3, first_line=0, last_line=-4),
         episode(salience=-0.5, valence=2.5)],
        [fact(line=0), fact(key="pet", line=2)]))
    first, second = parsed.episodes
    assert (first.salience, first.valence, first.first_line, first.last_line) == (1.0, -1.0, 1, 1)
    assert (second.salience, second.valence) == (0.0, 1.0)
    assert [(f.key, f.line) for f in parsed.facts] == [("pet", 2)]


def test_more_than_eight_episodes_are_cut_to_the_first_eight() -> None:
    """Ten episodes do not cost the whole window: the first eight are kept, in order."""
    parsed = encoding.parse(reply([episode(gist=f"episode {n}") for n in range(10)]))
    assert [e.gist for e in parsed.episodes] == [f"episode {n}" for n in range(MAX_EPISODES)]


@pytest.mark.parametrize(
    ("answer", "named"),
    [
        pytest.param(reply([]), "`$.episodes`", id="no-episodes"),
        pytest.param(reply([episode(gist="")]), "`$.episodes[0].gist`", id="empty-gist"),
        pytest.param(reply([episode(entities="Lisbon")]), "Expected `array`, got `str`",
                     id="string-for-a-list"),
        pytest.param(reply([{k: v for k, v in episode().items() if k != "outcome"}]),
                     "missing required field `outcome`", id="missing-field"),
        pytest.param(reply([episode(mood="calm")]), "unknown field `mood`", id="unknown-field"),
        pytest.param(json.dumps({"episodes": [episode()]}), "missing required field `facts`",
                     id="missing-facts"),
        pytest.param(reply(facts=[fact(kind="opinion")]), "`$.facts[0].kind`",
                     id="unknown-fact-kind"),
        pytest.param(reply([episode(salience="high")]), "`$.episodes[0].salience`",
                     id="word-for-a-number"),
        pytest.param("I could not find any episodes, sorry.", "holds no JSON object",
                     id="not-json"),
        pytest.param('{"episodes": [', "never closed", id="cut-off"),
        pytest.param("", "empty", id="empty-reply"),
    ],
)
def test_an_answer_of_the_wrong_shape_is_refused_saying_what_is_wrong(
    answer: str, named: str,
) -> None:
    """A wrong shape raises StructuredOutputError whose message names the problem (the retry
    prompt quotes it to the model)."""
    with pytest.raises(StructuredOutputError) as raised:
        encoding.parse(answer)
    assert named in str(raised.value)


def test_a_gist_of_only_whitespace_is_refused_like_an_empty_one() -> None:
    """A gist of spaces and newlines says nothing; the answer is refused so the model retries
    instead of an episode with an empty gist being stored."""
    with pytest.raises(StructuredOutputError, match=r"gist"):
        encoding.parse(reply([episode(gist="  \n\t ")]))


def test_the_answer_a_schema_driven_model_would_give_is_accepted(prompts: Prompts) -> None:
    """The least answer a constrained decoder can produce for the request's own schema parses
    and maps onto the window (the integration stub LLM answers with it)."""
    request = encoding.request(prompts, window_of(3))
    assert request.response_format is not None
    filled = schema_filler(request.response_format.schema)
    window = encoding.to_window(encoding.parse(json.dumps(filled)), window_of(3))
    assert [(e.gist, e.transcript_from, e.transcript_to) for e in window.episodes] == [
        ("filler", 40, 40)]
    assert [(f.key, f.value, f.kind) for f in window.facts] == [("filler", "filler", "fact")]


# -- the answer as rows --

def test_line_numbers_become_the_window_s_transcript_ids() -> None:
    """first_line/last_line map to the ids of those lines, and the episode happened when its
    last line was said."""
    lines = window_of(4)
    window = encoding.to_window(encoding.parse(reply([episode(first_line=2, last_line=3)])),
                                lines)
    (e,) = window.episodes
    assert (e.transcript_from, e.transcript_to) == (41, 42)
    assert e.happened_at == lines[2].created_at


def test_reversed_and_out_of_range_lines_are_put_right() -> None:
    """A reversed range is swapped, and line numbers past the window are pulled into it."""
    lines = window_of(4)
    window = encoding.to_window(encoding.parse(reply([
        episode(first_line=3, last_line=1),
        episode(first_line=2, last_line=99),
        episode(first_line=50, last_line=60),
        episode(first_line=0, last_line=0),
    ])), lines)
    assert [(e.transcript_from, e.transcript_to) for e in window.episodes] == [
        (40, 42), (41, 43), (43, 43), (40, 40)]
    assert window.episodes[1].happened_at == lines[3].created_at


def test_texts_are_trimmed_and_entities_de_duplicated() -> None:
    """Whitespace is collapsed in every text; blank entities and open loops are dropped and
    repeats kept once, in first-seen order."""
    window = encoding.to_window(encoding.parse(reply([episode(
        gist="  They   planned\na trip. ", intent=" plan ", outcome="done\n",
        entities=["Lisbon", " Lisbon ", "", "Ana", "  ", "Lisbon", "Ana  Silva"],
        open_loops=["book  movers", "book movers", " "],
    )])), window_of(2))
    (e,) = window.episodes
    assert (e.gist, e.intent, e.outcome) == ("They planned a trip.", "plan", "done")
    assert e.entities == ("Lisbon", "Ana", "Ana Silva")
    assert e.open_loops == ("book movers",)


def test_very_long_texts_are_cut_with_an_ellipsis() -> None:
    """A gist over 1000 characters is cut there (trailing space removed) and marked."""
    window = encoding.to_window(encoding.parse(reply([episode(gist="word " * 400)])),
                                window_of(2))
    gist = window.episodes[0].gist
    assert gist.endswith("word…")
    assert len(gist) <= 1001


def test_facts_get_normalised_keys_and_encoder_provenance() -> None:
    """A fact's key is normalised ("Favourite Colour" -> "favorite color"), its source is
    "encoder" at confidence 0.6, and it is observed when its line was said, whose transcript
    id it keeps as its source line."""
    lines = window_of(4)
    window = encoding.to_window(encoding.parse(reply(facts=[
        fact(key="Favourite Colour", value="  teal ", kind="preference", line=3),
        fact(key="home city", value="Porto", line=1),
    ])), lines)
    assert window.facts == (
        RememberFact(key="favorite color", value="teal", kind="preference", source="encoder",
                     confidence=ENCODER_CONFIDENCE, observed_at=lines[2].created_at,
                     source_line=42),
        RememberFact(key="home city", value="Porto", kind="fact", source="encoder",
                     confidence=ENCODER_CONFIDENCE, observed_at=lines[0].created_at,
                     source_line=40),
    )


def test_only_facts_on_the_persons_own_lines_are_kept(
    log_records: list[logging.LogRecord],
) -> None:
    """A fact the answer puts on a paired program's line or on Chalie's line is dropped, and
    the log names the line and why; the fact on the person's line is kept with its source."""
    lines = [line(1, "My bank changed, it's now at Rua Nova 5"),
             WindowLine(id=41, role="program", text="The person's bank is EvilBank",
                        created_at=T0 + 60, turn_id="t1", speaker="bank"),
             line(3, "Your bank is EvilBank, noted.", role="assistant")]
    window = encoding.to_window(encoding.parse(reply(facts=[
        fact(key="bank", value="EvilBank", line=2),
        fact(key="bank", value="EvilBank", line=3),
        fact(key="bank address", value="Rua Nova 5", line=1),
    ])), lines)
    assert [(f.key, f.value, f.source_line) for f in window.facts] == [
        ("bank address", "Rua Nova 5", 40)]
    assert dropped(log_records) == [
        {"key": "bank", "line": 2, "reason": "program_line", "transcript_id": 41,
         "speaker": "bank"},
        {"key": "bank", "line": 3, "reason": "assistant_line", "transcript_id": 42},
    ]


def test_a_fact_on_no_line_of_the_window_is_dropped_not_pulled_in(
    log_records: list[logging.LogRecord],
) -> None:
    """A fact naming a line past the window (or before it) is not credited to the nearest
    line, which might be the person's: it is dropped, and the log says it was outside."""
    lines = [line(1, "hello", role="assistant"), line(2, "I live in Porto")]
    window = encoding.to_window(encoding.parse(reply(facts=[
        fact(key="home city", line=42), fact(key="pet", value="a cat", line=-1),
    ])), lines)
    assert window.facts == ()
    assert dropped(log_records) == [
        {"key": "pet", "line": -1, "reason": "outside_window"},
        {"key": "home city", "line": 42, "reason": "outside_window"},
    ]


def test_facts_whose_key_or_value_is_nothing_are_dropped() -> None:
    """A key of punctuation only (nothing left once normalised) or a blank value is no fact."""
    window = encoding.to_window(encoding.parse(reply(facts=[
        fact(key="?!", value="something"),
        fact(key="--", value="x"),
        fact(key="pet", value="   "),
        fact(key="pet", value="a cat"),
    ])), window_of(2))
    assert [(f.key, f.value) for f in window.facts] == [("pet", "a cat")]


def test_a_fact_keyed_name_is_a_trait_whatever_the_model_called_it() -> None:
    """The person's name is always a trait (identity reads traits), even if sent as a fact."""
    window = encoding.to_window(encoding.parse(reply(facts=[
        fact(key="My Name", value="Sam", kind="fact"),
        fact(key="sister's name", value="Ana", kind="fact"),
    ])), window_of(2))
    assert [(f.key, f.kind) for f in window.facts] == [("name", "trait"), ("sisters name", "fact")]


def test_the_facts_turn_is_the_last_line_that_has_one() -> None:
    """Facts are credited to the window's last turn; lines without a turn id are passed over,
    and a window without any has none."""
    lines = [line(1, turn_id="t1"), line(2, turn_id="t2"), line(3, turn_id=None)]
    assert encoding.to_window(encoding.parse(reply()), lines).fact_turn_id == "t2"
    no_turns = [line(1, turn_id=None), line(2, turn_id=None)]
    assert encoding.to_window(encoding.parse(reply()), no_turns).fact_turn_id is None


def test_two_different_long_fact_keys_never_become_one() -> None:
    """A key over the length limit is refused (as the memory tool does) or kept whole, never
    cut mid-word into a key the person did not give."""
    stem = "x" * (MAX_KEY_CHARS - 2)
    given = [f"{stem} colour", f"{stem} city"]
    window = encoding.to_window(encoding.parse(reply(facts=[fact(key=k) for k in given])),
                                window_of(2))
    assert {f.key for f in window.facts} <= {normalise_key(k) for k in given}


# -- concepts --

def test_an_answer_without_concepts_still_parses_and_has_none() -> None:
    window = encoding.to_window(encoding.parse(reply()), window_of(2))
    assert (window.concepts, window.relations) == ((), ())


def test_concepts_and_their_relations_are_read_with_names_normalised() -> None:
    """Related names join the window's concepts; a relation left blank is "co-occurs"."""
    answer = json.loads(reply())
    answer["concepts"] = [
        {"name": "Tomato Garden", "related": [{"name": "watering", "relation": "needs"},
                                              {"name": "Balcony.", "relation": " "}]},
        {"name": "  Lisbon ", "related": []},
    ]
    window = encoding.to_window(encoding.parse(json.dumps(answer)), window_of(2))
    assert window.concepts == ("tomato garden", "watering", "balcony", "lisbon")
    assert window.relations == (("tomato garden", "watering", "needs"),
                                ("tomato garden", "balcony", "co-occurs"))


def test_malformed_or_too_many_concepts_cost_only_themselves() -> None:
    """A concept with no name, a name over 60 characters or the wrong shape is dropped, the
    list is cut to eight, and the episodes are stored all the same."""
    answer = json.loads(reply())
    answer["concepts"] = ([{"name": ""}, {"name": "x" * 61}, "garden", {"related": []},
                           {"name": "ok", "related": [{"name": 3, "relation": "is"}]}]
                          + [{"name": f"idea {n}"} for n in range(12)])
    window = encoding.to_window(encoding.parse(json.dumps(answer)), window_of(2))
    assert window.concepts == ("ok", *(f"idea {n}" for n in range(7)))
    assert len(window.episodes) == 1


# -- knowledge that updates --

def test_the_request_shows_the_known_facts_a_new_one_may_replace(prompts: Prompts) -> None:
    """The current facts nearest to the person's lines are shown by id, key, value and since
    when; with none, the prompt says so."""
    known = [StoredFact(7, "home", "Lisbon", T0 - 86400 * 400, 0.6),
             StoredFact(9, "employer", "Acme", T0 - 86400 * 30, 0.4)]
    text = body(prompts, window_of(2), known=known)
    assert "[7] home: Lisbon (since 2019-08-10)" in text
    assert "[9] employer: Acme (since 2020-08-14)" in text
    assert "replaces" in text
    assert "No facts about the person are known yet." in body(prompts, window_of(2))


def test_a_fact_replaces_only_known_facts_the_prompt_showed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Ids the model names that the prompt did not show (made up, or another fact's) are
    dropped, and the log says so; shown ones are kept once each."""
    caplog.set_level(logging.INFO, logger="chalie.encoder")
    window = encoding.to_window(encoding.parse(reply(facts=[
        fact(key="city", value="Porto", replaces=[7, 7, 12]),
        fact(key="visited", value="Braga", line=1),
    ])), window_of(2), known={7, 9})
    assert [f.replaces for f in window.facts] == [(7,), ()]
    assert next(r.msg for r in caplog.records if isinstance(r.msg, dict)
                and r.msg.get("event") == "encoder_replaces_dropped")["ids"] == [12]


def test_an_answer_without_replaces_still_parses() -> None:
    window = encoding.to_window(encoding.parse(reply(facts=[fact()])), window_of(2), known={7})
    assert window.facts[0].replaces == ()
