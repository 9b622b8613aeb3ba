"""Structured output: the schema a request sends, and how a model's reply is read back."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalie.errors import LlmBadResponse, StructuredOutputError
from chalie.llm.structured import decode_structured, json_schema, structured
from chalie.llm.types import JsonSchemaFormat


class Episode(msgspec.Struct, frozen=True):
    """One remembered moment."""

    text: Annotated[str, msgspec.Meta(min_length=1)]
    salience: Annotated[float, msgspec.Meta(ge=0, le=1)]
    tags: tuple[str, ...] = ()


class Speaker(msgspec.Struct, frozen=True):
    name: str
    title: str  # a property called "title" is kept; only msgspec's own title keys go


class Digest(msgspec.Struct, frozen=True):
    """What an exchange leaves behind."""

    episodes: Annotated[tuple[Episode, ...], msgspec.Meta(min_length=1, max_length=5)]
    speaker: Speaker
    mood: Literal["calm", "tense"] = "calm"
    turns: Annotated[int, msgspec.Meta(ge=1)] = 1
    summary: str | None = None


class Node(msgspec.Struct):
    children: list[Node]


class WithMap(msgspec.Struct):
    counts: dict[str, int]


def good() -> dict[str, Any]:
    return {
        "episodes": [{"text": "Rex is a dog", "salience": 0.8, "tags": ["pet"]}],
        "speaker": {"name": "Ana", "title": "Dr"},
        "mood": "tense",
        "turns": 3,
        "summary": None,
    }


def refs_in(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [k for k in node if k in ("$ref", "$defs")]
        return found + [r for v in node.values() for r in refs_in(v)]
    if isinstance(node, list):
        return [r for v in node for r in refs_in(v)]
    return []


# --- the schema -----------------------------------------------------------------------------------

def test_nested_structs_and_lists_of_structs_are_inlined() -> None:
    """The schema a server receives is flat: each struct appears in place, no `$ref` anywhere."""
    schema = json_schema(Digest)
    assert refs_in(schema) == []
    episode = schema["properties"]["episodes"]["items"]
    assert episode["type"] == "object"
    assert set(episode["properties"]) == {"text", "salience", "tags"}
    assert schema["properties"]["speaker"]["properties"]["name"] == {"type": "string"}


def test_every_struct_object_is_closed_and_requires_all_properties() -> None:
    """Each object forbids extra keys and requires every property, defaults included (strict)."""
    schema = json_schema(Digest)
    objects = [
        schema,
        schema["properties"]["episodes"]["items"],
        schema["properties"]["speaker"],
    ]
    for obj in objects:
        assert obj["additionalProperties"] is False
        assert obj["required"] == list(obj["properties"])
    assert schema["required"] == ["episodes", "speaker", "mood", "turns", "summary"]


def test_msgspec_titles_and_defaults_are_dropped_but_descriptions_and_fields_kept() -> None:
    """No `title` or `default` keyword is sent; docstrings stay as descriptions, as does a field
    named `title`."""
    schema = json_schema(Digest)
    assert "title" not in schema
    assert schema["description"] == "What an exchange leaves behind."
    assert "default" not in schema["properties"]["mood"]
    assert schema["properties"]["speaker"]["properties"]["title"] == {"type": "string"}
    assert schema["properties"]["episodes"]["items"]["description"] == "One remembered moment."


def test_constraints_survive_as_json_schema_keywords() -> None:
    """Bounds from msgspec.Meta reach the server as minimum/maximum/minLength/minItems/maxItems."""
    props = json_schema(Digest)["properties"]
    episode = props["episodes"]["items"]["properties"]
    assert episode["salience"] == {"type": "number", "minimum": 0, "maximum": 1}
    assert episode["text"] == {"type": "string", "minLength": 1}
    assert props["episodes"]["minItems"] == 1
    assert props["episodes"]["maxItems"] == 5
    assert props["turns"] == {"type": "integer", "minimum": 1}
    assert props["mood"] == {"enum": ["calm", "tense"]}


def test_a_dict_field_keeps_its_value_schema() -> None:
    """A mapping field is not closed: it still admits any key with a value of its type."""
    counts = json_schema(WithMap)["properties"]["counts"]
    assert counts == {"type": "object", "additionalProperties": {"type": "integer"}}


def test_a_recursive_type_is_refused_with_a_clear_error() -> None:
    """A self-referencing struct cannot be flattened, and the error says so."""
    with pytest.raises(TypeError, match="recursive"):
        json_schema(Node)


def test_a_type_that_is_not_an_object_is_refused() -> None:
    """Structured output asks for one JSON object; a list type is refused up front."""
    with pytest.raises(TypeError, match="not encoded as a JSON object"):
        json_schema(list[Episode])


def test_structured_names_the_schema() -> None:
    """`structured` gives the response format a request carries: the name and the flat schema."""
    assert structured("digest", Digest) == JsonSchemaFormat("digest", json_schema(Digest))


# --- decoding -------------------------------------------------------------------------------------

def test_what_the_schema_describes_decodes_to_the_struct() -> None:
    """A reply with every property the schema requires comes back as the struct."""
    reply = msgspec.json.encode(good()).decode()
    assert decode_structured(reply, Digest) == Digest(
        episodes=(Episode("Rex is a dog", 0.8, ("pet",)),),
        speaker=Speaker("Ana", "Dr"),
        mood="tense",
        turns=3,
    )


def test_a_struct_encoded_then_decoded_is_unchanged() -> None:
    """What Chalie would write itself reads back equal."""
    digest = Digest((Episode("a", 0.0), Episode("b", 1.0, ("x", "y"))), Speaker("S", ""))
    assert decode_structured(msgspec.json.encode(digest).decode(), Digest) == digest


def _broken(change: str) -> dict[str, Any]:
    value = good()
    if change == "wrong type":
        value["episodes"][0]["salience"] = "high"
    elif change == "missing field":
        del value["speaker"]["name"]
    elif change == "over le":
        value["episodes"][0]["salience"] = 1.5
    elif change == "empty list":
        value["episodes"] = []
    return value


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("wrong type", "`$.episodes[0].salience`: Expected `float`, got `str`"),
        ("missing field", "`$.speaker`: Object missing required field `name`"),
        ("over le", "`$.episodes[0].salience`: Expected `float` <= 1"),
        ("empty list", "`$.episodes`: Expected `array` of length >= 1"),
    ],
)
def test_a_reply_that_breaks_the_schema_is_rejected_naming_the_path(
    change: str, message: str
) -> None:
    """Each violation raises StructuredOutputError saying what was wrong and at which path."""
    reply = msgspec.json.encode(_broken(change)).decode()
    with pytest.raises(StructuredOutputError) as caught:
        decode_structured(reply, Digest)
    assert str(caught.value).startswith(message)
    assert reply[:50] in str(caught.value)
    assert isinstance(caught.value, LlmBadResponse)


def test_a_root_level_problem_is_reported_at_dollar() -> None:
    """A missing top-level field is reported at `$`."""
    value = good()
    del value["speaker"]
    with pytest.raises(StructuredOutputError, match=r"^`\$`: Object missing required field"):
        decode_structured(msgspec.json.encode(value).decode(), Digest)


@pytest.mark.parametrize(
    "wrap",
    [
        "  \n{}\n\t ",
        "```json\n{}\n```",
        "```\n{}\n```",
        "```JSON {} ```",
        "Here is the digest:\n{}",
        "{}\nI hope this helps.",
        "Sure! Here it is:\n```json\n{}\n```\nLet me know {if} you need more.",
        "```json\n{}",  # a fence the model never closed
    ],
    ids=["whitespace", "json-fence", "plain-fence", "one-line-fence", "prose-before",
         "prose-after", "fence-and-prose-with-braces", "unclosed-fence"],
)
def test_what_models_wrap_json_in_is_tolerated(wrap: str) -> None:
    """Whitespace, Markdown fences and a sentence around the object do not stop it being read."""
    reply = wrap.replace("{}", msgspec.json.encode(good()).decode())
    assert decode_structured(reply, Digest).speaker == Speaker("Ana", "Dr")


def test_a_fence_inside_a_string_of_a_bare_object_is_left_alone() -> None:
    """An object whose text mentions ```{code}``` is read whole, not cut at the inner fence."""
    value = good()
    value["episodes"][0]["text"] = "typed ```{x}``` in chat"
    decoded = decode_structured(msgspec.json.encode(value).decode(), Digest)
    assert decoded.episodes[0].text == "typed ```{x}``` in chat"


def test_an_empty_reply_says_it_was_empty() -> None:
    """A blank reply raises StructuredOutputError("the reply was empty")."""
    with pytest.raises(StructuredOutputError) as caught:
        decode_structured(" \n ", Digest)
    assert str(caught.value) == "the reply was empty"


def test_a_reply_without_an_object_says_so() -> None:
    """Prose with no JSON object at all is rejected with that reason."""
    with pytest.raises(StructuredOutputError, match="holds no JSON object"):
        decode_structured("I could not find any episodes.", Digest)


def test_two_objects_are_rejected_not_guessed_between() -> None:
    """A reply with two objects is an error, even when the first alone would be valid."""
    one = msgspec.json.encode(good()).decode()
    with pytest.raises(StructuredOutputError, match="more than one JSON object"):
        decode_structured(f"{one}\n{one}", Digest)


def test_a_cut_off_object_says_it_was_never_closed() -> None:
    """A reply that stops mid-object (the token limit) is reported as never closed."""
    with pytest.raises(StructuredOutputError, match="never closed"):
        decode_structured('```json\n{"episodes": [', Digest)


def test_a_lone_surrogate_is_a_structured_output_error() -> None:
    """Text that is not valid Unicode is rejected like any other bad reply."""
    with pytest.raises(StructuredOutputError, match="not valid Unicode"):
        decode_structured('{"speaker": "\ud800"}', Digest)


def test_malformed_json_is_reported_with_the_reply_cut_to_200_characters() -> None:
    """Broken JSON says it is not valid JSON and quotes only the reply's first 200 characters."""
    reply = '{"episodes": [' + "x" * 500 + "}"
    with pytest.raises(StructuredOutputError) as caught:
        decode_structured(reply, Digest)
    message = str(caught.value)
    assert message.startswith("the reply is not valid JSON")
    assert repr(reply[:200]) in message
    assert "x" * 201 not in message


@given(st.text())
def test_arbitrary_text_raises_only_structured_output_error(text: str) -> None:
    """Whatever a model sends, the caller sees a Digest or a StructuredOutputError, nothing else."""
    try:
        decode_structured(text, Digest)
    except StructuredOutputError:
        pass


@given(
    st.text(alphabet=st.characters(exclude_characters="{}`"), max_size=40),
    st.text(alphabet=st.characters(exclude_characters="{}`"), max_size=40),
)
def test_prose_without_braces_around_a_valid_object_is_always_accepted(
    before: str, after: str
) -> None:
    """Any brace-free text before and after a valid object leaves it readable."""
    reply = before + msgspec.json.encode(good()).decode() + after
    assert decode_structured(reply, Digest).turns == 3
