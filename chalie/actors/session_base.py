"""What every part of the Session shares: its state, its seams and its plumbing.

The Session is split by concern over a few modules (session.py drives turns,
session_approvals.py and session_compaction.py hold those two mid-turn detours); they share
this base. Hooks that one part calls and another implements are declared abstract here.
"""

from __future__ import annotations

import abc
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import apsw
import pykka

from chalie.act.loop import ActLoop
from chalie.act.prompts import Prompts
from chalie.actors.messages import ActionRequest, AppendFrames, TurnDeadline, UserMessage
from chalie.actors.supervisor import Directory, Link, SupervisedActor
from chalie.actors.turn import Turn
from chalie.actors.work import Work
from chalie.clock import Clock, Timer
from chalie.config import ActConfig, LlmConfig, StoreConfig
from chalie.frames import Frame, Stage, Status
from chalie.llm.types import LlmProvider, ToolCall
from chalie.memory.context import ContextSettings
from chalie.memory.recall import Recall
from chalie.metrics import Metrics
from chalie.store import queries
from chalie.store.records import Outcome
from chalie.tools.catalog import ToolCatalog
from chalie.tools.registry import ToolRegistry
from chalie.world.signals import WorldBoard


@dataclass(frozen=True)
class SessionDeps:
    """Everything a Session needs from outside; tests swap the provider, clock and pool."""

    provider: LlmProvider
    tools: ToolRegistry | ToolCatalog  # a catalog: interfaces' and MCP servers' tools too
    prompts: Prompts
    act: ActConfig
    llm: LlmConfig
    store: StoreConfig
    read: Callable[[], apsw.Connection]
    clock: Clock
    pool: Executor
    directory: Directory
    metrics: Metrics
    recall: Recall
    context: ContextSettings
    world: WorldBoard | None = None  # signals for the prompt's world-state section


class SessionBase(SupervisedActor, abc.ABC):
    def __init__(self, link: Link | None, *, channel: str, deps: SessionDeps) -> None:
        super().__init__(link)
        self.channel = channel
        self._deps = deps
        self._inbox: deque[UserMessage | ActionRequest] = deque()
        self._turn: Turn | None = None
        self._storing: tuple[str, str | None] | None = None  # (turn id, client id) being stored
        self._storing_timer: Timer | None = None
        self._backstop_running = False
        self._work = Work(deps.pool, deps.provider, deps.metrics)
        self._token_ratio = 1.0  # real tokens per estimated token, learned from each turn
        self._bare_tokens: int | None = None  # an empty prompt's size, for the backstop

    def _bare_loop(self, text: str, now: str) -> ActLoop:
        """A loop with no context yet: the context arrives before the first request."""
        d = self._deps
        return ActLoop(
            prompts=d.prompts, user_text=text, history=(), tools=d.tools.specs(),
            max_iterations=d.act.max_iterations, max_result_chars=d.act.max_tool_result_chars,
            now_text=now,
        )

    def _new_loop(self, conn: apsw.Connection, text: str, now: str, *,
                  with_history: bool) -> tuple[ActLoop, int]:
        """A loop over the channel's Current State and the history after it; also the last
        transcript id that history reaches (what a checkpoint made now would cover)."""
        d = self._deps
        checkpoint = queries.latest_checkpoint(conn, self.channel)
        upto = queries.last_transcript_id(conn, self.channel)
        history = queries.recent_transcript(
            conn, self.channel, 2 * d.act.history_turns,
            after_id=checkpoint.upto_transcript_id if checkpoint else 0,
        ) if with_history else []
        loop = ActLoop(
            prompts=d.prompts, user_text=text, history=history, tools=d.tools.specs(),
            max_iterations=d.act.max_iterations, max_result_chars=d.act.max_tool_result_chars,
            now_text=now, state=checkpoint.text if checkpoint else "",
        )
        return loop, upto

    def on_failure(self, exception_type: type[BaseException] | None,
                   exception_value: BaseException | None, traceback: TracebackType | None) -> None:
        if self._turn is not None or self._storing is not None:
            self._deps.metrics.turns_in_flight.dec()  # the turn dies with this instance
        super().on_failure(exception_type, exception_value, traceback)

    # -- hooks between the parts --

    @abc.abstractmethod
    def _ask_llm(self) -> None:
        """Send the turn's next request (or compact first)."""

    @abc.abstractmethod
    def _next_call(self) -> None:
        """Run the next queued tool call, or ask the LLM when none is left."""

    @abc.abstractmethod
    def _run_tool(self, call: ToolCall, approval: str | None = None) -> None:
        """Run one tool call on the pool."""

    @abc.abstractmethod
    def _finish(self, outcome: Outcome, *, text: str | None = None, error: str | None = None,
                recoverable: bool = True) -> None:
        """End the turn: hand its record and closing frames to the StoreWriter."""

    def _is_current(self, turn_id: str) -> bool:
        return self._turn is not None and self._turn.id == turn_id

    # -- plumbing --

    def _require_turn(self) -> Turn:
        assert self._turn is not None, "no turn is running"
        return self._turn

    def _status(self, stage: Stage) -> None:
        self._emit(Status(stage=stage, exchange_id=self._require_turn().id))

    def _emit(self, *frames: Frame) -> None:
        self._to_writer(AppendFrames(self.channel, frames))

    def _to_writer(self, message: Any) -> None:
        self._deps.directory.tell("store_writer", message)

    def _deadline_timer(self, turn_id: str, deadline: float) -> Timer:
        clock = self._deps.clock
        return clock.call_later(deadline - clock.monotonic(),
                                lambda: self._tell_self(TurnDeadline(turn_id)))

    def _tell_self(self, message: Any) -> None:
        try:
            self.actor_ref.tell(message)
        except pykka.ActorDeadError:
            pass  # this instance was stopped or replaced; its turn is gone with it

    def _submit(self, job: Callable[[], Any], turn_id: str | None = None) -> None:
        self._work.submit(job, turn_id=turn_id or self._require_turn().id, reply=self._tell_self)




NARRATION_ARGS_CHARS = 120


def clip(text: str) -> str:
    """Tool arguments as narration shows them: the first 120 characters."""
    return text if len(text) <= NARRATION_ARGS_CHARS else text[:NARRATION_ARGS_CHARS] + "…"
