"""The StoreWriter's ops of delivery away from the page (chalie/store/delivery_rows.py): the
deliveries recorded for queued frames and how each send went, the devices that take Web Push,
the VAPID key pair, and the paired Telegram chats and their pairing codes. They travel with the
background paths' ops (chalie/store/background_ops.py applies them here).
"""

from __future__ import annotations

from typing import Any

import apsw
import msgspec

from chalie.store import delivery_rows
from chalie.store.delivery_rows import DeliveryRow, PushSubscription, TelegramChat, VapidKey


class RecordDeliveries(msgspec.Struct, frozen=True, tag=True):
    """Deliveries for queued frames, and those frames taken off the queue (`done`: (channel,
    seq)). Value: the ids of the deliveries stored (a delivery that exists is not again)."""

    rows: tuple[DeliveryRow, ...]
    done: tuple[tuple[str, int], ...]


class DeliveryTried(msgspec.Struct, frozen=True, tag=True):
    """How one send went: `status` sent, failed (given up), gone, or pending again (a retry at
    `next_at`). A Web Push target's device row follows it. Value: False when the delivery was
    no longer open."""

    delivery_id: str
    status: str
    error: str | None = None
    next_at: float | None = None
    ref: str | None = None
    push_id: str | None = None  # the device, when the target is one


class CloseDeliveries(msgspec.Struct, frozen=True, tag=True):
    """Open deliveries no longer to send (`status` dropped), with why. Value: how many."""

    ids: tuple[str, ...]
    status: str
    reason: str


class ReleaseHeld(msgspec.Struct, frozen=True, tag=True):
    """Deliveries held in quiet hours are due now."""

    ids: tuple[str, ...]


class PruneDeliveries(msgspec.Struct, frozen=True, tag=True):
    """Forget closed deliveries created before `before`. Value: how many."""

    before: float


class Subscribe(msgspec.Struct, frozen=True, tag=True):
    """A device takes Web Push. Value: (its row, whether it is new)."""

    row: PushSubscription


class Unsubscribe(msgspec.Struct, frozen=True, tag=True):
    """A device no longer takes Web Push (the person switched it off, or its push service
    said it is gone). Value: False when there was none."""

    subscription_id: str
    reason: str


class SaveVapidKey(msgspec.Struct, frozen=True, tag=True):
    key: VapidKey


class PairTelegram(msgspec.Struct, frozen=True, tag=True):
    """Pair a Telegram chat, spending the code it sent. Value: False (nothing paired) when the
    code is unknown, used or expired."""

    chat: TelegramChat
    code_hash: str


class UnpairTelegram(msgspec.Struct, frozen=True, tag=True):
    """Value: False when the chat was not paired."""

    chat_id: int


class AddTelegramCode(msgspec.Struct, frozen=True, tag=True):
    """A one-time pairing code (its hash), good until `expires_at`."""

    code_hash: str
    expires_at: float


DeliveryOp = (
    RecordDeliveries | DeliveryTried | CloseDeliveries | ReleaseHeld | PruneDeliveries
    | Subscribe | Unsubscribe | SaveVapidKey | PairTelegram | UnpairTelegram | AddTelegramCode
)


def apply(conn: apsw.Connection, op: DeliveryOp, *, now: float) -> Any:
    match op:
        case RecordDeliveries(rows=rows, done=done):
            stored = [row.id for row in rows if delivery_rows.insert(conn, row)]
            delivery_rows.unqueue(conn, done)
            return stored
        case DeliveryTried():
            changed = delivery_rows.tried(conn, op.delivery_id, status=op.status, now=now,
                                          error=op.error, next_at=op.next_at, ref=op.ref)
            if op.push_id is not None and op.status != "gone":
                delivery_rows.push_outcome(conn, op.push_id, ok=op.status == "sent", now=now,
                                           error=op.error, retry_at=op.next_at)
            elif op.push_id is not None:
                delivery_rows.unsubscribe(conn, op.push_id, now, op.error or "gone")
            return changed
        case CloseDeliveries(ids=ids, status=status, reason=reason):
            return delivery_rows.close(conn, ids, status, reason, now)
        case ReleaseHeld(ids=ids):
            delivery_rows.release(conn, ids, now)
        case PruneDeliveries(before=before):
            return delivery_rows.prune(conn, before)
        case Subscribe(row=row):
            return delivery_rows.subscribe(conn, row)
        case Unsubscribe(subscription_id=sub_id, reason=reason):
            return delivery_rows.unsubscribe(conn, sub_id, now, reason)
        case SaveVapidKey(key=key):
            delivery_rows.save_vapid_key(conn, key)
        case PairTelegram(chat=chat, code_hash=code_hash):
            if not delivery_rows.use_code(conn, code_hash, now):
                return False
            delivery_rows.pair_chat(conn, chat)
            return True
        case UnpairTelegram(chat_id=chat_id):
            return delivery_rows.unpair_chat(conn, chat_id, now)
        case AddTelegramCode(code_hash=code_hash, expires_at=expires_at):
            delivery_rows.add_code(conn, code_hash, now, expires_at)
    return None
