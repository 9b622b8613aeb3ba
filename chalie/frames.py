"""Server -> client frames of /ws (spec/interfaces.md section 5).

They live outside edge/ because actors build them and the StoreWriter logs them; the edge only
pushes their bytes. Every frame gets its channel's next `seq` when the StoreWriter appends it to
the event log, just before it is pushed. Frames that belong to a turn carry its `exchange_id`.
"""

from __future__ import annotations

from typing import Literal

import msgspec


class TextBlock(msgspec.Struct, frozen=True, tag="text", tag_field="type"):
    text: str


Block = TextBlock


class FrameMetrics(msgspec.Struct, frozen=True, omit_defaults=True):
    """The per-turn metrics block: tokens over every LLM call (and of them, the prompts' and
    the answers', as the providers reported them: left out when none), calls per tool,
    seconds."""

    tokens_total: int
    tools: dict[str, int]
    response_time_s: float
    prompt_tokens: int = 0
    completion_tokens: int = 0


class _Frame(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    seq: int = 0


Stage = Literal["processing", "thinking", "retrieving_memory", "responding"]


class Status(_Frame, frozen=True, kw_only=True, tag="status", omit_defaults=True):
    """A turn's stage. The first (`processing`) also carries what the turn answers: the
    person's `text`, the chat's `client_id` and `image_ids` (each left out when empty), so a
    client that reloads can show both sides of the conversation from the log, and knows which
    of its messages the server received; and `source` when the message was not typed on a
    page: "voice", or "telegram" (the person wrote in their paired Telegram chat)."""

    stage: Stage
    exchange_id: str | None = None
    text: str | None = None
    client_id: str | None = None
    image_ids: tuple[str, ...] = ()
    source: str | None = None


class ActNarration(_Frame, frozen=True, kw_only=True, tag="act_narration"):
    """A tool call the turn makes: `text` a sentence for the person (prompts/narration.toml),
    `args` the call's arguments as JSON, for a client's details."""

    text: str
    step: int
    tool: str
    exchange_id: str
    args: str = ""


class Message(_Frame, frozen=True, kw_only=True, tag="message"):
    """A turn's answer, whole: its `blocks` (text, as Markdown, and the like), what it cost
    (`metrics`: tokens, tool calls, time), and the topic, mode and confidence the turn ran
    with. Sent once the answer is on disk; `message_delta` frames may have shown it growing."""

    blocks: tuple[Block, ...]
    exchange_id: str
    metrics: FrameMetrics
    topic: str | None = None
    mode: str = "act"
    confidence: float | None = None


class Done(_Frame, frozen=True, kw_only=True, tag="done"):
    """The turn `exchange_id` is over (answered, stopped or failed): `duration_ms` from the
    message to now. Nothing more of it follows."""

    duration_ms: int
    exchange_id: str


class Error(_Frame, frozen=True, kw_only=True, tag="error"):
    """Something the person should know went wrong: a turn that failed (`exchange_id`, with
    what it cost so far), or a frame the server could not accept (no `exchange_id`). The socket
    stays open. `recoverable`: sending again may well work (the model was unreachable, the turn
    timed out, a frame was malformed); false when it will not (no such skill)."""

    message: str
    recoverable: bool
    exchange_id: str | None = None
    metrics: FrameMetrics | None = None


class Card(_Frame, frozen=True, kw_only=True, tag="card"):
    """A tool result rendered as a card. `html` is made by Chalie from the tool's blocks, every
    string escaped; `css` is scoped to `.chalie-card-<scope_id>`; `open_url` is a link the tool
    asked the client to open in a new tab."""

    html: str
    css: str
    scope_id: str
    tool_name: str
    title: str
    accent_color: str
    output_id: str
    topic: str | None = None
    exchange_id: str | None = None
    open_url: str | None = None


class Notification(_Frame, frozen=True, kw_only=True, tag="notification"):
    """Something that happened in the background. `source` says what sent it: dmn (a thought
    of Chalie's own), schedule (a scheduled prompt; `schedule_id`), goal (a goal's result;
    `goal_id`) or interface (the answer to a paired program's message; `program` is its
    name)."""

    content: str
    topic: str | None = None
    source: str | None = None
    schedule_id: str | None = None
    goal_id: str | None = None
    program: str | None = None


class Escalation(_Frame, frozen=True, kw_only=True, tag="escalation"):
    """A tool call that waits for the person's approval. Answer with an `action` frame:
    {"skill": "approval", "params": {"approval_id": ..., "approve": true|false}} (with
    "always": true beside "approve": true, when `always` offers it: the tool then runs without
    asking from now on). `why` says which program's words the call came from, when it did.
    `held`: the call was held on a turn nobody watched (it has no `exchange_id`: the person saw
    no exchange of that turn); it waits `expires_in_s` for an answer, across reconnects. With
    `expires_in_s` 0 nothing waits: the critic asks the person to check what a consequential
    call did (`approval_id` "critic-<call id>", `content` says why)."""

    content: str
    approval_id: str
    tool: str
    args: str
    expires_in_s: float
    exchange_id: str | None
    topic: str | None = None
    why: str | None = None
    always: bool = False
    held: bool = False


class Decision(_Frame, frozen=True, kw_only=True, tag="decision"):
    """How an escalation ended, logged so every client shows it (on any device, after any
    reload or resume): `outcome` approved, denied, expired (nobody answered in time, or the
    turn ended first) or withdrawn (the person steered elsewhere); `by` who answered: "page"
    (a /ws client of the person's), "program" (anything else), null when nobody did. A held
    call's (Escalation.held) has no `exchange_id`."""

    approval_id: str
    outcome: Literal["approved", "denied", "expired", "withdrawn"]
    by: Literal["page", "program"] | None
    tool: str
    exchange_id: str | None


class Task(_Frame, frozen=True, kw_only=True, tag="task"):
    """A goal's progress. With `step_id` None the goal changed state (planning, running,
    paused, completed, failed, cancelled, expired); otherwise one step of its plan did
    (running, done, failed). `coverage` is the share of the plan's steps done, 0 to 1; `title`
    the goal or the step's description."""

    goal_id: str
    status: str
    coverage: float
    step_id: str | None = None
    title: str = ""
    error: str | None = None


class ImageReady(_Frame, frozen=True, kw_only=True, tag="image_ready"):
    """An image a chat message carried (`image_ids`) reached the model ("success"), or the
    turn ended before it could ("failed"): one frame an image, once."""

    image_id: str
    status: Literal["success", "failed"]


Frame = (
    Status | ActNarration | Message | Done | Error | Card | Notification | Escalation | Decision
    | Task | ImageReady
)

class MessageDelta(msgspec.Struct, frozen=True, kw_only=True, tag="message_delta",
                   tag_field="type", omit_defaults=True):
    """A piece of the answer's text as the model writes it: ephemeral, so it has no `seq`, is
    never logged and never replayed; the `message` frame that follows is the answer. The texts
    of an exchange's deltas concatenate to that message's text. `reset`: the text so far was
    not the answer after all (the model went on to call a tool, or the person steered):
    start again from this delta's text. A socket that opens or resumes mid-answer is sent one
    delta with `reset` and the whole text so far (chalie/edge/hub.py), so deltas it missed
    leave no hole."""

    exchange_id: str
    text: str
    reset: bool = False


_encode = msgspec.json.Encoder().encode


def encode_live(frame: MessageDelta | Error | Done) -> str:
    """A frame pushed without a seq, never logged: `message_delta`; an `error` (and `done`) the
    store could not log because it cannot take writes."""
    return _encode(frame).decode()


def frame_type(frame: Frame) -> str:
    return str(type(frame).__struct_config__.tag)


def encode_frame(frame: Frame, seq: int) -> str:
    return _encode(msgspec.structs.replace(frame, seq=seq)).decode()


def text_blocks(text: str) -> tuple[Block, ...]:
    return (TextBlock(text=text),)


class _SeqOnly(msgspec.Struct):
    seq: int = 0


_read_seq = msgspec.json.Decoder(_SeqOnly).decode

# Keepalive probe: per socket, never logged, so it has no seq (spec/interfaces.md section 5).
PING = '{"type":"ping"}'


def frame_seq(encoded: str) -> int:
    """The seq of an encoded frame, read without decoding the rest."""
    return _read_seq(encoded).seq
