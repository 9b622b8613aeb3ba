"""The stub LLM itself: structured requests get schema-valid JSON, chat requests get text."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalie.llm.openai_compat import OpenAICompatProvider
from chalie.llm.structured import decode_structured, json_schema, structured
from chalie.llm.types import ChatRequest, Message
from tests.integration.harness import StubLlm, completion, schema_filler
from tests.llm.test_structured import Digest, Episode, Speaker


def structured_body(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": "stub",
        "messages": [{"role": "user", "content": "digest this"}],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "digest", "schema": schema, "strict": True},
        },
    }


def content(response: httpx.Response) -> str:
    text: str = response.json()["choices"][0]["message"]["content"]
    return text


# --- schema_filler --------------------------------------------------------------------------------

def test_filler_for_a_real_struct_decodes_as_that_struct() -> None:
    """The filler for Digest's schema is a Digest: one of each list, bounds and enums respected."""
    filler = schema_filler(json_schema(Digest))
    assert decode_structured(json.dumps(filler), Digest) == Digest(
        episodes=(Episode("filler", 0.0, ("filler",)),),
        speaker=Speaker("filler", "filler"),
        mood="calm",
        turns=1,
        summary="filler",  # `str | None`: anyOf takes its first option
    )


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "string"}, "filler"),
        ({"type": "string", "minLength": 9}, "fillerxxx"),
        ({"type": "string", "maxLength": 3}, "fil"),
        ({"enum": ["calm", "tense"]}, "calm"),
        ({"const": "Tag1"}, "Tag1"),
        ({"type": "integer", "minimum": 3}, 3),
        ({"type": "integer", "exclusiveMinimum": 3}, 4),
        ({"type": "integer", "exclusiveMaximum": -2}, -3),
        ({"type": "number", "minimum": 0.25, "maximum": 0.75}, 0.25),
        ({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.5}, 0.25),
        ({"type": "integer", "minimum": 1, "multipleOf": 5}, 5),
        ({"type": "boolean"}, False),
        ({"type": "null"}, None),
        ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, 0),
        ({"type": "array", "items": {"type": "integer"}}, [0]),
        ({"type": "array", "items": {"type": "integer"}, "minItems": 3}, [0, 0, 0]),
        ({"type": "array", "items": {"type": "integer"}, "maxItems": 0}, []),
        ({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
          "items": False, "minItems": 2, "maxItems": 2}, [0, "filler"]),
        ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
          "required": ["b"]}, {"b": "filler"}),
    ],
)
def test_filler_is_the_minimal_value_each_keyword_allows(
    schema: dict[str, Any], value: Any
) -> None:
    """Each schema keyword the filler honours gives the smallest value inside it."""
    assert schema_filler(schema) == value


@given(st.integers(-1000, 1000), st.integers(0, 1000), st.booleans())
def test_filler_numbers_always_fall_inside_their_bounds(
    low: int, width: int, integer: bool
) -> None:
    """Whatever the bounds, the filler number satisfies them."""
    high = low + width
    schema = {"type": "integer" if integer else "number", "minimum": low, "maximum": high}
    value = schema_filler(schema)
    assert low <= value <= high
    assert isinstance(value, int) or not integer


# --- the stub over a real socket ------------------------------------------------------------------

def test_structured_request_gets_filler_and_chat_request_gets_stub_answer(llm: StubLlm) -> None:
    """Over HTTP, a json_schema request is answered with valid JSON and a chat with prose."""
    url = f"{llm.base_url}/chat/completions"
    with httpx.Client() as client:
        structured_reply = client.post(url, json=structured_body(json_schema(Digest)))
        chat_reply = client.post(url, json={"model": "stub", "messages": []})
    assert decode_structured(content(structured_reply), Digest).mood == "calm"
    assert content(chat_reply) == "stub answer"
    assert [("response_format" in r) for r in llm.requests] == [True, False]


def test_queued_structured_replies_are_kept_apart_from_chat_replies(llm: StubLlm) -> None:
    """A queued structured reply answers the structured request, not the chat in between."""
    llm.queue_structured(completion('{"queued": true}'))
    llm.queue(completion("queued chat"))
    url = f"{llm.base_url}/chat/completions"
    with httpx.Client() as client:
        chat = client.post(url, json={"model": "stub", "messages": []})
        first = client.post(url, json=structured_body({"type": "boolean"}))
        second = client.post(url, json=structured_body({"type": "boolean"}))
    assert content(chat) == "queued chat"
    assert content(first) == '{"queued": true}'
    assert content(second) == "false"


def test_official_openai_client_and_chalie_send_the_same_response_format(llm: StubLlm) -> None:
    """The body Chalie sends matches the official client's, and both get schema-valid JSON."""
    import openai

    schema = json_schema(Digest)
    response_format: Any = {
        "type": "json_schema",
        "json_schema": {"name": "digest", "schema": schema, "strict": True},
    }
    client = openai.OpenAI(base_url=llm.base_url, api_key="stub", max_retries=0)
    try:
        official = client.chat.completions.create(
            model="stub",
            messages=[{"role": "user", "content": "digest this"}],
            response_format=response_format,
        )
    finally:
        client.close()
    provider = OpenAICompatProvider(base_url=llm.base_url, model="stub")
    try:
        ours = provider.complete(
            ChatRequest("", (Message("user", "digest this"),),
                        response_format=structured("digest", Digest)),
            timeout_s=10.0,
        )
    finally:
        provider.close()
    official_sent, ours_sent = llm.requests
    assert ours_sent["response_format"] == official_sent["response_format"] == response_format
    assert decode_structured(official.choices[0].message.content or "", Digest).turns == 1
    assert decode_structured(ours.text, Digest) == decode_structured(
        official.choices[0].message.content or "", Digest
    )
