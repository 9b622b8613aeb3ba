"""POST /api/messages: an interface talks to Chalie directly (spec/interfaces.md section 4).

The message runs a turn on the interface's own channel ("interface.<id>"), like a chat message
but framed as coming from that program (prompts/interface_message.md), with the conversation of
the person's channel (interfaces.notify_channel) as its history. What Chalie concludes reaches
the person as a `notification` frame on that channel, logged with the turn, so a person who is
offline gets it on `resume`; the message, marked with the program's name, and the answer enter
that channel's transcript, so the person's reply is read with them. The interface gets only
202 {"ok", "message_id"}: it never receives /ws output.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

import msgspec

from chalie.actors.session_messages import Deliver, UserMessage
from chalie.edge.api_spec import INTERFACE_AUTH, Operation
from chalie.edge.rest_base import ApiError, JsonHandler

MAX_TEXT = 20_000
MAX_FIELD = 128
MAX_METADATA_BYTES = 8192
CHANNEL_PREFIX = "interface."


class MessageBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    text: str
    source: str | None = None
    topic: str | None = None
    metadata: dict[str, Any] | None = None


class MessageAccepted(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    message_id: str
    ok: Literal[True] = True


def interface_channel(interface_id: str) -> str:
    return f"{CHANNEL_PREFIX}{interface_id}"


class MessagesHandler(JsonHandler):
    api = {"post": Operation(
        "An interface talks to Chalie: the message runs a turn on its own channel",
        {202: MessageAccepted}, auth=(INTERFACE_AUTH,), body=MessageBody, example={
            "text": "Your appointment moved to 3pm", "source": "calendar",
            "topic": "appointments"},
        description="What Chalie concludes reaches the person as a notification; the "
                    "interface gets only the message's id.")}

    async def post(self) -> None:
        self.query_params()
        token = self.bearer_token()
        board = self.ctx.interfaces
        state = board.by_token(token) if token is not None and board is not None else None
        if state is None:
            raise ApiError(401, "send the interface's bearer token (Authorization: Bearer ...); "
                                "only paired interfaces send messages")
        body = self.decode_body(MessageBody)
        _check(body)
        received = self.ctx.clock.monotonic()
        message_id = str(uuid.uuid4())
        prompts = self.ctx.prompts
        if prompts is None:
            raise ApiError(503, "messages are not available on this server")
        f = prompts.fragment
        details = [
            f("interface_source", source=body.source) if body.source else "",
            f("interface_topic", topic=body.topic) if body.topic else "",
            f("interface_metadata",
              metadata=msgspec.json.encode(body.metadata).decode()) if body.metadata else "",
        ]
        said = "\n".join([body.text, *(d for d in details if d)])
        text = prompts.render("interface_message", program=state.row.name,
                              message=prompts.message_of(state.row.name, said))
        message = UserMessage(
            text=text, received_at=received, source="interface", client_id=message_id,
            notify_channel=self.ctx.config.interfaces.notify_channel, topic=body.topic,
            program=state.row.name, program_text=said,
        )
        if not self.ctx.directory.tell("sessions",
                                       Deliver(interface_channel(state.row.id), message)):
            raise ApiError(503, "the server is restarting; try again shortly")
        self.ctx.metrics.interface_messages.inc()
        self.set_status(202)
        self.write_json(MessageAccepted(message_id))


def _check(body: MessageBody) -> None:
    if not body.text.strip():
        raise ApiError(400, "text: must not be blank")
    if len(body.text) > MAX_TEXT:
        raise ApiError(400, f"text: at most {MAX_TEXT} characters, got {len(body.text)}")
    for name in ("source", "topic"):
        value = getattr(body, name)
        if value is not None and len(value) > MAX_FIELD:
            raise ApiError(400, f"{name}: at most {MAX_FIELD} characters")
    if body.metadata is not None and len(msgspec.json.encode(body.metadata)) > MAX_METADATA_BYTES:
        raise ApiError(400, f"metadata: at most {MAX_METADATA_BYTES} bytes of JSON")
