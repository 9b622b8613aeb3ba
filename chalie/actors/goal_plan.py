"""A goal's plan, for the Goal actor (chalie/actors/goal.py): the pool job that asks the light
model for one (a structured-output call, prompts/plan.md), has chalie/background/plans.py check
it and asks again once with the reasons; what the job answers (PlanReady, PlanRefused); the
steps a good plan becomes, in the order they run, or the one step of a goal run without a plan
(the goal itself); and a step's prompt, with the plan as it shows it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import msgspec
import structlog

from chalie.act.snapshots import snapshot
from chalie.actors.work import Work
from chalie.background import plans
from chalie.clock import Clock
from chalie.errors import StructuredOutputError
from chalie.llm.types import ChatRequest, Message
from chalie.prompts import Prompts
from chalie.store.goal_rows import GoalRow, StepRow
from chalie.store.memory_writes import SnapshotRow

log = structlog.get_logger("chalie.goals")

PLAIN_STEP = "goal"  # the id of the one step of a goal run without a plan


class PlanReady(msgspec.Struct, frozen=True, tag=True):
    plan: plans.Plan
    tokens: int
    calls: int
    elapsed_s: float
    snapshots: tuple[SnapshotRow, ...]


class PlanRefused(msgspec.Struct, frozen=True, tag=True):
    problems: tuple[str, ...]
    tokens: int
    calls: int
    elapsed_s: float
    snapshots: tuple[SnapshotRow, ...]


def plan_job(*, goal_id: str, goal: str, tools: str, work: Work, prompts: Prompts,
             clock: Clock, timeout: float) -> Callable[[], PlanReady | PlanRefused]:
    """The job, for the pool, that asks for a plan for `goal` (`tools`: the tools' names, as
    the prompt lists them): PlanReady, or PlanRefused with the second plan's problems. A failed
    LLM call ends it (the Work answers LlmFailed)."""

    def job() -> PlanReady | PlanRefused:
        started = time.perf_counter()
        problems: list[str] = []
        tokens = calls = 0
        snaps: list[SnapshotRow] = []
        for attempt in (1, 2):
            body = prompts.render("plan", goal=goal, tools=tools)
            if problems:
                listed = "\n".join(f"- {p}" for p in problems)
                body = f"{body}\n\n{prompts.fragment('plan_retry', problems=listed)}"
            request = ChatRequest(system="", messages=(Message("user", body),),
                                  response_format=plans.FORMAT)
            snaps.append(snapshot(request, call=attempt, purpose="plan", now=clock.time()))
            response = work.call_llm(request, timeout, light=True)
            tokens += response.usage.total_tokens
            calls += 1
            try:
                plan = plans.parse(response.text)
            except StructuredOutputError as e:
                problems = [str(e)]
                continue
            problems = plans.problems(plan)
            if not problems:
                return PlanReady(plan, tokens, calls, time.perf_counter() - started,
                                 tuple(snaps))
            log.info("goal_plan_refused", goal_id=goal_id, attempt=attempt,
                     problems=problems)
        return PlanRefused(tuple(problems), tokens, calls, time.perf_counter() - started,
                           tuple(snaps))

    return job


def plan_steps(plan: plans.Plan) -> tuple[StepRow, ...]:
    """A good plan's steps as the store keeps them, each after the steps it depends on."""
    by_id = {s.id: s for s in plan.steps}
    return tuple(
        StepRow(step_id=sid, position=n, description=" ".join(by_id[sid].description.split()),
                depends_on=tuple(by_id[sid].depends_on))
        for n, sid in enumerate(plans.order(plan)))


def plain_step(goal: str) -> StepRow:
    """The one step of a goal run without a plan: the goal itself."""
    return StepRow(step_id=PLAIN_STEP, position=0, description=goal, depends_on=())


def step_prompt(row: GoalRow, steps: Sequence[StepRow], step: StepRow, *, final: bool,
                prompts: Prompts) -> tuple[str, dict[str, str]]:
    """The prompt file of a step's loop and what only it fills in: the goal itself for a goal
    run without a plan (prompts/goal_plain.md), else the plan with the results so far and the
    step (prompts/goal_step.md), `final` when its answer is the goal's result."""
    if row.mode == "plain":
        return "goal_plain", {"goal": row.goal}
    return "goal_step", {
        "goal": row.goal, "plan": plan_text(steps, step, prompts), "step_id": step.step_id,
        "step": step.description,
        "last": prompts.fragment("goal_last_step" if final else "goal_next_step")}


def plan_text(steps: Sequence[StepRow], current: StepRow, prompts: Prompts) -> str:
    """The plan as the prompt of the step `current` shows it: each step done, now or to do,
    with the results so far."""
    f = prompts.fragment
    lines = []
    for s in steps:
        status = "now" if s is current else ("done" if s.status == "done" else "to do")
        result = f" -> {' '.join(s.result.split())}" if s.result else ""
        lines.append(f("goal_plan_step", status=status, id=s.step_id,
                       description=s.description, result=result))
    return "\n".join(lines)
