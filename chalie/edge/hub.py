"""The Outbox the StoreWriter pushes to: channel -> open sockets, delivered on the IOLoop.

Each socket remembers the highest seq it was sent, so a frame that reaches it twice (once in a
resume replay read from the log, once as the live push of the same commit) goes out once.
The hub also keeps sockets alive: every `ping_interval_s` it sends a `ping` frame, and closes
a socket that let `ping_misses` pings in a row go without a reply. At the same beat it closes
(1008, "logged out") every socket whose login session has ended since it opened: logged out,
ended by `chalie passwd`, expired, or replaced by a newer cookie (the page then reconnects with
that one and resumes).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Protocol

import msgspec
import structlog
from tornado.ioloop import IOLoop, PeriodicCallback

from chalie.frames import MessageDelta, encode_live, frame_seq

log = structlog.get_logger("chalie.edge")


LiveSessions = Callable[[Collection[str]], Collection[str]]  # token hashes -> the live ones
ENDS_EXCHANGE = frozenset({"message", "error", "done"})


class _Piece(msgspec.Struct):
    """What the hub reads of a frame it passes on: its type, exchange and (a delta's) text."""

    type: str = ""
    exchange_id: str | None = None
    text: str = ""
    reset: bool = False


_read_piece = msgspec.json.Decoder(_Piece).decode


class Sink(Protocol):
    def send_frame(self, seq: int, frame: str, *, again: bool = False) -> None: ...

    def send_live(self, frame: str) -> None:
        """An ephemeral frame: no seq, nothing to de-duplicate."""
        ...

    def close(self, code: int | None = None, reason: str | None = None) -> None: ...

    def keepalive(self, max_misses: int) -> None:
        """Send a ping, or close the socket if `max_misses` pings went unanswered."""
        ...


class SocketHub:
    def __init__(self, loop: IOLoop) -> None:
        self._loop = loop
        self._sockets: dict[str, set[Sink]] = {}
        self._pinger: PeriodicCallback | None = None
        self._live: LiveSessions | None = None
        # channel -> (exchange, its answer's text so far): what a socket that opens or resumes
        # mid-answer is sent first (one reset delta), as message_delta frames are not logged.
        self._streaming: dict[str, tuple[str, str]] = {}
        self._visible: set[Sink] = set()  # sockets whose page said it is visible (`presence`)
        self.visible_pages = 0  # how many: read from any thread (the Delivery actor's)

    # Called on the IOLoop thread only.
    def register(self, channel: str, sink: Sink) -> None:
        self._sockets.setdefault(channel, set()).add(sink)

    def seen(self, sink: Sink, visible: bool) -> None:
        """A socket's page said whether it is visible (a `presence` frame)."""
        if visible:
            self._visible.add(sink)
        else:
            self._visible.discard(sink)
        self.visible_pages = len(self._visible)

    def unregister(self, channel: str, sink: Sink) -> None:
        self._visible.discard(sink)
        self.visible_pages = len(self._visible)
        sinks = self._sockets.get(channel)
        if sinks is not None:
            sinks.discard(sink)
            if not sinks:
                del self._sockets[channel]

    def close_all(self, reason: str) -> None:
        """Close every socket with 1001 (going away); clients reconnect and resume."""
        for sinks in list(self._sockets.values()):
            for sink in list(sinks):
                sink.close(1001, reason)

    def count(self) -> int:
        return sum(len(s) for s in self._sockets.values())

    def start_keepalive(self, interval_s: float, max_misses: int,
                        live: LiveSessions | None = None) -> None:
        """Ping every `interval_s`; with `live` (read off the IOLoop: it reads the store), also
        close the sockets whose login session is no longer live."""
        self._live = live
        self._pinger = PeriodicCallback(lambda: self.keepalive(max_misses), interval_s * 1000)
        self._pinger.start()

    def stop_keepalive(self) -> None:
        if self._pinger is not None:
            self._pinger.stop()
            self._pinger = None

    def keepalive(self, max_misses: int) -> None:
        for sinks in list(self._sockets.values()):
            for sink in list(sinks):
                sink.keepalive(max_misses)
        if self._live is not None:
            self._loop.add_callback(self.close_ended, self._live)

    async def close_ended(self, live: LiveSessions) -> int:
        """Close every socket whose login session has ended; how many were closed."""
        opened = {sink: session for sinks in self._sockets.values() for sink in sinks
                  if (session := getattr(sink, "session", None)) is not None}
        if not opened:
            return 0
        alive = set(await self._loop.run_in_executor(None, live, set(opened.values())))
        ended = [sink for sink, session in opened.items() if session not in alive]
        for sink in ended:
            sink.close(1008, "logged out")
        if ended:
            log.info("ws_closed_logged_out", sockets=len(ended))
        return len(ended)

    # Called from any thread (the StoreWriter's): add_callback is the thread-safe door.
    def push(self, channel: str, frames: Sequence[str], *, again: bool = False) -> None:
        try:
            self._loop.add_callback(self._deliver, channel, tuple(frames), again)
        except RuntimeError:  # the loop is closed: the server is shutting down
            log.info("push_after_shutdown", channel=channel, frames=len(frames))

    def live(self, channel: str, frame: str) -> None:
        try:
            self._loop.add_callback(self._deliver_live, channel, frame)
        except RuntimeError:
            pass  # shutting down: an ephemeral frame is not missed

    def text_so_far(self, channel: str) -> str | None:
        """The channel's answer as it streams so far, as one `message_delta` with `reset`
        (a client that applies it shows the whole text); None when nothing streams."""
        streaming = self._streaming.get(channel)
        if streaming is None:
            return None
        exchange_id, text = streaming
        return encode_live(MessageDelta(exchange_id=exchange_id, text=text, reset=True))

    def _deliver_live(self, channel: str, frame: str) -> None:
        piece = _read_piece(frame)
        if piece.type == "message_delta" and piece.exchange_id is not None:
            exchange_id, text = self._streaming.get(channel, (piece.exchange_id, ""))
            same = exchange_id == piece.exchange_id and not piece.reset
            self._streaming[channel] = (piece.exchange_id,
                                        text + piece.text if same else piece.text)
        elif piece.type in ENDS_EXCHANGE:
            self._ended(channel, piece)
        for sink in list(self._sockets.get(channel, ())):
            sink.send_live(frame)

    def _ended(self, channel: str, piece: _Piece) -> None:
        streaming = self._streaming.get(channel)
        if streaming is not None and piece.exchange_id == streaming[0]:
            del self._streaming[channel]

    def _deliver(self, channel: str, frames: tuple[str, ...], again: bool) -> None:
        if channel in self._streaming:
            for frame in frames:
                piece = _read_piece(frame)
                if piece.type in ENDS_EXCHANGE:
                    self._ended(channel, piece)
        sinks = self._sockets.get(channel)
        if not sinks:
            return
        sequenced = [(frame_seq(f), f) for f in frames]
        for sink in list(sinks):
            for seq, frame in sequenced:
                sink.send_frame(seq, frame, again=again)
