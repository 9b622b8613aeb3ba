"""The person's Telegram bot: a two-way channel to Chalie, through python-telegram-bot with long
polling (no public address needed), driven on the server's IOLoop (Tornado runs on asyncio).

It is a client of the actor system as the edge is (chalie/edge/telegram_turn.py): a message
from the paired chat runs a turn on the person's channel (dmn.channel) through a TurnCall, as
/ws does; a photo is stored as an image (InsertImage, as POST /api/images) and goes with the
message (a photo without a caption waits for the next one); a press of an escalation's button
answers it as the person (chalie/edge/approvals.py), whichever sent it: a turn of this chat,
or the Delivery actor's TelegramSender (chalie/delivery/telegram_sender.py).

Pairing (chalie/edge/telegram_inbox.py, with the codes of chalie/edge/telegram_pairing.py): a
private chat that sends the dashboard's one-time code is paired (PairTelegram). Any other chat
is not heard: what it sends is logged with its chat id, never its text, and only a pairing
attempt is answered (how to pair, or that the code was wrong).

The bot starts when telegram.token is set, in the background: a Bot API that cannot be reached
is tried again with back-off; a refused token is logged once and shown in GET /api/telegram
(`Following.state`); a changed token restarts it (`restart`). Nothing a Telegram user sends,
and no failure of the Bot API, ends the bridge or the server. The token appears in no log line:
python-telegram-bot's own debug lines, which quote it, are kept below the log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

import structlog
from telegram import CallbackQuery, Message, Update
from telegram.error import InvalidToken, TelegramError
from telegram.ext import Application, ApplicationBuilder, ContextTypes, TypeHandler

from chalie.config import Config
from chalie.delivery.telegram_sender import Following, hide, read_callback
from chalie.edge import approvals
from chalie.edge.context import EdgeContext
from chalie.edge.frames import MAX_IMAGE_IDS
from chalie.edge.telegram_inbox import Pairing, has_image, paired, store_image
from chalie.edge.telegram_pairing import is_start
from chalie.edge.telegram_turn import RETRY_MAX_S, STOPPING, BotApi, Conversation

log = structlog.get_logger("chalie.edge")

UPDATES = ("message", "callback_query")  # what the bot asks Telegram for
MAX_ANSWERED = 1000  # approval ids remembered as answered (a second press is told so)
CONNECT_FIRST_S = 1.0  # the first wait after the Bot API could not be reached, doubling
HELLO = "This chat is paired with Chalie: write here as on its page."
KEPT = "Got the image: it goes with your next message."
TOO_MANY = f"At most {MAX_IMAGE_IDS} images go with one message; send your words first."
ONLY = "Chalie reads text and photos here."

AnyApplication = Application[Any, Any, Any, Any, Any, Any]


def _quiet_library() -> None:
    """python-telegram-bot's debug lines quote the Bot API's address, which holds the token."""
    quiet = logging.getLogger("telegram")
    if quiet.getEffectiveLevel() < logging.INFO:
        quiet.setLevel(logging.INFO)


class TelegramBridge:
    """Start with `await start()` on the IOLoop, stop with `await stop()`; `restart(config)`
    after a reload, which starts the bot again when telegram.token changed."""

    def __init__(self, ctx: EdgeContext, following: Following) -> None:
        self.ctx = ctx
        self.following = following
        self._token = ""
        self._app: AnyApplication | None = None
        self._api: BotApi | None = None
        self._connecting: asyncio.Task[None] | None = None
        self._lifecycle = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._conversations: set[Conversation] = set()
        self._approvals: dict[str, str] = {}  # approval id -> channel, shown by a turn here
        self._answered: set[str] = set()  # approval ids a press answered
        self._images: dict[int, list[str]] = {}  # chat -> image ids for its next message
        self._pairing = Pairing(ctx)
        self._problem_logged: str | None = None

    @property
    def bot(self) -> str | None:
        return self.following.state()[0]

    # -- the lifecycle --

    async def start(self) -> None:
        """Begin connecting (in the background) when a token is set; returns at once."""
        async with self._lifecycle:
            self._begin(self.ctx.config.telegram.token)

    async def stop(self) -> None:
        async with self._lifecycle:
            await self._halt()

    def restart(self, config: Config) -> asyncio.Task[None] | None:
        """After a reload: when telegram.token changed, stop the bot and start it with the new
        one (in the background; the task, to wait for it). Call on the IOLoop."""
        if config.telegram.token == self._token:
            return None
        return self._spawn(self._restart(config.telegram.token))

    async def _restart(self, token: str) -> None:
        async with self._lifecycle:
            await self._halt()
            self._begin(token)

    def _begin(self, token: str) -> None:
        self._token = token
        self._problem_logged = None
        if not token:
            self.following.failed(None)
            return
        _quiet_library()
        self._connecting = asyncio.create_task(self._connect(token))

    async def _halt(self) -> None:
        if self._connecting is not None:
            self._connecting.cancel()
            await asyncio.gather(self._connecting, return_exceptions=True)
            self._connecting = None
        for conversation in list(self._conversations):
            conversation.end(STOPPING)
        current = asyncio.current_task()
        work = [t for t in self._tasks if t is not current]
        for task in work:
            task.cancel()
        await asyncio.gather(*work, return_exceptions=True)
        app, self._app, self._api = self._app, None, None
        if app is not None:
            await _close(app)
        self._images.clear()
        self._approvals.clear()

    async def _connect(self, token: str) -> None:
        """Until the Bot API takes the token (then poll) or refuses it (then wait for another)."""
        wait = CONNECT_FIRST_S
        while True:
            app = self._build(token)
            try:
                await app.initialize()  # getMe: the token checked
                assert app.updater is not None
                await app.updater.start_polling(allowed_updates=list(UPDATES),
                                                error_callback=self._polling_failed)
                await app.start()
            except asyncio.CancelledError:  # stopped while connecting
                await _close(app)
                raise
            except InvalidToken:
                await _close(app)
                self._problem("the Bot API refused the bot's token: check telegram.token (the "
                              "token @BotFather gave)", refused=True)
                return
            except (TelegramError, OSError) as e:
                await _close(app)
                self._problem(f"the Bot API at {self.ctx.config.telegram.base_url} cannot be "
                              f"reached ({hide(str(e), token) or type(e).__name__}); trying "
                              "again")
                await asyncio.sleep(wait)
                wait = min(wait * 2, RETRY_MAX_S)
                continue
            self._app, self._api = app, BotApi(app.bot, token)
            username = app.bot.username
            self.following.connected(username)
            log.info("telegram_started", bot=username)
            return

    def _build(self, token: str) -> AnyApplication:
        settings = self.ctx.config.telegram
        app = (ApplicationBuilder().token(token).base_url(settings.base_url)
               .base_file_url(settings.base_file_url).build())
        app.add_handler(TypeHandler(Update, self._on_update))
        app.add_error_handler(self._on_error)
        return app

    def _problem(self, problem: str, *, refused: bool = False) -> None:
        if problem != self._problem_logged:  # once, not at every retry
            self._problem_logged = problem
            if refused:
                log.warning("telegram_token_refused", problem=problem)
            else:
                log.warning("telegram_unreachable", problem=problem)
        # After the log: whoever sees the state (the dashboard, a test) finds the line written.
        self.following.failed(problem)

    def _polling_failed(self, error: TelegramError) -> None:
        """getUpdates failed (python-telegram-bot tries again, backing off up to 30 s)."""
        words = hide(str(error), self._token)
        if words != self._problem_logged:
            self._problem_logged = words
            log.warning("telegram_polling_failed", error=words)

    # -- updates --

    async def _on_update(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        if not isinstance(update, Update):
            return
        try:
            if update.callback_query is not None:
                await self._on_press(update.callback_query)
            elif update.message is not None:
                await self._on_message(update.message)
        except Exception as e:  # nothing a user sends ends the bridge
            log.warning("telegram_update_failed", update_id=update.update_id,
                        error=hide(f"{type(e).__name__}: {e}", self._token))

    async def _on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        log.warning("telegram_handler_failed",
                    error=hide(repr(context.error), self._token))

    async def _on_message(self, message: Message) -> None:
        api = self._api
        if api is None:
            return
        chat = message.chat
        text = message.text if message.text is not None else message.caption or ""
        if not await paired(self.ctx, chat.id):
            await self._pairing.heard(api, message)
            return
        if message.text is not None and is_start(message.text):
            await api.send(chat.id, HELLO)
            return
        image_id: str | None = None
        if has_image(message):
            image_id = await store_image(self.ctx, api, message)
            if image_id is None:
                return
        kept = self._images.setdefault(chat.id, [])
        if image_id is not None:
            if len(kept) >= MAX_IMAGE_IDS:
                await api.send(chat.id, TOO_MANY, reply_to=message.message_id)
                return
            kept.append(image_id)
        if not text.strip():
            await api.send(chat.id, KEPT if image_id is not None else ONLY,
                           reply_to=message.message_id)
            return
        image_ids = tuple(self._images.pop(chat.id, []))
        conversation = Conversation(self.ctx, api, self.following, self._approvals,
                                    channel=self.ctx.config.dmn.channel, chat_id=chat.id,
                                    message_id=message.message_id)
        log.info("telegram_message", chat_id=chat.id, client_id=conversation.client_id,
                 chars=len(text), images=len(image_ids))
        self._conversations.add(conversation)
        task = self._spawn(conversation.run(text, image_ids))
        task.add_done_callback(lambda _: self._conversations.discard(conversation))

    async def _on_press(self, query: CallbackQuery) -> None:
        """An escalation's button: the person's answer, as a page's."""
        api = self._api
        if api is None:
            return
        message = query.message
        chat_id = message.chat.id if message is not None else query.from_user.id
        if not await paired(self.ctx, chat_id):
            log.info("telegram_chat_ignored", chat_id=chat_id, kind="button")
            await api.answer(query.id, "This chat is not paired with Chalie.")
            return
        answer = read_callback(query.data)
        if answer is None:
            await api.answer(query.id, "That button does nothing now.")
            return
        approval_id, approve, always = answer
        if approval_id in self._answered:
            await api.answer(query.id, "Already answered.")
            return
        channel = self._approvals.get(approval_id) or await asyncio.get_running_loop() \
            .run_in_executor(None, lambda: approvals.channel_of(self.ctx, approval_id))
        if channel is None:
            await api.answer(query.id, "This is no longer waiting for an answer.")
            if message is not None:
                await api.drop_buttons(chat_id, message.message_id)
            return
        if not approvals.answer(self.ctx, channel, approval_id, approve, always=always):
            await api.answer(query.id, "Chalie is restarting; try again shortly.")
            return
        if len(self._answered) > MAX_ANSWERED:
            self._answered.clear()
        self._answered.add(approval_id)
        log.info("telegram_answered", chat_id=chat_id, approval_id=approval_id,
                 approve=approve, always=always)
        await api.answer(query.id, "Always allowed" if always else
                         "Approved" if approve else "Denied")

    def _spawn(self, work: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            e = task.exception()
            log.warning("telegram_task_failed",
                        error=hide(f"{type(e).__name__}: {e}", self._token))


async def _close(app: AnyApplication) -> None:
    """Stop polling and close the Bot API clients, however far the start got."""
    try:
        if app.updater is not None and app.updater.running:
            await app.updater.stop()
        if app.running:
            await app.stop()
        await app.shutdown()
        await app.bot.shutdown()  # an app whose initialize failed still opened its clients
    except Exception as e:  # closing is best effort: nothing more to do
        log.info("telegram_close_failed", error=type(e).__name__)
