"""Client -> server frames of /ws, decoded strictly: unknown fields and types are errors."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import msgspec

MAX_IMAGE_IDS = 3
MAX_IMAGE_ID = 64  # characters of one image id


class _ClientFrame(msgspec.Struct, frozen=True, tag_field="type", forbid_unknown_fields=True):
    pass


class ChatFrame(_ClientFrame, frozen=True, tag="chat"):
    """The person's message: it starts a turn, or waits for the one running. `image_ids`: up
    to 3 images uploaded first (POST /api/images). `client_id`: the client's own id for it,
    echoed in the turn's first `status` frame, so a client that resends after a drop sees
    which of its messages arrived (one sent twice with the same id is answered once)."""

    text: str
    source: Literal["text", "voice"] = "text"
    image_ids: tuple[str, ...] = ()
    client_id: str | None = None


class PongFrame(_ClientFrame, frozen=True, tag="pong"):
    """The answer to the server's `ping`: a socket that answers none is closed."""



class ActionPayload(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    skill: str
    params: dict[str, Any] = {}


class ActionFrame(_ClientFrame, frozen=True, tag="action"):
    """Run a skill directly, without the LLM; also how the person answers an escalation."""

    payload: ActionPayload
    client_id: str | None = None


class SteerFrame(_ClientFrame, frozen=True, tag="act_steer"):
    """Words for the turn running now: they go into its next request to the model ("stop",
    "cancel" and the like end it). With no turn running, it is a message like `chat`."""

    text: str


class ResumeFrame(_ClientFrame, frozen=True, tag="resume"):
    """Every logged frame of the channel after `last_seq` (the highest `seq` the client has),
    replayed in order; live frames follow. 0: the whole log."""

    last_seq: Annotated[int, msgspec.Meta(ge=0)]


class PresenceFrame(_ClientFrame, frozen=True, tag="presence"):
    """Whether the page is visible to the person now: while one is, nothing is delivered away
    from the page (notify.skip_when_visible). A socket that never said counts as not visible."""

    visible: bool


ClientFrame = ChatFrame | PongFrame | ActionFrame | SteerFrame | ResumeFrame | PresenceFrame
KNOWN_TYPES = ("chat", "action", "act_steer", "resume", "pong", "presence")

_decoder = msgspec.json.Decoder(ClientFrame)
_TYPE_ONLY = msgspec.json.Decoder(dict[str, object])


class BadFrame(ValueError):
    """A frame the server cannot accept; the message says which field and why."""


_AT = re.compile(r" - at `\$\.?([^`]*)`")


def decode_client_frame(data: str | bytes) -> ClientFrame:
    try:
        frame: ClientFrame = _decoder.decode(data)
    except msgspec.DecodeError as e:
        raise BadFrame(_explain(data, str(e))) from None
    return frame


def _explain(data: str | bytes, error: str) -> str:
    try:
        raw = _TYPE_ONLY.decode(data)
    except msgspec.DecodeError:
        return f"frame is not a JSON object: {error}"
    kind = raw.get("type")
    if "type" not in raw:
        return "frame has no `type` field"
    if kind not in KNOWN_TYPES:
        return f"unknown frame type {kind!r}; known: {', '.join(KNOWN_TYPES)}"
    found = _AT.search(error)
    where = f" (field `{found.group(1)}`)" if found and found.group(1) else ""
    return f"bad `{kind}` frame: {_AT.sub('', error)}{where}"
