"""Dmn: the default mode network. Chalie thinks on its own while the person is away.

Two triggers. `idle`: once per idle period, when the person has sent nothing for `dmn.idle_s`
(any chat or action of theirs starts a new period: the Sessions tell PersonActive). `cadence`:
every `dmn.cadence_s`. The first trigger comes `dmn.boot_delay_s` after start (idle if an idle
period is due, else cadence). Before any LLM call, a trigger reads what it would think about
(chalie/background/drift.py): when nothing (episode, signal, goal state, open loop) changed
since the last thought, it makes no call at all and counts a skip; when the dmn path has used
its budget, likewise.

Otherwise it runs the ACT loop (prompts/dmn.md, at most `dmn.max_iterations` calls and
`dmn.timeout_s`), with only the drift engine's tools: `memory` (reflect; plant an open loop),
`recall`, `schedule` (a reminder to raise something later) and `goal` (plan). Its answer is the
no-action token (a silent exit) or a message for the person, which Attention sends, defers
(quiet hours) or suppresses (the daily cap); a sent one is a `notification` frame logged in the
person's channel, and the assistant's line in its transcript.

The Dmn also owns delivery of the deferred queue: when quiet hours end, and when the person
connects (PersonConnected), whichever is first; messages older than `dmn.deferred_max_age_s`
are dropped, counted.

It prefers the person's usual hours (the `active_hours` trait, chalie/cognition/traits.py):
a thought it would send outside them, when enough evidence says when they are, waits in the
same queue for the next usual hour, at most USUAL_HOURS_MAX_WAIT_S and never as long as
`dmn.deferred_max_age_s`; the person connecting meanwhile gets it at once.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import apsw
import msgspec
import structlog

from chalie.actors.driver import Ending
from chalie.actors.messages import (
    ApplyOps,
    OpsApplied,
    PersonActive,
    PersonConnected,
    TurnStored,
    TurnStoreFailed,
)
from chalie.actors.path import PathActor, PathDeps
from chalie.actors.supervisor import Link
from chalie.background import drift
from chalie.background.drift import Inputs
from chalie.clock import Timer
from chalie.cognition import concepts, traits
from chalie.config import DmnConfig
from chalie.store import concept_rows, proactive_rows, trait_rows
from chalie.store.background_ops import (
    ConceptsActivated,
    DeliverDeferred,
    DmnRun,
    DriftGist,
    Op,
    Proactive,
)
from chalie.store.proactive_rows import ProactiveRow
from chalie.tools.view import ToolView

log = structlog.get_logger("chalie.dmn")

TOOLS = ("memory", "recall", "schedule", "goal")
BUSY_RETRY_S = 60.0  # an idle trigger that finds a thought in hand tries again this much later
USUAL_HOURS_MAX_WAIT_S = 12 * 3600.0  # a thought waits at most this long for the usual hours
GIST_CHARS = 500  # a drift gist longer than this is cut


def activated(conn: apsw.Connection, trigger: str, at: float) -> tuple[concepts.Activated, ...]:
    """Spreading activation over the stored concepts, from seeds drawn with a generator seeded
    by the trigger and its time: the same run always thinks of the same concepts."""
    try:
        nodes, links = concept_rows.graph(conn)
        rng = random.Random(f"{trigger}:{at:.6f}")
        return tuple(concepts.activate(nodes, links, rng, now=at))
    except Exception:  # the thought goes on without concepts
        log.exception("concepts_not_activated")
        return ()


class _Due(msgspec.Struct, frozen=True, tag=True):
    """The Dmn's own: a trigger's time came (boot, idle or cadence)."""

    trigger: str


class _QuietOver(msgspec.Struct, frozen=True, tag=True):
    """The Dmn's own: quiet hours ended; deliver what waited."""


class _UsualHour(msgspec.Struct, frozen=True, tag=True):
    """The Dmn's own: the person's usual active hours began; deliver what waited for them."""


class _InputsRead(msgspec.Struct, frozen=True, tag=True):
    trigger: str
    at: float
    inputs: Inputs
    concepts: tuple[concepts.Activated, ...] = ()  # spreading activation's top concepts


class _InputsFailed(msgspec.Struct, frozen=True, tag=True):
    trigger: str
    error: str


class Dmn(PathActor):
    path = "dmn"
    light_model = True

    def __init__(self, link: Link | None, *, deps: PathDeps, config: DmnConfig,
                 gist_ttl_s: float) -> None:
        super().__init__(link, deps=deps, tools=ToolView(deps.catalog, allow=TOOLS))
        self._config = config
        self._gist_ttl_s = gist_ttl_s  # cognition.gist_ttl_s
        self._booted = False
        self._last_active = deps.clock.time()  # wall clock; the store says better at start
        self._idle_fired_for: float | None = None  # the activity whose idle period fired
        self._last_fingerprint: str | None = None
        self._busy: str | None = None  # the trigger being handled
        self._storing: str | None = None
        self._timers: dict[str, Timer] = {}
        self._deferred_waiting = False
        self._wait_until: float | None = None  # a thought waits for the person's usual hours

    @property
    def busy(self) -> str | None:
        """The trigger being handled (its thought not stored yet), or None."""
        return self._busy

    def started(self) -> None:
        d, config = self._deps, self._config
        conn = d.read()
        active = proactive_rows.last_person_activity(conn)
        if active is not None:
            self._last_active = active
            idle_run = proactive_rows.last_run(conn, "idle")
            if idle_run is not None and idle_run >= active:
                self._idle_fired_for = active
        thought = proactive_rows.last_thought(conn)
        self._last_fingerprint = thought[1] if thought else None
        self._deferred_waiting = bool(proactive_rows.deferred(conn, d.channel))
        log.info("dmn_started", enabled=config.enabled, boot_in_s=config.boot_delay_s,
                 quiet=d.attention.quiet.is_quiet(d.clock.time()),
                 deferred_waiting=self._deferred_waiting)
        self._after("boot", config.boot_delay_s, _Due("boot"))
        self._quiet_watch()

    def on_stop(self) -> None:
        for timer in self._timers.values():
            timer.cancel()

    def on_receive(self, message: Any) -> Any:
        with structlog.contextvars.bound_contextvars(actor="dmn"):
            self._dispatch(message)

    def _dispatch(self, message: Any) -> None:
        match message:
            case _Due(trigger=trigger):
                self._timers.pop(trigger, None)
                self._due(trigger)
            case PersonActive(at=at):
                self._person_active(at)
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
            case _InputsRead():
                self._think(message)
            case _InputsFailed(trigger=trigger, error=error):
                log.error("dmn_inputs_failed", trigger=trigger, error=error)
                self._busy = None
            case OpsApplied(error=error):
                if error is not None:
                    log.warning("dmn_write_not_stored", error=error)
            case TurnStored(turn_id=tid) | TurnStoreFailed(turn_id=tid) if tid == self._storing:
                self._storing = None
                self._busy = None
                if isinstance(message, TurnStoreFailed):
                    log.warning("dmn_thought_not_stored", error=message.error)
            case _:
                self.turn_message(message)

    # -- triggers --

    def _due(self, trigger: str) -> None:
        d, config = self._deps, self._config
        now = d.clock.time()
        if trigger == "boot":
            self._booted = True
            self._after("cadence", config.cadence_s, _Due("cadence"))
            trigger = "idle" if self._idle_due(now) else "cadence"
            self._arm_idle()
        elif trigger == "cadence":
            self._after("cadence", config.cadence_s, _Due("cadence"))
        elif trigger == "idle" and not self._idle_due(now):
            self._arm_idle()  # the person came back meanwhile
            return
        if trigger == "idle":
            if self._busy is not None:  # this period's thought comes once the last is done
                self._at("idle", now + BUSY_RETRY_S, _Due("idle"))
                return
            self._idle_fired_for = self._last_active
        self._fire(trigger, now)

    def _idle_due(self, now: float) -> bool:
        return self._idle_fired_for != self._last_active and \
            now - self._last_active >= self._config.idle_s

    def _person_active(self, at: float) -> None:
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

    def _fire(self, trigger: str, now: float) -> None:
        d = self._deps
        if not self._config.enabled:
            return
        if self._busy is not None:
            log.info("dmn_trigger_skipped", trigger=trigger, reason="busy", running=self._busy)
            d.metrics.dmn_triggers.labels(trigger=trigger, result="busy").inc()
            return
        if not d.governor.has_room(self.path):
            self._skipped(trigger, now, "budget", self._last_fingerprint or "")
            return
        self._busy = trigger
        world = d.world
        channel = d.channel

        def job() -> Any:
            try:
                inputs = drift.read(d.read(), d.prompts, trigger=trigger, channel=channel,
                                    now=now, signals=world.signals if world else (),
                                    world=world.top() if world else [])
            except Exception as e:  # a broken read must not leave the Dmn busy for good
                log.exception("dmn_inputs_failed")
                return _InputsFailed(trigger, repr(e))
            return _InputsRead(trigger, now, inputs, activated(d.read(), trigger, now))

        self._work.submit(job, turn_id=f"dmn-{trigger}", reply=self.tell_self)

    def _skipped(self, trigger: str, at: float, reason: str, fingerprint: str) -> None:
        d = self._deps
        log.info("dmn_trigger_skipped", trigger=trigger, reason=reason)
        d.metrics.dmn_triggers.labels(trigger=trigger, result=reason).inc()
        d.metrics.proactive_suppressed.labels(reason=reason).inc()
        self._to_writer(ApplyOps((DmnRun(trigger, at, reason, fingerprint),), reply_to="dmn",
                                 tag="skip"))

    def _think(self, read: _InputsRead) -> None:
        d, config = self._deps, self._config
        inputs, trigger = read.inputs, read.trigger
        if inputs.empty or inputs.fingerprint == self._last_fingerprint:
            self._busy = None
            self._skipped(trigger, read.at, "nothing_new", inputs.fingerprint)
            return
        self._last_fingerprint = inputs.fingerprint
        f = d.prompts.fragment
        since = datetime.fromtimestamp(self._last_active, UTC).strftime("%Y-%m-%d %H:%M UTC")
        turn = self.new_turn(
            text=f"[dmn] {trigger}", template="dmn",
            extra={"loops": inputs.loops, "goals": inputs.goals, "nothing": drift.NO_ACTION,
                   "concepts": "\n".join(
                       f("dmn_concept", name=c.name, activation=f"{c.activation:.2f}")
                       for c in read.concepts) or f("dmn_none"),
                   "trigger": f("dmn_idle", since=since) if trigger == "idle"
                   else f("dmn_cadence")},
            max_iterations=config.max_iterations, timeout_s=config.timeout_s,
            request=read,
        )
        turn.loop.use_context(identity=inputs.identity, state=inputs.state,
                              memory=inputs.episodes, history=inputs.history,
                              tools=self._tools.specs(), world=inputs.world)
        log.info("dmn_thinking", trigger=trigger, turn_id=turn.id,
                 fingerprint=inputs.fingerprint)
        d.metrics.dmn_triggers.labels(trigger=trigger, result="ran").inc()
        self._driver.begin(turn)
        self._driver.ask()

    def turn_ended(self, ending: Ending) -> None:
        d = self._deps
        read: _InputsRead = ending.turn.request
        ops: list[Op] = []
        if ending.paused:
            result = "budget"
            d.metrics.proactive_suppressed.labels(reason="budget").inc()
        elif ending.outcome == "answered" and ending.text is not None:
            if drift.is_no_action(ending.text):
                result = "nothing"
                d.metrics.proactive_suppressed.labels(reason="no_action").inc()
            else:
                status, reason = d.attention.decide(capped=True)
                wake = self._usual_hour() if status == "sent" else None
                if wake is not None:
                    status, reason = "deferred", "inactive_hours"
                    self._wait_until = max(wake, self._wait_until or wake)
                result = status
                ops.append(Proactive(ProactiveRow(
                    path="dmn", channel=d.channel, content=ending.text, status=status,
                    capped=True, composed_at=d.clock.time(), reason=reason)))
                if status == "suppressed":
                    d.metrics.proactive_suppressed.labels(reason=reason or "cap").inc()
                    ops.append(self._gist(ending.text, read))
                else:
                    d.metrics.proactive.labels(path="dmn", result=status).inc()
                if status == "deferred":
                    d.metrics.proactive_suppressed.labels(reason=reason or "quiet_hours").inc()
        else:
            result = "error"
        log.info("dmn_thought", trigger=read.trigger, result=result, outcome=ending.outcome,
                 error=ending.error)
        ops.append(DmnRun(read.trigger, read.at, result, read.inputs.fingerprint))
        if read.concepts:  # their cooldown starts
            ops.append(ConceptsActivated(tuple(c.id for c in read.concepts), read.at))
        self._storing = ending.turn.id
        self.commit(ending, tuple(ops), reply_to="dmn")
        if result == "deferred":  # after the commit: the writer stores the message first
            self._deferred_waiting = True
            self._quiet_watch()

    def _gist(self, text: str, read: _InputsRead) -> DriftGist:
        """A thought not sent: the next user turn may see it, for cognition.gist_ttl_s."""
        text = " ".join(text.split())
        if len(text) > GIST_CHARS:
            text = text[:GIST_CHARS].rstrip() + "…"
        return DriftGist(self._deps.channel, text, tuple(c.name for c in read.concepts),
                         self._deps.clock.time() + self._gist_ttl_s)

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
        usual = self._timers.pop("usual", None)
        if usual is not None:
            usual.cancel()
        self._wait_until = None
        if not self._deferred_waiting:
            return
        self._deferred_waiting = False
        log.info("deferred_delivery", why=why)
        self._to_writer(ApplyOps((DeliverDeferred(self._deps.channel,
                                                  self._config.deferred_max_age_s),),
                                 reply_to="dmn", tag="deliver"))

    # -- plumbing --

    def _after(self, name: str, delay: float, message: Any) -> None:
        self._at(name, self._deps.clock.time() + delay, message)

    def _at(self, name: str, when: float, message: Any) -> None:
        """One timer per name, due at wall-clock `when`."""
        old = self._timers.pop(name, None)
        if old is not None:
            old.cancel()
        self._timers[name] = self._deps.clock.call_at(when, lambda: self.tell_self(message))
