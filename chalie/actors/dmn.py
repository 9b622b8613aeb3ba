"""Dmn: the default mode network. Chalie thinks on its own while the person is away.

When it thinks is chalie/actors/dmn_triggers.py's: an `idle` trigger, once per idle period
(`dmn.idle_s`), a `cadence` one (`dmn.cadence_s`), and a `signal` one shortly after salient
signals arrive; never in a conversation. Before any LLM call, a trigger reads what it would
think about (chalie/background/drift.py): when nothing (episode, salient signal, goal state,
open loop) changed since the last thought, it makes no call at all and counts a skip; when the
dmn path has used its budget, likewise; when a thought is still in hand, it counts a `busy`
skip.

Otherwise it runs the ACT loop (prompts/dmn.md, at most `dmn.max_iterations` calls and
`dmn.timeout_s`), with only the drift engine's tools: `memory` (reflect; plant an open loop),
`recall`, `schedule` (a reminder to raise something later) and `goal` (plan). Its answer is the
no-action token (a silent exit) or a message for the person, which Attention sends, defers
(quiet hours; outside the person's usual hours, unless signals woke it: news does not keep;
or, when the person started a conversation while it thought, until it pauses) or suppresses
(the daily cap; the thought is then kept as a drift gist the next user turn may see); a sent
one is a `notification` frame logged in the person's channel, and the assistant's line in its
transcript. What is deferred waits in a queue the triggers deliver when it may be
(dmn_triggers.py).
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import apsw
import msgspec
import structlog

from chalie.actors.dmn_triggers import Triggers
from chalie.actors.driver_deps import Ending
from chalie.actors.path import PathActor, PathDeps
from chalie.actors.store_writer_messages import ApplyOps, OpsApplied
from chalie.actors.supervisor import Link
from chalie.actors.turn_messages import TurnStored, TurnStoreFailed
from chalie.background import drift
from chalie.background.drift import Inputs
from chalie.cognition import concepts
from chalie.config import DmnConfig
from chalie.store import concept_rows, proactive_rows
from chalie.store.background_ops import (
    ConceptsActivated,
    DmnRun,
    DriftGist,
    Op,
    Proactive,
)
from chalie.store.proactive_rows import ProactiveRow
from chalie.tools.view import ToolView

log = structlog.get_logger("chalie.dmn")

TOOLS = ("memory", "recall", "schedule", "goal")
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


class _InputsRead(msgspec.Struct, frozen=True, tag=True):
    trigger: str
    at: float
    inputs: Inputs
    concepts: tuple[concepts.Activated, ...] = ()  # spreading activation's top concepts
    signals: tuple[str, ...] = ()  # the ids of the signals that woke a signal trigger


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
        self._last_fingerprint: str | None = None
        self._busy: str | None = None  # the trigger being handled
        self._storing: str | None = None
        self._triggers = Triggers(self._deps, config, tell=self.tell_self, fire=self._fire,
                                  busy=lambda: self._busy is not None)

    @property
    def busy(self) -> str | None:
        """The trigger being handled (its thought not stored yet), or None."""
        return self._busy

    def started(self) -> None:
        conn = self._deps.read()
        thought = proactive_rows.last_thought(conn)
        self._last_fingerprint = thought[1] if thought else None
        self._triggers.start(conn)

    def on_stop(self) -> None:
        self._triggers.stop()

    def on_receive(self, message: Any) -> Any:
        with structlog.contextvars.bound_contextvars(actor="dmn"):
            self._dispatch(message)

    def _dispatch(self, message: Any) -> None:
        match message:
            case _ if self._triggers.handle(message):
                pass
            case _InputsRead():
                self._think(message)
            case _InputsFailed(trigger=trigger, error=error):
                log.error("dmn_inputs_failed", trigger=trigger, error=error)
                self._free()
            case OpsApplied(error=error):
                if error is not None:
                    log.warning("dmn_write_not_stored", error=error)
            case TurnStored(turn_id=tid) | TurnStoreFailed(turn_id=tid) if tid == self._storing:
                self._storing = None
                if isinstance(message, TurnStoreFailed):
                    log.warning("dmn_thought_not_stored", error=message.error)
                self._free()
            case _:
                self.turn_message(message)

    def _free(self) -> None:
        """The thought in hand is done (or none came of it): a trigger held for it may run."""
        self._busy = None
        self._triggers.free()

    # -- a thought --

    def _fire(self, trigger: str, now: float, woke: tuple[str, ...] = ()) -> None:
        """A trigger came (Triggers): read what to think about, on the pool, unless thinking
        is off, a thought is in hand, or the budget is used."""
        d = self._deps
        if not self._config.enabled:
            return
        if self._busy is not None:
            log.info("dmn_trigger_skipped", trigger=trigger, reason="busy", running=self._busy)
            d.metrics.dmn_triggers.labels(trigger=trigger, result="busy").inc()
            return
        if not d.governor.has_room(self.path):
            self._skipped(trigger, now, "budget", self._last_fingerprint or "", woke)
            return
        self._busy = trigger
        world = d.world
        channel, wake = d.channel, self._config.signal_wake

        def job() -> Any:
            try:
                held = world.top(len(world.signals)) if world else []
                inputs = drift.read(d.read(), d.prompts, trigger=trigger, channel=channel,
                                    now=now, signals=world.signals if world else (),
                                    world=world.top() if world else [], wake=wake,
                                    woke=[s for s in held if s.signal.id in woke])
            except Exception as e:  # a broken read must not leave the Dmn busy for good
                log.exception("dmn_inputs_failed")
                return _InputsFailed(trigger, repr(e))
            return _InputsRead(trigger, now, inputs, activated(d.read(), trigger, now), woke)

        self._work.submit(job, turn_id=f"dmn-{trigger}", reply=self.tell_self)

    def _skipped(self, trigger: str, at: float, reason: str, fingerprint: str,
                 woke: tuple[str, ...] = ()) -> None:
        d = self._deps
        log.info("dmn_trigger_skipped", trigger=trigger, reason=reason)
        d.metrics.dmn_triggers.labels(trigger=trigger, result=reason).inc()
        d.metrics.proactive_suppressed.labels(reason=reason).inc()
        self._to_writer(ApplyOps((DmnRun(trigger, at, reason, fingerprint, woke),),
                                 reply_to="dmn", tag="skip"))

    def _think(self, read: _InputsRead) -> None:
        d, config = self._deps, self._config
        inputs, trigger = read.inputs, read.trigger
        if inputs.empty or inputs.fingerprint == self._last_fingerprint:
            self._skipped(trigger, read.at, "nothing_new", inputs.fingerprint, read.signals)
            self._free()
            return
        self._last_fingerprint = inputs.fingerprint
        f = d.prompts.fragment
        since = datetime.fromtimestamp(self._triggers.last_active, UTC).strftime(
            "%Y-%m-%d %H:%M UTC")
        turn = self.new_turn(
            text=f"[dmn] {trigger}", template="dmn",
            extra={"loops": inputs.loops, "goals": inputs.goals, "nothing": drift.NO_ACTION,
                   "concepts": "\n".join(
                       f("dmn_concept", name=c.name, activation=f"{c.activation:.2f}")
                       for c in read.concepts) or f("dmn_none"),
                   "trigger": self._why(trigger, inputs, since)},
            max_iterations=config.max_iterations, timeout_s=config.timeout_s,
            request=read,
        )
        turn.loop.use_context(identity=inputs.identity, state=inputs.state,
                              memory=inputs.episodes, history=inputs.history,
                              tools=self._tools.specs(), world=inputs.world)
        turn.provenance.person(*inputs.person_texts)
        turn.provenance.program(*inputs.program_texts)
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
                if status == "sent" and self._triggers.conversing():
                    status, reason = "deferred", "conversation"  # delivered at the pause
                elif status == "sent" and read.trigger != "signal" \
                        and self._triggers.hold_for_usual_hours():
                    # A signal's news does not keep until the usual hours; quiet hours hold it.
                    status, reason = "deferred", "inactive_hours"
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
        ops.append(DmnRun(read.trigger, read.at, result, read.inputs.fingerprint, read.signals))
        if read.concepts:  # their cooldown starts
            ops.append(ConceptsActivated(tuple(c.id for c in read.concepts), read.at))
        self._storing = ending.turn.id
        self.commit(ending, tuple(ops), reply_to="dmn")
        if result == "deferred":  # after the commit: the writer stores the message first
            self._triggers.deferred()

    def _why(self, trigger: str, inputs: Inputs, since: str) -> str:
        """The prompt's "why you are thinking now"."""
        f = self._deps.prompts.fragment
        if trigger == "idle":
            return f("dmn_idle", since=since)
        if trigger == "signal":
            return f("dmn_signal", signals=inputs.woke or f("dmn_none"))
        return f("dmn_cadence")

    def _gist(self, text: str, read: _InputsRead) -> DriftGist:
        """A thought not sent: the next user turn may see it, for cognition.gist_ttl_s."""
        text = " ".join(text.split())
        if len(text) > GIST_CHARS:
            text = text[:GIST_CHARS].rstrip() + "…"
        return DriftGist(self._deps.channel, text, tuple(c.name for c in read.concepts),
                         self._deps.clock.time() + self._gist_ttl_s)
