"""What a client sending frames to /ws is told: decoded frames, or an error naming the problem."""

from __future__ import annotations

import pytest

from chalie.edge.frames import (
    KNOWN_TYPES,
    BadFrame,
    ChatFrame,
    PongFrame,
    PresenceFrame,
    decode_client_frame,
)


def test_chat_frame_decodes_with_text_as_the_default_source() -> None:
    """A minimal chat frame is a typed chat from the keyboard with no images or client id."""
    assert decode_client_frame('{"type": "chat", "text": "hello"}') == ChatFrame(
        text="hello", source="text", image_ids=(), client_id=None
    )


def test_chat_frame_keeps_every_optional_field() -> None:
    """A voice chat with a client id and image ids keeps them all."""
    frame = decode_client_frame(
        b'{"type": "chat", "text": "hi", "source": "voice", "client_id": "c-1",'
        b' "image_ids": ["img1"]}'
    )
    assert frame == ChatFrame(text="hi", source="voice", image_ids=("img1",), client_id="c-1")


def test_pong_frame_decodes() -> None:
    """A keepalive answer decodes to a pong."""
    assert decode_client_frame('{"type": "pong"}') == PongFrame()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param("hello?", "frame is not a JSON object: JSON is malformed: invalid character "
                     "(byte 0)", id="not-json"),
        pytest.param("[1, 2]", "frame is not a JSON object: Expected `object`, got `array`",
                     id="json-array"),
        pytest.param('"chat"', "frame is not a JSON object: Expected `object`, got `str`",
                     id="json-string"),
        pytest.param('{"text": "hi"}', "frame has no `type` field", id="no-type"),
        pytest.param('{"type": "chat"}',
                     "bad `chat` frame: Object missing required field `text`", id="no-text"),
        pytest.param('{"type": "chat", "text": 42}',
                     "bad `chat` frame: Expected `str`, got `int` (field `text`)",
                     id="text-not-a-string"),
        pytest.param('{"type": "chat", "text": null}',
                     "bad `chat` frame: Expected `str`, got `null` (field `text`)",
                     id="text-null"),
        pytest.param('{"type": "chat", "text": "hi", "mood": "happy"}',
                     "bad `chat` frame: Object contains unknown field `mood`",
                     id="unknown-field"),
        pytest.param('{"type": "pong", "late": true}',
                     "bad `pong` frame: Object contains unknown field `late`",
                     id="unknown-field-on-pong"),
        pytest.param('{"type": "chat", "text": "hi", "source": "telepathy"}',
                     "bad `chat` frame: Invalid enum value 'telepathy' (field `source`)",
                     id="bad-source"),
        pytest.param('{"type": "chat", "text": "hi", "image_ids": [3]}',
                     "bad `chat` frame: Expected `str`, got `int` (field `image_ids[0]`)",
                     id="bad-image-id"),
    ],
)
def test_bad_frame_error_names_the_problem(data: str, message: str) -> None:
    """A frame the server cannot accept is refused with a message saying what is wrong."""
    with pytest.raises(BadFrame) as caught:
        decode_client_frame(data)
    assert str(caught.value) == message


@pytest.mark.parametrize(("data", "shown"), [('{"type": "shout", "text": "hi"}', "'shout'"),
                                             ('{"type": 7}', "7")])
def test_unknown_frame_type_error_lists_the_known_types(data: str, shown: str) -> None:
    """A frame of a type the server does not know is refused with the list of types it knows."""
    assert {"chat", "pong"} <= set(KNOWN_TYPES)
    with pytest.raises(BadFrame) as caught:
        decode_client_frame(data)
    assert str(caught.value) == f"unknown frame type {shown}; known: {', '.join(KNOWN_TYPES)}"


def test_a_presence_frame_says_whether_the_page_is_visible() -> None:
    """`presence` carries one boolean; anything else is refused naming the field."""
    assert decode_client_frame('{"type": "presence", "visible": true}') == PresenceFrame(True)
    assert "presence" in KNOWN_TYPES
    with pytest.raises(BadFrame) as caught:
        decode_client_frame('{"type": "presence", "visible": "yes"}')
    assert str(caught.value) == "bad `presence` frame: Expected `bool`, got `str` (field `visible`)"
    with pytest.raises(BadFrame, match="missing required field `visible`"):
        decode_client_frame('{"type": "presence"}')
