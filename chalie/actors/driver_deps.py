"""The TurnDriver's contract with the path that hosts it: what the path gives it (its Policy,
its DriverDeps, itself as the Host its turns are driven for) and what it gets back when a turn
ends (an Ending). The Session, the Dmn, the Scheduler and each Goal fill these in."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import apsw

from chalie.act.critic import Critic
from chalie.actors.turn import Turn
from chalie.actors.work import Work
from chalie.background.governor import Governor
from chalie.clock import Clock
from chalie.frames import Frame, MessageDelta
from chalie.memory.recall import Recall
from chalie.store.records import Outcome
from chalie.tools.base import ToolSource


@dataclass(frozen=True)
class Policy:
    """What sets one path's turns apart. `attended`: a person watches the turn (status and
    narration frames, `confirm` tools ask for approval); unattended turns skip `confirm` tools.
    `governed`: each LLM request first asks the spending governor for room."""

    path: str
    attended: bool = True
    governed: bool = False


@dataclass(frozen=True)
class DriverDeps:
    work: Work
    tools: ToolSource
    clock: Clock
    read: Callable[[], apsw.Connection]
    channel: str  # where the turn's output goes (tools see it in their context)
    request_timeout_s: float
    approval_timeout_s: float
    recall: Recall | None = None
    governor: Governor | None = None
    live: Callable[[MessageDelta], None] | None = None  # message_delta frames to the person
    critic: Critic | None = None  # checks consequential calls of attended turns; None: off
    # A tool call as a sentence for the person (Prompts.narrate); None: its name and arguments.
    narrate: Callable[[str, object], str] | None = None


@dataclass(frozen=True)
class Ending:
    """How a turn ended; the host stores it. `paused`: the path ran out of budget before the
    turn was done (outcome "cancelled"): the work should be tried again later."""

    turn: Turn
    outcome: Outcome
    elapsed: float
    text: str | None = None
    error: str | None = None
    recoverable: bool = True
    paused: bool = False


class Host(Protocol):
    def show(self, *frames: Frame) -> None:
        """Frames for the person while the turn runs (status, narration, escalation, card)."""
        ...

    def turn_ended(self, ending: Ending) -> None:
        """The turn is over: store it. The driver is free for the next turn already."""
        ...

    def state_written(self, turn: Turn, summary: str) -> None:
        """Compaction stage 2 wrote a new Current State for the turn's channel."""
        ...

    def tell_self(self, message: Any) -> None:
        """Put a message in the host's mailbox (results of pool jobs, timers)."""
        ...
