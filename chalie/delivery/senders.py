"""The services that carry an Item to the person: what each must do for the Delivery actor.

A Sender names its targets as they are now (the push subscriptions in the store, the Apprise
URLs in the settings, the paired Telegram chats) and sends one Item to one target. `send` runs
on a worker thread, blocks at most about `notify.timeout_s`, and never raises: what went wrong
is its `Sent`. The actor records every outcome (chalie/store/delivery_rows.py), retries a
failure with back-off, and drops a target that is `gone`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from chalie.config import NOTIFY_KINDS
from chalie.delivery.items import Item

Outcome = Literal["sent", "gone", "failed"]
ALL_KINDS = frozenset(NOTIFY_KINDS)


@dataclass(frozen=True)
class Target:
    """`key`: "push:<subscription id>", "apprise:<hash of the URL>" or "telegram:<chat id>",
    unique over every sender; `service`: the `channel` label of
    chalie_notifications_sent_total (webpush, telegram, or the Apprise service: json, ntfy,
    tgram, mailto...); `name`: what the person sees of it (a device's name, a masked URL);
    `kinds`: the kinds it takes."""

    key: str
    service: str
    name: str
    kinds: frozenset[str] = ALL_KINDS


@dataclass(frozen=True)
class Sent:
    """How a send went: `outcome` sent, gone (the target no longer exists: a push service's
    404 or 410) or failed (try again later; `retry_after_s` when the service said when);
    `error` what went wrong, secrets masked; `ref` the service's id for the message (a
    Telegram message id), kept for `settled`."""

    outcome: Outcome
    error: str | None = None
    ref: str | None = None
    retry_after_s: float | None = None


class Sender(Protocol):
    name: str  # webpush | apprise | telegram

    def targets(self) -> list[Target]:
        """The targets now (read on the Delivery actor's thread: quick, no network)."""
        ...

    def send(self, target: Target, item: Item) -> Sent:
        """Deliver `item` to `target` (on a worker thread; never raises)."""
        ...


@runtime_checkable
class Settles(Protocol):
    """A Sender that changes what it sent when an escalation it carried is answered (Telegram
    replaces the Approve and Deny buttons with the outcome)."""

    def settled(self, target: Target, item: Item, ref: str, outcome: str) -> None: ...


@runtime_checkable
class Chooses(Protocol):
    """A Sender that declines some items (Telegram: the escalations of a turn the person runs
    in that chat, which its own conversation shows)."""

    def wants(self, target: Target, item: Item) -> bool: ...
