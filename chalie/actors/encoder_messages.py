"""What the Encoder receives: the store grew (from the StoreWriter), a silence ended a stretch
of conversation (from a Session), and the answers to its own encodings and embedding batches."""

from __future__ import annotations

import msgspec


class _Msg(msgspec.Struct, frozen=True, tag=True):
    pass


class MemoryGrew(_Msg, frozen=True):
    """To the Encoder: new items were stored (transcript of `channel`, episodes, knowledge)."""

    channel: str | None = None


class EncodeTail(_Msg, frozen=True):
    """To the Encoder: a silence ended a stretch of the channel's conversation; encode what
    is not encoded yet now, however little."""

    channel: str


class EncodeWindow(_Msg, frozen=True):
    """The Encoder's own: a channel's encoding finished (stored, skipped or failed). `error`
    says, for a person, why the light model could not encode the window (its answers were
    unreadable, or its call failed): the encoder then backs off."""

    channel: str
    stored: bool
    error: str = ""


class RetryEncoding(_Msg, frozen=True):
    """The Encoder's own: a channel's wait after failed encodings is over."""

    channel: str


class IndexBatch(_Msg, frozen=True):
    """The Encoder's own: an embedding batch finished; `more` when there may be more to do."""

    more: bool
    error: str | None = None
