"""The bodies of Chalie's OpenAI-compatible endpoints (chalie/edge/openai_chat.py), and what
is read from a request: the new message, its images and the channel it runs on.

A request is decoded tolerantly, unlike Chalie's own endpoints: OpenAI clients send sampling
settings and vendor fields Chalie has no use for (temperature, top_p, max_tokens, seed,
metadata, ...), and refusing them would refuse most clients. The fields Chalie reads are typed:
a wrong type is a 400 naming the field.

Such a client sends the whole conversation every time; Chalie keeps its own history, so only
the last message, which must be the person's, is new. System and developer messages are not
used (Chalie has its own identity and instructions), nor are earlier turns (Chalie's history
has them, as they were). Client tools are not offered to the model: Chalie's own tools run
inside the turn and a tool call never reaches the client, so `tools` and `functions` are
ignored as a model that chose to answer in words would, but a `tool_choice` that demands a
call, a structured `response_format` or `n` above 1 cannot be honoured and is a 400.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Any, Literal

import msgspec

from chalie.config import CHANNEL_RE
from chalie.edge.frames import MAX_IMAGE_IDS
from chalie.edge.rest_base import ApiError
from chalie.edge.tokens import token_channel
from chalie.store.image_rows import sniff

MODELS = ("chalie", "chalie-light")  # the primary model's, the light job's
OWNER = "chalie"
Role = Literal["system", "developer", "user", "assistant", "tool", "function"]


class OpenAiFault(ApiError):
    """A request Chalie refuses, answered in OpenAI's error shape: `kind` is its `type`,
    `param` the field at fault and `code` OpenAI's code for it."""

    def __init__(self, status: int, message: str, *, kind: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None) -> None:
        super().__init__(status, message)
        self.kind, self.param, self.code = kind, param, code


# -- requests --

class TextPart(msgspec.Struct, frozen=True, tag="text", tag_field="type"):
    text: str


class ImageUrl(msgspec.Struct, frozen=True):
    url: str
    detail: str | None = None


class ImagePart(msgspec.Struct, frozen=True, tag="image_url", tag_field="type"):
    image_url: ImageUrl


Part = TextPart | ImagePart


class ChatMessage(msgspec.Struct, frozen=True):
    role: Role
    content: str | list[Part] | None = None
    name: str | None = None


class StreamOptions(msgspec.Struct, frozen=True):
    include_usage: bool = False


class ChatRequest(msgspec.Struct, frozen=True):
    """POST /v1/chat/completions: what Chalie reads. Other fields are accepted and ignored
    (see the module's docstring)."""

    model: str
    messages: list[ChatMessage]
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    n: int | None = None
    tool_choice: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None


# -- answers --

class Model(msgspec.Struct, frozen=True):
    id: str
    created: int
    object: Literal["model"] = "model"
    owned_by: str = OWNER


class ModelList(msgspec.Struct, frozen=True):
    data: list[Model]
    object: Literal["list"] = "list"


class Usage(msgspec.Struct, frozen=True):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class AnswerMessage(msgspec.Struct, frozen=True):
    content: str
    role: Literal["assistant"] = "assistant"


class Choice(msgspec.Struct, frozen=True):
    message: AnswerMessage
    index: int = 0
    finish_reason: Literal["stop"] = "stop"


class ChatCompletion(msgspec.Struct, frozen=True):
    id: str
    created: int
    model: str
    choices: list[Choice]
    usage: Usage
    object: Literal["chat.completion"] = "chat.completion"


class Delta(msgspec.Struct, frozen=True, omit_defaults=True):
    role: Literal["assistant"] | None = None
    content: str | None = None


class ChunkChoice(msgspec.Struct, frozen=True):
    delta: Delta
    finish_reason: Literal["stop"] | None = None
    index: int = 0


class ChatChunk(msgspec.Struct, frozen=True):
    """One server-sent event of a streamed answer; the usage chunk has no choices."""

    id: str
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: Usage | None = None
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"


class ErrorDetail(msgspec.Struct, frozen=True):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class OpenAiError(msgspec.Struct, frozen=True):
    """Every error answer of /v1/, in OpenAI's shape."""

    error: ErrorDetail


# -- what a request says --

class NewMessage(msgspec.Struct, frozen=True):
    """The person's new message: its text and its images (media type, bytes)."""

    text: str
    images: tuple[tuple[str, bytes], ...]


def check(request: ChatRequest) -> None:
    """What Chalie cannot honour: a 400 naming the field."""
    if request.model not in MODELS:
        raise OpenAiFault(404, f"The model {request.model!r} does not exist; this server "
                               f"offers {', '.join(MODELS)}", param="model",
                          code="model_not_found")
    if request.n is not None and request.n != 1:
        raise OpenAiFault(400, "n: Chalie gives one answer a request; send n=1 or leave it "
                               "out", param="n")
    if request.tool_choice not in (None, "none", "auto"):
        raise OpenAiFault(400, "tool_choice: Chalie runs its own tools inside the turn and "
                               "never returns a tool call; leave tool_choice out",
                          param="tool_choice")
    kind = (request.response_format or {}).get("type", "text")
    if kind != "text":
        raise OpenAiFault(400, f"response_format: Chalie answers in its own words; "
                               f"{kind!r} is not offered", param="response_format")
    if not request.messages:
        raise OpenAiFault(400, "messages: give at least one message", param="messages")
    if request.messages[-1].role != "user":
        raise OpenAiFault(400, "messages: the last message must be the person's (role "
                               f"user), not {request.messages[-1].role!r}", param="messages")


def new_message(request: ChatRequest, max_image_bytes: int) -> NewMessage:
    """The last message's text (its text parts joined) and its images, from data: URLs."""
    last = len(request.messages) - 1
    content = request.messages[last].content
    parts: list[Part] = [TextPart(content)] if isinstance(content, str) else list(content or ())
    texts, images = [], []
    for n, part in enumerate(parts):
        if isinstance(part, TextPart):
            texts.append(part.text)
            continue
        param = f"messages[{last}].content[{n}].image_url.url"
        images.append(_image(part.image_url.url, param, max_image_bytes))
    if len(images) > MAX_IMAGE_IDS:
        raise OpenAiFault(400, f"messages[{last}].content: at most {MAX_IMAGE_IDS} images in "
                               "a message", param=f"messages[{last}].content")
    text = "\n".join(t for t in texts if t.strip())
    if not text.strip() and not images:
        raise OpenAiFault(400, f"messages[{last}].content: the message is empty",
                          param=f"messages[{last}].content")
    return NewMessage(text, tuple(images))


_DATA_URL = re.compile(r"data:([^;,]*)(;[^,]*)?,(.*)", re.DOTALL)


def _image(url: str, param: str, max_bytes: int) -> tuple[str, bytes]:
    found = _DATA_URL.fullmatch(url.strip())
    if found is None:
        raise OpenAiFault(400, f"{param}: Chalie does not fetch images; send the image in a "
                               "data: URL (data:image/png;base64,...)", param=param,
                          code="invalid_image_url")
    if ";base64" not in (found.group(2) or ""):
        raise OpenAiFault(400, f"{param}: the data: URL must be base64", param=param,
                          code="invalid_image_url")
    try:
        data = base64.b64decode(found.group(3), validate=True)
    except (binascii.Error, ValueError):
        raise OpenAiFault(400, f"{param}: not valid base64", param=param,
                          code="invalid_image_url") from None
    if len(data) > max_bytes:
        raise OpenAiFault(413, f"{param}: the image is {len(data)} bytes; images.max_bytes "
                               f"allows {max_bytes}", param=param)
    media_type = sniff(data)
    if media_type is None:
        raise OpenAiFault(400, f"{param}: not a PNG, JPEG, WebP or GIF image", param=param,
                          code="invalid_image_format")
    return media_type, data


def image_id(data: bytes) -> str:
    """An image's id from its bytes: a request sent again stores no second copy."""
    return "oai-" + hashlib.sha256(data).hexdigest()[:40]


def channel_of(token_name: str, user: str | None) -> str:
    """The token's channel, or with `user` a channel of its own under the token's:
    `token.<name>.<user>`, the user's text as it is when it makes a channel name, else a short
    hash of it."""
    base = token_channel(token_name)
    if not user:
        return base
    channel = f"{base}.{user}"
    if CHANNEL_RE.fullmatch(channel):
        return channel
    return f"{base}.u{hashlib.sha256(user.encode()).hexdigest()[:16]}"


def client_id(token_id: str, channel: str, body: ChatRequest, window: int) -> str:
    """The message's id for Chalie's idempotency: the same conversation sent again within the
    same repeat window (a retry, a Regenerate) runs no second turn (see openai_chat.py)."""
    digest = hashlib.sha256()
    for piece in (token_id, channel, body.model, str(window)):
        digest.update(piece.encode() + b"\0")
    digest.update(msgspec.json.encode(body.messages))
    return "openai-" + digest.hexdigest()[:32]
