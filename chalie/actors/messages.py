"""Messages the actors exchange: frozen, tagged msgspec structs, dispatched with `match`."""

from __future__ import annotations

from typing import Any

import msgspec

from chalie.act.critic import Checked
from chalie.cognition.topics import TopicChoice
from chalie.frames import Frame
from chalie.llm.types import ChatResponse, Image, ToolCall
from chalie.memory.context import TurnContext
from chalie.store.background_ops import Op
from chalie.store.concept_rows import ConceptRow
from chalie.store.effects import RememberFact
from chalie.store.interface_rows import InterfaceRow, SubscriptionRow
from chalie.store.memory_writes import EpisodeRow, SnapshotRow
from chalie.store.records import StoredCompaction, TurnRecord
from chalie.tools.base import ToolOutcome
from chalie.world.signals import Signal


class _Msg(msgspec.Struct, frozen=True, tag=True):
    pass


# --- supervision -------------------------------------------------------------------------------

class ChildFailed(_Msg, frozen=True):
    """A child crashed. `pending` holds the messages left in its inbox, to hand to its successor."""

    name: str
    urn: str
    error: str
    pending: tuple[Any, ...] = ()


class RestartChild(_Msg, frozen=True):
    name: str


class Ping(_Msg, frozen=True):
    """Ask a supervisor to answer once it has started its children."""


# --- session -----------------------------------------------------------------------------------

class UserMessage(_Msg, frozen=True):
    """A person's chat message; `received_at` is the edge's monotonic receipt time."""

    text: str
    received_at: float
    source: str = "text"
    client_id: str | None = None
    notify_channel: str | None = None  # an interface's message: the answer also goes here
    topic: str | None = None  # as a `notification` frame with this topic
    image_ids: tuple[str, ...] = ()  # images uploaded with POST /api/images, for the model


class FrameRejected(_Msg, frozen=True):
    """The edge could not accept a client frame; the session answers with an `error` frame."""

    reason: str


class ContextReady(_Msg, frozen=True):
    """The turn's context (identity, state, recall, history, tools) was gathered and fitted."""

    turn_id: str
    context: TurnContext
    images: tuple[Image, ...] = ()  # the turn's images, as the store has them
    missing_images: tuple[str, ...] = ()  # image ids the store has no image for
    topic: TopicChoice | None = None  # the message's topic (chalie/cognition/topics.py)


class EncodeTail(_Msg, frozen=True):
    """To the Encoder: a silence ended a stretch of the channel's conversation; encode what
    is not encoded yet now, however little."""

    channel: str


class LlmReturned(_Msg, frozen=True):
    turn_id: str
    response: ChatResponse


class LlmFailed(_Msg, frozen=True):
    turn_id: str
    error: str
    recoverable: bool


class ToolReturned(_Msg, frozen=True):
    turn_id: str
    outcome: ToolOutcome
    duration_ms: float
    approval: str | None = None


class TurnDeadline(_Msg, frozen=True):
    turn_id: str


class CompactionReturned(_Msg, frozen=True):
    """A compaction call came back: stage 'trail' or 'restart' of a turn, or the 'backstop'."""

    turn_id: str
    stage: str
    response: ChatResponse
    tokens_before: int


class CriticReturned(_Msg, frozen=True):
    """The critic's check of a consequential tool call came back (chalie/act/critic.py)."""

    turn_id: str
    call: ToolCall
    checked: Checked


class BackstopChecked(_Msg, frozen=True):
    """The turn-boundary check found the next prompt within budget: nothing to compact."""


class ApprovalExpired(_Msg, frozen=True):
    turn_id: str
    approval_id: str


class TurnStored(_Msg, frozen=True):
    turn_id: str


class TurnStoreFailed(_Msg, frozen=True):
    turn_id: str
    error: str


class Steer(_Msg, frozen=True):
    """`act_steer`: redirect the running turn; with none running it is a chat."""

    text: str
    received_at: float


class ActionRequest(_Msg, frozen=True):
    """`action`: run a skill without the LLM, or answer an escalation (skill "approval")."""

    skill: str
    params: dict[str, Any]
    received_at: float
    client_id: str | None = None


SessionMessage = (
    UserMessage | FrameRejected | Steer | ActionRequest | ContextReady | LlmReturned | LlmFailed
    | ToolReturned | BackstopChecked
    | TurnDeadline | CompactionReturned | ApprovalExpired | TurnStored | TurnStoreFailed
)


class Deliver(_Msg, frozen=True):
    """To the SessionSupervisor: route `message` to the channel's Session, starting it if needed."""

    channel: str
    message: SessionMessage


class IdleCheck(_Msg, frozen=True):
    """To a Session, from its own idle timer: has it been idle for server.session_idle_s?"""


class SessionIdle(_Msg, frozen=True):
    """To the SessionSupervisor: the Session `urn` of `channel` has been idle long enough."""

    channel: str
    urn: str


class StopIfIdle(_Msg, frozen=True):
    """To a Session, from its supervisor (which holds the channel's messages meanwhile): answer
    IdleAnswer, stop=True when it is still idle and may be stopped, False when something
    arrived since it said idle."""


class IdleAnswer(_Msg, frozen=True):
    """To the SessionSupervisor: the Session `urn` of `channel` answers StopIfIdle."""

    channel: str
    urn: str
    stop: bool


# --- background paths ----------------------------------------------------------------------

class PersonActive(_Msg, frozen=True):
    """To the Dmn: the person sent something (a chat, an action) at wall-clock `at`: the idle
    timer starts again."""

    at: float


class PersonConnected(_Msg, frozen=True):
    """To the Dmn: a socket opened on `channel`: deferred messages are delivered now."""

    channel: str


class SchedulesChanged(_Msg, frozen=True):
    """To the Scheduler: schedules were added or cancelled; read them again."""


class RunGoal(_Msg, frozen=True):
    """To the GoalSupervisor: a goal was stored; pursue it."""

    goal_id: str


class StopGoal(_Msg, frozen=True):
    """To the GoalSupervisor: a goal was cancelled (in the store already); stop its actor."""

    goal_id: str


class ToGoal(_Msg, frozen=True):
    """To the GoalSupervisor: route `message` to a goal's actor (held while it restarts)."""

    goal_id: str
    message: Any


# --- store writer ------------------------------------------------------------------------------

class AppendFrames(_Msg, frozen=True):
    channel: str
    frames: tuple[Frame, ...]


class PushLive(_Msg, frozen=True):
    """An ephemeral frame (`message_delta`, encoded): pushed, never logged. It goes through the
    StoreWriter only so it reaches the sockets in order with the frames logged before it (the
    narration of the tool call before the answer's text)."""

    channel: str
    frame: str


class CommitTurn(_Msg, frozen=True):
    """Store the turn and log its closing frames in one transaction, then push the frames.
    `extras`: a background path's own writes, in the turn's transaction (a scheduled run marked
    done, a goal's step checkpointed, a proactive message). `reply_to` gets TurnStored or
    TurnStoreFailed: "sessions" (routed to the turn's channel), "goal:<id>", or an actor's
    directory name."""

    record: TurnRecord
    frames: tuple[Frame, ...]
    received_at: float  # monotonic receipt of the message: the writer stamps the response time
    notify: AppendFrames | None = None  # frames for another channel, in the same transaction
    extras: tuple[Op, ...] = ()
    reply_to: str = "sessions"


class ApplyOps(_Msg, frozen=True):
    """To the StoreWriter: apply background ops in one transaction, log and push the frames
    they make. Asked: answers OpsApplied. Told with `reply_to`: OpsApplied goes there."""

    ops: tuple[Op, ...]
    reply_to: str | None = None
    tag: str = ""


class OpsApplied(_Msg, frozen=True):
    """The ops of an ApplyOps were stored (`error` None: `values`, one per op) or not."""

    tag: str
    values: tuple[Any, ...] = ()
    error: str | None = None


class CloseOpenExchange(_Msg, frozen=True):
    """A Session (re)started: end a turn of the channel that was cut off with error + done."""

    channel: str


class RepushExchange(_Msg, frozen=True):
    """Push an already logged exchange's frames again (a client retried a chat by client_id)."""

    channel: str
    exchange_id: str


class SaveCheckpoint(_Msg, frozen=True):
    """A new Current State of the channel, with the audit record of the call that wrote it."""

    channel: str
    text: str
    upto_transcript_id: int
    turn_id: str | None
    compaction: StoredCompaction | None = None
    snapshots: tuple[SnapshotRow, ...] = ()


class CreateAuthSession(_Msg, frozen=True):
    token_hash: str
    created_at: float
    expires_at: float


class PruneStep(_Msg, frozen=True):
    """To the StoreWriter: delete at most `batch` rows of `kind` (chalie/store/retention.py)
    older than `before`, in one short transaction; Pruned goes to `reply_to`."""

    kind: str
    before: float
    batch: int
    reply_to: str = "housekeeper"


class Pruned(_Msg, frozen=True):
    """A PruneStep's answer: rows deleted (fewer than the batch: that kind is done), or the
    error that stopped it."""

    kind: str
    deleted: int
    batch: int
    error: str | None = None


class Vacuum(_Msg, frozen=True):
    """To the StoreWriter: return up to `pages` free pages to the file system; Vacuumed goes to
    `reply_to`."""

    pages: int
    reply_to: str = "housekeeper"


class Vacuumed(_Msg, frozen=True):
    pages: int
    error: str | None = None


class RotateAuthSession(_Msg, frozen=True):
    """Replace a session's token: the new row keeps the old one's expiry, the old one ends at
    `old_until`. Answered with that expiry, or None when the old row is gone or was already
    replaced (it ends by `old_until` already), so concurrent requests rotate it once."""

    old_hash: str
    new_hash: str
    now: float
    old_until: float


class EndAuthSession(_Msg, frozen=True):
    """Log out: delete the session row. Answered with whether there was one."""

    token_hash: str


# --- memory ------------------------------------------------------------------------------------

class StoreEpisodes(_Msg, frozen=True):
    """To the StoreWriter: a window of a channel's transcript became these episodes (and these
    facts); its encoding mark moves to `upto_transcript_id`."""

    channel: str
    after_transcript_id: int  # the encoding mark the window started from
    upto_transcript_id: int
    encoding_id: str
    episodes: tuple[EpisodeRow, ...]
    facts: tuple[RememberFact, ...] = ()  # as of the messages they came from (observed_at)
    fact_turn_id: str | None = None  # provenance of the facts: the window's last turn
    snapshots: tuple[SnapshotRow, ...] = ()
    tokens: int = 0  # what the encoding's LLM calls used (charged to the encoder's budget)
    llm_calls: int = 0
    concepts: tuple[ConceptRow, ...] = ()  # the window's concepts, embedded in `space_id`
    relations: tuple[tuple[str, str, str], ...] = ()  # (name, name, relation) the encoder named
    space_id: int | None = None
    situation: str = ""  # the situation model's summarised part ("" when the encoder gave none)


class SaveSnapshots(_Msg, frozen=True):
    """To the StoreWriter: the prompts of a background job that stored nothing else, and what
    its calls used, for `path`'s budget."""

    turn_id: str
    snapshots: tuple[SnapshotRow, ...]
    path: str = "encoder"
    tokens: int = 0
    llm_calls: int = 0


class StoreVectors(_Msg, frozen=True):
    """To the StoreWriter: vectors of items of one kind, embedded in the background."""

    space_id: int
    embedder: str
    kind: int
    rows: tuple[tuple[int, bytes], ...]
    upto_id: int
    more: bool  # the batch was full: there may be more items to embed


class DropSpace(_Msg, frozen=True):
    """To the StoreWriter: remove (in batches) a vector space that is no longer in use."""

    space_id: int


class ForgetItem(_Msg, frozen=True):
    """To the StoreWriter, asked: forget a knowledge item or an episode; replies True when it
    existed."""

    kind: str  # "knowledge" | "episode"
    item_id: int


class MemoryGrew(_Msg, frozen=True):
    """To the Encoder: new items were stored (transcript of `channel`, episodes, knowledge)."""

    channel: str | None = None


class EncodeWindow(_Msg, frozen=True):
    """The Encoder's own: a channel's encoding finished (stored, skipped or failed)."""

    channel: str
    stored: bool


class IndexBatch(_Msg, frozen=True):
    """The Encoder's own: an embedding batch finished; `more` when there may be more to do."""

    more: bool
    error: str | None = None


# --- other programs ----------------------------------------------------------------------------

class SignalsIn(_Msg, frozen=True):
    """To WorldState: accepted signals (from REST or a broadcast stream)."""

    signals: tuple[Signal, ...]


class FlushWorld(_Msg, frozen=True):
    """WorldState's own: write world state to the store now."""


class SaveWorld(_Msg, frozen=True):
    """To the StoreWriter: world state as it is now (it replaces what is stored)."""

    signals: tuple[Signal, ...]


class CreatePairingKey(_Msg, frozen=True):
    """To the StoreWriter, asked: keep a pairing key's hash until `expires_at`."""

    key_hash: str
    created_at: float
    expires_at: float


class PairInterface(_Msg, frozen=True):
    """To the StoreWriter, asked: use up the pairing key and store the interface, in one
    transaction. Replies True, or False when the key is unknown, used or expired."""

    key_hash: str
    now: float
    row: InterfaceRow


class UpdateCapabilities(_Msg, frozen=True):
    """To the StoreWriter, asked: an interface's refreshed capabilities. Replies True when the
    interface is still paired."""

    interface_id: str
    version: str
    capabilities: str  # JSON
    refreshed_at: float


class DeleteInterface(_Msg, frozen=True):
    """To the StoreWriter, asked: unpair. Replies True when it was paired."""

    interface_id: str


class SaveSubscription(_Msg, frozen=True):
    """To the StoreWriter, asked: a new broadcast stream. Replies True, or False when its name
    is taken."""

    row: SubscriptionRow


class DeleteSubscription(_Msg, frozen=True):
    """To the StoreWriter, asked: forget a broadcast stream. Replies True when it existed."""

    subscription_id: str


class InterfaceChanged(_Msg, frozen=True):
    """To InterfaceHealth, asked: an interface was paired or refreshed (its row as stored) and
    is online now. Replies once its tools are published."""

    row: InterfaceRow


class InterfaceGone(_Msg, frozen=True):
    """To InterfaceHealth, asked: an interface was unpaired. Replies once its tools and token
    are gone from what readers see."""

    interface_id: str


class CheckHealth(_Msg, frozen=True):
    """InterfaceHealth's own: time to check every interface."""


class HealthChecked(_Msg, frozen=True):
    """InterfaceHealth's own: one interface's /health answered (`error` None) or not."""

    interface_id: str
    error: str | None
    checked_at: float
