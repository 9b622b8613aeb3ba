"""InterfaceHealth: the owner of the paired interfaces' state and of their tools' online flag.

It loads the paired interfaces at start and publishes them (InterfaceBoard) and their tools
(ToolCatalog). Every `interfaces.health_interval_s` it calls each one's GET /health on its own
small pool (the mailbox never waits on the network); `interfaces.health_failures` failures in
a row take the interface offline: its tools leave every prompt and refuse to run. The first
success brings it back. Pairing, refreshing and unpairing (the edge) tell it, and it answers
once readers see the change, so a revoked token stops working before DELETE returns.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import apsw
import msgspec
import pykka
import structlog

from chalie.actors.supervisor import Link, SupervisedActor
from chalie.clock import Clock, Timer
from chalie.config import InterfacesConfig
from chalie.interfaces.board import InterfaceBoard, InterfaceState, provider_key
from chalie.interfaces.client import InterfaceClient
from chalie.interfaces.errors import InterfaceError
from chalie.interfaces.tool import interface_tools
from chalie.metrics import Metrics
from chalie.store import interface_rows
from chalie.store.interface_rows import InterfaceRow
from chalie.tools.catalog import ToolCatalog

log = structlog.get_logger("chalie.interfaces")


class InterfaceChanged(msgspec.Struct, frozen=True, tag=True):
    """To InterfaceHealth, asked: an interface was paired or refreshed (its row as stored) and
    is online now. Replies once its tools are published."""

    row: InterfaceRow


class InterfaceGone(msgspec.Struct, frozen=True, tag=True):
    """To InterfaceHealth, asked: an interface was unpaired. Replies once its tools and token
    are gone from what readers see."""

    interface_id: str


class CheckHealth(msgspec.Struct, frozen=True, tag=True):
    """InterfaceHealth's own: time to check every interface."""


class HealthChecked(msgspec.Struct, frozen=True, tag=True):
    """InterfaceHealth's own: one interface's /health answered (`error` None) or not."""

    interface_id: str
    error: str | None
    checked_at: float


@dataclass(frozen=True)
class HealthDeps:
    board: InterfaceBoard
    catalog: ToolCatalog
    client: InterfaceClient
    config: InterfacesConfig
    read: Callable[[], apsw.Connection]
    clock: Clock
    pool: Executor
    metrics: Metrics


class InterfaceHealth(SupervisedActor):
    def __init__(self, link: Link | None, *, deps: HealthDeps) -> None:
        super().__init__(link)
        self._d = deps
        self._states: dict[str, InterfaceState] = {}
        self._checking: set[str] = set()
        self._timer: Timer | None = None
        # Loaded in the starter's thread: the Sessions start after this, so no turn misses
        # a paired interface's tools.
        for row in interface_rows.interfaces(deps.read()):
            self._register(row)
        self._publish()
        log.info("interfaces_loaded", interfaces=len(self._states))

    def started(self) -> None:
        self._check_all()  # at once: an interface that went away while we were down shows

    def on_stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def on_receive(self, message: Any) -> Any:
        match message:
            case CheckHealth():
                self._timer = None
                self._check_all()
            case HealthChecked():
                self._checked(message)
            case InterfaceChanged(row=row):
                self._register(row)
                self._publish()
                return True
            case InterfaceGone(interface_id=interface_id):
                self._d.catalog.remove_provider(provider_key(interface_id))
                found = self._states.pop(interface_id, None) is not None
                self._publish()
                return found
            case _:
                log.warning("unexpected_message", message=type(message).__name__)
        return None

    # -- state --

    def _register(self, row: InterfaceRow) -> None:
        """Paired or refreshed: its tools as stored, online until checks say otherwise."""
        try:
            tools = interface_tools(row, self._d.client, self._d.metrics)
        except InterfaceError as e:  # a stored row that no longer passes the checks
            log.error("interface_capabilities_unreadable", interface_id=row.id, name=row.name,
                      error=str(e))
            tools = []
        self._d.catalog.set_provider(provider_key(row.id), label=row.name, order=row.paired_at,
                                     tools=tools)
        previous = self._states.get(row.id)
        self._states[row.id] = InterfaceState(
            row=row, last_check_at=previous.last_check_at if previous else None)

    def _publish(self) -> None:
        self._d.board.publish(self._states)
        self._d.metrics.interfaces_paired.set(len(self._states))
        self._d.metrics.interfaces_online.set(sum(s.online for s in self._states.values()))

    # -- checks --

    def _check_all(self) -> None:
        d = self._d
        for interface_id, state in self._states.items():
            if interface_id in self._checking:
                continue  # the last check has not answered yet (it has its own timeout)
            self._checking.add(interface_id)
            d.pool.submit(self._check, interface_id, state.row.host, state.row.port)
        self._timer = d.clock.call_later(d.config.health_interval_s, self._tick)

    def _check(self, interface_id: str, host: str, port: int) -> None:
        """On the pool: one GET /health, answered to the mailbox."""
        try:
            self._d.client.health(host, port)
            error = None
        except Exception as e:  # InterfaceError, or a bug: either way the check failed
            error = str(e) or type(e).__name__
        self._tell(HealthChecked(interface_id, error, self._d.clock.time()))

    def _checked(self, m: HealthChecked) -> None:
        self._checking.discard(m.interface_id)
        state = self._states.get(m.interface_id)
        if state is None:
            return  # unpaired while its check was out
        failures = 0 if m.error is None else state.failures + 1
        online = state.online
        if m.error is None and not online:
            online = True
        elif m.error is not None and online and failures >= self._d.config.health_failures:
            online = False
        changed = online != state.online
        self._states[m.interface_id] = msgspec.structs.replace(
            state, online=online, failures=failures, last_check_at=m.checked_at,
            last_error=m.error, changed_at=m.checked_at if changed else state.changed_at)
        if m.error is not None:
            log.info("interface_health_failed", interface_id=m.interface_id,
                     name=state.row.name, failures=failures, error=m.error)
        if changed:
            self._d.catalog.set_online(provider_key(m.interface_id), online)
            self._d.metrics.interface_transitions.labels(
                to="online" if online else "offline").inc()
            log.warning("interface_offline" if not online else "interface_online",
                        interface_id=m.interface_id, name=state.row.name, failures=failures,
                        error=m.error)
        self._publish()

    def _tick(self) -> None:
        self._tell(CheckHealth())

    def _tell(self, message: Any) -> None:
        try:
            self.actor_ref.tell(message)
        except pykka.ActorDeadError:
            pass  # stopped (shutdown, or replaced after a crash: the new one checks anew)
