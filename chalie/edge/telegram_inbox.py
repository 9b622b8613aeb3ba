"""What arrives at the Telegram bot besides the person's words: a pairing attempt from a chat
that is not paired yet, and an image to store for the person's next turn.

A chat that is not paired is heard only when it tries to pair (chalie/edge/telegram_pairing.py):
a private chat's right code pairs it (PairTelegram spends the code), a wrong one is said so and
counted (five in ten minutes and the chat is not heard for a while); a bare /start is told how
to pair; anything else is logged with the chat's id, never its text, and left unanswered.

An image (a photo, the largest size Telegram offers, or an image sent as a file) is fetched
from the Bot API and stored as POST /api/images stores one (InsertImage): PNG, JPEG, WebP or
GIF, at most images.max_bytes, or the person is told why not.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pykka
import structlog
from telegram import Chat, Message

from chalie.actors.delivery_messages import TargetsChanged
from chalie.actors.store_writer_messages import ApplyOps, OpsApplied
from chalie.edge.auth import LoginThrottle
from chalie.edge.context import EdgeContext
from chalie.edge.rest_base import ASK_TIMEOUT_S
from chalie.edge.telegram_pairing import WRONG_CODES, WRONG_WINDOW_S, code_hash, code_in, is_start
from chalie.edge.telegram_turn import BotApi
from chalie.store import delivery_rows
from chalie.store.background_ops import InsertImage
from chalie.store.delivery_ops import PairTelegram
from chalie.store.delivery_rows import TelegramChat
from chalie.store.image_rows import sniff

log = structlog.get_logger("chalie.edge")

PAIRED = ("Paired: this chat now talks with Chalie, with the same memory and conversation as "
          "its page. Approvals come here as buttons, and so do the messages you chose in "
          "Chalie's settings.")
HOW_TO_PAIR = ("This is a private bot. To pair your chat, make a code in Chalie's dashboard "
               "(Telegram) and send it here.")
WRONG_CODE = "That code is unknown, used or expired: make a new one in Chalie's dashboard."
NOT_PRIVATE = "Pair from your private chat with the bot, not a group."
UNSTORED = "Chalie cannot store that right now; try again shortly."
NOT_FETCHED = "Chalie could not fetch that image from Telegram; send it again."


class Unavailable(Exception):
    """The store did not take an op (restarting, slow, or unable to write)."""


async def apply(ctx: EdgeContext, *ops: Any) -> tuple[Any, ...]:
    """Apply ops through the StoreWriter (off the loop); their values."""
    ref = ctx.directory.get("store_writer")
    if ref is None:
        raise Unavailable("the store is restarting")
    try:
        result = await asyncio.get_running_loop().run_in_executor(
            None, lambda: ref.ask(ApplyOps(tuple(ops)), timeout=ASK_TIMEOUT_S))
    except (pykka.ActorDeadError, pykka.Timeout) as e:
        raise Unavailable(type(e).__name__) from None
    except Exception as e:  # a write the store could not take
        raise Unavailable(str(e)) from None
    if not isinstance(result, OpsApplied):
        raise Unavailable(f"the store answered {type(result).__name__}")
    if result.error is not None:
        raise Unavailable(result.error)
    return result.values


async def paired(ctx: EdgeContext, chat_id: int) -> bool:
    chats = await asyncio.get_running_loop().run_in_executor(
        None, lambda: delivery_rows.telegram_chats(ctx.read()))
    return any(c.chat_id == chat_id for c in chats)


class Pairing:
    """The pairing attempts of chats that are not paired."""

    def __init__(self, ctx: EdgeContext) -> None:
        self.ctx = ctx
        self._wrong = LoginThrottle(ctx.clock, max_failures=WRONG_CODES, window_s=WRONG_WINDOW_S)

    async def heard(self, api: BotApi, message: Message) -> None:
        chat = message.chat
        code = code_in(message.text) if message.text is not None else None
        if code is None:
            log.info("telegram_chat_ignored", chat_id=chat.id, chat_type=chat.type)
            if message.text is not None and is_start(message.text):
                await api.send(chat.id, HOW_TO_PAIR)
            return
        key = str(chat.id)
        if self._wrong.retry_after(key) is not None:
            log.info("telegram_pairing_throttled", chat_id=chat.id)
            return
        if chat.type != Chat.PRIVATE:
            log.info("telegram_pairing_not_private", chat_id=chat.id, chat_type=chat.type)
            await api.send(chat.id, NOT_PRIVATE)
            return
        try:
            (done,) = await apply(self.ctx, PairTelegram(
                TelegramChat(chat.id, _name(chat), self.ctx.clock.time()), code_hash(code)))
        except Unavailable:
            await api.send(chat.id, UNSTORED)
            return
        if not done:
            self._wrong.failed(key)
            log.info("telegram_pairing_refused", chat_id=chat.id)
            await api.send(chat.id, WRONG_CODE)
            return
        self._wrong.succeeded(key)
        log.info("telegram_paired", chat_id=chat.id)
        if self.ctx.directory.get("delivery") is not None:
            self.ctx.directory.tell("delivery", TargetsChanged())
        await api.send(chat.id, PAIRED)


def has_image(message: Message) -> bool:
    """A photo, or an image sent as a file (uncompressed)."""
    document = message.document
    return bool(message.photo) or (
        document is not None and (document.mime_type or "").startswith("image/"))


async def store_image(ctx: EdgeContext, api: BotApi, message: Message) -> str | None:
    """Store the message's image; its id, or None (the person was told why)."""
    limit = ctx.config.images.max_bytes
    chat_id, reply_to = message.chat.id, message.message_id
    if message.photo:
        file_id, size = message.photo[-1].file_id, message.photo[-1].file_size
    else:
        assert message.document is not None
        file_id, size = message.document.file_id, message.document.file_size
    if size is not None and size > limit:
        await api.send(chat_id, f"That image is {size} bytes; Chalie takes at most {limit} "
                       "(images.max_bytes).", reply_to=reply_to)
        return None
    found = await api.call("getFile", lambda: api.bot.get_file(file_id))
    data = await api.call("download", found.download_as_bytearray) \
        if not isinstance(found, bool | None) else None
    if not isinstance(data, bytearray):
        await api.send(chat_id, NOT_FETCHED, reply_to=reply_to)
        return None
    media_type = sniff(bytes(data))
    if len(data) > limit or media_type is None:
        await api.send(chat_id, f"Chalie takes PNG, JPEG, WebP or GIF images up to {limit} "
                       "bytes.", reply_to=reply_to)
        return None
    image_id = uuid.uuid4().hex
    try:
        await apply(ctx, InsertImage(image_id, media_type, bytes(data)))
    except Unavailable:
        await api.send(chat_id, UNSTORED, reply_to=reply_to)
        return None
    return image_id


def _name(chat: Chat) -> str:
    name = chat.full_name or chat.title or ""
    if chat.username:
        name = f"{name} (@{chat.username})" if name else f"@{chat.username}"
    return name or str(chat.id)
