"""The seam between the actors and the sockets: frames out, already sequenced and logged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Outbox(Protocol):
    def push(self, channel: str, frames: Sequence[str], *, again: bool = False) -> None:
        """Deliver encoded frames to every socket of `channel`; callable from any thread.
        `again`: the frames were pushed before and go out once more even to sockets that had
        them (a client retrying a message gets its answer; clients de-duplicate by seq)."""
        ...

    def live(self, channel: str, frame: str) -> None:
        """Deliver an ephemeral frame (no seq, not logged: `message_delta`) to the sockets of
        `channel` open now; callable from any thread, in order with `push`."""
        ...
