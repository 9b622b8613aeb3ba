"""Pairing a Telegram chat: the one-time code the dashboard shows (POST
/api/telegram/pairing-code), and how a message to the bot is read as one.

A code is 8 characters of an alphabet without look-alikes (no 0/O, 1/I/L): 40 bits, good for
telegram.pairing_code_ttl_s, once. Only its SHA-256 is stored (AddTelegramCode); the chat that
sends it, as `/start CODE` (what the dashboard's t.me link sends) or the code alone, is paired
(PairTelegram spends it). Case, spaces and dashes do not matter. A chat that keeps sending
wrong codes is not heard for a while (`WRONG_CODES` in `WRONG_WINDOW_S`).
"""

from __future__ import annotations

import hashlib
import re
import secrets

from chalie.delivery.telegram_sender import Following, TelegramSender
from chalie.edge.context import EdgeContext

ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
LENGTH = 8
WRONG_CODES = 5  # a chat that sent this many wrong codes...
WRONG_WINDOW_S = 600.0  # ...within this many seconds is not heard until they are older
_START = re.compile(r"^/start(?:@\w+)?(?:\s+(?P<rest>.*))?$", re.IGNORECASE | re.DOTALL)
_SPACING = re.compile(r"[\s\-_]+")


def new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(LENGTH))


def code_hash(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def code_in(text: str) -> str | None:
    """The pairing code a message carries (`/start CODE`, or the code alone), normalised;
    None when it does not look like one."""
    text = text.strip()
    start = _START.match(text)
    if start is not None:
        text = start.group("rest") or ""
    code = _SPACING.sub("", text).upper()
    if len(code) == LENGTH and all(c in ALPHABET for c in code):
        return code
    return None


def is_start(text: str) -> bool:
    return _START.match(text.strip()) is not None


def link(bot: str | None, code: str) -> str | None:
    """The t.me link that opens the bot and sends `/start CODE` with one tap."""
    return f"https://t.me/{bot}?start={code}" if bot else None


def following_of(ctx: EdgeContext) -> Following | None:
    """What the bridge and the sender share (the bot's name, what keeps it off), when the
    Telegram sender is in use."""
    sender = ctx.away.named("telegram") if ctx.away is not None else None
    return sender.following if isinstance(sender, TelegramSender) else None
