"""Telegram, one way: what the Delivery actor sends to the person's paired chats (a proactive
message, a goal's or a scheduled prompt's result, an escalation with Approve and Deny buttons)
when it is not part of a conversation the person holds there. The conversation itself, and
the buttons' answers, are the bridge's (chalie/edge/telegram.py).

Each paired chat (chalie/store/delivery_rows.py telegram_chats) is a target, "telegram:<chat
id>", while telegram.token is set; it takes the kinds in notify.kinds. A send is one Bot API
call (sendMessage; editMessageText once an escalation it carried is answered), made with a
blocking httpx client on the Delivery actor's worker thread: python-telegram-bot's Bot is
asynchronous and bound to one event loop, so using it here would mean an event loop, a client
and a getMe per message (asyncio.run around `async with Bot(...)`) for the same one request.

What a failure says never holds the token (it is in every Bot API address): `hide` blanks it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Literal

import apsw
import httpx
import structlog

from chalie.config import Config
from chalie.delivery.items import Item
from chalie.delivery.senders import Sent, Target
from chalie.store import delivery_rows

NAME = "telegram"
PREFIX = "telegram:"
HIDDEN = "***"
MAX_TEXT = 4096  # characters of one Telegram message
MAX_CALLBACK = 64  # bytes of a button's callback data (Telegram's limit)
MAX_ERROR = 300  # characters of a failure's words kept
CALLBACK_PREFIX = "ap"  # callback data "ap:<approval_id>:<y|n|a>": an escalation's answer
ANSWERS = {"y": (True, False), "n": (False, False), "a": (True, True)}  # approve, always
OUTCOME_WORDS = {
    "approved": "✅ Approved",
    "denied": "❌ Denied",
    "expired": "⌛ Expired: nobody answered in time",
    "withdrawn": "↩️ Withdrawn: the conversation moved on",
}

log = structlog.get_logger("chalie.delivery")


class Following:
    """What the Telegram bridge and this sender share (thread-safe): the exchanges the bridge
    follows in a Telegram conversation, whose escalations it shows there with their buttons
    (so the sender leaves them out), and the bot as the bridge last found it: its @username,
    or the problem that keeps it off (the token refused), for GET /api/telegram."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._exchanges: set[str] = set()
        self._bot: str | None = None
        self._problem: str | None = None

    def follow(self, exchange_id: str) -> None:
        with self._lock:
            self._exchanges.add(exchange_id)

    def forget(self, exchange_id: str) -> None:
        with self._lock:
            self._exchanges.discard(exchange_id)

    def follows(self, exchange_id: str | None) -> bool:
        with self._lock:
            return exchange_id is not None and exchange_id in self._exchanges

    def connected(self, bot: str) -> None:
        """The Bot API accepted the token: the bot is @`bot`."""
        with self._lock:
            self._bot, self._problem = bot, None

    def failed(self, problem: str | None, *, bot: str | None = None) -> None:
        """What keeps the bot off (None: nothing; the token is not set)."""
        with self._lock:
            self._bot, self._problem = bot, problem

    def state(self) -> tuple[str | None, str | None]:
        """(the bot's username when known, the problem that keeps it off)."""
        with self._lock:
            return self._bot, self._problem


def hide(text: str, token: str) -> str:
    """`text` without the bot's token (or its secret half), however an error quoted it."""
    for secret in (token, token.partition(":")[2]):
        if len(secret) >= 8:
            text = text.replace(secret, HIDDEN)
    return text


def callback_data(approval_id: str, answer: str) -> str | None:
    """A button's callback data for an answer ("y" approve, "n" deny, "a" always allow);
    None when it would not fit Telegram's 64 bytes."""
    data = f"{CALLBACK_PREFIX}:{approval_id}:{answer}"
    return data if len(data.encode()) <= MAX_CALLBACK else None


def read_callback(data: str | None) -> tuple[str, bool, bool] | None:
    """(approval_id, approve, always) of a button's callback data; None for any other."""
    prefix, _, rest = (data or "").partition(":")
    approval_id, _, answer = rest.rpartition(":")
    if prefix != CALLBACK_PREFIX or not approval_id or answer not in ANSWERS:
        return None
    approve, always = ANSWERS[answer]
    return approval_id, approve, always


def buttons(approval_id: str, *, always: bool = False) -> dict[str, Any] | None:
    """An escalation's inline keyboard: Approve, Deny (and Always allow, when offered)."""
    row = []
    labels = [("Approve", "y"), ("Deny", "n"), *([("Always allow", "a")] if always else [])]
    for label, answer in labels:
        data = callback_data(approval_id, answer)
        if data is None:
            return None
        row.append({"text": label, "callback_data": data})
    return {"inline_keyboard": [row]}


def outcome_words(outcome: str) -> str:
    return OUTCOME_WORDS.get(outcome, f"Answered ({outcome})")


def cut(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


class TelegramSender:
    """The Sender "telegram" (chalie/delivery/senders.py), with Settles and Chooses."""

    name = NAME

    def __init__(self, read: Callable[[], apsw.Connection], config: Callable[[], Config],
                 following: Following) -> None:
        self._read = read
        self._config = config
        self.following = following

    def targets(self) -> list[Target]:
        config = self._config()
        if not config.telegram.token:
            return []
        kinds = frozenset(config.notify.kinds)
        return [Target(f"{PREFIX}{chat.chat_id}", NAME, chat.name, kinds)
                for chat in delivery_rows.telegram_chats(self._read())]

    def wants(self, target: Target, item: Item) -> bool:
        """Not an escalation of a turn the person runs in Telegram: the bridge shows it in
        that conversation, with its buttons."""
        return not (item.kind == "escalations" and self.following.follows(item.exchange_id))

    def send(self, target: Target, item: Item) -> Sent:
        chat_id = _chat_id(target)
        if chat_id is None:
            return Sent("gone", f"{target.key} is not a Telegram chat")
        params: dict[str, Any] = {"chat_id": chat_id, "text": cut(item.text())}
        if item.actions and item.approval_id:
            markup = buttons(item.approval_id, always=item.always)
            if markup is not None:
                params["reply_markup"] = markup
        return self._call("sendMessage", params)

    def settled(self, target: Target, item: Item, ref: str, outcome: str) -> None:
        """The escalation was answered (or ended): its message says how, without buttons."""
        chat_id = _chat_id(target)
        if chat_id is None or not ref.isdigit():
            return
        sent = self._call("editMessageText", {
            "chat_id": chat_id, "message_id": int(ref),
            "text": cut(f"{item.text()}\n\n{outcome_words(outcome)}")})
        if sent.outcome != "sent":
            log.warning("telegram_settle_failed", target=target.key, error=sent.error)

    def _call(self, method: str, params: dict[str, Any]) -> Sent:
        """One Bot API call; never raises."""
        config = self._config()
        token = config.telegram.token
        if not token:
            return Sent("failed", "telegram.token is not set")
        url = f"{config.telegram.base_url}{token}/{method}"
        timeout = config.notify.timeout_s
        try:
            with httpx.Client(timeout=timeout, follow_redirects=False) as http:
                response = http.post(url, json=params)
        except httpx.TimeoutException:
            return Sent("failed", f"the Bot API did not answer within {timeout:g}s")
        except httpx.HTTPError as e:
            return Sent("failed", _short(hide(
                f"the Bot API cannot be reached ({type(e).__name__}: {e})", token)))
        return _outcome(response, token)


def _outcome(response: httpx.Response, token: str) -> Sent:
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        return Sent("failed", f"the Bot API answered {response.status_code} without JSON")
    if answer.get("ok") is True:
        result = answer.get("result")
        ref = str(result["message_id"]) if isinstance(result, dict) \
            and isinstance(result.get("message_id"), int) else None
        return Sent("sent", ref=ref)
    code = answer.get("error_code") if isinstance(answer.get("error_code"), int) \
        else response.status_code
    words = _short(hide(str(answer.get("description") or f"error {code}"), token))
    if code == 403:  # the person blocked the bot, or left the chat
        return Sent("gone", words)
    if code == 400 and "chat not found" in words.lower():
        return Sent("gone", words)
    if code in (401, 404):
        return Sent("failed", f"the Bot API refused the bot's token ({words}): check "
                              "telegram.token")
    if code == 429:
        parameters = answer.get("parameters")
        after = parameters.get("retry_after") if isinstance(parameters, dict) else None
        return Sent("failed", words, retry_after_s=float(after)
                    if isinstance(after, int | float) else None)
    return Sent("failed", words)


def _chat_id(target: Target) -> int | None:
    rest = target.key.removeprefix(PREFIX)
    if rest == target.key:
        return None
    try:
        return int(rest)
    except ValueError:
        return None


def _short(text: str) -> str:
    return cut(text, MAX_ERROR)


def check_token(config: Config) -> tuple[Literal["ok", "warn"], str, str]:
    """What the Bot API at telegram.base_url says of telegram.token (getMe), as a line of
    `chalie doctor`: (level, what was checked, the problem and the setting to change)."""
    settings = config.telegram
    what = "Telegram: the bot token"
    try:
        with httpx.Client(timeout=config.notify.timeout_s, follow_redirects=False) as http:
            response = http.post(f"{settings.base_url}{settings.token}/getMe")
    except httpx.HTTPError as e:
        return ("warn", f"Telegram: the Bot API at {settings.base_url}",
                hide(f"cannot be reached ({type(e).__name__}: {e}); check the network, or "
                     "telegram.base_url", settings.token))
    try:
        answer = response.json()
    except ValueError:
        answer = None
    answer = answer if isinstance(answer, dict) else {}
    result = answer.get("result")
    if response.status_code == 200 and answer.get("ok") is True and isinstance(result, dict):
        return "ok", f"{what} is accepted (@{result.get('username')})", ""
    words = hide(str(answer.get("description") or f"HTTP {response.status_code}"),
                 settings.token)
    if response.status_code in (401, 404):
        return ("warn", what, f"the Bot API refused it ({words}); set telegram.token to the "
                "token @BotFather gave the bot")
    return ("warn", what, f"not checked: the Bot API at {settings.base_url} answered "
            f"{response.status_code} ({words}); try again later")
