"""What the background paths' actors (the DMN, the Scheduler, each Goal) share.

Each hosts one TurnDriver with an unattended, governed Policy: nobody watches its turns (no
status or narration frames, no approvals, so `confirm` tools are neither offered nor run; a
call that came from another program's words is held for the person, who is asked when the turn
is stored: chalie/actors/consent.py), and every LLM request first asks the spending governor
for room. Its turns are stored with
`path` set, on the person's channel, with no transcript lines of their own: what the person is
told enters the transcript when it is delivered (chalie/store/background_ops.py).
"""

from __future__ import annotations

import abc
import uuid
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import apsw
import structlog

from chalie.act.budget import PromptBudget
from chalie.act.loop import ActLoop
from chalie.actors.consent import held_ops
from chalie.actors.driver import TurnDriver
from chalie.actors.driver_deps import DriverDeps, Ending, Policy
from chalie.actors.store_writer_messages import CommitTurn
from chalie.actors.supervisor import Directory, Link, SupervisedActor
from chalie.actors.turn import Turn, turn_record
from chalie.actors.turn_messages import (
    ContextReady,
    LlmFailed,
    LlmReturned,
    ToolReturned,
    TurnDeadline,
    TurnStored,
    TurnStoreFailed,
)
from chalie.actors.work import Work
from chalie.background.attention import Attention
from chalie.background.governor import Governor
from chalie.clock import Clock
from chalie.config import ActConfig, LlmConfig
from chalie.frames import Frame
from chalie.llm.types import LlmProvider
from chalie.memory import context
from chalie.memory.context import ContextSettings, TurnContext
from chalie.memory.recall import Recall
from chalie.metrics import Metrics
from chalie.prompts import Prompts
from chalie.store.background_ops import Op
from chalie.tools.base import ToolSource
from chalie.world.signals import WorldBoard

log = structlog.get_logger("chalie.paths")


@dataclass(frozen=True)
class PathDeps:
    """Everything a background path's actor needs from outside."""

    provider: LlmProvider
    prompts: Prompts
    llm: LlmConfig
    act: ActConfig
    read: Callable[[], apsw.Connection]
    clock: Clock
    pool: Executor  # the background loops' own pool: user turns keep theirs
    directory: Directory
    metrics: Metrics
    catalog: ToolSource
    context: ContextSettings
    governor: Governor
    attention: Attention
    channel: str  # the person's channel: proactive messages, `task` frames (dmn.channel)
    recall: Recall
    world: WorldBoard | None = None
    light: LlmProvider | None = None  # the light job's model; None: `provider`
    light_llm: LlmConfig | None = None  # its settings; None: `llm`


class PathActor(SupervisedActor, abc.ABC):
    """A background path's actor, host of its TurnDriver."""

    path: str = ""
    light_model: bool = False  # the path's turns run on the light job's model (the DMN's do)

    def __init__(self, link: Link | None, *, deps: PathDeps, tools: ToolSource) -> None:
        super().__init__(link)
        if self.light_model and deps.light is not None:
            deps = replace(deps, provider=deps.light, llm=deps.light_llm or deps.llm)
        self._deps = deps
        self._tools = tools
        self._work = Work(deps.pool, deps.provider, deps.metrics, path=self.path,
                          governor=deps.governor, light=deps.light)
        self._driver = TurnDriver(
            host=self, policy=Policy(self.path, attended=False, governed=True),
            deps=DriverDeps(
                work=self._work, tools=tools, clock=deps.clock, read=deps.read,
                channel=deps.channel, request_timeout_s=deps.llm.request_timeout_s,
                approval_timeout_s=deps.act.approval_timeout_s, recall=deps.recall,
                governor=deps.governor,
            ))

    # -- a turn --

    def new_turn(self, *, text: str, template: str, extra: dict[str, str], max_iterations: int,
                 timeout_s: float, request: Any = None, asked: str | None = None) -> Turn:
        """A turn of this path (not begun): `text` is what it works on (stored as the turn's
        text and used to recall), rendered into `template` with `extra`; `asked`: what the
        person asked for, when the turn does their bidding (their scheduled prompt, goal)."""
        d = self._deps
        now = datetime.fromtimestamp(d.clock.time(), UTC).strftime("%Y-%m-%d %H:%M UTC")
        loop = ActLoop(
            prompts=d.prompts, user_text=text, history=(), tools=self._tools.specs(),
            max_iterations=max_iterations, max_result_chars=d.act.max_tool_result_chars,
            now_text=now, template=template, extra=extra,
        )
        turn = Turn(
            id=uuid.uuid4().hex, loop=loop,
            budget=PromptBudget(d.llm.context_window, d.act.compaction_threshold),
            started_at=d.clock.time(), received_at=d.clock.monotonic(), timeout_s=timeout_s,
            source=self.path, request=request,
        )
        if asked:
            turn.provenance.person(asked, request=True)
        return turn

    def gather_context(self, turn: Turn, channel: str) -> None:
        """Identity, the channel's Current State and history, what recall finds for the turn's
        text, world state and the tools, fitted to the budget, on the pool; ContextReady comes
        back, and `use_context` starts the loop."""
        d = self._deps
        turn.phase = "context"
        turn_id, text, system = turn.id, turn.user_text, turn.loop.system
        tools = self._tools.specs()
        world = d.world.top() if d.world is not None else []

        def job() -> Any:
            built = context.build(d.read(), channel=channel, text=text, recall=d.recall,
                                  prompts=d.prompts, system=system, tools=tools,
                                  settings=d.context, world=world)
            return ContextReady(turn_id, built)

        self._work.submit(job, turn_id=turn_id, reply=self.tell_self)

    def use_context(self, ctx: TurnContext) -> None:
        turn = self._driver.turn
        assert turn is not None
        turn.loop.use_context(identity=ctx.identity, state=ctx.state,
                              history=ctx.history, tools=ctx.tools, world=ctx.world,
                              situation=ctx.situation, memory=ctx.memory_lines)
        turn.history_upto = ctx.history_upto
        turn.recalled = ctx.recalled
        turn.provenance.person(ctx.identity, *ctx.person_texts)
        turn.provenance.program(*ctx.program_texts)
        self._driver.ask()

    def commit(self, ending: Ending, extras: tuple[Op, ...], *, reply_to: str) -> None:
        """Store the ended turn, on the person's channel, with this path's own writes, in one
        transaction; `reply_to` hears when it is stored."""
        d = self._deps
        now = d.clock.time()
        record = turn_record(ending.turn, d.channel, ending.outcome, ending.elapsed, now,
                             text=ending.text, error=ending.error, path=self.path)
        held = held_ops(ending.turn.held, tools=self._tools, channel=d.channel, path=self.path,
                        now=now, days=d.act.held_approval_days, narrate=d.prompts.narrate)
        self._to_writer(CommitTurn(record, (), ending.turn.received_at, extras=(*extras, *held),
                                   reply_to=reply_to))

    def turn_message(self, message: Any) -> None:
        """A message for the running turn (its context, or one the driver takes); one of a turn
        that has ended is dropped."""
        match message:
            case ContextReady(turn_id=tid, context=ctx) if self._driver.owns(tid):
                self.use_context(ctx)
            case _ if self._driver.handle(message):
                pass
            case (ContextReady() | LlmReturned() | LlmFailed() | ToolReturned() | TurnDeadline()
                  | TurnStored() | TurnStoreFailed()):
                log.debug("stale_message_dropped", message=type(message).__name__)
            case _:
                log.warning("unexpected_message", message=type(message).__name__)

    # -- the driver's host --

    def show(self, *frames: Frame) -> None:
        """Nobody watches a background turn: no status, narration or cards."""

    def state_written(self, turn: Turn, summary: str) -> None:
        """A background loop's compaction restart stays in the loop: it has no channel of its
        own whose Current State it could replace."""

    @abc.abstractmethod
    def turn_ended(self, ending: Ending) -> None:
        """The path's turn is over: store it (`commit`) with the path's own writes."""

    # -- plumbing --

    def _to_writer(self, message: Any) -> None:
        self._deps.directory.tell("store_writer", message)
