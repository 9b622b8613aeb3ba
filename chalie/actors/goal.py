"""Goal pursuit: one Goal actor per active goal, under the GoalSupervisor.

A Goal first plans (chalie/actors/goal_plan.py; one structured-output call, prompts/plan.md):
`{"steps": [{"id", "description", "depends_on"}], "confidence"}`, checked by
chalie/background/plans.py (Kahn's algorithm; 4-30 words a step; no two steps alike; confidence
over 0.5). A plan that fails the checks is asked for again once, with the reasons. When the
second fails them too (a weak model), the goal runs without a plan, in mode plain: one step,
the goal itself, a bounded ACT loop on its text (prompts/goal_plain.md); the goal keeps the
checks' reasons (`plan_problems`).
Then each ready step (all its dependencies done) runs an ACT loop (prompts/goal_step.md) with
every tool but `goal`, within what is left of the goal's `goals.max_iterations` and
`goals.timeout_s` (counted over all its steps). Each step is checkpointed in the transaction
that stores its turn and its `task` frame, so after a restart the goal resumes at its first
unfinished step and a finished step never runs again. The last step's answer is the goal's
result: the goal completes in that same transaction. What the person hears meanwhile (the
result, a failure, progress at most every `goals.progress_every_s`) is chalie/actors/
goal_news.py's; a goal that is over says why (`end_reason`, goal_rows.END_REASONS).

A step whose LLM call fails is tried again `goals.step_retries` times, `goals.retry_backoff_s`
apart (doubling); when the goal path's budget is used up the goal pauses (a `paused` task
frame) and resumes once the budget frees room. One paused for longer than `goals.expire_days`
(since the first of a run of pauses; a step that runs ends it) expires, at that time or, after
a restart, at once. A cancelled goal (DELETE /api/goals/<id>, the `goal` tool) is cancelled in
the store first; its actor then stops at once, and a step it was running is not stored.
"""

from __future__ import annotations

from typing import Any

import pykka
import structlog

from chalie.actors import goal_news
from chalie.actors.background_messages import GoalDone, StopGoal
from chalie.actors.driver_deps import Ending
from chalie.actors.goal_news import EXPIRED, FAILED
from chalie.actors.goal_plan import (
    PlanReady,
    PlanRefused,
    plain_step,
    plan_job,
    plan_steps,
    step_prompt,
)
from chalie.actors.goal_waits import ExpiryDue, Resume, Waits
from chalie.actors.path import PathActor, PathDeps
from chalie.actors.store_writer_messages import ApplyOps, OpsApplied, SaveSnapshots
from chalie.actors.supervisor import Link
from chalie.actors.turn_messages import LlmFailed, TurnStored, TurnStoreFailed
from chalie.background import plans
from chalie.config import GoalsConfig
from chalie.store import goal_rows
from chalie.store.background_ops import (
    GoalSpent,
    GoalState,
    Op,
    PauseGoal,
    SavePlan,
    Spend,
    StepStatus,
)
from chalie.store.goal_rows import GoalRow, StepRow
from chalie.tools.view import ToolView

log = structlog.get_logger("chalie.goals")

EXCLUDED_TOOLS = ("goal",)
RESULT_CHARS = 4000  # of a step's answer kept as its result


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
        self._awaiting: str | None = None  # that write: a turn id, "plan", "paused", "ended"
        self._waits = Waits(deps.clock, self.tell_self, expire_days=config.expire_days)
        self._failures = 0  # failed attempts in a row (LLM errors), for the backoff
        self._done = False

    @property
    def _reply_to(self) -> str:
        return f"goal:{self._goal_id}"

    def started(self) -> None:
        structlog.contextvars.bind_contextvars(goal_id=self._goal_id)
        self._load()
        self._go_on()

    def on_stop(self) -> None:
        self._waits.cancel()

    def on_receive(self, message: Any) -> Any:
        with structlog.contextvars.bound_contextvars(actor="goal", goal_id=self._goal_id):
            self._dispatch(message)

    def _dispatch(self, message: Any) -> None:
        match message:
            case StopGoal():
                self._stop_now("cancelled")
            case Resume():
                self._waits.resumed()
                self._go_on()
            case ExpiryDue():
                self._waits.expiry_came()
                self._go_on()
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
        self._waits.watch_expiry(self._row)

    def _go_on(self) -> None:
        """On start, and when a wait is over: expire a goal paused too long, or go on."""
        if self._waits.expired(self._row) and not (self._busy or self._done):
            self._expire()
        else:
            self._advance()

    def _advance(self) -> None:
        """Do what comes next: plan, run the next ready step, or finish."""
        row = self._row
        if self._done or self._busy or self._waits.waiting:
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
            assert self._row is not None
            log.warning("goal_runs_plain", goal_id=self._goal_id, problems=outcome.problems)
            self._ops(*spent, SavePlan(self._goal_id, (plain_step(self._row.goal),), None,
                                       d.channel, mode="plain", problems=outcome.problems),
                      tag="plan")
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
                                result=latest.result if latest else None,
                                end_reason="completed"), tag="ended")
            return
        step = next(s for s in self._steps if s.step_id == ready[0])
        iterations = config.max_iterations - row.iterations
        seconds = config.timeout_s - row.elapsed_s
        if iterations <= 0 or seconds <= 0:
            spent, reason = ((f"all {config.max_iterations} iterations", "out_of_iterations")
                             if iterations <= 0 else
                             (f"all {config.timeout_s:g}s", "out_of_time"))
            self._busy = True
            self._ops(*self._failure_ops(f"it used {spent} before step {step.step_id}",
                                         reason), tag="ended")
            return
        if not d.governor.has_room(self.path):
            self._pause()
            return
        self._busy = True
        final = len(done) == len(self._steps) - 1
        self._ops(StepStatus(self._goal_id, step.step_id, "running", d.channel, attempt=True))
        template, extra = step_prompt(row, self._steps, step, final=final, prompts=d.prompts)
        turn = self.new_turn(text=step.description, template=template, extra=extra,
                             max_iterations=iterations, timeout_s=seconds, request=(step, final),
                             asked=row.goal if row.source != "dmn" else None)
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
            self._waits.resume_at(until)
        elif ending.outcome == "answered" and ending.text:
            self._failures = 0
            result = ending.text[:RESULT_CHARS]
            ops = [spent, StepStatus(self._goal_id, step.step_id, "done", d.channel,
                                     result=result),
                   *(self._result_ops(ending.text) if last else self._progress_ops(result))]
        elif ending.outcome == "timeout" or not ending.recoverable or \
                self._failures >= self._config.step_retries:
            error = ending.error or "no answer"
            reason = "out_of_time" if ending.outcome == "timeout" else "step_failed"
            ops = [spent, StepStatus(self._goal_id, step.step_id, "failed", d.channel,
                                     result=error),
                   *self._failure_ops(f"step {step.step_id} failed: {error}", reason)]
        else:  # a recoverable failure: the step runs again after a while
            ops = [spent, StepStatus(self._goal_id, step.step_id, "pending", d.channel)]
            self._retry_later(ending.error or "no answer")
        log.info("goal_step_finished", goal_id=self._goal_id, step_id=step.step_id,
                 outcome=ending.outcome, paused=ending.paused)
        self._awaiting = ending.turn.id
        self.commit(ending, tuple(ops), reply_to=self._reply_to)

    def _result_ops(self, text: str) -> list[Op]:
        """The goal completes with `text` as its result, which surfaces to the person."""
        return goal_news.ended(self._deps, self._goal_id, "completed", "completed", text,
                               result=text[:RESULT_CHARS])

    def _progress_ops(self, result: str) -> list[Op]:
        """The person hears which step is done, when it is time to (goal_news.progress)."""
        assert self._row is not None
        done = sum(s.status == "done" for s in self._steps) + 1
        return goal_news.progress(self._deps, self._row, self._config.progress_every_s,
                                  done=done, total=len(self._steps), found=result)

    def _failure_ops(self, error: str, reason: str) -> list[Op]:
        assert self._row is not None
        log.warning("goal_failed", goal_id=self._goal_id, error=error, reason=reason)
        return goal_news.ended(self._deps, self._goal_id, "failed", reason,
                               FAILED.format(goal=self._row.goal, error=error), error=error)

    # -- waiting --

    def _failed_attempt(self, error: str, *, recoverable: bool) -> None:
        """Planning failed (the LLM call, not the plan): try again later, or fail the goal."""
        if recoverable and self._failures < self._config.step_retries:
            self._retry_later(error)
            return
        self._busy = True
        self._ops(*self._failure_ops(f"planning failed: {error}", "planning_error"),
                  tag="ended")

    def _retry_later(self, error: str) -> None:
        delay = self._config.retry_backoff_s * 2 ** self._failures
        self._failures += 1
        log.warning("goal_retry_later", goal_id=self._goal_id, error=error, retry_in_s=delay,
                    attempt=self._failures)
        self._waits.resume_at(self._deps.clock.time() + delay)

    def _pause(self) -> None:
        """Wait for the budget to free room; the goal is read again once the pause is stored
        (since when it is paused: its expiry)."""
        d = self._deps
        until = d.governor.frees_at(self.path)
        log.warning("goal_paused", goal_id=self._goal_id,
                    resumes_in_s=round(until - d.clock.time(), 1))
        self._busy = True
        self._ops(PauseGoal(self._goal_id, None if until == float("inf") else until,
                            d.channel), tag="paused")
        self._waits.resume_at(until)

    def _expire(self) -> None:
        assert self._row is not None
        days = self._config.expire_days
        log.warning("goal_expired", goal_id=self._goal_id, paused_at=self._row.paused_at)
        self._busy = True
        self._ops(*goal_news.ended(self._deps, self._goal_id, "expired", "expired",
                                   EXPIRED.format(goal=self._row.goal, days=days)),
                  tag="ended")

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
        self._waits.cancel()
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
