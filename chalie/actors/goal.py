"""Goal pursuit: one Goal actor per active goal, under the GoalSupervisor.

A Goal first plans (chalie/actors/goal_plan.py; one structured-output call, prompts/plan.md):
`{"steps": [{"id", "description", "depends_on"}], "confidence"}`, checked by
chalie/background/plans.py (Kahn's algorithm; 4-30 words a step; no two steps alike; confidence
over 0.5). A plan that fails the checks is asked for again once, with the reasons; a second bad
plan fails the goal with them.
Then each ready step (all its dependencies done) runs an ACT loop (prompts/goal_step.md) with
every tool but `goal`, within what is left of the goal's `goals.max_iterations` and
`goals.timeout_s` (counted over all its steps). Each step is checkpointed in the transaction
that stores its turn and its `task` frame, so after a restart the goal resumes at its first
unfinished step and a finished step never runs again. The last step's answer is the goal's
result: the goal completes in that same transaction, and the result reaches the person as a
proactive notification (quiet hours and the daily cap apply; a result the cap holds back is
still in the goal and in its last `task` frame).

A step whose LLM call fails is tried again `goals.step_retries` times, `goals.retry_backoff_s`
apart (doubling); when the goal path's budget is used up the goal pauses (a `paused` task
frame) and resumes once the budget frees room. A cancelled goal (DELETE /api/goals/<id>, the
`goal` tool) is cancelled in the store first; its actor then stops at once, and a step it was
running is not stored.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pykka
import structlog

from chalie.actors.background_messages import GoalDone, StopGoal
from chalie.actors.driver_deps import Ending
from chalie.actors.goal_plan import PlanReady, PlanRefused, plan_job, plan_steps, plan_text
from chalie.actors.path import PathActor, PathDeps
from chalie.actors.store_writer_messages import ApplyOps, OpsApplied, SaveSnapshots
from chalie.actors.supervisor import Link
from chalie.actors.turn_messages import LlmFailed, TurnStored, TurnStoreFailed
from chalie.background import plans
from chalie.clock import Timer
from chalie.config import GoalsConfig
from chalie.store import goal_rows
from chalie.store.background_ops import (
    GoalSpent,
    GoalState,
    Op,
    PauseGoal,
    Proactive,
    SavePlan,
    Spend,
    StepStatus,
)
from chalie.store.goal_rows import GoalRow, StepRow
from chalie.store.proactive_rows import ProactiveRow
from chalie.tools.view import ToolView

log = structlog.get_logger("chalie.goals")

EXCLUDED_TOOLS = ("goal",)
RESULT_CHARS = 4000  # of a step's answer kept as its result
FAILED = 'I could not complete the goal "{goal}": {error}'


class _Resume(msgspec.Struct, frozen=True, tag=True):
    """A Goal's own: a retry's wait, or a budget pause, is over."""


class Goal(PathActor):
    path = "goal"

    def __init__(self, link: Link | None, *, deps: PathDeps, config: GoalsConfig,
                 goal_id: str, supervisor: pykka.ActorRef[Any] | None = None) -> None:
        super().__init__(link, deps=deps, tools=ToolView(deps.catalog, deny=EXCLUDED_TOOLS))
        self._config = config
        self._goal_id = goal_id
        self._supervisor = supervisor
        self._row: GoalRow | None = None
        self._steps: list[StepRow] = []
        self._busy = False  # planning, a step, or a write we wait for
        self._awaiting: str | None = None  # the write we wait for: a turn id, "plan", "ended"
        self._timer: Timer | None = None
        self._failures = 0  # failed attempts in a row (LLM errors), for the backoff
        self._done = False

    @property
    def _reply_to(self) -> str:
        return f"goal:{self._goal_id}"

    def started(self) -> None:
        structlog.contextvars.bind_contextvars(goal_id=self._goal_id)
        self._load()
        self._advance()

    def on_stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def on_receive(self, message: Any) -> Any:
        with structlog.contextvars.bound_contextvars(actor="goal", goal_id=self._goal_id):
            self._dispatch(message)

    def _dispatch(self, message: Any) -> None:
        match message:
            case StopGoal():
                self._stop_now("cancelled")
            case _Resume():
                self._timer = None
                self._advance()
            case PlanReady() | PlanRefused():
                self._planned(message)
            case LlmFailed(turn_id=tid) if tid == self._plan_id:
                self._busy = False
                self._failed_attempt(message.error, recoverable=message.recoverable)
            case OpsApplied(tag=tag, error=error):
                self._ops_applied(tag, error)
            case TurnStored(turn_id=tid) | TurnStoreFailed(turn_id=tid) if \
                    tid == self._awaiting:
                self._stored(message)
            case _:
                self.turn_message(message)

    @property
    def _plan_id(self) -> str:
        return f"{self._goal_id}-plan"

    # -- state --

    def _load(self) -> None:
        conn = self._deps.read()
        self._row = goal_rows.get(conn, self._goal_id)
        self._steps = goal_rows.steps(conn, self._goal_id)

    def _advance(self) -> None:
        """Do what comes next: plan, run the next ready step, or finish."""
        row = self._row
        if self._done or self._busy or self._timer is not None:
            return
        if row is None or row.state not in goal_rows.ACTIVE:
            self._finish_actor()
            return
        if row.state in ("pending", "planning") or not self._steps:
            self._plan()
            return
        self._next_step()

    # -- the plan --

    def _plan(self) -> None:
        assert self._row is not None
        d = self._deps
        if not d.governor.has_room(self.path):
            self._pause()
            return
        self._busy = True
        if self._row.state == "pending":
            self._ops(GoalState(self._goal_id, "planning", d.channel))
        specs = self._tools.specs()
        tools = ", ".join(s.name for s in specs) or d.prompts.fragment("plan_no_tools")
        log.info("goal_planning", goal_id=self._goal_id)
        job = plan_job(goal_id=self._goal_id, goal=self._row.goal, tools=tools, work=self._work,
                       prompts=d.prompts, clock=d.clock, timeout=d.llm.request_timeout_s)
        self._work.submit(job, turn_id=self._plan_id, reply=self.tell_self)

    def _planned(self, outcome: PlanReady | PlanRefused) -> None:
        d = self._deps
        self._failures = 0
        self._to_writer(SaveSnapshots(self._plan_id, outcome.snapshots, path="goal"))
        spent: tuple[Op, ...] = (
            Spend("goal", outcome.tokens, outcome.calls, self._goal_id),
            GoalSpent(self._goal_id, 0, outcome.elapsed_s, outcome.tokens))
        if isinstance(outcome, PlanRefused):
            error = "no usable plan: " + "; ".join(outcome.problems)
            self._ops(*spent, *self._failure_ops(error), tag="ended")
            return
        plan = outcome.plan
        steps = plan_steps(plan)
        log.info("goal_planned", goal_id=self._goal_id, steps=len(steps),
                 confidence=plan.confidence)
        self._ops(*spent, SavePlan(self._goal_id, steps, plan.confidence, d.channel), tag="plan")

    # -- steps --

    def _next_step(self) -> None:
        row = self._row
        assert row is not None
        d, config = self._deps, self._config
        done = {s.step_id for s in self._steps if s.status == "done"}
        ready = plans.ready([(s.step_id, s.depends_on) for s in self._steps], done)
        if not ready:  # every step done, yet the goal is not completed: finish it
            latest = next((s for s in reversed(self._steps) if s.result), None)
            self._busy = True
            self._ops(GoalState(self._goal_id, "completed", d.channel,
                                result=latest.result if latest else None), tag="ended")
            return
        step = next(s for s in self._steps if s.step_id == ready[0])
        iterations = config.max_iterations - row.iterations
        seconds = config.timeout_s - row.elapsed_s
        if iterations <= 0 or seconds <= 0:
            spent = (f"all {config.max_iterations} iterations" if iterations <= 0
                     else f"all {config.timeout_s:g}s")
            self._busy = True
            self._ops(*self._failure_ops(f"it used {spent} before step {step.step_id}"),
                      tag="ended")
            return
        if not d.governor.has_room(self.path):
            self._pause()
            return
        self._busy = True
        final = len(done) == len(self._steps) - 1
        self._ops(StepStatus(self._goal_id, step.step_id, "running", d.channel, attempt=True))
        turn = self.new_turn(
            text=step.description, template="goal_step",
            extra={"goal": row.goal, "plan": plan_text(self._steps, step, d.prompts),
                   "step_id": step.step_id, "step": step.description,
                   "last": d.prompts.fragment("goal_last_step" if final else "goal_next_step")},
            max_iterations=iterations, timeout_s=seconds, request=(step, final),
        )
        log.info("goal_step_started", goal_id=self._goal_id, step_id=step.step_id,
                 turn_id=turn.id, iterations_left=iterations, seconds_left=round(seconds, 1))
        self._driver.begin(turn)
        self.gather_context(turn, f"goal.{self._goal_id}")

    def turn_ended(self, ending: Ending) -> None:
        d = self._deps
        step, last = ending.turn.request
        loop = ending.turn.loop
        spent = GoalSpent(self._goal_id, loop.llm_calls, ending.elapsed, loop.tokens_total)
        if ending.outcome == "cancelled" and not ending.paused:
            return  # the goal was cancelled: its work is not stored (_stop_now)
        ops: list[Op]
        if ending.paused:
            until = d.governor.frees_at(self.path)
            ops = [spent, StepStatus(self._goal_id, step.step_id, "pending", d.channel),
                   PauseGoal(self._goal_id, None if until == float("inf") else until,
                             d.channel)]
            self._set_timer(until)
        elif ending.outcome == "answered" and ending.text:
            self._failures = 0
            result = ending.text[:RESULT_CHARS]
            ops = [spent, StepStatus(self._goal_id, step.step_id, "done", d.channel,
                                     result=result)]
            if last:
                ops += self._result_ops(ending.text)
        elif ending.outcome == "timeout" or not ending.recoverable or \
                self._failures >= self._config.step_retries:
            error = ending.error or "no answer"
            ops = [spent, StepStatus(self._goal_id, step.step_id, "failed", d.channel,
                                     result=error),
                   *self._failure_ops(f"step {step.step_id} failed: {error}")]
        else:  # a recoverable failure: the step runs again after a while
            ops = [spent, StepStatus(self._goal_id, step.step_id, "pending", d.channel)]
            self._retry_later(ending.error or "no answer")
        log.info("goal_step_finished", goal_id=self._goal_id, step_id=step.step_id,
                 outcome=ending.outcome, paused=ending.paused)
        self._awaiting = ending.turn.id
        self.commit(ending, tuple(ops), reply_to=self._reply_to)

    def _result_ops(self, text: str) -> list[Op]:
        """The goal completes with `text` as its result, which surfaces to the person."""
        d = self._deps
        return [GoalState(self._goal_id, "completed", d.channel, result=text[:RESULT_CHARS]),
                self._surface(text)]

    def _failure_ops(self, error: str) -> list[Op]:
        assert self._row is not None
        log.warning("goal_failed", goal_id=self._goal_id, error=error)
        return [GoalState(self._goal_id, "failed", self._deps.channel, error=error),
                self._surface(FAILED.format(goal=self._row.goal, error=error))]

    def _surface(self, text: str) -> Proactive:
        """A proactive message about this goal, as attention decides (cap, quiet hours)."""
        d = self._deps
        status, reason = d.attention.decide(capped=True)
        if status == "suppressed":
            d.metrics.proactive_suppressed.labels(reason=reason or "cap").inc()
        else:
            d.metrics.proactive.labels(path="goal", result=status).inc()
        return Proactive(ProactiveRow(path="goal", channel=d.channel, content=text,
                                      status=status, capped=True, composed_at=d.clock.time(),
                                      ref=self._goal_id, reason=reason),
                         goal_id=self._goal_id)

    # -- waiting --

    def _failed_attempt(self, error: str, *, recoverable: bool) -> None:
        """Planning failed (the LLM call, not the plan): try again later, or fail the goal."""
        if recoverable and self._failures < self._config.step_retries:
            self._retry_later(error)
            return
        self._busy = True
        self._ops(*self._failure_ops(f"planning failed: {error}"), tag="ended")

    def _retry_later(self, error: str) -> None:
        delay = self._config.retry_backoff_s * 2 ** self._failures
        self._failures += 1
        log.warning("goal_retry_later", goal_id=self._goal_id, error=error, retry_in_s=delay,
                    attempt=self._failures)
        self._set_timer(self._deps.clock.time() + delay)

    def _pause(self) -> None:
        d = self._deps
        until = d.governor.frees_at(self.path)
        log.warning("goal_paused", goal_id=self._goal_id,
                    resumes_in_s=round(until - d.clock.time(), 1))
        self._ops(PauseGoal(self._goal_id, None if until == float("inf") else until,
                            d.channel))
        self._set_timer(until)

    def _set_timer(self, when: float) -> None:
        """Go on (_Resume) once the wall clock reaches `when` (never, for infinity)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if when != float("inf"):
            self._timer = self._deps.clock.call_at(when, lambda: self.tell_self(_Resume()))

    # -- the store's answers --

    def _ops_applied(self, tag: str, error: str | None) -> None:
        if tag != self._awaiting:  # progress, or a stale answer to an earlier instance
            if error is not None:
                log.warning("goal_progress_not_stored", goal_id=self._goal_id, error=error)
            return
        self._awaiting = None
        self._busy = False
        if error is not None and tag == "plan":
            log.warning("goal_plan_not_stored", goal_id=self._goal_id, error=error)
        self._load()
        self._advance()

    def _stored(self, message: TurnStored | TurnStoreFailed) -> None:
        self._awaiting = None
        self._busy = False
        if isinstance(message, TurnStoreFailed):
            log.warning("goal_step_not_stored", goal_id=self._goal_id, error=message.error)
        self._load()
        self._advance()

    def _stop_now(self, why: str) -> None:
        log.info("goal_stopping", goal_id=self._goal_id, why=why)
        if self._driver.turn is not None:
            self._driver.finish("cancelled", error=why)
        self._finish_actor()

    def _finish_actor(self) -> None:
        if self._done:
            return
        self._done = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._supervisor is not None:
            try:
                self._supervisor.tell(GoalDone(self._goal_id))
            except pykka.ActorDeadError:
                pass
        self.actor_ref.stop(block=False)

    def _ops(self, *ops: Op, tag: str = "progress") -> None:
        """Writes of this goal's; with a tag other than progress, the goal waits for them."""
        if tag != "progress":
            self._awaiting = tag
        self._to_writer(ApplyOps(tuple(ops), reply_to=self._reply_to, tag=tag))
