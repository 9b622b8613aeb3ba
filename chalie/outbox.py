"""The seam between the actors and the sockets: frames out, already sequenced and logged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Outbox(Protocol):
    def push(self, channel: str, frames: Sequence[str]) -> None:
        """Deliver encoded frames to every socket of `channel`; callable from any thread."""
        ...
