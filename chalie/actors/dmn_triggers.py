"""When the Dmn (chalie/actors/dmn.py) thinks, and when what it deferred is delivered: its
triggers, the deferred queue's delivery, and the timers of both (one per name: boot, cadence,
idle, signal, conversation, quiet, usual). What it thinks is the Dmn's own.

Three triggers. `idle`: once per idle period, when the person has sent nothing for `dmn.idle_s`
(any chat or action of theirs starts a new period: the Sessions tell PersonActive). `cadence`:
every `dmn.cadence_s`. `signal`: `dmn.signal_debounce_s` after a salient signal arrived
(SignalsNoticed, from WorldState), with every salient signal that came meanwhile, so a burst
is one thought; a signal wakes it at most once. The first trigger comes `dmn.boot_delay_s`
after start (idle if an idle period is due, else cadence); salient signals that came while the
server was down, or before their thought, wake it then too. An idle trigger that finds a
thought in hand comes again BUSY_RETRY_S later; a signal trigger waits for that thought.

No trigger fires in a conversation: while a turn of the person's runs, or within `dmn.busy_s`
of their last message. A trigger due then is held, and when the conversation pauses one
thought runs for all that were held (a signal's if one was, then cadence, then idle: the
others are merged into it, counted).

The deferred queue is delivered when quiet hours end, and when the person connects
(PersonConnected), whichever is first, but never in a conversation (it waits for the pause);
messages older than `dmn.deferred_max_age_s` are dropped, counted (by the StoreWriter, on
DeliverDeferred).

It prefers the person's usual hours (the `active_hours` trait, chalie/cognition/traits.py):
a thought it would send outside them, when enough evidence says when they are, waits in the
same queue for the next usual hour, at most USUAL_HOURS_MAX_WAIT_S and never as long as
`dmn.deferred_max_age_s`; the person connecting meanwhile gets it at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import apsw
import msgspec
import structlog

from chalie.actors.background_messages import PersonActive, PersonConnected, SignalsNoticed
from chalie.actors.path import PathDeps
from chalie.actors.store_writer_messages import ApplyOps
from chalie.clock import Timer
from chalie.cognition import traits
from chalie.config import DmnConfig
from chalie.store import proactive_rows, trait_rows
from chalie.store.background_ops import DeliverDeferred

log = structlog.get_logger("chalie.dmn")

BUSY_RETRY_S = 60.0  # an idle trigger that finds a thought in hand tries again this much later
USUAL_HOURS_MAX_WAIT_S = 12 * 3600.0  # a thought waits at most this long for the usual hours
RUNNING_MAX_S = 1800.0  # a turn said to run longer than this is taken as over (its Session died)
WOKEN_KEPT = 4096  # ids of the signals that woke a thought, remembered so none wakes it twice
PRIORITY = ("signal", "cadence", "idle")  # which held trigger runs when a conversation pauses


class _Due(msgspec.Struct, frozen=True, tag=True):
    """The Dmn's own: a trigger's time came (boot, idle, cadence or signal)."""

    trigger: str


class _Paused(msgspec.Struct, frozen=True, tag=True):
    """The Dmn's own: the conversation may have paused; release what waited for it."""


class _QuietOver(msgspec.Struct, frozen=True, tag=True):
    """The Dmn's own: quiet hours ended; deliver what waited."""


class _UsualHour(msgspec.Struct, frozen=True, tag=True):
    """The Dmn's own: the person's usual active hours began; deliver what waited for them."""


class Triggers:
    def __init__(self, deps: PathDeps, config: DmnConfig, *, tell: Callable[[Any], None],
                 fire: Callable[[str, float, tuple[str, ...]], None],
                 busy: Callable[[], bool]) -> None:
        """`tell` puts a timer's message in the Dmn's mailbox (the Dmn gives it to `handle`);
        `fire` has the Dmn think for a trigger, at a wall-clock time (a signal trigger: with
        the ids of the signals that woke it); `busy`: the Dmn has a thought in hand."""
        self._deps = deps
        self._config = config
        self._tell = tell
        self._fire = fire
        self._busy = busy
        self._booted = False
        self._last_active = deps.clock.time()  # wall clock; the store says better at start
        self._idle_fired_for: float | None = None  # the activity whose idle period fired
        self._timers: dict[str, Timer] = {}
        self._deferred_waiting = False
        self._wait_until: float | None = None  # a thought waits for the person's usual hours
        self._last_message: float | None = None  # the person's, as far as the Dmn knows
        self._running: dict[str, float] = {}  # channel -> when its person's turn started
        self._held: set[str] = set()  # triggers due in a conversation (or behind a thought)
        self._signals: dict[str, None] = {}  # salient signals waiting for their thought
        self._woken: dict[str, None] = {}  # those that had it (the newest WOKEN_KEPT)

    @property
    def last_active(self) -> float:
        """When the person last sent something (wall clock), as far as the Dmn knows."""
        return self._last_active

    def start(self, conn: apsw.Connection) -> None:
        """Take what the store says (the person's last activity, whether its idle period had
        its thought, whether messages wait), then wait for the boot trigger and watch the
        quiet hours."""
        d, config = self._deps, self._config
        active = proactive_rows.last_person_activity(conn)
        if active is not None:
            self._last_active = self._last_message = active
            idle_run = proactive_rows.last_run(conn, "idle")
            if idle_run is not None and idle_run >= active:
                self._idle_fired_for = active
        self._deferred_waiting = bool(proactive_rows.deferred(conn, d.channel))
        unseen = self._unseen_signals(conn)
        log.info("dmn_started", enabled=config.enabled, boot_in_s=config.boot_delay_s,
                 quiet=d.attention.quiet.is_quiet(d.clock.time()),
                 deferred_waiting=self._deferred_waiting, signals_waiting=len(unseen))
        self._signals.update(dict.fromkeys(unseen))
        self._after("boot", config.boot_delay_s, _Due("boot"))
        self._quiet_watch()

    def _unseen_signals(self, conn: apsw.Connection) -> list[str]:
        """Salient signals in world state that arrived after the last thought: their own
        thought had not come when the server stopped."""
        world = self._deps.world
        if world is None:
            return []
        thought = proactive_rows.last_thought(conn)
        since = thought[0] if thought is not None else 0.0
        return [s.signal.id for s in world.top(len(world.signals))
                if s.signal.received_at > since and s.salience >= self._config.signal_wake]

    def stop(self) -> None:
        for timer in self._timers.values():
            timer.cancel()

    def handle(self, message: Any) -> bool:
        """Take a timer's message, PersonActive or PersonConnected; False for any other."""
        match message:
            case _Due(trigger=trigger):
                self._timers.pop(trigger, None)
                self._due(trigger)
            case PersonActive(at=at, channel=channel, running=running):
                self._person_active(at, channel, running)
            case SignalsNoticed(ids=ids, received_at=at):
                self._noticed(ids, at)
            case _Paused():
                self._timers.pop("conversation", None)
                self._release(paused=True)
            case PersonConnected(channel=channel) if channel == self._deps.channel:
                self._deliver("connected")
            case PersonConnected():
                pass
            case _QuietOver():
                self._timers.pop("quiet", None)
                self._deliver("quiet_hours_over")
                self._quiet_watch()
            case _UsualHour():
                self._timers.pop("usual", None)
                self._wait_until = None
                self._quiet_watch()
            case _:
                return False
        return True

    def hold_for_usual_hours(self) -> bool:
        """A thought Attention would send now: True when it should rather wait for the
        person's next usual hour (it is then deferred, and waits for it)."""
        wake = self._usual_hour()
        if wake is None:
            return False
        self._wait_until = max(wake, self._wait_until or wake)
        return True

    def deferred(self) -> None:
        """A thought was deferred (after its commit: the writer stores the message first):
        deliver it when it may be."""
        self._deferred_waiting = True
        self._quiet_watch()

    def conversing(self) -> bool:
        """The person is in a conversation: a turn of theirs runs, or their last message is
        less than dmn.busy_s old."""
        now = self._deps.clock.time()
        if any(now - started < RUNNING_MAX_S for started in self._running.values()):
            return True
        last = self._last_message
        return last is not None and now - last < self._config.busy_s

    def free(self) -> None:
        """The Dmn's thought in hand is done: a trigger held behind it may run."""
        if self._held:
            self._release(paused=False)

    # -- triggers --

    def _due(self, trigger: str) -> None:
        config = self._config
        now = self._deps.clock.time()
        if trigger == "boot":
            self._booted = True
            self._after("cadence", config.cadence_s, _Due("cadence"))
            # Salient signals that came while the server was down (or before their thought)
            # are thought about first: a signal trigger looks at what a cadence one does.
            trigger = "signal" if self._signals else "idle" if self._idle_due(now) else "cadence"
            self._arm_idle()
        elif trigger == "cadence":
            self._after("cadence", config.cadence_s, _Due("cadence"))
        elif trigger == "idle" and not self._idle_due(now):
            self._arm_idle()  # the person came back meanwhile
            return
        elif trigger == "signal" and not self._signals:
            return  # the boot trigger took them already
        if trigger == "idle" and self._busy() and not self.conversing():
            self._at("idle", now + BUSY_RETRY_S, _Due("idle"))  # once the last thought is done
            return
        if (trigger == "signal" and self._busy()) or self.conversing():
            self._hold(trigger)
            return
        self._start(trigger, now)

    def _start(self, trigger: str, now: float) -> None:
        """Have the Dmn think now, for `trigger`."""
        if trigger == "idle":
            self._idle_fired_for = self._last_active
        woke: tuple[str, ...] = ()
        if trigger == "signal":
            woke = tuple(self._signals)
            self._woken.update(self._signals)
            self._signals.clear()
            while len(self._woken) > WOKEN_KEPT:
                del self._woken[next(iter(self._woken))]
        self._fire(trigger, now, woke)

    def _hold(self, trigger: str) -> None:
        """`trigger` waits for the conversation to pause (and for the thought in hand)."""
        if trigger not in self._held:
            log.info("dmn_trigger_held", trigger=trigger, conversing=self.conversing(),
                     thinking=self._busy())
            self._deps.metrics.dmn_triggers.labels(trigger=trigger, result="held").inc()
        self._held.add(trigger)
        self._watch_conversation()

    def _release(self, *, paused: bool) -> None:
        """One thought for what was held, unless the person is (still) in a conversation or
        it waits for the thought in hand. When a conversation `paused`, what was deferred is
        delivered first: the person is here."""
        if self.conversing():
            self._watch_conversation()
            return
        if paused:
            self._deliver("conversation_paused")
        now = self._deps.clock.time()
        if "idle" in self._held and not self._idle_due(now):
            self._held.discard("idle")  # the person came back: not idle any more
        if "signal" in self._held and not self._signals:
            self._held.discard("signal")  # another trigger took them
        if not self._held or self._busy():
            return  # nothing waits, or it waits for the thought in hand (free())
        trigger = next(t for t in PRIORITY if t in self._held)
        for merged in self._held - {trigger}:
            log.info("dmn_trigger_merged", trigger=merged, into=trigger)
            self._deps.metrics.dmn_triggers.labels(trigger=merged, result="merged").inc()
        self._held.clear()
        self._start(trigger, now)

    def _watch_conversation(self) -> None:
        """Wake when the conversation may have paused: dmn.busy_s after the last message, or,
        while a turn runs, when it would be taken as over (its end wakes it sooner)."""
        if not self.conversing():
            return
        now = self._deps.clock.time()
        live = [t for t in self._running.values() if now - t < RUNNING_MAX_S]
        last = self._last_message
        when = min(live) + RUNNING_MAX_S if live or last is None else last + self._config.busy_s
        self._at("conversation", when, _Paused())

    def _noticed(self, ids: tuple[str, ...], received_at: float) -> None:
        """Salient signals arrived: each wakes one thought, dmn.signal_debounce_s after the
        first of those that wait for it."""
        fresh = [i for i in ids if i not in self._woken and i not in self._signals]
        if not fresh:
            return
        self._signals.update(dict.fromkeys(fresh))
        if "signal" not in self._timers and "signal" not in self._held:
            self._at("signal", received_at + self._config.signal_debounce_s, _Due("signal"))

    def _idle_due(self, now: float) -> bool:
        return self._idle_fired_for != self._last_active and \
            now - self._last_active >= self._config.idle_s

    def _person_active(self, at: float, channel: str, running: bool | None) -> None:
        if running:
            self._running[channel] = at
        elif running is not None:
            self._running.pop(channel, None)
        self._last_message = max(at, self._last_message or at)
        if self._held or self._deferred_waiting:
            self._watch_conversation()
        if at <= self._last_active:
            return  # no later than what is known: the same period
        self._last_active = at
        self._idle_fired_for = None
        # A timer already set stays: when it fires early, it is set again from the latest
        # activity (_due). Re-setting it on every message would leave a cancelled timer per
        # message in the clock's queue for idle_s.
        if self._booted and "idle" not in self._timers:
            self._arm_idle()

    def _arm_idle(self) -> None:
        """The idle trigger waits idle_s after the person's last activity, once per period."""
        timer = self._timers.pop("idle", None)
        if timer is not None:
            timer.cancel()
        if self._idle_fired_for == self._last_active:
            return  # this period's idle thought is had
        self._at("idle", self._last_active + self._config.idle_s, _Due("idle"))

    # -- the deferred queue --

    def _usual_hour(self) -> float | None:
        """When the person's next usual active hour begins, if now is outside their usual
        hours (known from enough evidence) and it comes soon enough to wait for; else None."""
        d = self._deps
        zone = d.attention.quiet.zone
        if zone is None:
            return None
        now = d.clock.time()
        try:
            learned = trait_rows.load(d.read())
        except apsw.Error:
            log.exception("traits_not_read")
            return None
        wake = traits.next_usual_hour(learned, now, zone)
        limit = min(USUAL_HOURS_MAX_WAIT_S, self._config.deferred_max_age_s)
        return wake if wake is not None and wake - now < limit else None

    def _quiet_watch(self) -> None:
        """While it is quiet, wake when quiet hours end; when it is not, deliver what waits
        (or, when it waits for the person's usual hours, wake when they begin)."""
        d = self._deps
        if "quiet" in self._timers:
            return
        now = d.clock.time()
        ends = d.attention.quiet.ends_at(now)
        if not d.attention.quiet.is_quiet(now):
            if self._wait_until is not None and now < self._wait_until:
                if "usual" not in self._timers:
                    self._at("usual", self._wait_until, _UsualHour())
                return
            self._deliver("not_quiet")
        elif ends is not None:
            self._at("quiet", ends, _QuietOver())

    def _deliver(self, why: str) -> None:
        """Deliver what waits now, unless the person is in a conversation: then when it
        pauses."""
        if self._deferred_waiting and self.conversing():
            self._watch_conversation()
            return
        usual = self._timers.pop("usual", None)
        if usual is not None:
            usual.cancel()
        self._wait_until = None
        if not self._deferred_waiting:
            return
        self._deferred_waiting = False
        log.info("deferred_delivery", why=why)
        self._deps.directory.tell("store_writer", ApplyOps(
            (DeliverDeferred(self._deps.channel, self._config.deferred_max_age_s),),
            reply_to="dmn", tag="deliver"))

    # -- plumbing --

    def _after(self, name: str, delay: float, message: Any) -> None:
        self._at(name, self._deps.clock.time() + delay, message)

    def _at(self, name: str, when: float, message: Any) -> None:
        """One timer per name, due at wall-clock `when`."""
        old = self._timers.pop(name, None)
        if old is not None:
            old.cancel()
        self._timers[name] = self._deps.clock.call_at(when, lambda: self._tell(message))
