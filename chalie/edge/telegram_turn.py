"""One message of the person's in their paired Telegram chat, run as a turn and shown there.

The message goes to the Session of the person's channel through a TurnCall (chalie/edge/
turn_call.py), the path MCP's ask_chalie and /v1/chat/completions take: the same turns, the
same memory as /ws. What the turn does shows in the chat:
- the answer grows in a message of the bot's (a reply to the person's), edited as its
  `message_delta`s arrive, at most once every telegram.edit_every_s; the final text is the
  last edit (an answer longer than one Telegram message goes on in more);
- while Chalie works (and on each step it narrates) the chat says the bot is typing;
- an escalation of the turn is a message with Approve and Deny (and Always allow when the
  escalation offers it); the bridge answers a press (chalie/edge/telegram.py), and the message
  is edited to say the decision once its `decision` frame comes.

Every Bot API call goes through `BotApi`, which waits out a 429 and retries a network failure
or a 5xx with back-off, and never raises: the chat may miss an edit, the server never falls.
"""

from __future__ import annotations

import asyncio
import json
import os
import warnings
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

import structlog
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Message, ReplyParameters
from telegram.constants import ChatAction
from telegram.error import BadRequest, NetworkError, RetryAfter, TelegramError

from chalie.actors.session_messages import UserMessage
from chalie.delivery import items
from chalie.delivery.telegram_sender import (
    MAX_TEXT,
    Following,
    buttons,
    cut,
    hide,
    outcome_words,
)
from chalie.edge.context import EdgeContext
from chalie.edge.turn_call import CallFailed, TurnCall

log = structlog.get_logger("chalie.edge")
# python-telegram-bot 22 warns (a deprecation) as it makes each flood-control error (429)
# unless the program opts in to its coming time periods as timedelta: Chalie does.
os.environ.setdefault("PTB_TIMEDELTA", "true")

T = TypeVar("T")
ATTEMPTS = 5  # tries of one Bot API call that fails for a passing reason
RETRY_FIRST_S = 1.0  # the first wait after such a failure, doubling
RETRY_MAX_S = 30.0
TYPING_EVERY_S = 4.5  # Telegram shows "typing…" for 5 seconds after each chat action
CALL_SLACK_S = 30.0  # waited past act.timeout_s + act.approval_timeout_s: the turn ends first
STOPPING = "the server is stopping"


class BotApi:
    """The bridge's calls to the Bot API, retried and never raising."""

    def __init__(self, bot: Bot, token: str) -> None:
        self.bot = bot
        self._token = token

    async def send(self, chat_id: int, text: str, *, reply_to: int | None = None,
                   markup: dict[str, Any] | None = None) -> int | None:
        """The new message's id; None when it could not be sent."""
        reply = ReplyParameters(reply_to, allow_sending_without_reply=True) \
            if reply_to is not None else None
        sent = await self.call("sendMessage", lambda: self.bot.send_message(
            chat_id, cut(text), reply_parameters=reply, reply_markup=_markup(markup)))
        return sent.message_id if isinstance(sent, Message) else None

    async def edit(self, chat_id: int, message_id: int, text: str, *,
                   markup: dict[str, Any] | None = None) -> bool:
        """Whether the message shows `text` now (without buttons unless `markup`)."""
        done = await self.call("editMessageText", lambda: self.bot.edit_message_text(
            cut(text), chat_id=chat_id, message_id=message_id, reply_markup=_markup(markup)))
        return done is not None

    async def typing(self, chat_id: int) -> None:
        await self.call("sendChatAction", lambda: self.bot.send_chat_action(
            chat_id, ChatAction.TYPING), attempts=1)

    async def answer(self, query_id: str, text: str) -> None:
        await self.call("answerCallbackQuery", lambda: self.bot.answer_callback_query(
            query_id, text=text), attempts=2)

    async def drop_buttons(self, chat_id: int, message_id: int) -> None:
        await self.call("editMessageReplyMarkup", lambda: self.bot.edit_message_reply_markup(
            chat_id=chat_id, message_id=message_id, reply_markup=None))

    async def call(self, what: str, make: Callable[[], Awaitable[T]], *,
                   attempts: int = ATTEMPTS) -> T | bool | None:
        """`make()`'s result; True for an edit that changed nothing (Telegram's "message is
        not modified"); None when the Bot API refused it or kept failing."""
        wait = RETRY_FIRST_S
        for attempt in range(1, attempts + 1):
            try:
                return await make()
            except RetryAfter as e:
                pause = retry_after_s(e)
            except BadRequest as e:  # before NetworkError: it is one
                if "not modified" in str(e).lower():
                    return True
                log.warning("telegram_refused", call=what, error=hide(str(e), self._token))
                return None
            except NetworkError as e:  # 5xx, timeouts, the connection
                pause, wait = wait, min(wait * 2, RETRY_MAX_S)
                if attempt == attempts:
                    log.warning("telegram_call_failed", call=what, attempts=attempts,
                                error=hide(str(e), self._token))
            except TelegramError as e:  # 403 (blocked), the token refused, ...
                log.warning("telegram_refused", call=what, error=hide(str(e), self._token))
                return None
            if attempt < attempts:
                await asyncio.sleep(pause)
        return None


def retry_after_s(e: RetryAfter) -> float:
    with warnings.catch_warnings():  # its type changes in a later version: both are read
        warnings.simplefilter("ignore")
        after = e.retry_after
    return after.total_seconds() if isinstance(after, timedelta) else float(after)


def _markup(markup: dict[str, Any] | None) -> InlineKeyboardMarkup | None:
    if markup is None:
        return None
    return InlineKeyboardMarkup([[InlineKeyboardButton(b["text"], callback_data=b["callback_data"])
                                  for b in row] for row in markup["inline_keyboard"]])


def pieces(text: str, limit: int = MAX_TEXT) -> list[str]:
    """`text` in messages of at most `limit` characters, cut at a line's end where one is
    near."""
    out = []
    while len(text) > limit:
        cut_at = text.rfind("\n", limit // 2, limit)
        cut_at = cut_at + 1 if cut_at > 0 else limit
        out.append(text[:cut_at])
        text = text[cut_at:]
    if text.strip():
        out.append(text)
    return out


class Reply:
    """The answer's message(s) in the chat, growing by edits."""

    def __init__(self, api: BotApi, chat_id: int, reply_to: int, every_s: float) -> None:
        self._api = api
        self._chat = chat_id
        self._reply_to = reply_to
        self._every_s = every_s
        self.text = ""  # the answer so far
        self._shown: list[tuple[int, str]] = []  # (message id, text) of each message
        self._dirty = asyncio.Event()
        self._done = asyncio.Event()
        self._pump: asyncio.Task[None] | None = None

    @property
    def started(self) -> bool:
        return bool(self._shown)

    def delta(self, text: str, reset: bool) -> None:
        self.text = text if reset else self.text + text
        if self._done.is_set():
            return
        self._dirty.set()
        if self._pump is None:
            self._pump = asyncio.create_task(self._grow())

    async def finish(self, text: str) -> None:
        """Show `text` as the answer, after any edit under way."""
        self._done.set()
        self._dirty.set()
        if self._pump is not None:
            await self._pump
        await self._show(text)

    async def _grow(self) -> None:
        while True:
            await self._dirty.wait()
            if self._done.is_set():
                return
            self._dirty.clear()
            await self._show(self.text)
            try:  # at most one edit every edit_every_s; finish() ends the wait
                await asyncio.wait_for(self._done.wait(), self._every_s)
            except TimeoutError:
                pass

    async def _show(self, text: str) -> None:
        parts = pieces(text)
        for n, part in enumerate(parts):
            if n < len(self._shown):
                message_id, shown = self._shown[n]
                if shown != part and await self._api.edit(self._chat, message_id, part):
                    self._shown[n] = (message_id, part)
                continue
            new_id = await self._api.send(self._chat, part, reply_to=(
                self._reply_to if n == 0 else None))
            if new_id is None:
                return
            self._shown.append((new_id, part))
        for n in range(len(parts), len(self._shown)):  # the text got shorter (a reset)
            message_id, shown = self._shown[n]
            if shown != "…" and await self._api.edit(self._chat, message_id, "…"):
                self._shown[n] = (message_id, "…")


class Conversation:
    """One message's turn, followed in the chat; `run` returns when the exchange is done."""

    def __init__(self, ctx: EdgeContext, api: BotApi, following: Following,
                 approvals: dict[str, str], *, channel: str, chat_id: int,
                 message_id: int) -> None:
        self.ctx = ctx
        self.api = api
        self.following = following
        self.approvals = approvals  # approval id -> channel, of the escalations shown here
        self.channel = channel
        self.chat_id = chat_id
        self.message_id = message_id
        self.client_id = f"tg-{chat_id}-{message_id}"
        settings = ctx.config.telegram
        self.reply = Reply(api, chat_id, message_id, settings.edit_every_s)
        self.exchange_id: str | None = None
        self._asked: dict[str, asyncio.Task[tuple[int, str] | None]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._waiting = 0  # escalations waiting for the person: no "typing…" meanwhile
        self._nudge = asyncio.Event()
        self._over = asyncio.Event()
        self.call = TurnCall(ctx, channel, self.client_id, on_progress=self._progress,
                             on_delta=self.reply.delta, on_frame=self._frame)

    async def run(self, text: str, image_ids: tuple[str, ...]) -> None:
        act = self.ctx.config.act
        message = UserMessage(text=text, received_at=self.ctx.clock.monotonic(),
                              source="telegram", client_id=self.client_id, image_ids=image_ids)
        typing = asyncio.create_task(self._typing())
        try:
            result = await self.call.run(message, act.timeout_s + act.approval_timeout_s
                                         + CALL_SLACK_S)
        except CallFailed as e:
            self._over.set()
            if e.status != 499:  # not the server stopping
                await self.reply.finish(_with_problem(self.reply.text, e.message))
            return
        finally:
            self._over.set()
            await typing
            if self.exchange_id is not None:
                self.following.forget(self.exchange_id)
        answer = result.text
        if result.error is not None:
            answer = _with_problem(answer, result.error)
        await self.reply.finish(answer or "(no answer)")
        if self._tasks:  # the last decision's edit
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def end(self, why: str = STOPPING) -> None:
        """Stop following the turn (it goes on; its answer is kept on the channel)."""
        self.call.end(why)
        for task in list(self._tasks):
            task.cancel()

    # -- what the turn shows --

    def _progress(self, text: str) -> None:
        self._nudge.set()

    def _frame(self, frame: dict[str, Any]) -> None:
        match frame.get("type"):
            case "status" if self.exchange_id is None:
                self.exchange_id = str(frame.get("exchange_id"))
                self.following.follow(self.exchange_id)
            case "escalation":
                approval_id = str(frame.get("approval_id") or "")
                if approval_id and approval_id not in self._asked:
                    waits = float(frame.get("expires_in_s") or 0) > 0
                    if waits:
                        self._waiting += 1
                        self.approvals[approval_id] = self.channel
                    self._asked[approval_id] = self._spawn(self._ask(frame, waits))
            case "decision":
                approval_id = str(frame.get("approval_id") or "")
                asked = self._asked.get(approval_id)
                if asked is not None:
                    self._waiting = max(0, self._waiting - 1)
                    self.approvals.pop(approval_id, None)
                    self._spawn(self._decided(asked, str(frame.get("outcome") or "")))
                    self._nudge.set()

    async def _ask(self, frame: dict[str, Any], waits: bool) -> tuple[int, str] | None:
        """The escalation as a message, with its buttons when it waits for an answer."""
        item = items.read(self.channel, json.dumps(frame), self.ctx.clock.time())
        if not isinstance(item, items.Item):
            return None
        text = cut(item.text())
        markup = buttons(item.approval_id or "", always=bool(frame.get("always"))) \
            if waits else None
        message_id = await self.api.send(self.chat_id, text, markup=markup)
        return None if message_id is None else (message_id, text)

    async def _decided(self, asked: asyncio.Task[tuple[int, str] | None], outcome: str) -> None:
        shown = await asked
        if shown is not None:
            message_id, text = shown
            await self.api.edit(self.chat_id, message_id,
                                f"{text}\n\n{outcome_words(outcome)}")

    async def _typing(self) -> None:
        """"typing…" while the turn runs, renewed as Telegram lets it lapse and at each step
        narrated; not while only the person's answer is awaited."""
        while not self._over.is_set():
            if not self._waiting:
                await self.api.typing(self.chat_id)
            self._nudge.clear()
            waits = [asyncio.create_task(e.wait()) for e in (self._over, self._nudge)]
            _, pending = await asyncio.wait(waits, timeout=TYPING_EVERY_S,
                                            return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()

    def _spawn(self, work: Awaitable[T]) -> asyncio.Task[T]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


def _with_problem(text: str, problem: str) -> str:
    words = f"⚠️ {problem}"
    return f"{text}\n\n{words}" if text.strip() else words
