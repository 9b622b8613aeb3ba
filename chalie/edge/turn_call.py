"""One message run through the reasoning path on a channel, followed as a client would.

What the MCP server's `ask_chalie` and POST /v1/chat/completions share. A `TurnCall` is a Sink
of the SocketHub on the channel: registered before the message is delivered, it sees the
channel's frames as a /ws client does, finds its exchange by the message's `client_id` (in the
turn's opening `status` frame), passes on its progress (narration, an approval it waits for)
and its answer's text as it streams (`message_delta`, `reset` included), and ends with the
exchange's `done`. `on_frame`, when given, sees each of the exchange's frames itself (its
opening `status` first): a client that shows more than the answer (the Telegram bridge's
approval buttons) reads them there.

The `client_id` makes the message idempotent: a message sent again with the same id (a retry)
runs no second turn. Chalie shows the first one's frames again (the session re-pushes a stored
exchange); one still running is found in the log and followed from there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import structlog

from chalie.actors.session_messages import ActionRequest, Deliver, UserMessage
from chalie.edge.context import EdgeContext
from chalie.store import queries

log = structlog.get_logger("chalie.edge")

_decode = msgspec.json.Decoder(dict[str, Any]).decode


class CallFailed(Exception):
    """The message could not be run: `status` (503 restarting or the store cannot take
    writes, 504 no answer in time, 499 the call was ended: its token revoked or the server
    stopping) and what to tell the caller."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class TurnResult:
    """How the exchange ended: the answer's text, or the error that ended it; `tokens` over
    every LLM call of the turn."""

    exchange_id: str
    text: str = ""
    error: str | None = None
    tokens: int = 0
    prompt_tokens: int = 0  # of `tokens`, those of the prompts
    completion_tokens: int = 0  # of `tokens`, those the model wrote
    tools: dict[str, int] = field(default_factory=dict)


Progress = Callable[[str], None]  # a sentence about what the turn is doing now
Delta = Callable[[str, bool], None]  # (text, reset)
FrameSeen = Callable[[dict[str, Any]], None]  # one of the exchange's frames, decoded


class TurnCall:
    def __init__(self, ctx: EdgeContext, channel: str, client_id: str, *,
                 on_progress: Progress | None = None, on_delta: Delta | None = None,
                 on_frame: FrameSeen | None = None) -> None:
        self.ctx = ctx
        self.channel = channel
        self.client_id = client_id
        self._on_progress = on_progress
        self._on_delta = on_delta
        self._on_frame = on_frame
        self._exchange: str | None = None
        self._result: TurnResult | None = None
        self._done: asyncio.Future[TurnResult] | None = None
        self.session = None  # not a login's socket: the hub's logout sweep passes it by

    async def run(self, message: UserMessage | ActionRequest, timeout_s: float) -> TurnResult:
        """Deliver `message` (its client_id is this call's) and wait for its exchange's end."""
        store = self.ctx.store
        if store is not None and not store.writable:
            raise CallFailed(503, f"{store.words()}; try again then")
        self._done = asyncio.get_running_loop().create_future()
        hub = self.ctx.hub
        hub.register(self.channel, self)
        try:
            self._follow_running()
            if self._exchange is None and not self.ctx.directory.tell(
                    "sessions", Deliver(self.channel, message)):
                raise CallFailed(503, "the server is restarting; try again shortly")
            try:
                return await asyncio.wait_for(asyncio.shield(self._done), timeout_s)
            except TimeoutError:
                raise CallFailed(504, f"no answer within {timeout_s:.0f}s; the turn goes on "
                                      "and its answer is kept on the channel") from None
        finally:
            hub.unregister(self.channel, self)

    @property
    def exchange_id(self) -> str | None:
        """The exchange that answers the message, once the turn has begun."""
        return self._exchange

    def end(self, why: str) -> None:
        """Stop waiting (the token was revoked, the server stops)."""
        if self._done is not None and not self._done.done():
            self._done.set_exception(CallFailed(499, why))

    def _follow_running(self) -> None:
        """A message sent again while its first turn still runs: follow that turn."""
        running = queries.running_exchange(self.ctx.read(), self.channel, self.client_id)
        if running is None:
            return
        exchange, frames = running
        log.info("turn_call_follows_running", channel=self.channel, exchange_id=exchange)
        self._exchange = exchange
        self._result = TurnResult(exchange)
        if self._on_frame is not None and frames:
            self._on_frame(_decode(frames[0]))
        for frame in frames[1:]:
            self._take(_decode(frame))

    # -- the Sink --

    def send_frame(self, seq: int, frame: str, *, again: bool = False) -> None:
        self._take(_decode(frame))

    def send_live(self, frame: str) -> None:
        self._take(_decode(frame))

    def close(self, code: int | None = None, reason: str | None = None) -> None:
        self.end(reason or "the call was ended")

    def keepalive(self, max_misses: int) -> None:
        pass  # not a socket: nothing to ping

    def _take(self, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        if self._exchange is None:
            if kind == "status" and frame.get("client_id") == self.client_id \
                    and isinstance(frame.get("exchange_id"), str):
                self._exchange = frame["exchange_id"]
                self._result = TurnResult(self._exchange)
                if self._on_frame is not None:
                    self._on_frame(frame)
            return
        result = self._result
        if result is None or frame.get("exchange_id") != self._exchange:
            return
        if self._on_frame is not None:
            self._on_frame(frame)
        match kind:
            case "message_delta":
                if self._on_delta is not None:
                    self._on_delta(str(frame.get("text", "")), bool(frame.get("reset")))
            case "act_narration":
                self._progress(str(frame.get("text", "")))
            case "escalation":
                self._progress(f"waiting for the person's approval: {frame.get('content', '')}")
            case "message":
                blocks = frame.get("blocks") or ()
                result.text = "".join(str(b.get("text", "")) for b in blocks
                                      if isinstance(b, dict))
                self._metrics(result, frame.get("metrics"))
            case "error":
                result.error = str(frame.get("message", "the turn failed"))
                self._metrics(result, frame.get("metrics"))
            case "done":
                if self._done is not None and not self._done.done():
                    self._done.set_result(result)

    def _progress(self, text: str) -> None:
        if self._on_progress is not None and text:
            self._on_progress(text)

    @staticmethod
    def _metrics(result: TurnResult, metrics: Any) -> None:
        if isinstance(metrics, dict):
            result.tokens = int(metrics.get("tokens_total") or 0)
            result.prompt_tokens = int(metrics.get("prompt_tokens") or 0)
            result.completion_tokens = int(metrics.get("completion_tokens") or 0)
            tools = metrics.get("tools")
            if isinstance(tools, dict):
                result.tools = {str(k): int(v) for k, v in tools.items()}
