"""What the StoreWriter receives, and its answers: frames to log and push, turns to commit,
background ops, checkpoints, memory (episodes, vectors, forgetting), housekeeping (pruning,
vacuum), login sessions, and other programs' rows (pairing, interfaces, subscriptions, world
state). "Asked" messages are sent with `ask` and answered with the value their docstring names."""

from __future__ import annotations

from typing import Any

import msgspec

from chalie.frames import Done, Error, Frame, Message
from chalie.store.background_ops import Op
from chalie.store.concept_rows import ConceptRow
from chalie.store.effects import RememberFact
from chalie.store.interface_rows import InterfaceRow, SubscriptionRow
from chalie.store.memory_writes import EpisodeRow, SnapshotRow
from chalie.store.records import StoredCompaction, TurnRecord
from chalie.store.token_rows import TokenRow
from chalie.values.signals import Signal


class _Msg(msgspec.Struct, frozen=True, tag=True):
    pass


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


class CreateApiToken(_Msg, frozen=True):
    """A scoped API token. Answered with False (nothing stored) when one of its name exists."""

    row: TokenRow


class RevokeApiToken(_Msg, frozen=True):
    """Delete a token's row. Answered with whether there was one."""

    token_id: str


class TouchApiTokens(_Msg, frozen=True):
    """Told: when tokens were last used, (token id, time) each."""

    used: tuple[tuple[str, float], ...]


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
    """To the StoreWriter, asked: what an interface's /capabilities answer now (its tools and the
    signal types it declares). Replies True when the interface is still paired."""

    interface_id: str
    version: str
    capabilities: str  # JSON
    capability_signals: tuple[str, ...] | None  # None: /capabilities declared none
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


def stamped(commit: CommitTurn, now: float) -> tuple[TurnRecord, tuple[Frame, ...]]:
    """The turn and its closing frames with the response time as of now, when it is stored:
    the person sees the answer only after this, so the time spent queued for the store counts."""
    elapsed = max(0.0, now - commit.received_at)
    frames: list[Frame] = []
    for frame in commit.frames:
        if isinstance(frame, Message | Error) and frame.metrics is not None:
            metrics = msgspec.structs.replace(frame.metrics, response_time_s=round(elapsed, 4))
            frames.append(msgspec.structs.replace(frame, metrics=metrics))
        elif isinstance(frame, Done):
            frames.append(msgspec.structs.replace(frame, duration_ms=round(elapsed * 1000)))
        else:
            frames.append(frame)
    return msgspec.structs.replace(commit.record, response_time_s=elapsed), tuple(frames)
