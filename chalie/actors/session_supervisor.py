"""SessionSupervisor: one Session per channel, started on first use, restarted on a crash,
stopped when idle.

Everything for a Session goes through here as Deliver(channel, message), so senders never hold
a stale ref: while a crashed Session waits out its backoff, its messages are held and handed to
the new instance in order.

A Session idle for server.session_idle_s says so (SessionIdle; chalie/actors/session_idle.py).
If it is still the channel's current instance, the supervisor tells it StopIfIdle and, until
its IdleAnswer, holds the channel's messages. The Session answers in mailbox order, so anything
delivered before StopIfIdle has already made it busy (stop=False: the held messages go to it);
with stop=True it is forgotten and stopped, and the held messages, if any, start a new Session,
which loads its state from the store. No ask: the supervisor never waits on a child, and only
the one channel's messages wait for the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pykka
import structlog

from chalie.actors.session_messages import (
    Deliver,
    IdleAnswer,
    SessionIdle,
    StopIfIdle,
    StoreWritable,
)
from chalie.actors.supervisor import ChildSpec, Link, Supervisor

SessionFactory = Callable[[Link, str], pykka.ActorRef[Any]]

log = structlog.get_logger("chalie.supervisor")


class SessionSupervisor(Supervisor):
    def __init__(self, link: Link | None, *, session_factory: SessionFactory, **kw: Any) -> None:
        super().__init__(link, name="sessions", **kw)
        self._session_factory = session_factory
        self._stopping: dict[str, str] = {}  # name -> urn asked StopIfIdle, not yet answered

    def started(self) -> None:
        super().started()
        self._count()

    def handle(self, message: Any) -> Any:
        match message:
            case Deliver(channel=channel, message=inner):
                self._deliver(channel, inner)
            case SessionIdle(channel=channel, urn=urn):
                self._ask_to_stop(f"session:{channel}", urn)
            case IdleAnswer(channel=channel, urn=urn, stop=stop):
                self._answered(f"session:{channel}", urn, stop=stop)
            case StoreWritable():  # to every Session running: what they kept can go now
                for name in [n for n in self._specs if n.startswith("session:")]:
                    if self._stopping_now(name):
                        self.hold(name, message)
                    else:
                        self.send_child(name, message)
            case _:
                return super().handle(message)
        return None

    def _deliver(self, channel: str, message: Any) -> None:
        name = f"session:{channel}"
        if self._stopping_now(name):
            self.hold(name, message)
            return
        if self.send_child(name, message):
            return
        self._start_session(name, channel)
        self.send_child(name, message)

    def _start_session(self, name: str, channel: str) -> None:
        factory = self._session_factory
        self.add_child(ChildSpec(name, lambda link: factory(link, channel), register=False))
        self._count()

    def _stopping_now(self, name: str) -> bool:
        """Whether `name` has been asked to stop and not answered yet (an instance that has
        crashed since is not: its successor takes the messages)."""
        urn = self._stopping.get(name)
        ref = self.child(name)
        if urn is not None and (ref is None or ref.actor_urn != urn):
            del self._stopping[name]
            return False
        return urn is not None

    def _ask_to_stop(self, name: str, urn: str) -> None:
        ref = self.child(name)
        if ref is None or ref.actor_urn != urn or name in self._stopping:
            return  # a stale word from an instance replaced since, or asked already
        self._stopping[name] = urn
        try:
            ref.tell(StopIfIdle())
        except pykka.ActorDeadError:
            del self._stopping[name]  # it crashed: its ChildFailed is on the way

    def _answered(self, name: str, urn: str, *, stop: bool) -> None:
        if self._stopping.get(name) != urn:
            return  # an answer from an instance replaced since
        del self._stopping[name]
        held = self._pending.pop(name, [])
        ref = self.child(name)
        if stop and ref is not None and ref.actor_urn == urn:
            self.forget_child(name)
            self._count()
            self._metrics.sessions_stopped.inc()
            log.info("session_stopped_idle", child=name)
            ref.stop(block=False)  # idle: nothing of its own is in flight
            if held:
                self._start_session(name, name.removeprefix("session:"))
        for message in held:
            self.send_child(name, message)

    def _count(self) -> None:
        self._metrics.sessions.set(sum(n.startswith("session:") for n in self._specs))
