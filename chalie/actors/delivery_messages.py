"""What the Delivery actor (chalie/actors/delivery.py) receives from the others."""

from __future__ import annotations

import msgspec


class _Msg(msgspec.Struct, frozen=True, tag=True):
    pass


class AwayQueued(_Msg, frozen=True):
    """From the StoreWriter, after a commit: frames for away from the page were queued
    (chalie/store/delivery_rows.py): read the queue."""


class TargetsChanged(_Msg, frozen=True):
    """A target was added or removed (a device subscribed, a chat paired, the Apprise URLs
    saved): open deliveries to a target that is gone are dropped."""
