"""What the background paths receive: the Dmn (the person is active or connected; signals
worth a thought arrived), the Scheduler (schedules changed) and the GoalSupervisor (a goal to
run, stop, or route to; a goal's actor finished)."""

from __future__ import annotations

from typing import Any

import msgspec


class _Msg(msgspec.Struct, frozen=True, tag=True):
    pass


class PersonActive(_Msg, frozen=True):
    """To the Dmn: the person sent something (a chat, an action) at wall-clock `at`: the idle
    timer starts again, and no trigger fires for dmn.busy_s. `running`: their turn on `channel`
    started (True) or was stored (False); no trigger fires while one runs."""

    at: float
    channel: str = ""
    running: bool | None = None


class SignalsNoticed(_Msg, frozen=True):
    """To the Dmn, from WorldState: signals whose salience reached dmn.signal_wake arrived
    (kept in world state); they wake it after dmn.signal_debounce_s."""

    ids: tuple[str, ...]
    received_at: float  # wall clock: when the first of them arrived


class PersonConnected(_Msg, frozen=True):
    """To the Dmn: a socket opened on `channel`: deferred messages are delivered now."""

    channel: str


class SchedulesChanged(_Msg, frozen=True):
    """To the Scheduler: schedules were added or cancelled; read them again."""


class RunGoal(_Msg, frozen=True):
    """To the GoalSupervisor: a goal was stored; pursue it."""

    goal_id: str


class StopGoal(_Msg, frozen=True):
    """To the GoalSupervisor: a goal was cancelled (in the store already); stop its actor."""

    goal_id: str


class GoalDone(_Msg, frozen=True):
    """To the GoalSupervisor, from a Goal: this goal's actor is finished for good."""

    goal_id: str


class ToGoal(_Msg, frozen=True):
    """To the GoalSupervisor: route `message` to a goal's actor (held while it restarts)."""

    goal_id: str
    message: Any
