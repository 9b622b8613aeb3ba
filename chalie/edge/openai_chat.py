"""GET /v1/models and POST /v1/chat/completions: Chalie as an OpenAI-compatible model, for the
chat programs and SDKs that speak OpenAI's API (a scoped API token with `chat`).

The model `chalie` answers with the primary model, `chalie-light` with the light job's; either
way it is Chalie's whole turn: its memory, history, tools and identity. The answer comes in
OpenAI's shape, at once or streamed as server-sent events (`stream`), usage included.

A client sends the whole conversation each time; Chalie keeps its own, so it takes only the
last message, the person's (openai_wire.py says what else it reads and ignores). The message's
client_id is a hash of the token, the channel, the model and every message sent, so the same
request sent again within openai.repeat_window_s (an SDK's retry, or a client's Regenerate,
which sends the same conversation again) runs no second turn: it gets the answer already given.
An edited last message is a new message, answered after what Chalie has already heard. After
the window an identical conversation (a new chat that opens with "hi" again) is a new turn.

The conversation runs on the token's channel (`token.<name>`), or with the request's `user`,
on `token.<name>.<user>`. Revoking the token ends its calls at once: a waiting request gets a
401, a stream an error event, and the connection is closed.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import msgspec
import structlog

from chalie.actors.session_messages import UserMessage
from chalie.actors.store_writer_messages import ApplyOps, OpsApplied
from chalie.edge.api_spec import API_TOKEN_AUTH, Operation, Streamed
from chalie.edge.openai_base import OpenAiHandler, error_body
from chalie.edge.openai_wire import (
    MODELS,
    AnswerMessage,
    ChatChunk,
    ChatCompletion,
    ChatRequest,
    Choice,
    ChunkChoice,
    Delta,
    Model,
    ModelList,
    NewMessage,
    OpenAiError,
    OpenAiFault,
    Usage,
    channel_of,
    check,
    client_id,
    image_id,
    new_message,
)
from chalie.edge.turn_call import CallFailed, TurnCall, TurnResult
from chalie.store import queries
from chalie.store.background_ops import InsertImage
from chalie.store.image_rows import load

log = structlog.get_logger("chalie.edge")

CALL_SLACK_S = 15.0  # past the turn's own budget (act.timeout_s), before a request gives up
_AT = re.compile(r" - at `\$\.?([^`]*)`")
_ERRORS = (403, 404, 502, 504)


class ModelsHandler(OpenAiHandler):
    api = {"get": Operation(
        "The models Chalie offers: chalie (the primary model), chalie-light (the light one)",
        {200: ModelList}, auth=(API_TOKEN_AUTH,), errors=(403,), error_body=OpenAiError)}

    async def get(self) -> None:
        self.query_params()
        self.authorize()
        created = int(self.ctx.clock.time())
        self.write_json(ModelList([Model(name, created) for name in MODELS]))


class ChatHandler(OpenAiHandler):
    api = {"post": Operation(
        "Chat with Chalie as with an OpenAI model; only the last message is new",
        {200: Streamed(ChatCompletion, ChatChunk)}, auth=(API_TOKEN_AUTH,), body=ChatRequest,
        errors=_ERRORS, error_body=OpenAiError,
        example={"model": "chalie", "messages": [{"role": "user", "content": "hello"}]},
        description="Chalie keeps its own history: the last message, the person's, is the new "
                    "one; the same conversation sent again soon after gets the answer "
                    "already given (openai.repeat_window_s). With `stream`, server-sent "
                    "events of chat.completion.chunk and `data: [DONE]`. Images: data: URLs "
                    "in image_url parts.")}

    def body_limit(self) -> tuple[int, str]:
        """A conversation, and an image as base64 (4 characters to 3 bytes)."""
        config = self.ctx.config
        return (config.server.max_body_bytes + config.images.max_bytes * 4 // 3,
                "server.max_body_bytes + images.max_bytes")

    async def post(self) -> None:
        self.query_params()
        token = self.authorize()
        body = self._decode()
        check(body)
        message = new_message(body, self.ctx.config.images.max_bytes)
        channel = channel_of(token.name, body.user)
        cid = await self._client_id(token.id, channel, body)
        image_ids = await self._store_images(message)
        user = UserMessage(message.text, received_at=self.ctx.clock.monotonic(), client_id=cid,
                           image_ids=image_ids, light=body.model == "chalie-light")
        exchange = _Exchange(self, body.model, bool(body.stream),
                             body.stream_options is not None
                             and body.stream_options.include_usage)
        call = TurnCall(self.ctx, channel, cid, on_delta=exchange.delta)
        exchange.call = call
        self._call = call
        unwatch = self.board().watch(token.id, lambda: exchange.revoked(call))
        act = self.ctx.config.act
        try:
            log.info("openai_chat", token=token.name, channel=channel, client_id=cid,
                     stream=bool(body.stream), model=body.model)
            result = await call.run(user, act.timeout_s + act.approval_timeout_s
                                    + CALL_SLACK_S)
        except CallFailed as e:
            exchange.failed(e)
            return
        finally:
            unwatch()
            self._call = None
        exchange.answer(result)

    _call: TurnCall | None = None

    def on_connection_close(self) -> None:
        """The client went away: stop following the turn (it goes on; its answer is kept)."""
        if self._call is not None:
            self._call.end("the client went away")

    def _decode(self) -> ChatRequest:
        try:
            return msgspec.json.decode(self.request.body, type=ChatRequest)
        except msgspec.ValidationError as e:
            found = _AT.search(str(e))
            field = found.group(1) if found else None
            raise OpenAiFault(400, f"{field or 'body'}: {_AT.sub('', str(e))}"[:300],
                              param=field) from None
        except msgspec.DecodeError as e:
            raise OpenAiFault(400, f"body is not valid JSON: {e}"[:300]) from None

    async def _client_id(self, token_id: str, channel: str, body: ChatRequest) -> str:
        """This window's id, unless the last window's already names this message."""
        window = int(self.ctx.clock.time() // self.ctx.config.openai.repeat_window_s)
        now, before = (client_id(token_id, channel, body, w) for w in (window, window - 1))
        seen = await self.off_loop(lambda: _seen(self.ctx.read(), channel, before))
        return before if seen else now

    async def _store_images(self, message: NewMessage) -> tuple[str, ...]:
        """Each image stored once: its id comes from its bytes."""
        ids = tuple(image_id(data) for _, data in message.images)
        if not ids:
            return ()
        _, missing = await self.off_loop(lambda: load(self.ctx.read(), ids))
        ops = tuple(InsertImage(i, media_type, data)
                    for i, (media_type, data) in zip(ids, message.images, strict=True)
                    if i in missing)
        if ops:
            done: OpsApplied = await self.ask("store_writer", ApplyOps(ops))
            if done.error is not None:
                raise OpenAiFault(503, f"the store refused the image: {done.error}",
                                  kind="server_error")
        return ids


def _seen(conn: Any, channel: str, cid: str) -> bool:
    """Whether a message with `cid` was answered on `channel`, or is being answered."""
    return queries.turn_for_client_id(conn, channel, cid) is not None \
        or queries.running_exchange(conn, channel, cid) is not None


class _Exchange:
    """One answer as the client gets it: a chat.completion at the end, or a stream of chunks
    as the turn's text streams."""

    def __init__(self, handler: ChatHandler, model: str, stream: bool,
                 include_usage: bool) -> None:
        self.handler, self.model = handler, model
        self.stream, self.include_usage = stream, include_usage
        self.created = int(handler.ctx.clock.time())
        self.call: TurnCall | None = None
        self.started = False  # the stream's headers and first chunk are sent
        self.sent = ""  # what was streamed since the last reset: the answer so far
        self.any_sent = False
        self.was_revoked = False

    # -- while the turn runs --

    def delta(self, text: str, reset: bool) -> None:
        """A piece of the answer. After a reset (the text so far was not the answer: the model
        went on to call a tool) the sent text cannot be taken back: a blank line parts it."""
        if not self.stream or (not text and not reset):
            return
        if reset:
            self.sent = ""
            if self.any_sent and text:
                self._content("\n\n")
        if text:
            self.sent += text
            self._content(text)

    def revoked(self, call: TurnCall) -> None:
        self.was_revoked = True
        call.end("the API token was revoked")

    # -- at the end --

    @property
    def id(self) -> str:
        exchange = self.call.exchange_id if self.call is not None else None
        return f"chatcmpl-{exchange or 'pending'}"

    def answer(self, result: TurnResult) -> None:
        if result.error is not None:
            self._error(502, f"the model failed: {result.error}", kind="server_error",
                        code="turn_failed")
            return
        usage = _usage(result)
        if not self.stream:
            self.handler.write_json(ChatCompletion(
                self.id, self.created, self.model, [Choice(AnswerMessage(result.text))], usage))
            return
        text = result.text
        rest = text[len(self.sent):] if text.startswith(self.sent) else \
            ("\n\n" if self.any_sent and text else "") + text
        if rest:
            self._content(rest)
        self._chunk([ChunkChoice(Delta(), "stop")])
        if self.include_usage:
            self._chunk([], usage)
        self._finish_stream()

    def failed(self, error: CallFailed) -> None:
        if error.status == 499 and not self.was_revoked:
            if self.handler.request.connection is None or self._gone():
                return  # the client went away: no one to tell
            self._error(503, "the server is stopping; try again shortly", kind="server_error")
        elif error.status == 499:
            self._error(401, "the API token was revoked", kind="authentication_error",
                        code="token_revoked")
        else:
            self._error(error.status, error.message, kind="server_error")

    def _error(self, status: int, message: str, *, kind: str, code: str | None = None) -> None:
        handler = self.handler
        handler.outcome = "refused" if status == 401 else "error"
        if not self.started:
            handler.send_error(status, exc_info=(OpenAiFault, OpenAiFault(
                status, message, kind=kind, code=code), None))
            return
        self._event(msgspec.json.encode(error_body(status, message, kind=kind, code=code)))
        self._finish_stream(done=False)

    # -- the stream --

    def _content(self, text: str) -> None:
        self.any_sent = True
        self._chunk([ChunkChoice(Delta(content=text))])

    def _chunk(self, choices: list[ChunkChoice], usage: Usage | None = None) -> None:
        self._start()
        self._event(msgspec.json.encode(ChatChunk(self.id, self.created, self.model, choices,
                                                  usage)))

    def _start(self) -> None:
        if self.started:
            return
        self.started = True
        handler = self.handler
        handler.set_header("Content-Type", "text/event-stream")
        handler.set_header("Cache-Control", "no-cache")
        handler.set_header("X-Accel-Buffering", "no")  # a proxy must not hold the events
        stream = getattr(handler.request.connection, "stream", None)
        if stream is not None:
            stream.set_nodelay(True)
        self._event(msgspec.json.encode(ChatChunk(
            self.id, self.created, self.model, [ChunkChoice(Delta(role="assistant"))])))

    def _event(self, data: bytes) -> None:
        if self._gone():
            return
        self.handler.write(b"data: " + data + b"\n\n")
        flushed = self.handler.flush()
        flushed.add_done_callback(_quiet)

    def _finish_stream(self, *, done: bool = True) -> None:
        if self._gone():
            return
        if done:
            self.handler.write(b"data: [DONE]\n\n")
        self.handler.finish()

    def _gone(self) -> bool:
        return bool(self.handler._finished)


def _quiet(future: asyncio.Future[None]) -> None:
    """A flush to a client that went away fails; on_connection_close has ended the call."""
    if not future.cancelled():
        future.exception()


def _usage(result: TurnResult) -> Usage:
    """The turn's tokens over every LLM call (tools and compaction included)."""
    completion = result.completion_tokens
    prompt = result.prompt_tokens
    if prompt + completion != result.tokens:  # a provider that reports only the total
        completion = min(result.tokens, max(1, len(result.text) // 4))
        prompt = result.tokens - completion
    return Usage(prompt, completion, prompt + completion)

