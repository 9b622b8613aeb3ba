"""What an MCP tool call answered, as the text the model reads."""

from __future__ import annotations

import base64
import json

from mcp import types

from chalie.mcp.results import RESOURCE_TEXT_CHARS, call_outcome
from chalie.tools.base import ToolOutcome


def result(*content: types.ContentBlock, structured: object = None,
           is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=list(content), structured_content=structured,
                                is_error=is_error)


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def test_text_blocks_are_the_answer_one_per_line() -> None:
    """Two text blocks read as two lines, and the call is not an error."""
    outcome = call_outcome(result(text("It is 09:00."), text("In London.")))
    assert outcome == ToolOutcome(text="It is 09:00.\nIn London.")


def test_structured_content_alone_is_given_as_compact_json() -> None:
    """A result with only structuredContent reads as its JSON, without spaces."""
    outcome = call_outcome(result(structured={"timezone": "UTC", "hour": 9}))
    assert outcome.text == '{"timezone":"UTC","hour":9}'
    assert not outcome.is_error


def test_structured_content_the_text_already_says_is_not_repeated() -> None:
    """A server that sends the same JSON as text and as structuredContent is read once."""
    data = {"timezone": "UTC", "datetime": "2030-01-01T09:00:00+00:00"}
    outcome = call_outcome(result(text(json.dumps(data, indent=2)), structured=data))
    assert outcome.text == json.dumps(data, indent=2)
    wrapped = call_outcome(result(text("echo: hi"), structured={"result": "echo: hi"}))
    assert wrapped.text == "echo: hi"


def test_structured_content_that_adds_something_is_appended_compactly() -> None:
    """Text and different structured content: the text, then the JSON on its own line."""
    outcome = call_outcome(result(text("Found 2 rooms."), structured={"rooms": ["a", "b"]}))
    assert outcome.text == 'Found 2 rooms.\n{"rooms":["a","b"]}'


def test_is_error_gives_an_error_outcome_with_the_text() -> None:
    """isError: the model reads `error: <the server's text>` and the call counts as an error."""
    outcome = call_outcome(result(text("Invalid timezone: Mars/Olympus"), is_error=True))
    assert outcome == ToolOutcome(text="error: Invalid timezone: Mars/Olympus", is_error=True)
    silent = call_outcome(result(is_error=True))
    assert silent.is_error
    assert silent.text == "error: the tool failed without saying why"


def test_images_and_audio_become_a_short_summary_not_bytes() -> None:
    """An image or audio block reads as its mime type and size; the base64 never reaches the
    model."""
    png = base64.b64encode(b"\x89PNG" + bytes(1230)).decode()
    wav = base64.b64encode(bytes(10)).decode()
    outcome = call_outcome(result(
        types.ImageContent(type="image", data=png, mime_type="image/png"),
        types.AudioContent(type="audio", data=wav, mime_type="audio/wav"),
    ))
    assert outcome.text == "[image: image/png, 1234 bytes]\n[audio: audio/wav, 10 bytes]"


def test_an_embedded_text_resource_gives_its_uri_type_and_clipped_text() -> None:
    """A text resource reads as its uri and mime type, then its text cut to a bounded length."""
    long_text = "x" * (RESOURCE_TEXT_CHARS + 500)
    outcome = call_outcome(result(types.EmbeddedResource(
        type="resource",
        resource=types.TextResourceContents(uri="file:///notes.md", mime_type="text/markdown",
                                            text=long_text),
    )))
    header, body = outcome.text.split("\n", 1)
    assert header == "[resource: file:///notes.md, text/markdown]"
    assert body == "x" * RESOURCE_TEXT_CHARS + "… (500 more characters)"


def test_a_binary_resource_and_a_resource_link_are_summarised() -> None:
    """A blob resource reads as uri, type and size; a link as uri, type, name and description."""
    blob = base64.b64encode(bytes(300)).decode()
    outcome = call_outcome(result(
        types.EmbeddedResource(type="resource", resource=types.BlobResourceContents(
            uri="file:///a.pdf", mime_type="application/pdf", blob=blob)),
        types.ResourceLink(type="resource_link", uri="https://example.org/r/1", name="report",
                           mime_type="text/html", description="The weekly report"),
    ))
    assert outcome.text.splitlines() == [
        "[resource: file:///a.pdf, application/pdf, 300 bytes]",
        "[resource link: https://example.org/r/1, text/html, report: The weekly report]",
    ]


def test_an_empty_result_says_so() -> None:
    """No content at all is still something the model can read."""
    assert call_outcome(result()).text == "(the tool returned no content)"
