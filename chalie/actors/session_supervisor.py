"""SessionSupervisor: one Session per channel, started on first use, restarted on a crash.

Everything for a Session goes through here as Deliver(channel, message), so senders never hold
a stale ref: while a crashed Session waits out its backoff, its messages are held and handed to
the new instance in order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pykka

from chalie.actors.messages import Deliver
from chalie.actors.supervisor import ChildSpec, Link, Supervisor

SessionFactory = Callable[[Link, str], pykka.ActorRef[Any]]


class SessionSupervisor(Supervisor):
    def __init__(self, link: Link | None, *, session_factory: SessionFactory, **kw: Any) -> None:
        super().__init__(link, name="sessions", **kw)
        self._session_factory = session_factory

    def handle(self, message: Any) -> Any:
        match message:
            case Deliver(channel=channel, message=inner):
                self._deliver(channel, inner)
            case _:
                return super().handle(message)
        return None

    def _deliver(self, channel: str, message: Any) -> None:
        name = f"session:{channel}"
        if self.send_child(name, message):
            return
        factory = self._session_factory
        self.add_child(ChildSpec(name, lambda link: factory(link, channel), register=False))
        self.send_child(name, message)
