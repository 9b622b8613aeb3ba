"""Delivery away from the page in the store: the frames queued for it, each delivery to each
target, the devices that take Web Push, the VAPID key pair and the paired Telegram chats.

Writes run on the StoreWriter's connection inside its transactions (chalie/store/
delivery_ops.py); reads on any reader.
"""

from __future__ import annotations

from collections.abc import Iterable

import apsw
import msgspec

QUEUED_TYPES = ("notification", "escalation", "decision")
# Channels of other programs' conversations (an API token's, an interface's messages): what
# happens there is theirs to follow, never delivered to the person away from the page.
PROGRAM_CHANNELS = ("token.", "interface.")
OPEN = ("pending", "held")
MAX_QUEUE_READ = 200


class Queued(msgspec.Struct, frozen=True):
    channel: str
    seq: int
    type: str
    frame: str
    created_at: float


class DeliveryRow(msgspec.Struct, frozen=True):
    id: str
    channel: str
    seq: int
    kind: str
    service: str
    target: str
    target_name: str
    title: str
    body: str
    payload: str  # the Item, JSON (chalie/delivery/items.py)
    approval_id: str | None
    exchange_id: str | None
    status: str  # pending | held | sent | failed | gone | dropped | skipped
    attempts: int
    next_at: float | None
    expires_at: float | None
    last_error: str | None
    created_at: float
    updated_at: float
    sent_at: float | None = None
    ref: str | None = None


class PushSubscription(msgspec.Struct, frozen=True):
    id: str
    endpoint: str
    p256dh: str
    auth: str
    name: str
    created_at: float
    last_sent_at: float | None = None
    failures: int = 0
    last_error: str | None = None
    retry_at: float | None = None


class VapidKey(msgspec.Struct, frozen=True):
    private_pem: str
    public_key: str  # base64url, the uncompressed P-256 point
    created_at: float


class TelegramChat(msgspec.Struct, frozen=True):
    chat_id: int
    name: str
    paired_at: float


_DELIVERY = ", ".join(DeliveryRow.__struct_fields__)
_PUSH = ", ".join(PushSubscription.__struct_fields__)


def _marks(n: int) -> str:
    return ", ".join("?" for _ in range(n))


# --- the queue ------------------------------------------------------------------------------

def for_away(channel: str, kinds: Iterable[str]) -> bool:
    """Whether frames of these types on `channel` are queued for away from the page."""
    return not channel.startswith(PROGRAM_CHANNELS) and any(k in QUEUED_TYPES for k in kinds)


def queue(conn: apsw.Connection, channel: str, rows: Iterable[tuple[int, str, str]],
          now: float) -> int:
    """Queue the frames (seq, type, encoded frame) that are for away from the page: those of
    QUEUED_TYPES on the person's channels. How many were."""
    if channel.startswith(PROGRAM_CHANNELS):
        return 0
    n = 0
    for seq, kind, frame in rows:
        if kind in QUEUED_TYPES:
            conn.execute("INSERT OR IGNORE INTO away_queue (channel, seq, type, frame, "
                         "created_at) VALUES (?, ?, ?, ?, ?)", (channel, seq, kind, frame, now))
            n += 1
    return n


def queued(conn: apsw.Connection, limit: int = MAX_QUEUE_READ) -> list[Queued]:
    """The oldest queued frames, in the order they were logged."""
    return [Queued(*r) for r in conn.execute(
        "SELECT channel, seq, type, frame, created_at FROM away_queue "
        "ORDER BY created_at, channel, seq LIMIT ?", (limit,))]


def unqueue(conn: apsw.Connection, keys: Iterable[tuple[str, int]]) -> None:
    conn.executemany("DELETE FROM away_queue WHERE channel = ? AND seq = ?", list(keys))


# --- deliveries -----------------------------------------------------------------------------

def insert(conn: apsw.Connection, row: DeliveryRow) -> bool:
    """A delivery, once per (frame, target): False when that one exists already."""
    conn.execute(f"INSERT OR IGNORE INTO deliveries ({_DELIVERY}) VALUES "
                 f"({_marks(len(DeliveryRow.__struct_fields__))})", msgspec.structs.astuple(row))
    return conn.changes() > 0


def get(conn: apsw.Connection, delivery_id: str) -> DeliveryRow | None:
    row = conn.execute(f"SELECT {_DELIVERY} FROM deliveries WHERE id = ?",
                       (delivery_id,)).fetchone()
    return None if row is None else DeliveryRow(*row)


def tried(conn: apsw.Connection, delivery_id: str, *, status: str, now: float,
          error: str | None, next_at: float | None, ref: str | None) -> bool:
    """How a send went. False when the delivery was no longer open (settled meanwhile)."""
    conn.execute(
        "UPDATE deliveries SET status = ?, attempts = attempts + 1, last_error = ?, "
        "next_at = ?, updated_at = ?, ref = coalesce(?, ref), "
        "sent_at = CASE WHEN ? = 'sent' THEN ? ELSE sent_at END "
        "WHERE id = ? AND status IN ('pending', 'held')",
        (status, error, next_at, now, ref, status, now, delivery_id))
    return conn.changes() > 0


def close(conn: apsw.Connection, ids: Iterable[str], status: str, reason: str,
          now: float) -> int:
    """Close open deliveries (dropped: answered, expired, target removed; sent once due)."""
    n = 0
    for delivery_id in ids:
        conn.execute("UPDATE deliveries SET status = ?, last_error = ?, next_at = NULL, "
                     "updated_at = ? WHERE id = ? AND status IN ('pending', 'held')",
                     (status, reason, now, delivery_id))
        n += conn.changes()
    return n


def release(conn: apsw.Connection, ids: Iterable[str], now: float) -> None:
    """Held deliveries (quiet hours ended) become pending, due now."""
    conn.executemany("UPDATE deliveries SET status = 'pending', next_at = ?, updated_at = ? "
                     "WHERE id = ? AND status = 'held'", [(now, now, i) for i in ids])


def open_rows(conn: apsw.Connection) -> list[DeliveryRow]:
    """Every delivery still to send (pending or held), soonest first."""
    return [DeliveryRow(*r) for r in conn.execute(
        f"SELECT {_DELIVERY} FROM deliveries WHERE status IN ('pending', 'held') "
        "ORDER BY next_at")]


def of_approval(conn: apsw.Connection, approval_id: str) -> list[DeliveryRow]:
    return [DeliveryRow(*r) for r in conn.execute(
        f"SELECT {_DELIVERY} FROM deliveries WHERE approval_id = ? ORDER BY created_at",
        (approval_id,))]


def listing(conn: apsw.Connection, *, limit: int, offset: int,
            service: str | None = None, status: str | None = None) -> list[DeliveryRow]:
    """The delivery log, newest first."""
    where, args = [], []
    if service is not None:
        where.append("service = ?")
        args.append(service)
    if status is not None:
        where.append("status = ?")
        args.append(status)
    clause = f"WHERE {' AND '.join(where)} " if where else ""
    return [DeliveryRow(*r) for r in conn.execute(
        f"SELECT {_DELIVERY} FROM deliveries {clause}ORDER BY created_at DESC, id "
        "LIMIT ? OFFSET ?", (*args, limit, offset))]


def prune(conn: apsw.Connection, before: float, limit: int = 1000) -> int:
    """Forget closed deliveries created before `before`."""
    conn.execute("DELETE FROM deliveries WHERE id IN (SELECT id FROM deliveries WHERE "
                 "created_at < ? AND status NOT IN ('pending', 'held') LIMIT ?)", (before, limit))
    return conn.changes()


# --- push subscriptions ---------------------------------------------------------------------

def subscribe(conn: apsw.Connection, sub: PushSubscription) -> tuple[PushSubscription, bool]:
    """Add a device, or (the same endpoint again) take its new keys and name; (the row, whether
    it is new)."""
    found = conn.execute("SELECT id FROM push_subscriptions WHERE endpoint = ?",
                         (sub.endpoint,)).fetchone()
    if found is not None:
        conn.execute("UPDATE push_subscriptions SET p256dh = ?, auth = ?, name = ?, "
                     "failures = 0, last_error = NULL, retry_at = NULL WHERE id = ?",
                     (sub.p256dh, sub.auth, sub.name, found[0]))
        row = subscription(conn, str(found[0]))
        assert row is not None
        return row, False
    conn.execute(f"INSERT INTO push_subscriptions ({_PUSH}) VALUES "
                 f"({_marks(len(PushSubscription.__struct_fields__))})",
                 msgspec.structs.astuple(sub))
    return sub, True


def subscription(conn: apsw.Connection, sub_id: str) -> PushSubscription | None:
    row = conn.execute(f"SELECT {_PUSH} FROM push_subscriptions WHERE id = ?",
                       (sub_id,)).fetchone()
    return None if row is None else PushSubscription(*row)


def subscriptions(conn: apsw.Connection) -> list[PushSubscription]:
    return [PushSubscription(*r) for r in conn.execute(
        f"SELECT {_PUSH} FROM push_subscriptions ORDER BY created_at, id")]


def unsubscribe(conn: apsw.Connection, sub_id: str, now: float, reason: str) -> bool:
    """Remove a device; its open deliveries are dropped. False when there was none."""
    conn.execute("DELETE FROM push_subscriptions WHERE id = ?", (sub_id,))
    gone = conn.changes() > 0
    if gone:
        conn.execute("UPDATE deliveries SET status = 'dropped', last_error = ?, next_at = NULL, "
                     "updated_at = ? WHERE target = ? AND status IN ('pending', 'held')",
                     (reason, now, f"push:{sub_id}"))
    return gone


def push_outcome(conn: apsw.Connection, sub_id: str, *, ok: bool, now: float,
                 error: str | None = None, retry_at: float | None = None) -> None:
    """A send to a device went (ok) or failed: its run of failures, shown on the dashboard."""
    if ok:
        conn.execute("UPDATE push_subscriptions SET last_sent_at = ?, failures = 0, "
                     "last_error = NULL, retry_at = NULL WHERE id = ?", (now, sub_id))
    else:
        conn.execute("UPDATE push_subscriptions SET failures = failures + 1, last_error = ?, "
                     "retry_at = ? WHERE id = ?", (error, retry_at, sub_id))


# --- the VAPID key pair ---------------------------------------------------------------------

def vapid_key(conn: apsw.Connection) -> VapidKey | None:
    row = conn.execute("SELECT private_pem, public_key, created_at FROM vapid_keys "
                       "WHERE id = 1").fetchone()
    return None if row is None else VapidKey(*row)


def save_vapid_key(conn: apsw.Connection, key: VapidKey) -> None:
    conn.execute("INSERT OR REPLACE INTO vapid_keys (id, private_pem, public_key, created_at) "
                 "VALUES (1, ?, ?, ?)", (key.private_pem, key.public_key, key.created_at))


# --- Telegram -------------------------------------------------------------------------------

def telegram_chats(conn: apsw.Connection) -> list[TelegramChat]:
    return [TelegramChat(int(c), str(n), float(p)) for c, n, p in conn.execute(
        "SELECT chat_id, name, paired_at FROM telegram_chats ORDER BY paired_at")]


def pair_chat(conn: apsw.Connection, chat: TelegramChat) -> None:
    conn.execute("INSERT OR REPLACE INTO telegram_chats (chat_id, name, paired_at) "
                 "VALUES (?, ?, ?)", (chat.chat_id, chat.name, chat.paired_at))


def unpair_chat(conn: apsw.Connection, chat_id: int, now: float) -> bool:
    conn.execute("DELETE FROM telegram_chats WHERE chat_id = ?", (chat_id,))
    gone = conn.changes() > 0
    if gone:
        conn.execute("UPDATE deliveries SET status = 'dropped', last_error = 'chat unpaired', "
                     "next_at = NULL, updated_at = ? WHERE target = ? AND status IN "
                     "('pending', 'held')", (now, f"telegram:{chat_id}"))
    return gone


def add_code(conn: apsw.Connection, code_hash: str, now: float, expires_at: float) -> None:
    conn.execute("DELETE FROM telegram_codes WHERE expires_at < ? OR used_at IS NOT NULL",
                 (now,))
    conn.execute("INSERT INTO telegram_codes (code_hash, created_at, expires_at) "
                 "VALUES (?, ?, ?)", (code_hash, now, expires_at))


def use_code(conn: apsw.Connection, code_hash: str, now: float) -> bool:
    """Spend a one-time pairing code: False when it is unknown, used or expired."""
    conn.execute("UPDATE telegram_codes SET used_at = ? WHERE code_hash = ? AND used_at IS NULL "
                 "AND expires_at > ?", (now, code_hash, now))
    return conn.changes() > 0
