"""The Outbox the StoreWriter pushes to: channel -> open sockets, delivered on the IOLoop."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import structlog
from tornado.ioloop import IOLoop

log = structlog.get_logger("chalie.edge")


class Sink(Protocol):
    def send_frame(self, frame: str) -> None: ...


class SocketHub:
    def __init__(self, loop: IOLoop) -> None:
        self._loop = loop
        self._sockets: dict[str, set[Sink]] = {}

    # Called on the IOLoop thread only.
    def register(self, channel: str, sink: Sink) -> None:
        self._sockets.setdefault(channel, set()).add(sink)

    def unregister(self, channel: str, sink: Sink) -> None:
        sinks = self._sockets.get(channel)
        if sinks is not None:
            sinks.discard(sink)
            if not sinks:
                del self._sockets[channel]

    def count(self) -> int:
        return sum(len(s) for s in self._sockets.values())

    # Called from any thread (the StoreWriter's): add_callback is the thread-safe door.
    def push(self, channel: str, frames: Sequence[str]) -> None:
        try:
            self._loop.add_callback(self._deliver, channel, tuple(frames))
        except RuntimeError:  # the loop is closed: the server is shutting down
            log.info("push_after_shutdown", channel=channel, frames=len(frames))

    def _deliver(self, channel: str, frames: tuple[str, ...]) -> None:
        for sink in list(self._sockets.get(channel, ())):
            for frame in frames:
                sink.send_frame(frame)
