"""A stand-in for the Telegram Bot API on 127.0.0.1: a real HTTP server at the `base_url` and
`base_file_url` python-telegram-bot (and Chalie's sender) are given, speaking the methods Chalie
uses: getMe, deleteWebhook, getUpdates (long polling: held until an update is queued or its
`timeout` passes), sendMessage, editMessageText, editMessageReplyMarkup, answerCallbackQuery,
sendChatAction, getFile and the file download.

A test queues what people send (`text`, `photo`, `press` a button) and reads what the bot did:
`chat(chat_id)` is the chat as its person sees it (each message the bot sent, with its text and
buttons after every edit), `calls` every request in order. `fail` makes the next calls of a
method answer an error (a 429 with retry_after, a 403, a 500...). A request with another token
answers 401, as Telegram does.

Parameters arrive as Telegram takes them: a JSON body, or a form whose values are JSON-encoded
(what python-telegram-bot sends).
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote

TOKEN = "123456:TEST-token-for-the-stand-in"
WAIT_S = 20.0
BOT = {"id": 123456, "is_bot": True, "first_name": "Chalie", "username": "chalie_test_bot",
       "can_join_groups": False, "can_read_all_group_messages": False,
       "supports_inline_queries": False}
# Form values that are JSON (numbers, objects); every other one is the string itself.
_JSON_FIELDS = frozenset({
    "chat_id", "message_id", "reply_markup", "offset", "limit", "timeout", "allowed_updates",
    "reply_parameters", "show_alert", "drop_pending_updates", "cache_time",
    "reply_to_message_id", "disable_notification", "link_preview_options",
})


@dataclass
class Sent:
    """A message the bot sent, as its chat shows it now."""

    message_id: int
    chat_id: int
    text: str
    buttons: list[tuple[str, str]] = field(default_factory=list)  # (label, callback data)
    edits: int = 0
    texts: list[str] = field(default_factory=list)  # every text it showed, in order
    reply_to: int | None = None


@dataclass
class _Failure:
    status: int
    description: str
    retry_after: int | None
    times: int


def user(chat_id: int, first_name: str = "Ada") -> dict[str, Any]:
    return {"id": chat_id, "is_bot": False, "first_name": first_name}


def private_chat(chat_id: int, first_name: str = "Ada") -> dict[str, Any]:
    return {"id": chat_id, "type": "private", "first_name": first_name,
            "username": first_name.lower()}


class TelegramApi:
    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self.bot = dict(BOT)
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.messages: dict[int, Sent] = {}  # message_id -> what the bot sent
        self.files: dict[str, bytes] = {}  # file_id -> bytes
        self._updates: list[dict[str, Any]] = []
        self._next_update = 1
        self._next_message = 1000
        self._next_person_message = 1
        self._failures: dict[str, list[_Failure]] = {}
        self._changed = threading.Condition()
        self._closed = False
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._route()

            def do_POST(self) -> None:
                self._route()

            def _route(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                path = unquote(self.path.split("?", 1)[0])
                if path.startswith("/file/bot"):
                    self._file(path[len("/file/bot"):])
                    return
                if not path.startswith("/bot"):
                    self._answer(404, {"ok": False, "error_code": 404,
                                       "description": "Not Found"})
                    return
                token, _, method = path[len("/bot"):].rpartition("/")
                if token != api.token:
                    self._answer(401, {"ok": False, "error_code": 401,
                                       "description": "Unauthorized"})
                    return
                params = _params(self.headers.get("Content-Type", ""), body)
                status, answer = api._call(method, params)
                self._answer(status, answer)

            def _file(self, rest: str) -> None:
                token, _, file_path = rest.partition("/")
                data = api._file(file_path) if token == api.token else None
                if data is None:
                    self._answer(404, {"ok": False, "error_code": 404,
                                       "description": "Not Found"})
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _answer(self, status: int, answer: dict[str, Any]) -> None:
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()

    # -- where it is --

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/bot"

    @property
    def base_file_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/file/bot"

    def settings(self) -> dict[str, Any]:
        """The [telegram] section that points a server here."""
        return {"token": self.token, "base_url": self.base_url,
                "base_file_url": self.base_file_url}

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        self.server.shutdown()
        self.server.server_close()

    # -- what people send --

    def text(self, chat_id: int, text: str, *, first_name: str = "Ada") -> int:
        """A person writes `text` in their private chat with the bot; the message's id."""
        return self._message(chat_id, first_name, {"text": text})

    def photo(self, chat_id: int, data: bytes, *, caption: str | None = None,
              first_name: str = "Ada") -> int:
        """A person sends a photo (Telegram offers it in two sizes: the larger is `data`)."""
        n = self._next_update
        small, large = f"photo-{n}-small", f"photo-{n}-large"
        self.files[small], self.files[large] = data[: max(1, len(data) // 4)], data
        extra: dict[str, Any] = {"photo": [
            {"file_id": small, "file_unique_id": f"u{small}", "width": 90, "height": 90,
             "file_size": len(self.files[small])},
            {"file_id": large, "file_unique_id": f"u{large}", "width": 800, "height": 600,
             "file_size": len(data)}]}
        if caption is not None:
            extra["caption"] = caption
        return self._message(chat_id, first_name, extra)

    def sticker(self, chat_id: int) -> int:
        """Something that is neither text nor a photo."""
        return self._message(chat_id, "Ada", {"sticker": {
            "file_id": "sticker-1", "file_unique_id": "us1", "width": 512, "height": 512,
            "is_animated": False, "is_video": False, "type": "regular"}})

    def press(self, chat_id: int, message_id: int, data: str) -> str:
        """A person presses the inline button with callback `data` under the bot's message;
        the callback query's id."""
        sent = self.messages[message_id]
        query_id = f"cq-{self._next_update}"
        self._queue({"callback_query": {
            "id": query_id, "from": user(chat_id), "chat_instance": f"ci-{chat_id}",
            "data": data, "message": {
                "message_id": message_id, "date": int(time.time()),
                "chat": private_chat(chat_id), "from": self.bot, "text": sent.text}}})
        return query_id

    def raw_update(self, update: dict[str, Any]) -> None:
        """Any update at all (its update_id is added)."""
        self._queue(update)

    def _message(self, chat_id: int, first_name: str, extra: dict[str, Any]) -> int:
        message_id = self._next_person_message
        self._next_person_message += 1
        self._queue({"message": {
            "message_id": message_id, "date": int(time.time()),
            "chat": private_chat(chat_id, first_name), "from": user(chat_id, first_name),
            **extra}})
        return message_id

    def _queue(self, update: dict[str, Any]) -> None:
        with self._changed:
            self._updates.append({"update_id": self._next_update, **update})
            self._next_update += 1
            self._changed.notify_all()

    # -- what the bot did --

    def fail(self, method: str, status: int, description: str, *, times: int = 1,
             retry_after: int | None = None) -> None:
        """The next `times` calls of `method` answer this error."""
        with self._changed:
            self._failures.setdefault(method, []).append(
                _Failure(status, description, retry_after, times))

    def chat(self, chat_id: int) -> list[Sent]:
        """The bot's messages in a chat, oldest first, as they show now."""
        with self._changed:
            return [m for m in self.messages.values() if m.chat_id == chat_id]

    def called(self, method: str) -> list[dict[str, Any]]:
        with self._changed:
            return [params for name, params in self.calls if name == method]

    def wait(self, condition: Callable[[], bool], timeout: float = WAIT_S) -> None:
        """Until `condition` holds (checked after every request), or fail."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not condition():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"the bot did not do it in time; calls: "
                                         f"{[name for name, _ in self.calls][-30:]}")
                self._changed.wait(left)

    def polling(self) -> bool:
        """Whether the bot has asked for updates (it is running)."""
        return bool(self.called("getUpdates"))

    # -- the methods --

    def _call(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._changed:
            if method != "getUpdates":
                self.calls.append((method, params))
                self._changed.notify_all()
            failure = self._failure(method)
        if failure is not None:
            answer: dict[str, Any] = {"ok": False, "error_code": failure.status,
                                      "description": failure.description}
            if failure.retry_after is not None:
                answer["parameters"] = {"retry_after": failure.retry_after}
            return failure.status, answer
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            return 404, {"ok": False, "error_code": 404, "description": "Not Found: method"}
        try:
            result = handler(params)
        except _BadRequest as e:
            return 400, {"ok": False, "error_code": 400, "description": str(e)}
        return 200, {"ok": True, "result": result}

    def _failure(self, method: str) -> _Failure | None:
        queued = self._failures.get(method)
        if not queued:
            return None
        failure = queued[0]
        failure.times -= 1
        if failure.times <= 0:
            queued.pop(0)
        return failure

    def _m_getMe(self, params: dict[str, Any]) -> Any:
        return self.bot

    def _m_deleteWebhook(self, params: dict[str, Any]) -> Any:
        return True

    def _m_getUpdates(self, params: dict[str, Any]) -> Any:
        offset = int(params.get("offset") or 0)
        timeout = float(params.get("timeout") or 0)
        deadline = time.monotonic() + min(timeout, WAIT_S)
        with self._changed:
            self.calls.append(("getUpdates", params))
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
            self._changed.notify_all()
            while not self._updates and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            return list(self._updates)

    def _m_sendMessage(self, params: dict[str, Any]) -> Any:
        chat_id = int(params["chat_id"])
        text = str(params.get("text") or "")
        if not text.strip():
            raise _BadRequest("Bad Request: message text is empty")
        if len(text) > 4096:
            raise _BadRequest("Bad Request: message is too long")
        with self._changed:
            message_id = self._next_message
            self._next_message += 1
            reply = params.get("reply_parameters") or {}
            self.messages[message_id] = Sent(
                message_id, chat_id, text, _buttons(params.get("reply_markup")), texts=[text],
                reply_to=reply.get("message_id") if isinstance(reply, dict) else None)
            self._changed.notify_all()
        return self._message_json(self.messages[message_id])

    def _m_editMessageText(self, params: dict[str, Any]) -> Any:
        sent = self._sent(params)
        text = str(params.get("text") or "")
        buttons = _buttons(params.get("reply_markup"))
        if not text.strip():
            raise _BadRequest("Bad Request: message text is empty")
        if len(text) > 4096:
            raise _BadRequest("Bad Request: MESSAGE_TOO_LONG")
        with self._changed:
            if text == sent.text and buttons == sent.buttons:
                raise _BadRequest("Bad Request: message is not modified: specified new message "
                                  "content and reply markup are exactly the same as a current "
                                  "content and reply markup of the message")
            sent.text, sent.buttons = text, buttons
            sent.edits += 1
            sent.texts.append(text)
            self._changed.notify_all()
        return self._message_json(sent)

    def _m_editMessageReplyMarkup(self, params: dict[str, Any]) -> Any:
        sent = self._sent(params)
        with self._changed:
            sent.buttons = _buttons(params.get("reply_markup"))
            sent.edits += 1
            self._changed.notify_all()
        return self._message_json(sent)

    def _m_answerCallbackQuery(self, params: dict[str, Any]) -> Any:
        return True

    def _m_sendChatAction(self, params: dict[str, Any]) -> Any:
        return True

    def _m_getFile(self, params: dict[str, Any]) -> Any:
        file_id = str(params["file_id"])
        if file_id not in self.files:
            raise _BadRequest("Bad Request: invalid file_id")
        return {"file_id": file_id, "file_unique_id": f"u{file_id}",
                "file_size": len(self.files[file_id]), "file_path": f"photos/{file_id}.jpg"}

    def _file(self, file_path: str) -> bytes | None:
        name = file_path.removeprefix("photos/").removesuffix(".jpg")
        return self.files.get(name)

    def _sent(self, params: dict[str, Any]) -> Sent:
        sent = self.messages.get(int(params.get("message_id") or 0))
        if sent is None or sent.chat_id != int(params.get("chat_id") or 0):
            raise _BadRequest("Bad Request: message to edit not found")
        return sent

    def _message_json(self, sent: Sent) -> dict[str, Any]:
        out: dict[str, Any] = {"message_id": sent.message_id, "date": int(time.time()),
                               "chat": private_chat(sent.chat_id), "from": self.bot,
                               "text": sent.text}
        if sent.buttons:
            out["reply_markup"] = {"inline_keyboard": [[
                {"text": label, "callback_data": data} for label, data in sent.buttons]]}
        return out


class _BadRequest(Exception):
    pass


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up on a long poll (the bot stopping) is no error of the stand-in's."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _params(content_type: str, body: bytes) -> dict[str, Any]:
    if not body:
        return {}
    if content_type.startswith("application/json"):
        value = json.loads(body)
        return value if isinstance(value, dict) else {}
    out: dict[str, Any] = {}
    for name, value in parse_qsl(body.decode(), keep_blank_values=True):
        out[name] = json.loads(value) if name in _JSON_FIELDS else value
    return out


def _buttons(markup: Any) -> list[tuple[str, str]]:
    if isinstance(markup, str):
        markup = json.loads(markup)
    if not isinstance(markup, dict):
        return []
    return [(str(b.get("text")), str(b.get("callback_data")))
            for row in markup.get("inline_keyboard") or () for b in row]
