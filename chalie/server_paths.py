"""Wiring of the background paths for chalie/server.py: the spending governor and Attention
(with what the store says was spent and sent in the last day), and the Dmn, the Scheduler and
the goals' supervisor as children of the root supervisor."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

import apsw
import pykka
import structlog

from chalie.actors import goal_news
from chalie.actors.dmn import Dmn
from chalie.actors.goal import Goal
from chalie.actors.goal_supervisor import GoalSupervisor
from chalie.actors.path import PathDeps
from chalie.actors.scheduler import Scheduler
from chalie.actors.session_deps import SessionDeps
from chalie.actors.store_writer_messages import ApplyOps
from chalie.actors.supervisor import ChildSpec, Link
from chalie.background import schedules
from chalie.background.attention import Attention, QuietHours, resolve_zone
from chalie.background.governor import WINDOW_S, Governor
from chalie.clock import Clock
from chalie.config import Config, parse_span
from chalie.metrics import Metrics
from chalie.store import goal_rows, proactive_rows

log = structlog.get_logger("chalie.server")

CRASHED = "I could not complete a goal: {error}"


def policy(config: Config, conn: apsw.Connection, clock: Clock, metrics: Metrics,
           store_writable: Callable[[], bool] | None = None) -> tuple[Governor, Attention]:
    """The spending governor and Attention, loaded with the last 24 hours from the store."""
    now = clock.time()
    governor = Governor(config.governor.budgets(), clock, metrics,
                        spent=proactive_rows.spent_since(conn, now - WINDOW_S),
                        store_writable=store_writable)
    dmn = config.dmn
    zone, how = resolve_zone(dmn.timezone)
    if zone is None:
        log.warning("quiet_all_day", key="dmn.timezone", reason=how)
    else:
        log.info("quiet_hours", hours=dmn.quiet_hours or "none", zone=how)
    attention = Attention(QuietHours(parse_span(dmn.quiet_hours), zone),
                          daily_cap=dmn.daily_cap, clock=clock,
                          counted=proactive_rows.capped_since(conn, now - WINDOW_S))
    return governor, attention


def deps(session: SessionDeps, config: Config, *, pool: Executor, governor: Governor | None,
         attention: Attention | None) -> PathDeps:
    """The background paths' seams: the Sessions' own, with their pool, budgets and Attention."""
    assert governor is not None, "policy() first"
    assert attention is not None, "policy() first"
    return PathDeps(
        provider=session.provider, prompts=session.prompts, llm=session.llm, act=session.act,
        read=session.read, clock=session.clock, pool=pool, directory=session.directory,
        metrics=session.metrics, catalog=session.tools, context=session.context,
        governor=governor, attention=attention, channel=config.dmn.channel,
        recall=session.recall, world=session.world, light=session.light,
        light_llm=config.llm.job("light"))


def default_zone(config: Config) -> str:
    """The zone a cron schedule is read in when none is given: dmn.timezone's, if it has an
    IANA name; else UTC."""
    zone, _ = resolve_zone(config.dmn.timezone)
    if zone is not None:
        try:
            schedules.zone(zone.key)
        except schedules.ScheduleError:
            pass
        else:
            return zone.key
    return "UTC"


def children(config: Config, paths: PathDeps, common: dict[str, Any]) -> tuple[ChildSpec, ...]:
    """The Dmn, the Scheduler and the goals' supervisor."""

    def start_dmn(link: Link) -> pykka.ActorRef[Any]:
        return Dmn.start(link, deps=paths, config=config.dmn,
                         gist_ttl_s=config.cognition.gist_ttl_s)

    def start_scheduler(link: Link) -> pykka.ActorRef[Any]:
        return Scheduler.start(link, deps=paths, config=config.scheduler)

    def start_goal(link: Link, goal_id: str,
                   supervisor: pykka.ActorRef[Any]) -> pykka.ActorRef[Any]:
        return Goal.start(link, deps=paths, config=config.goals, goal_id=goal_id,
                          supervisor=supervisor)

    def start_goals(link: Link) -> pykka.ActorRef[Any]:
        return GoalSupervisor.start(
            link, goal_factory=start_goal, active=lambda: goal_rows.active_ids(paths.read()),
            max_running=config.goals.max_running, fail=goal_failer(paths), **common)

    return (ChildSpec("dmn", start_dmn), ChildSpec("scheduler", start_scheduler),
            ChildSpec("goals", start_goals))


def goal_failer(paths: PathDeps) -> Callable[[str, str], None]:
    """How the goals' supervisor fails a goal whose actor keeps crashing: in the store (why it
    ended: crashed), with a proactive message saying so."""

    def fail(goal_id: str, error: str) -> None:
        paths.directory.tell("store_writer", ApplyOps(tuple(goal_news.ended(
            paths, goal_id, "failed", "crashed", CRASHED.format(error=error), error=error))))

    return fail


async def let_turns_finish(grace_s: float, clock: Clock, metrics: Metrics) -> None:
    """Give turns in flight up to server.shutdown_grace_s to be stored. Their frames are in
    the event log for a `resume` after the restart; a turn still running at the end is
    closed with an error frame at the next start."""
    deadline = clock.monotonic() + grace_s

    def in_flight() -> int:
        return int(metrics.registry.get_sample_value("chalie_turns_in_flight") or 0)

    while in_flight() > 0 and clock.monotonic() < deadline:
        await asyncio.sleep(0.05)
    left = in_flight()
    if left:
        log.warning("shutdown_with_turns_in_flight", turns=left, grace_s=grace_s)
