"""Broadcast streams: Chalie connects out to a WebSocket and reads signals from it.

Each subscription is one task on the IOLoop (the SignalGate lives there too). A frame
`{"type": "signal", ...signal fields...}` is one signal, checked, type-scoped and rate-limited
like a REST signal, sender "subscription:<name>"; frames of another type are the stream's own
business and ignored. Signals accepted in one pass of the loop go to WorldState in one message.

A stream that closes or fails is connected again after a delay that starts at
subscriptions.reconnect_initial_s and doubles up to reconnect_max_s, each delay ±20 % at random
(so many Chalies dropped by one stream do not come back at once). The delay starts over after a
connection that brought a valid signal or lasted reconnect_max_s. Logs name the subscription,
never its URL (a query string may carry a token).
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Callable, Iterable, Sequence
from typing import cast
from urllib.parse import urlsplit

import msgspec
import structlog
from tornado.httpclient import HTTPRequest
from tornado.websocket import WebSocketClientConnection, websocket_connect

from chalie.actors.supervisor import Directory
from chalie.actors.world_state import SignalsIn
from chalie.clock import Clock
from chalie.config import SubscriptionsConfig
from chalie.metrics import Metrics
from chalie.store.interface_rows import SubscriptionRow
from chalie.values.signals import Signal
from chalie.world.signals import (
    ANY_TYPE,
    MAX_TYPE,
    TYPE_RE,
    Rejection,
    SignalGate,
    SignalIn,
    allowed_types,
    parse_value,
)

log = structlog.get_logger("chalie.edge")

NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
MAX_URL = 2048
MAX_TYPES = 100
MAX_FRAME_BYTES = 64 * 1024  # a signal is at most ~12 KiB of JSON; a bigger frame ends the stream
PING_INTERVAL_S = 30.0  # keepalive: a stream that does not answer a ping within this is closed
JITTER = 0.2
SHOWN_CHARS = 200  # of a bad frame's decode error


class SubscriptionState(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A stream as GET /api/subscriptions shows it: `connected_at` is null while disconnected;
    `last_error` is the latest problem, kept after a reconnect."""

    id: str
    name: str
    url: str
    signals: list[str]
    connected: bool
    last_error: str | None
    accepted: int
    rejected: int
    connected_at: float | None
    created_at: float


def check(name: str, url: str, signals: Sequence[str]) -> tuple[str, ...]:
    """A new subscription's fields checked; its signal types without repeats. Raises
    ValueError("<field>: <problem>")."""
    if not NAME_RE.match(name):
        raise ValueError(f"name: 1-64 letters, digits or '_', '.', '-', got {name[:64]!r}")
    if len(url) > MAX_URL:
        raise ValueError(f"url: at most {MAX_URL} characters, got {len(url)}")
    if any(c.isspace() or not c.isprintable() for c in url):
        raise ValueError("url: must not contain spaces or control characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError for a port that is not one
    except ValueError as e:
        raise ValueError(f"url: not a valid URL ({e})") from None
    if url.partition("://")[0] not in ("ws", "wss") or not parts.hostname:
        raise ValueError("url: must be ws://host/... or wss://host/...")
    if parts.fragment or url.endswith("#"):
        raise ValueError("url: a WebSocket URL has no #fragment")
    if not signals:
        raise ValueError(f'signals: list the signal types to accept, or ["{ANY_TYPE}"] for any')
    if ANY_TYPE in signals:
        if len(set(signals)) > 1:
            raise ValueError(f'signals: ["{ANY_TYPE}"] accepts any type; give it alone')
        return (ANY_TYPE,)
    if len(signals) > MAX_TYPES:
        raise ValueError(f"signals: at most {MAX_TYPES} types, got {len(signals)}")
    for kind in signals:
        if not 0 < len(kind) <= MAX_TYPE or not TYPE_RE.match(kind):
            raise ValueError(f"signals: each 1-{MAX_TYPE} letters, digits or '_', '.', ':', "
                             f"'-', got {kind[:MAX_TYPE]!r}")
    return tuple(dict.fromkeys(signals))


def backoff_delay(failures: int, initial: float, most: float, rand: Callable[[], float]) -> float:
    """Seconds to wait after `failures` (1, 2, ...) failed or short connections in a row:
    initial, doubled each time up to `most`, times 1 ± JITTER (`rand()` is in [0, 1))."""
    base = min(most, initial * 2.0 ** min(failures - 1, 60))
    return base * (1.0 - JITTER + 2.0 * JITTER * rand())


class _Stream:
    """One subscription's live state; changed on the IOLoop only."""

    def __init__(self, row: SubscriptionRow) -> None:
        self.row = row
        self.sender = f"subscription:{row.name}"
        self.allowed = allowed_types(row.signals)
        self.connected = False
        self.connected_at: float | None = None
        self.last_error: str | None = None
        self.accepted = 0
        self.rejected = 0
        self.failures = 0  # failed or short connections in a row
        self.good = False  # this connection brought a valid signal
        self.conn: WebSocketClientConnection | None = None
        self.task: asyncio.Task[None] | None = None

    def state(self) -> SubscriptionState:
        row = self.row
        return SubscriptionState(
            id=row.id, name=row.name, url=row.url, signals=list(row.signals),
            connected=self.connected, last_error=self.last_error, accepted=self.accepted,
            rejected=self.rejected, connected_at=self.connected_at, created_at=row.created_at)


class Subscriptions:
    """Every broadcast stream this Chalie reads. Use on the IOLoop only."""

    def __init__(self, *, gate: SignalGate, directory: Directory, metrics: Metrics,
                 config: SubscriptionsConfig, clock: Clock,
                 rand: Callable[[], float] = random.random) -> None:
        self._gate = gate
        self._directory = directory
        self._metrics = metrics
        self._config = config
        self._clock = clock
        self._rand = rand
        self._streams: dict[str, _Stream] = {}
        self._pending: list[Signal] = []  # accepted, not yet told to WorldState
        self._flush_scheduled = False

    def start(self, rows: Iterable[SubscriptionRow]) -> None:
        """Connect every stored subscription (at server start, inside the running IOLoop)."""
        for row in rows:
            self.add(row)
        self._count_connected()

    def add(self, row: SubscriptionRow) -> None:
        """Start reading a new subscription's stream (nothing if its id is known)."""
        if row.id in self._streams:
            return
        stream = _Stream(row)
        self._streams[row.id] = stream
        stream.task = asyncio.get_running_loop().create_task(self._run(stream),
                                                              name=stream.sender)
        log.info("subscription_added", subscription=row.name, id=row.id)

    def remove(self, subscription_id: str) -> bool:
        """Stop reading a subscription; False when there is none with this id."""
        stream = self._streams.pop(subscription_id, None)
        if stream is None:
            return False
        self._halt(stream)
        self._gate.forget(stream.sender)
        self._count_connected()
        log.info("subscription_removed", subscription=stream.row.name, id=subscription_id)
        return True

    def states(self) -> list[SubscriptionState]:
        """Each subscription as GET /api/subscriptions shows it, oldest first: `connected_at`
        is null while disconnected; `last_error` is the latest problem (a failed connect, a
        close, a rejected frame), kept after a reconnect."""
        streams = sorted(self._streams.values(), key=lambda s: (s.row.created_at, s.row.id))
        return [s.state() for s in streams]

    def state(self, subscription_id: str) -> SubscriptionState | None:
        stream = self._streams.get(subscription_id)
        return None if stream is None else stream.state()

    async def stop(self) -> None:
        """Close every stream and cancel every pending reconnect (at shutdown)."""
        streams = list(self._streams.values())
        self._streams.clear()
        for stream in streams:
            self._halt(stream)
        tasks = [s.task for s in streams if s.task is not None]
        await asyncio.gather(*tasks, return_exceptions=True)
        self._flush()
        self._count_connected()

    # --- one stream ---------------------------------------------------------------------------

    def _halt(self, stream: _Stream) -> None:
        if stream.task is not None:
            stream.task.cancel()
        if stream.conn is not None:
            stream.conn.close(1001, "unsubscribed")
        stream.connected = False

    async def _run(self, stream: _Stream) -> None:
        """Connect, read until the stream ends, wait, and again, until cancelled."""
        config = self._config
        while True:
            started = self._clock.monotonic()
            stream.good = False
            try:
                await self._read(stream)
            except Exception as e:  # a bug here must not end the stream for good
                log.exception("subscription_failed", subscription=stream.row.name)
                stream.last_error = f"internal error: {_describe(e)}"
            lasted = self._clock.monotonic() - started
            stable = stream.good or lasted >= config.reconnect_max_s
            stream.failures = 0 if stable else stream.failures + 1
            delay = backoff_delay(max(1, stream.failures), config.reconnect_initial_s,
                                  config.reconnect_max_s, self._rand)
            level = log.warning if stream.failures <= 1 else log.info
            level("subscription_down", subscription=stream.row.name, error=stream.last_error,
                  retry_in_s=round(delay, 3), failures=stream.failures)
            await asyncio.sleep(delay)

    async def _read(self, stream: _Stream) -> None:
        """One connection: open it, take its frames until it closes; `last_error` says why."""
        closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def on_message(message: str | bytes | None) -> None:
            if message is None:
                if not closed.done():
                    closed.set_result(None)
            elif self._streams.get(stream.row.id) is stream:
                self._frame(stream, message)

        timeout = self._config.connect_timeout_s
        connecting: asyncio.Future[WebSocketClientConnection] | None = None
        try:
            connecting = cast("asyncio.Future[WebSocketClientConnection]", websocket_connect(
                HTTPRequest(stream.row.url, connect_timeout=timeout, request_timeout=timeout),
                on_message_callback=on_message, ping_interval=PING_INTERVAL_S,
                ping_timeout=PING_INTERVAL_S, max_message_size=MAX_FRAME_BYTES,
            ))
            conn = await asyncio.shield(connecting)
        except asyncio.CancelledError:
            if connecting is not None:
                connecting.add_done_callback(_close_late)
            raise
        except Exception as e:  # refused, DNS, TLS, timeout, an HTTP answer that is not 101
            stream.last_error = f"connect failed: {_describe(e)}"
            return
        stream.conn, stream.connected = conn, True
        stream.connected_at = self._clock.time()
        self._count_connected()
        log.info("subscription_connected", subscription=stream.row.name)
        try:
            await closed
        finally:
            conn.close()
            stream.conn, stream.connected, stream.connected_at = None, False, None
            self._count_connected()
        code, reason = conn.close_code, conn.close_reason
        stream.last_error = "stream closed" + (f" (code {code}{': ' + reason if reason else ''})"
                                               if code is not None else " without a close code")

    def _frame(self, stream: _Stream, message: str | bytes) -> None:
        try:
            value = msgspec.json.decode(message)
        except msgspec.DecodeError as e:
            self._reject(stream, Rejection("invalid", f"frame is not valid JSON: "
                                                      f"{str(e)[:SHOWN_CHARS]}"))
            return
        if not isinstance(value, dict):
            self._reject(stream, Rejection(
                "invalid", f"frame is a JSON {type(value).__name__}, not an object"))
            return
        if value.get("type") != "signal":
            return  # the stream's own frames (hello, ping, ...)
        parsed = parse_value({k: v for k, v in value.items() if k != "type"})
        if isinstance(parsed, SignalIn):
            stream.good = True
        result = self._gate.admit(stream.sender, stream.allowed, parsed)
        if isinstance(result, Rejection):
            if result.reason == "forbidden" and isinstance(parsed, SignalIn):
                result = Rejection("forbidden", f"signal_type {parsed.signal_type!r} is not one "
                                   f"this subscription accepts ({', '.join(stream.row.signals)})")
            self._reject(stream, result)
            return
        stream.accepted += 1
        self._metrics.signals.labels(result="accepted", via="stream").inc()
        self._pending.append(result)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _reject(self, stream: _Stream, rejection: Rejection) -> None:
        stream.rejected += 1
        stream.last_error = rejection.error
        self._metrics.signals.labels(result=rejection.reason, via="stream").inc()
        log.debug("subscription_frame_rejected", subscription=stream.row.name,
                  reason=rejection.reason, error=rejection.error)

    def _flush(self) -> None:
        """Tell WorldState every signal accepted since the last flush, in one message."""
        self._flush_scheduled = False
        if self._pending:
            batch, self._pending = tuple(self._pending), []
            self._directory.tell("world", SignalsIn(batch))

    def _count_connected(self) -> None:
        connected = sum(s.connected for s in self._streams.values())
        self._metrics.subscriptions_connected.set(connected)


def _describe(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _close_late(connecting: asyncio.Future[WebSocketClientConnection]) -> None:
    """A connection that opens after its subscription was stopped is closed at once."""
    if not connecting.cancelled() and connecting.exception() is None:
        connecting.result().close(1001, "unsubscribed")
