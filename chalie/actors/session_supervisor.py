"""SessionSupervisor: one Session per channel, started on first use, restarted on a crash,
stopped when idle.

Everything for a Session goes through here as Deliver(channel, message), so senders never hold
a stale ref: while a crashed Session waits out its backoff, its messages are held and handed to
the new instance in order.

A Session idle for server.session_idle_s says so (SessionIdle; chalie/actors/session_idle.py).
If it is still the channel's current instance, it is asked StopIfIdle, and on True forgotten
and stopped; the channel's next message starts a new one, which loads its state from the store.
This is the one ask the supervisor makes of a child: the Session answers from its mailbox at
once and never asks anyone, and while the supervisor waits no Deliver can slip past the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pykka
import structlog

from chalie.actors.messages import Deliver, SessionIdle, StopIfIdle
from chalie.actors.supervisor import STOP_TIMEOUT_S, ChildSpec, Link, Supervisor

SessionFactory = Callable[[Link, str], pykka.ActorRef[Any]]

log = structlog.get_logger("chalie.supervisor")


class SessionSupervisor(Supervisor):
    def __init__(self, link: Link | None, *, session_factory: SessionFactory, **kw: Any) -> None:
        super().__init__(link, name="sessions", **kw)
        self._session_factory = session_factory

    def started(self) -> None:
        super().started()
        self._count()

    def handle(self, message: Any) -> Any:
        match message:
            case Deliver(channel=channel, message=inner):
                self._deliver(channel, inner)
            case SessionIdle(channel=channel, urn=urn):
                self._stop_if_idle(f"session:{channel}", urn)
            case _:
                return super().handle(message)
        return None

    def _deliver(self, channel: str, message: Any) -> None:
        name = f"session:{channel}"
        if self.send_child(name, message):
            return
        factory = self._session_factory
        self.add_child(ChildSpec(name, lambda link: factory(link, channel), register=False))
        self._count()
        self.send_child(name, message)

    def _stop_if_idle(self, name: str, urn: str) -> None:
        ref = self.child(name)
        if ref is None or ref.actor_urn != urn:
            return  # a stale word from an instance replaced since
        try:
            idle = ref.ask(StopIfIdle(), timeout=STOP_TIMEOUT_S)
        except (pykka.ActorDeadError, pykka.Timeout):
            return  # it crashed (its ChildFailed is on the way) or is busy: it says so again
        if not idle:
            return
        self.forget_child(name)
        self._count()
        self._metrics.sessions_stopped.inc()
        log.info("session_stopped_idle", child=name)
        try:
            ref.stop(block=True, timeout=STOP_TIMEOUT_S)
        except (pykka.ActorDeadError, pykka.Timeout):
            log.warning("session_stop_slow", child=name)

    def _count(self) -> None:
        self._metrics.sessions.set(sum(n.startswith("session:") for n in self._specs))
