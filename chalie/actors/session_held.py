"""Messages a Session keeps while the store cannot take writes (chalie/store/health.py).

A message that arrives while the store is faulted, or whose turn could not be stored because it
is, is answered at once by an `error` frame sent live (the event log cannot take it) in words a
person can act on, and kept here; when the StoreWriter says the store takes writes again
(StoreWritable), the kept messages go back to the front of the Session's queue in the order they
came, and are stored and answered then, with their own client_id (a client that sends one again
meanwhile is not answered twice: nothing of it was stored). While messages are kept, new ones
queue behind them, so order holds. How many: store.hold_messages in all channels together (each
at most server.max_frame_bytes); past that, and for a damaged database (it does not come back by
itself), a message is refused with a frame saying to send it again.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator

import msgspec
import structlog

from chalie.actors.session_messages import ActionRequest, UserMessage
from chalie.frames import Done, Error
from chalie.store.health import StoreHealth

log = structlog.get_logger("chalie.session")

KEPT = "{why}: your message is kept, and will be stored and answered as soon as that is done"
REFUSED = "{why}: your message could not be kept; send it again once that is done"


class HeldMessages:
    def __init__(self, health: StoreHealth | None, push_live: Callable[[Error | Done], None],
                 monotonic: Callable[[], float]) -> None:
        self._health = health
        self._push_live = push_live
        self._monotonic = monotonic
        self._queue: deque[UserMessage] = deque()
        # Exchanges closed only live (their turn ran into the fault): logged when it passes,
        # so that a client reading the log later sees them closed as the live one did.
        self._unclosed: list[tuple[Error, Done]] = []

    def __len__(self) -> int:
        return len(self._queue)

    def __iter__(self) -> Iterator[UserMessage]:
        return iter(self._queue)

    def holds(self) -> bool:
        """Whether a message starting now is kept instead (the store cannot take writes, or
        earlier messages are kept: order holds)."""
        return self._health is not None and (bool(self._queue) or not self._health.writable)

    def keep(self, request: UserMessage | ActionRequest, *, why: str | None = None,
             exchange_id: str | None = None) -> None:
        """Keep `request` (a turn for it, `exchange_id`, could not be stored: end it too), or
        refuse it when there is no room or the fault will not pass by itself."""
        health = self._health  # None (a Session built without one, in tests): refused
        why = why or (health.words() if health else "") or "the store could not take the message"
        fault = health.fault if health else None  # None: it passed, StoreWritable is coming
        kept = health is not None and isinstance(request, UserMessage) \
            and (fault is None or fault.state != "damaged") and health.hold()
        if kept:
            assert isinstance(request, UserMessage)
            self._queue.append(request)
        log.warning("message_kept" if kept else "message_refused", client_id=request.client_id,
                    held=len(self._queue), reason=why)
        error = Error(message=(KEPT if kept else REFUSED).format(why=why), recoverable=True,
                      exchange_id=exchange_id)
        self._push_live(error)
        if exchange_id is not None:
            done = Done(duration_ms=0, exchange_id=exchange_id)
            self._push_live(done)
            self._unclosed.append((error, done))

    def closings(self) -> tuple[Error | Done, ...]:
        """The closing frames of the exchanges closed only live, to log now that the store
        takes writes (once)."""
        out = tuple(frame for pair in self._unclosed for frame in pair)
        self._unclosed.clear()
        return out

    def release(self) -> list[UserMessage]:
        """The kept messages, oldest first, now that the store takes writes: each received now,
        so that its turn has its whole time budget (act.timeout_s runs from receipt), however
        long the store could not take it."""
        now = self._monotonic()
        out = [msgspec.structs.replace(m, received_at=now) for m in self._queue]
        self._queue.clear()
        if self._health is not None:
            self._health.release(len(out))
        if out:
            log.info("messages_released", count=len(out))
        return out

    def drop(self) -> None:
        """The Session is going (it crashed): what it kept is lost with it; free the room."""
        if self._queue:
            log.error("kept_messages_lost", count=len(self._queue))
        if self._health is not None:
            self._health.release(len(self._queue))
        self._queue.clear()
