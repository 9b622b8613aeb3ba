"""WorldState: the owner of world state. Signals in, decay, the top few out to every prompt.

Accepted signals arrive as SignalsIn (from REST and broadcast streams, already checked by the
edge's SignalGate). The actor keeps at most `signals.world_max` of them (the least salient go,
and so does any that decayed under `signals.min_salience`) and publishes the result on the
WorldBoard, which prompts read without asking. World state is written to the store at most
every `signals.flush_s` seconds and when the actor stops, and read back when it starts, so a
restart keeps it. Nothing here calls an LLM.

Each signal is judged once, as it arrives: one whose salience reaches `dmn.signal_wake` (and
that world state keeps) is told to the Dmn (SignalsNoticed), which thinks about it shortly; any
other is counted unattended (`chalie_signals_unattended_total`) and waits, if it is kept, for a
thought something else starts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import apsw
import msgspec
import pykka
import structlog

from chalie.actors.background_messages import SignalsNoticed
from chalie.actors.store_writer_messages import SaveWorld
from chalie.actors.supervisor import Directory, Link, SupervisedActor
from chalie.clock import Clock, Timer
from chalie.metrics import Metrics
from chalie.store import interface_rows
from chalie.values.signals import Signal
from chalie.world.signals import WorldBoard, keep, salience

log = structlog.get_logger("chalie.world")


class SignalsIn(msgspec.Struct, frozen=True, tag=True):
    """To WorldState: accepted signals (from REST or a broadcast stream)."""

    signals: tuple[Signal, ...]


class FlushWorld(msgspec.Struct, frozen=True, tag=True):
    """WorldState's own: write world state to the store now."""


class WorldState(SupervisedActor):
    def __init__(self, link: Link | None, *, board: WorldBoard, read: Callable[[], apsw.Connection],
                 clock: Clock, directory: Directory, metrics: Metrics, flush_s: float,
                 wake: float = 1.0) -> None:
        """`wake`: the salience from which a signal is told to the Dmn (dmn.signal_wake)."""
        super().__init__(link)
        self._board = board
        self._read = read
        self._clock = clock
        self._directory = directory
        self._metrics = metrics
        self._flush_s = flush_s
        self._wake = wake
        self._dirty = False
        self._flush_timer: Timer | None = None
        # Loaded here, in the starter's thread, not in started(): the supervisor starts the
        # Sessions after this returns, so no turn can read the board before it is filled.
        stored = interface_rows.world(read())
        self._signals: tuple[Signal, ...] = keep(stored, clock.time(), board.settings)
        self._publish()
        log.info("world_state_loaded", signals=len(self._signals), stored=len(stored))

    def on_stop(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.cancel()
        if self._dirty:
            self._flush()

    def on_receive(self, message: Any) -> Any:
        match message:
            case SignalsIn(signals=signals):
                self._take(signals)
            case FlushWorld():
                self._flush_timer = None
                if self._dirty:
                    self._flush()
            case _:
                log.warning("unexpected_message", message=type(message).__name__)

    def _take(self, signals: tuple[Signal, ...]) -> None:
        # Kept most salient first: the board's top-k is then the first k still over the floor.
        held = {s.id for s in self._signals}
        signals = tuple(s for s in signals if s.id not in held)  # a signal comes in once
        now = self._clock.time()
        self._signals = keep((*self._signals, *signals), now, self._board.settings)
        self._publish()
        self._judge(signals, now)
        self._dirty = True
        if self._flush_timer is None:
            self._flush_timer = self._clock.call_later(self._flush_s, self._tell_flush)

    def _judge(self, signals: tuple[Signal, ...], now: float) -> None:
        """New signals: the salient ones world state kept to the Dmn, the rest counted."""
        kept = {s.id for s in self._signals}
        half_life = self._board.settings.half_life_s
        salient = [s for s in signals  # salience is at most the energy: most stop there
                   if s.activation_energy >= self._wake and s.id in kept
                   and salience(s, now, half_life) >= self._wake]
        self._metrics.signals_unattended.inc(len(signals) - len(salient))
        dmn = self._directory.get("dmn") if salient else None
        if dmn is not None:  # none in a tree without the background paths
            try:
                dmn.tell(SignalsNoticed(tuple(s.id for s in salient),
                                        min(s.received_at for s in salient)))
            except pykka.ActorDeadError:  # restarting: it looks at world state when it starts
                pass

    def _tell_flush(self) -> None:
        try:
            self.actor_ref.tell(FlushWorld())
        except pykka.ActorDeadError:  # stopped meanwhile: on_stop flushed
            pass

    def _publish(self) -> None:
        self._board.publish(self._signals)
        self._metrics.world_signals.set(len(self._signals))

    def _flush(self) -> None:
        # Signals that decayed since are dropped before writing, so the store stays small.
        self._signals = keep(self._signals, self._clock.time(), self._board.settings)
        self._publish()
        self._dirty = False
        self._directory.tell("store_writer", SaveWorld(self._signals))
