"""Wiring of delivery away from the page: the senders (Web Push, Apprise, Telegram), what the
edge shares of them (chalie/delivery/away.py), the Delivery actor under the root
(chalie/actors/delivery.py), and the Telegram bridge beside the edge (chalie/edge/telegram.py:
a client of the actor system as the edge is)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import apsw
import pykka

from chalie.actors.delivery import Delivery
from chalie.actors.delivery_messages import TargetsChanged
from chalie.actors.pool import WorkerPool
from chalie.actors.supervisor import ChildSpec, Link
from chalie.config import Config
from chalie.delivery.apprise_sender import AppriseSender
from chalie.delivery.away import Away
from chalie.delivery.senders import Sender
from chalie.delivery.telegram_sender import Following, TelegramSender
from chalie.delivery.webpush import WebPushSender
from chalie.edge.context import EdgeContext
from chalie.edge.hub import SocketHub

if TYPE_CHECKING:
    from chalie.edge.telegram import TelegramBridge

SEND_WORKERS = 2  # sends at once; each waits at most notify.timeout_s


@dataclass
class Parts:
    away: Away
    following: Following  # the Telegram bridge's exchanges, shared with its sender
    pool: WorkerPool
    child: ChildSpec  # the Delivery actor, under the root
    bridge: TelegramBridge | None = field(default=None)
    _starting: set[asyncio.Task[None]] = field(default_factory=set)

    async def start_bridge(self, edge: EdgeContext) -> None:
        """The Telegram bot, once the edge is ready, when a token is set (it connects in the
        background)."""
        if edge.config.telegram.token:
            await self._bridge(edge).start()

    def _bridge(self, edge: EdgeContext) -> TelegramBridge:
        # python-telegram-bot is imported with the first token (about 0.4 s of start-up that a
        # server without a bot never pays).
        from chalie.edge.telegram import TelegramBridge  # noqa: PLC0415

        self.bridge = TelegramBridge(edge, self.following)
        return self.bridge

    async def stop_bridge(self) -> None:
        if self.bridge is not None:
            await self.bridge.stop()
            self.bridge = None

    def reloaded(self, config: Config, applied: list[str], edge: EdgeContext | None) -> None:
        """After a reload: a new telegram.token starts the bot again; deliveries to an Apprise
        URL no longer there are dropped."""
        if self.bridge is not None:
            self.bridge.restart(config)
        elif config.telegram.token and edge is not None:  # the first token: the bot starts
            task = asyncio.get_running_loop().create_task(self._bridge(edge).start())
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)
        if "notify.urls" in applied and edge is not None:
            edge.directory.tell("delivery", TargetsChanged())


def wire(server: Any, read: Callable[[], apsw.Connection], hub: SocketHub) -> Parts:
    """The senders, reading the config in effect (`server.config`) at each delivery, and the
    Delivery actor's ChildSpec."""
    config: Callable[[], Config] = lambda: server.config  # noqa: E731 (read at each call)
    attention, keys = server.attention, server.vapid
    following = Following()
    senders: list[Sender] = [WebPushSender(read, keys, config, clock=server.clock),
                             AppriseSender(config), TelegramSender(read, config, following)]
    away = Away(senders=senders, vapid_public_key=keys.public_key,
                conversing=following.follows)
    pool = WorkerPool(SEND_WORKERS, name="chalie-delivery")

    def start(link: Link) -> pykka.ActorRef[Any]:
        return Delivery.start(link, away=away, config=config, read=read, clock=server.clock,
                              directory=server.directory, metrics=server.metrics, pool=pool,
                              visible=lambda: hub.visible_pages > 0,
                              quiet=lambda: attention.quiet)

    return Parts(away=away, following=following, pool=pool, child=ChildSpec("delivery", start))
