"""Session(channel): the user path. It owns the channel's turns, one at a time.

The turn's ACT loop is run by a TurnDriver (chalie/actors/driver.py), the same one every path
uses; the Session forwards it the turn's messages and adds what only the user path has: a queue
of the person's messages, retries by client_id, the fast exits (nothing to answer, a cancel
phrase), the identity hook, the turn's context (recall, history, world state) gathered on the
pool before the first request, mid-turn steering and approvals, and the post-turn work (the
compaction backstop, the DMN's idle timer). The mailbox never blocks, so steering is just a
message: `Steer` lands here while a call is out and goes into the next request. A turn ends by
handing its record and closing frames to the StoreWriter (CommitTurn); the next queued message
starts once TurnStored arrives, so its prompt reads a history that includes the turn before it.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import apsw
import msgspec
import pykka
import structlog

from chalie.act import approval
from chalie.act.budget import PromptBudget
from chalie.act.critic import Critic
from chalie.act.fastpath import is_cancel, is_empty
from chalie.act.loop import ActLoop
from chalie.act.prompts import Prompts
from chalie.actors.driver import DriverDeps, Ending, Policy, TurnDriver
from chalie.actors.messages import (
    ActionRequest,
    AppendFrames,
    BackstopChecked,
    CloseOpenExchange,
    CommitTurn,
    CompactionReturned,
    ContextReady,
    FrameRejected,
    IdleAnswer,
    IdleCheck,
    LlmFailed,
    LlmReturned,
    PersonActive,
    PushLive,
    RepushExchange,
    SaveCheckpoint,
    SessionIdle,
    Steer,
    StopIfIdle,
    ToolReturned,
    TurnDeadline,
    TurnStored,
    TurnStoreFailed,
    UserMessage,
)
from chalie.actors.session_backstop import Backstop, channel_loop
from chalie.actors.session_cognition import ChannelCognition, TurnCognition
from chalie.actors.session_idle import IdleWatch
from chalie.actors.supervisor import Directory, Link, SupervisedActor
from chalie.actors.turn import Turn, closing_frames, turn_record
from chalie.actors.work import Work
from chalie.background.governor import Governor
from chalie.clock import Clock, Timer
from chalie.config import ActConfig, CognitionConfig, LlmConfig, StoreConfig
from chalie.frames import Done, Error, Frame, MessageDelta, Notification, Status, encode_live
from chalie.llm.types import LlmProvider, ToolCall
from chalie.memory import context
from chalie.memory.context import NAME_KEY, ContextSettings
from chalie.memory.identity import NameStatement, acknowledgement, read_name
from chalie.memory.recall import Recall
from chalie.metrics import Metrics
from chalie.store import cognition_rows, concept_rows, image_rows, queries
from chalie.store.effects import RememberFact
from chalie.tools.base import ToolSource
from chalie.world.signals import WorldBoard

log = structlog.get_logger("chalie.session")

CANCELLED = "Okay, I've stopped."
NOTHING_TO_CANCEL = "Okay."
EMPTY = "There was nothing in that message to answer."
POLICY = Policy(path="user", attended=True, governed=False)


@dataclass(frozen=True)
class SessionDeps:
    """Everything a Session needs from outside; tests swap the provider, clock and pool."""

    provider: LlmProvider
    tools: ToolSource  # the catalog: innate tools, interfaces' and MCP servers' tools
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
    governor: Governor | None = None  # counts the person's tokens too (it never limits them)
    light: LlmProvider | None = None  # the light job's model (compaction); None: `provider`
    cognition: CognitionConfig | None = None  # [cognition]; None: no critic
    timezone: str = "UTC"  # dmn.timezone: the person's local hours (adaptive traits)
    idle_s: float = 0.0  # server.session_idle_s: stop when idle this long (session_idle.py)
    # A connection for the one read at start (db.Readers.transient); None: `read`'s own.
    read_once: Callable[[], AbstractContextManager[apsw.Connection]] | None = None


class Session(SupervisedActor):
    """One channel's turns, one at a time; steering, approvals and compaction mid-turn."""

    def __init__(self, link: Link | None, *, channel: str, deps: SessionDeps) -> None:
        super().__init__(link)
        self.channel = channel
        self._deps = deps
        self._inbox: deque[UserMessage | ActionRequest] = deque()
        # (turn id, client id, whether the person sent it) of the turn being stored
        self._storing: tuple[str, str | None, bool] | None = None
        self._storing_timer: Timer | None = None
        self._token_ratio = 1.0  # real tokens per estimated token, learned from each turn
        work = Work(deps.pool, deps.provider, deps.metrics, path="user",
                    governor=deps.governor, light=deps.light)
        self._work = work
        self._driver = TurnDriver(host=self, policy=POLICY, deps=DriverDeps(
            work=work, tools=deps.tools, clock=deps.clock, read=deps.read, channel=channel,
            request_timeout_s=deps.llm.request_timeout_s,
            approval_timeout_s=deps.act.approval_timeout_s, recall=deps.recall,
            live=_live_sender(deps.directory, channel),
            critic=Critic.of(deps.cognition, deps.prompts),
        ))
        self._backstop = Backstop(self, channel=channel, deps=deps, work=work)
        self._cognition = ChannelCognition(channel, deps)
        # What the post-turn fan-out of the turn being stored needs: its cognition, its text,
        # whether it called tools (a person's chat only).
        self._fan_out: tuple[TurnCognition, str, bool] | None = None
        self._idle = IdleWatch(deps.clock, deps.idle_s, check=lambda: self.tell_self(IdleCheck()))

    def started(self) -> None:
        # Not `read()`: that would keep a connection on this Session's thread for its life.
        once = self._deps.read_once
        with once() if once is not None else nullcontext(self._deps.read()) as conn:
            self._cognition.load(conn)
        # A predecessor that crashed mid-turn left an open exchange: close it with an error.
        self._to_writer(CloseOpenExchange(self.channel))
        self._idle.active(idle_now=True)

    def on_failure(self, exception_type: Any, exception_value: Any, traceback: Any) -> None:
        if self._driver.turn is not None or self._storing is not None:
            self._deps.metrics.turns_in_flight.dec()  # the turn dies with this instance
        super().on_failure(exception_type, exception_value, traceback)

    def on_receive(self, message: Any) -> Any:
        turn = self._driver.turn
        with structlog.contextvars.bound_contextvars(
            actor="session", channel=self.channel, turn_id=turn.id if turn else None
        ):
            match message:
                case IdleCheck():
                    if self._idle.fired(self._is_idle()):
                        self._to_supervisor(SessionIdle(self.channel, self.actor_urn))
                case StopIfIdle():
                    self._to_supervisor(IdleAnswer(self.channel, self.actor_urn,
                                                   self._idle.may_stop(self._is_idle())))
                case _:
                    self._dispatch(message)
                    self._idle.active(self._is_idle())
        return None

    def _to_supervisor(self, message: SessionIdle | IdleAnswer) -> None:
        if self._link is not None:
            try:
                self._link.supervisor.tell(message)
            except pykka.ActorDeadError:
                pass  # shutting down

    def _is_idle(self) -> bool:
        """Nothing running, being stored, queued or checked: no reply can be on its way here
        (pool jobs, timers and TurnStored all belong to a turn or to the backstop)."""
        return (self._driver.turn is None and self._storing is None and not self._inbox
                and not self._backstop.running)

    def _dispatch(self, message: Any) -> None:
        match message:
            case UserMessage():
                self._on_user_message(message)
            case Steer(text=text, received_at=received_at):
                self._on_steer(text, received_at)
            case ActionRequest(skill=skill) if skill in approval.SKILLS:
                self._on_approval_answer(skill, message.params)
            case ActionRequest():
                self._enqueue(message)
            case FrameRejected(reason=reason):
                self._emit(Error(message=reason, recoverable=True))
            case (CompactionReturned(stage="backstop") | LlmFailed(turn_id="backstop")
                  | BackstopChecked()):
                self._backstop.done()
            case ContextReady(turn_id=tid) if self._driver.owns(tid):
                self._on_context(message)
            case TurnStored(turn_id=tid) | TurnStoreFailed(turn_id=tid) if (
                self._storing and tid == self._storing[0]
            ):
                self._on_stored(message)
            case _ if self._driver.handle(message):
                pass
            case (ContextReady() | LlmReturned() | LlmFailed() | ToolReturned() | TurnDeadline()
                  | CompactionReturned() | TurnStored() | TurnStoreFailed()):
                log.debug("stale_message_dropped", message=type(message).__name__)
            case _:
                log.warning("unexpected_message", message=type(message).__name__)

    # -- what the person sends --

    def _on_user_message(self, message: UserMessage) -> None:
        turn = self._driver.turn
        if turn is not None and not turn.is_action and is_cancel(message.text):
            self._cancel_running(message.text)
            return
        self._enqueue(message)

    def _on_steer(self, text: str, received_at: float) -> None:
        turn = self._driver.turn
        if turn is None or turn.is_action:
            self._on_user_message(UserMessage(text=text, received_at=received_at))
            return
        if is_cancel(text):
            self._cancel_running(text)
            return
        self._driver.steer(text)

    def _on_approval_answer(self, skill: str, params: dict[str, Any]) -> None:
        decision = approval.read_decision(skill, params)
        turn = self._driver.turn
        pending = turn.approval if turn else None
        if isinstance(decision, str):
            self._emit(Error(message=decision, recoverable=False))
        elif pending is None or pending.id != decision.approval_id:
            self._emit(Error(message=f"no approval {decision.approval_id!r} is waiting (it may "
                             "have expired or been answered)", recoverable=False))
        else:
            self._driver.resolve_approval(decision.approval_id, decision.approve)

    def _enqueue(self, message: UserMessage | ActionRequest) -> None:
        client_id = message.client_id
        if client_id is not None and self._is_known(client_id):
            return
        self._inbox.append(message)
        self._start_next()

    def _is_known(self, client_id: str) -> bool:
        """A client retrying a message it already sent: start nothing, show the first turn."""
        turn = self._driver.turn
        if (turn and turn.client_id == client_id) or any(
            m.client_id == client_id for m in self._inbox
        ) or (self._storing and self._storing[1] == client_id):
            log.info("duplicate_client_id_in_flight", client_id=client_id)
            return True
        stored = queries.turn_for_client_id(self._deps.read(), self.channel, client_id)
        if stored is None:
            return False
        log.info("duplicate_client_id_replayed", client_id=client_id, exchange_id=stored)
        self._to_writer(RepushExchange(self.channel, stored))
        return True

    # -- turn start --

    def _start_next(self) -> None:
        if self._driver.turn is not None or self._storing is not None or not self._inbox:
            return
        request = self._inbox.popleft()
        d = self._deps
        d.metrics.turns_in_flight.inc()
        turn_id = uuid.uuid4().hex
        structlog.contextvars.bind_contextvars(turn_id=turn_id)
        action = isinstance(request, ActionRequest)
        text = _action_text(request) if isinstance(request, ActionRequest) else request.text
        log.info("turn_started", chars=len(text), kind="action" if action else "chat")
        if _from_person(request):
            self._person_active()  # the person (not a program) is talking: the DMN waits
        statement = None if action else read_name(text)
        # Only the person's own "thanks" is acknowledged without the model: a program's
        # message (POST /api/messages) is always reasoned about.
        social = self._cognition.social_reply(text) if _from_person(request) and not action \
            else None
        recalls = not action and not is_empty(text) and not is_cancel(text) and not (
            statement is not None and statement.whole) and social is None
        # First, after only those pure checks: the exchange is open in the log, so a crash from
        # here on is closed with an error frame by whoever comes next. A turn that goes on to
        # recall says so in the same message (one transaction for the writer, not two).
        opening = Status(stage="processing", exchange_id=turn_id, text=text or None,
                         client_id=request.client_id,
                         image_ids=request.image_ids if isinstance(request, UserMessage) else ())
        self._emit(opening, *([Status(stage="retrieving_memory", exchange_id=turn_id)]
                              if recalls else []))
        now = datetime.fromtimestamp(d.clock.time(), UTC).strftime("%Y-%m-%d %H:%M UTC")
        if action:  # runs a skill: no history, no recall
            loop, upto = channel_loop(d, d.read(), self.channel, text, now, with_history=False)
        else:  # the context is gathered on the pool once the fast exits are passed
            loop, upto = self._bare_loop(text, now), 0
        self._driver.begin(Turn(
            id=turn_id, loop=loop,
            budget=PromptBudget(d.llm.context_window, d.act.compaction_threshold,
                                self._token_ratio),
            started_at=d.clock.time(), received_at=request.received_at,
            timeout_s=d.act.timeout_s,
            source="action" if action else request.source,  # type: ignore[union-attr]
            client_id=request.client_id, is_action=action, request=request,
            history_upto=upto,
            image_ids=request.image_ids if isinstance(request, UserMessage) else (),
        ))
        if isinstance(request, ActionRequest):
            self._run_action(request)
            return
        # A fast exit (nothing to answer, a cancel, a thanks) only acknowledges the person.
        self._require_turn().cognition = TurnCognition(
            social=social is not None or is_empty(text) or is_cancel(text))
        if _from_person(request):
            self._cognition.message_arrived(d.clock.time())
        if is_empty(text):
            self._driver.finish("cancelled", text=EMPTY)
            return
        if is_cancel(text):
            self._driver.finish("cancelled", text=NOTHING_TO_CANCEL)
            return
        if social is not None:  # "thanks!": a deterministic acknowledgement, no LLM call
            self._driver.finish("answered", text=social)
            return
        if statement is not None and self._identity_hook(statement):
            return
        self._gather_context()

    def _bare_loop(self, text: str, now: str) -> ActLoop:
        """A loop with no context yet: the context arrives before the first request."""
        d = self._deps
        return ActLoop(
            prompts=d.prompts, user_text=text, history=(), tools=d.tools.specs(),
            max_iterations=d.act.max_iterations, max_result_chars=d.act.max_tool_result_chars,
            now_text=now,
        )

    def _run_action(self, request: ActionRequest) -> None:
        """A deterministic skill, run directly: no LLM, zero tokens."""
        turn = self._require_turn()
        tool = self._deps.tools.get(request.skill)
        if tool is None or self._deps.tools.danger(request.skill) == "block":
            known = ", ".join(s.name for s in self._deps.tools.specs())
            self._driver.finish("error", error=f"no skill named {request.skill!r} (skills: "
                                f"{known}, approval)", recoverable=False)
            return
        raw = msgspec.json.encode(request.params).decode()
        self._driver.run_tool(ToolCall(f"action_{turn.id[:8]}", request.skill, request.params,
                                       raw))

    # -- memory, before the loop --

    def _identity_hook(self, statement: NameStatement) -> bool:
        """The identity hook needs no LLM: "call me Sam" stores the name as a trait with the
        turn; True when that was the whole message, and the turn is answered already."""
        turn = self._require_turn()
        fact = RememberFact(key=NAME_KEY, value=statement.name, kind="trait", source="identity",
                            confidence=1.0)
        turn.effects.append(fact)
        log.info("name_stated", whole=statement.whole)
        if not statement.whole:
            return False
        previous = queries.current_value(self._deps.read(), NAME_KEY)
        self._driver.finish("answered", text=acknowledgement(statement.name, previous))
        return True

    def _gather_context(self) -> None:
        """Identity, Current State, hybrid recall, history, world state and tools, gathered on
        the pool (where the query is embedded) and fitted to the budget; the loop starts when
        they come back."""
        turn = self._require_turn()
        d = self._deps
        turn.phase = "context"  # the turn's opening frames said "retrieving_memory" already
        turn_id, text, channel = turn.id, turn.user_text, self.channel
        system = turn.loop.system
        tools = d.tools.specs()
        pending = tuple(e for e in turn.effects if isinstance(e, RememberFact))
        ratio = self._token_ratio
        world = d.world.top() if d.world is not None else []
        image_ids = turn.image_ids
        mind = self._cognition.mind.copy()
        learned = self._cognition.trait_lines()
        choose_topic = self._cognition.topic_job(text)

        def job() -> Any:
            conn = d.read()
            images, missing = image_rows.load(conn, image_ids) if image_ids else ((), [])
            built = context.build(
                conn, channel=channel, text=text, recall=d.recall, prompts=d.prompts,
                system=system, tools=tools, settings=d.context, token_ratio=ratio,
                pending=pending, world=world, traits=learned,
                conversation=mind.state_text(d.prompts, cognition_rows.summary(conn, channel)),
                gists=concept_rows.gists(conn, channel, d.clock.time()),
            )
            topic = choose_topic(conn, built)
            log.info("context_ready", recalled=len(built.recalled), tokens=built.tokens,
                     degraded=built.degraded, images=len(images),
                     topic=topic.name if topic else None)
            return ContextReady(turn_id, built, images, tuple(missing), topic)

        self._work.submit(job, turn_id=turn_id, reply=self.tell_self)

    def _on_context(self, ready: ContextReady) -> None:
        turn = self._require_turn()
        if ready.missing_images:
            turn.image_ids = ()
            unknown = ", ".join(repr(i) for i in ready.missing_images)
            self._driver.finish("error", error=f"image_ids: no image {unknown} (upload it with "
                                "POST /api/images first)", recoverable=False)
            return
        turn.loop.images = ready.images
        ctx = ready.context
        turn.loop.use_context(identity=ctx.identity, state=ctx.state, memory=ctx.memory,
                              history=ctx.history, tools=ctx.tools, world=ctx.world)
        turn.history_upto = ctx.history_upto
        turn.recalled = ctx.recalled
        if isinstance(turn.cognition, TurnCognition):
            c = turn.cognition
            c.choice, c.recalled_texts, c.vector = ready.topic, ctx.recalled_texts, ctx.vector
            c.history_messages, c.worlds = len(ctx.history), ctx.worlds
        self._driver.ask()

    # -- turn end --

    def _cancel_running(self, text: str) -> None:
        turn = self._require_turn()
        log.info("turn_cancelled_by_person")
        turn.loop.steer(text)
        self._driver.finish("cancelled", text=CANCELLED)

    def turn_ended(self, ending: Ending) -> None:
        """The driver's turn is over: hand its record and closing frames to the StoreWriter."""
        turn, outcome, elapsed = ending.turn, ending.outcome, ending.elapsed
        d = self._deps
        extras: tuple[Any, ...] = ()
        verdict = None
        if isinstance(turn.cognition, TurnCognition):
            verdict = self._cognition.close(turn, ending.text, cancelled=outcome == "cancelled")
            extras = tuple(turn.cognition.ops)
            self._fan_out = (turn.cognition, turn.user_text,
                             bool(turn.loop.metrics().tools))
        frames = closing_frames(
            turn, outcome, elapsed, text=ending.text, error=ending.error,
            recoverable=ending.recoverable, topic=verdict.topic if verdict else None,
            mode=verdict.mode if verdict else "act",
            confidence=verdict.confidence if verdict else None)
        record = turn_record(turn, self.channel, outcome, elapsed, d.clock.time(),
                             text=ending.text, error=ending.error)
        d.metrics.turns.labels(outcome=outcome).inc()
        d.metrics.turn_seconds.observe(elapsed)
        log.info("turn_finished", outcome=outcome, tokens_total=record.tokens_total,
                 llm_calls=record.llm_calls, response_time_s=round(elapsed, 6),
                 llm_s=round(turn.loop.llm_seconds, 6), error=ending.error)
        self._token_ratio = turn.budget.ratio
        self._storing = (turn.id, turn.client_id, _from_person(turn.request))
        self._to_writer(CommitTurn(record, frames, turn.received_at,
                                   notify=_notification(turn.request, ending.text),
                                   extras=extras))
        # If the writer never answers (it crashed holding this turn), do not wait forever.
        wait = d.store.reply_timeout_s
        turn_id = turn.id
        self._storing_timer = d.clock.call_later(wait, lambda: self.tell_self(
            TurnStoreFailed(turn_id, f"the store did not confirm within {wait:g}s")))

    def _on_stored(self, message: TurnStored | TurnStoreFailed) -> None:
        turn_id = message.turn_id
        if self._storing_timer is not None:
            self._storing_timer.cancel()
            self._storing_timer = None
        self._deps.metrics.turns_in_flight.dec()
        if isinstance(message, TurnStoreFailed):
            self._emit(Error(message=f"the answer could not be stored: {message.error}",
                             recoverable=True, exchange_id=turn_id),
                       Done(duration_ms=0, exchange_id=turn_id))
        by_person = self._storing is not None and self._storing[2]
        self._storing = None
        fan_out, self._fan_out = self._fan_out, None

        def backstop() -> None:
            if not self._inbox:
                self._backstop.check(turn_id, self._token_ratio)

        # Post-turn fan-out (a person's chat; its answer is out): phase and situation, the
        # DMN's idle timer, counters, the compaction backstop, each step isolated.
        if by_person and fan_out is not None:
            cognition, text, used_tools = fan_out
            self._cognition.fan_out(cognition, text, used_tools,
                                    [("dmn_idle_reset", self._person_active),
                                     ("compaction_backstop", backstop)])
        else:
            if by_person:
                self._person_active()
            backstop()
        self._start_next()

    # -- the driver's host --

    def show(self, *frames: Frame) -> None:
        self._emit(*frames)

    def state_written(self, turn: Turn, summary: str) -> None:
        self._to_writer(SaveCheckpoint(self.channel, summary, turn.history_upto, turn.id))

    # -- plumbing --

    def _require_turn(self) -> Turn:
        turn = self._driver.turn
        assert turn is not None, "no turn is running"
        return turn

    def _person_active(self) -> None:
        """The person is here: the DMN's idle timer starts again (a DMN that is not running
        misses nothing: it reads the last turn from the store when it starts)."""
        ref = self._deps.directory.get("dmn")
        if ref is not None:
            try:
                ref.tell(PersonActive(self._deps.clock.time()))
            except pykka.ActorDeadError:
                pass  # being restarted

    def _emit(self, *frames: Frame) -> None:
        self._to_writer(AppendFrames(self.channel, frames))

    def _to_writer(self, message: Any) -> None:
        self._deps.directory.tell("store_writer", message)


def _live_sender(directory: Directory, channel: str) -> Callable[[MessageDelta], None]:
    """How the turn's message_delta frames reach the channel's sockets: through the
    StoreWriter (in order with the logged frames), from the worker thread that streams."""

    def send(frame: MessageDelta) -> None:
        directory.tell("store_writer", PushLive(channel, encode_live(frame)))

    return send


def _notification(request: Any, answer: str | None) -> AppendFrames | None:
    """An interface's message was answered: the answer goes to the person as a notification."""
    if not isinstance(request, UserMessage) or request.notify_channel is None or not answer:
        return None
    return AppendFrames(request.notify_channel,
                        (Notification(content=answer, topic=request.topic,
                                      source="interface"),))


def _from_person(request: Any) -> bool:
    """A chat or an action of the person's, not a program's message (POST /api/messages)."""
    return isinstance(request, ActionRequest) or (
        isinstance(request, UserMessage) and request.notify_channel is None)


def _action_text(request: ActionRequest) -> str:
    return f"[action] {request.skill} {msgspec.json.encode(request.params).decode()}"
