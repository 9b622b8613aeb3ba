"""The person's Telegram bot over REST (the dashboard's Telegram section).

GET /api/telegram says whether a bot token is set (telegram.token, a secret setting), the bot's
@username once the Bot API accepted it, what keeps it off (the token refused) and the paired
chats. POST /api/telegram/pairing-code makes a one-time code (only its hash is kept) that pairs
the chat that sends it to the bot, within telegram.pairing_code_ttl_s; DELETE
/api/telegram/chats/<chat_id> unpairs a chat (the bot stops answering it, and what was still
to be delivered there is dropped). All need the login cookie. The bot itself:
chalie/edge/telegram.py.
"""

from __future__ import annotations

import msgspec

from chalie.actors.delivery_messages import TargetsChanged
from chalie.edge import telegram_pairing as pairing
from chalie.edge.api_spec import COOKIE_AUTH, Operation, Param
from chalie.edge.rest_base import ApiError, AuthedHandler, shown
from chalie.edge.rest_schedules import apply
from chalie.store import delivery_rows
from chalie.store.delivery_ops import AddTelegramCode, UnpairTelegram

CHAT_ID = Param("chat_id", {"type": "integer"}, "the chat's Telegram id", required=True)


class TelegramChatItem(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A chat paired with the bot: its Telegram id, its name there, when it was paired."""

    chat_id: int
    name: str
    paired_at: float


class TelegramState(msgspec.Struct, frozen=True, omit_defaults=True,
                    forbid_unknown_fields=True):
    """`configured`: telegram.token is set; `bot` the bot's @username once the Bot API
    accepted the token; `error` what keeps the bot off (the token refused)."""

    configured: bool
    chats: list[TelegramChatItem]
    bot: str | None = None
    error: str | None = None


class PairingCode(msgspec.Struct, frozen=True, omit_defaults=True,
                  forbid_unknown_fields=True):
    """Send `code` to the bot (or open `link`, which sends `/start <code>`) before
    `expires_at` (epoch seconds); it pairs one chat, once."""

    code: str
    expires_at: float
    bot: str | None = None
    link: str | None = None


class Unpaired(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    removed: int


class TelegramHandler(AuthedHandler):
    api = {"get": Operation("The Telegram bot: whether it is set up, its name, the paired chats",
                            {200: TelegramState}, auth=(COOKIE_AUTH,))}

    async def get(self) -> None:
        self.query_params()
        chats = await self.off_loop(lambda: delivery_rows.telegram_chats(self.ctx.read()))
        configured = bool(self.ctx.config.telegram.token)
        following = pairing.following_of(self.ctx)
        bot, error = following.state() if following is not None and configured else (None, None)
        self.write_json(TelegramState(
            configured=configured, bot=bot, error=error,
            chats=[TelegramChatItem(c.chat_id, c.name, c.paired_at) for c in chats]))


class PairingCodeHandler(AuthedHandler):
    api = {"post": Operation(
        "Make a one-time code that pairs the Telegram chat that sends it to the bot",
        {201: PairingCode}, auth=(COOKIE_AUTH,), errors=(409,),
        description="Good for telegram.pairing_code_ttl_s, once; only its hash is kept. A 409 "
                    "while telegram.token is not set.")}

    async def post(self) -> None:
        self.query_params()
        settings = self.ctx.config.telegram
        if not settings.token:
            raise ApiError(409, "no bot yet: set telegram.token (the bot's token from "
                                "@BotFather) in the settings first")
        code = pairing.new_code()
        expires_at = self.ctx.clock.time() + settings.pairing_code_ttl_s
        await apply(self, AddTelegramCode(pairing.code_hash(code), expires_at))
        following = pairing.following_of(self.ctx)
        bot = following.state()[0] if following is not None else None
        self.set_status(201)
        self.write_json(PairingCode(code, expires_at, bot, pairing.link(bot, code)))


class TelegramChatHandler(AuthedHandler):
    api = {"delete": Operation(
        "Unpair a Telegram chat: the bot no longer answers it or sends to it",
        {200: Unpaired}, auth=(COOKIE_AUTH,), path=(CHAT_ID,), errors=(404,))}

    async def delete(self, chat_id: str) -> None:
        self.query_params()
        try:
            number = int(chat_id)
        except ValueError:
            raise ApiError(400, f"chat_id: a Telegram chat id (a whole number), got "
                                f"{shown(chat_id)}") from None
        if abs(number) >= 2**63:
            raise ApiError(404, f"no paired chat {number}")
        (gone,) = await apply(self, UnpairTelegram(number))
        if not gone:
            raise ApiError(404, f"no paired chat {number}")
        if self.ctx.directory.get("delivery") is not None:
            self.ctx.directory.tell("delivery", TargetsChanged())
        self.write_json(Unpaired(number))
