"""What the person hears of a goal (chalie/actors/goal.py), as the StoreWriter's ops.

How a goal ended (its result, or why it failed or expired) is a proactive message as attention
decides: quiet hours defer it, and the daily cap may hold it back (it stays in the goal and its
last `task` frame). While a goal works, a step done (not the last: the result says more) is
told at most every `goals.progress_every_s`, counted from the last one told, or from when the
goal was added: which step of how many, and what it found, in short. Progress is neither
capped nor deferred: in quiet hours it is skipped (recorded as suppressed), since a later one,
or the result, supersedes it.
"""

from __future__ import annotations

from chalie.actors.path import PathDeps
from chalie.store.background_ops import GoalState, Op, Proactive, ProgressTold
from chalie.store.goal_rows import GoalRow
from chalie.store.proactive_rows import ProactiveRow

FAILED = 'I could not complete the goal "{goal}": {error}'
EXPIRED = ('I gave up the goal "{goal}": it waited more than {days:g} days for the background '
           "budget to free up.")
PROGRESS = 'Goal "{goal}": step {done} of {total} done. {found}'
FOUND_CHARS = 200  # of a step's result, in a progress message


def ended(deps: PathDeps, goal_id: str, state: str, reason: str, content: str, *,
          error: str | None = None, result: str | None = None) -> list[Op]:
    """The goal is over (`state`, why: goal_rows.END_REASONS), and the person hears
    `content`."""
    return [GoalState(goal_id, state, deps.channel, error=error, result=result,
                      end_reason=reason),
            _surface(deps, goal_id, content, capped=True)]


def progress(deps: PathDeps, row: GoalRow, every_s: float, *, done: int, total: int,
             found: str) -> list[Op]:
    """Step `done` of `total` is done, having found `found`: a progress message, when
    `every_s` has passed since the person last heard of the goal; [] when not."""
    now = deps.clock.time()
    since = row.created_at if row.progress_at is None else row.progress_at
    if now - since < every_s:
        return []
    found = " ".join(found.split())
    if len(found) > FOUND_CHARS:
        found = found[:FOUND_CHARS] + "…"
    told = _surface(deps, row.id, PROGRESS.format(goal=row.goal, done=done, total=total,
                                                 found=found), capped=False)
    return [told, ProgressTold(row.id)] if told.row.status == "sent" else [told]


def _surface(deps: PathDeps, goal_id: str, content: str, *, capped: bool) -> Proactive:
    """A proactive message about the goal. Capped: as attention decides (the cap, quiet hours
    defer it); not: sent, or in quiet hours suppressed."""
    status, reason = deps.attention.decide(capped=capped)
    if status == "deferred" and not capped:
        status = "suppressed"
    if status == "suppressed":
        deps.metrics.proactive_suppressed.labels(reason=reason or "cap").inc()
    else:
        deps.metrics.proactive.labels(path="goal", result=status).inc()
    return Proactive(ProactiveRow(path="goal", channel=deps.channel, content=content,
                                  status=status, capped=capped, composed_at=deps.clock.time(),
                                  ref=goal_id, reason=reason),
                     goal_id=goal_id)
