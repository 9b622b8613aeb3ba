"""GoalSupervisor: one Goal actor per active goal (chalie/actors/goal.py).

At most `goals.max_running` goals are pursued at once; the others wait, oldest first. Goals
are started from the store at start, and by RunGoal once a new goal is stored; StopGoal stops
one that was cancelled; ToGoal routes a message to one (held while it restarts after a crash).
A goal that keeps crashing is failed on its own and never counts against this supervisor's
restart intensity, so one broken goal cannot take the others, or the server, down.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pykka
import structlog

from chalie.actors.background_messages import GoalDone, RunGoal, StopGoal, ToGoal
from chalie.actors.supervisor import ChildFailed, ChildSpec, Link, Supervisor

log = structlog.get_logger("chalie.goals")

MAX_CRASHES = 3  # a goal's actor restarted this often, and crashing again, fails the goal


GoalFactory = Callable[[Link, str, pykka.ActorRef[Any]], pykka.ActorRef[Any]]


class GoalSupervisor(Supervisor):
    def __init__(self, link: Link | None, *, goal_factory: GoalFactory,
                 active: Callable[[], list[str]], max_running: int,
                 fail: Callable[[str, str], None], **kw: Any) -> None:
        super().__init__(link, name="goals", **kw)
        self._factory = goal_factory
        self._active = active
        self._fail = fail
        self._max_running = max_running
        self._running: set[str] = set()
        self._waiting: list[str] = []
        self._crashes: dict[str, int] = {}
        self._backoff = kw["config"].backoff_initial_s
        self._backoff_max = kw["config"].backoff_max_s

    def started(self) -> None:
        super().started()
        for goal_id in self._active():
            self._run(goal_id)

    def handle(self, message: Any) -> Any:
        match message:
            case RunGoal(goal_id=goal_id):
                self._run(goal_id)
            case StopGoal(goal_id=goal_id):
                if goal_id in self._waiting:
                    self._waiting.remove(goal_id)
                self._tell(goal_id, message)
            case ToGoal(goal_id=goal_id, message=inner):
                self._tell(goal_id, inner)
            case GoalDone(goal_id=goal_id):
                self.forget_child(f"goal:{goal_id}")
                self._running.discard(goal_id)
                self._crashes.pop(goal_id, None)
                self._start_waiting()
            case _:
                return super().handle(message)
        return None

    def _child_failed(self, failed: ChildFailed) -> None:
        """A crashed goal restarts from the store after a backoff (`supervisor.*`); one that
        keeps crashing fails on its own (its error says why) and is not restarted. Goals never
        count against this supervisor's restart intensity: one broken goal must not take the
        other goals, or the server, down with it."""
        if not self._take_failed(failed):
            return
        goal_id = failed.name.removeprefix("goal:")
        crashes = self._crashes.get(goal_id, 0) + 1
        self._crashes[goal_id] = crashes
        if crashes <= MAX_CRASHES:
            self.restart_later(failed.name, min(self._backoff_max,
                                                self._backoff * 2 ** (crashes - 1)))
            return
        log.error("goal_crashed_for_good", goal_id=goal_id, crashes=crashes,
                  error=failed.error)
        self.forget_child(failed.name)
        self._running.discard(goal_id)
        self._fail(goal_id, f"it crashed {crashes} times: {failed.error}")
        self._start_waiting()

    def _run(self, goal_id: str) -> None:
        if goal_id in self._running or goal_id in self._waiting:
            return
        if len(self._running) >= self._max_running:
            log.info("goal_waiting", goal_id=goal_id, running=len(self._running))
            self._waiting.append(goal_id)
            return
        self._running.add(goal_id)
        factory, me = self._factory, self.actor_ref
        self.add_child(ChildSpec(f"goal:{goal_id}", lambda link: factory(link, goal_id, me),
                                 register=False))

    def _start_waiting(self) -> None:
        while self._waiting and len(self._running) < self._max_running:
            self._run(self._waiting.pop(0))

    def _tell(self, goal_id: str, message: Any) -> None:
        if not self.send_child(f"goal:{goal_id}", message):
            log.debug("goal_not_running", goal_id=goal_id, message=type(message).__name__)
