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
from contextlib import nullcontext
from typing import Any

import structlog

from chalie.act import approval
from chalie.act.critic import Critic
from chalie.act.fastpath import is_cancel, is_empty
from chalie.actors import session_approvals, session_turn
from chalie.actors.driver import TurnDriver
from chalie.actors.driver_deps import DriverDeps, Ending, Policy
from chalie.actors.session_backstop import Backstop
from chalie.actors.session_cognition import ChannelCognition, TurnCognition
from chalie.actors.session_deps import SessionDeps
from chalie.actors.session_held import HeldMessages
from chalie.actors.session_idle import IdleWatch
from chalie.actors.session_messages import (
    ActionRequest,
    BackstopChecked,
    FrameRejected,
    IdleAnswer,
    IdleCheck,
    SessionIdle,
    Steer,
    StopIfIdle,
    StoreWritable,
    UserMessage,
)
from chalie.actors.store_writer_messages import (
    AppendFrames,
    ApplyOps,
    CloseOpenExchange,
    SaveCheckpoint,
)
from chalie.actors.supervisor import Link, SupervisedActor
from chalie.actors.turn import Turn
from chalie.actors.turn_messages import (
    CompactionReturned,
    ContextReady,
    LlmFailed,
    LlmReturned,
    ToolReturned,
    TurnDeadline,
    TurnStored,
    TurnStoreFailed,
)
from chalie.actors.work import Work
from chalie.clock import Timer
from chalie.frames import Done, Error, Frame
from chalie.memory.identity import read_name

log = structlog.get_logger("chalie.session")

CANCELLED = "Okay, I've stopped."
NOTHING_TO_CANCEL = "Okay."
EMPTY = "There was nothing in that message to answer."
POLICY = Policy(path="user", attended=True, governed=False)


class Session(SupervisedActor):
    """One channel's turns, one at a time; steering, approvals and compaction mid-turn."""

    def __init__(self, link: Link | None, *, channel: str, deps: SessionDeps) -> None:
        super().__init__(link)
        self.channel = channel
        self._deps = deps
        self._inbox: deque[UserMessage | ActionRequest] = deque()
        # (turn id, client id, whether the person sent it, what it answers) of the turn being
        # stored
        self._storing: tuple[str, str | None, bool, UserMessage | ActionRequest] | None = None
        self._storing_timer: Timer | None = None
        self._token_ratio = 1.0  # real tokens per estimated token, learned from each turn
        self._history_from = 0  # where the last turn's history started (it moves in blocks)
        work = Work(deps.pool, deps.provider, deps.metrics, path="user",
                    governor=deps.governor, light=deps.light)
        self._work = work
        self._driver = TurnDriver(host=self, policy=POLICY, deps=DriverDeps(
            work=work, tools=deps.tools, clock=deps.clock, read=deps.read, channel=channel,
            request_timeout_s=deps.llm.request_timeout_s,
            approval_timeout_s=deps.act.approval_timeout_s, recall=deps.recall,
            live=session_turn.live_sender(deps.directory, channel),
            critic=Critic.of(deps.cognition, deps.prompts), narrate=deps.prompts.narrate,
        ))
        self._backstop = Backstop(channel=channel, deps=deps, work=work, reply=self.tell_self)
        self._cognition = ChannelCognition(channel, deps)
        # What the post-turn fan-out of the turn being stored needs: its cognition, its text,
        # whether it called tools (a person's chat only).
        self._fan_out: tuple[TurnCognition, str, bool] | None = None
        self._idle = IdleWatch(deps.clock, deps.idle_s, check=lambda: self.tell_self(IdleCheck()))
        self._held = HeldMessages(deps.store_health, session_turn.live_sender(
            deps.directory, channel), deps.clock.monotonic)

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
        self._held.drop()
        super().on_failure(exception_type, exception_value, traceback)

    def on_receive(self, message: Any) -> Any:
        turn = self._driver.turn
        with structlog.contextvars.bound_contextvars(
            actor="session", channel=self.channel, turn_id=turn.id if turn else None
        ):
            match message:
                case IdleCheck():
                    if self._idle.fired(self._is_idle()):
                        self.tell_supervisor(SessionIdle(self.channel, self.actor_urn))
                case StopIfIdle():
                    self.tell_supervisor(IdleAnswer(self.channel, self.actor_urn,
                                                   self._idle.may_stop(self._is_idle())))
                case _:
                    self._dispatch(message)
                    self._idle.active(self._is_idle())
        return None

    def _is_idle(self) -> bool:
        """Nothing running, being stored, queued or checked: no reply can be on its way here
        (pool jobs, timers and TurnStored all belong to a turn or to the backstop)."""
        return (self._driver.turn is None and self._storing is None and not self._inbox
                and not self._backstop.running and not self._held)

    def _dispatch(self, message: Any) -> None:
        match message:
            case UserMessage():
                self._on_user_message(message)
            case Steer(text=text, received_at=received_at):
                self._on_steer(text, received_at)
            case ActionRequest(skill=skill) if skill in approval.SKILLS:
                self._answered(session_approvals.answer(message, self._driver, self._deps))
            case ActionRequest():
                self._enqueue(message)
            case FrameRejected(reason=reason):
                self._emit(Error(message=reason, recoverable=True))
            case StoreWritable():  # what was kept meanwhile goes first, in order
                if closings := self._held.closings():
                    self._emit(*closings)
                self._inbox.extendleft(reversed(self._held.release()))
                self._start_next()
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

    def _answered(self, done: session_approvals.Answered) -> None:
        """The person answered an escalation: writes, an error for them, a held call's turn."""
        if done.ops:
            self._to_writer(ApplyOps(done.ops))
        if done.error is not None:
            self._emit(Error(message=done.error, recoverable=False))
        if done.run is not None:
            self._enqueue(done.run)

    def _enqueue(self, message: UserMessage | ActionRequest) -> None:
        client_id = message.client_id
        if client_id is not None and self._is_known(client_id):
            return
        self._inbox.append(message)
        self._start_next()

    def _is_known(self, client_id: str) -> bool:
        """A client retrying a message it already sent: start nothing, show the first turn."""
        turn, kept = self._driver.turn, (m.client_id for m in (*self._inbox, *self._held))
        if (turn and turn.client_id == client_id) or client_id in kept \
                or (self._storing and self._storing[1] == client_id):
            log.info("duplicate_client_id_in_flight", client_id=client_id)
            return True
        return session_turn.replayed(self._deps, self.channel, client_id)

    # -- turn start --

    def _start_next(self) -> None:
        if self._driver.turn is not None or self._storing is not None:
            return
        while self._inbox and self._held.holds():  # the store cannot take writes: kept
            self._held.keep(self._inbox.popleft())
        if not self._inbox:
            return
        request = self._inbox.popleft()
        d = self._deps
        d.metrics.turns_in_flight.inc()
        turn_id = uuid.uuid4().hex
        structlog.contextvars.bind_contextvars(turn_id=turn_id)
        action = isinstance(request, ActionRequest)
        text = session_turn.request_text(request)
        log.info("turn_started", chars=len(text), kind="action" if action else "chat")
        person = session_turn.from_person(request)
        if person:  # the person (not a program): the DMN waits
            session_turn.person_active(self._deps, self.channel, running=True)
        statement = None if action else read_name(text)
        # Only the person's own "thanks" is acknowledged without the model: a program's
        # message (POST /api/messages) is always reasoned about.
        social = self._cognition.social_reply(text) if person and not action else None
        recalls = not action and not is_empty(text) and not is_cancel(text) and not (
            statement is not None and statement.whole) and social is None
        # First, after only those pure checks: the exchange is open in the log.
        self._emit(*session_turn.opening_frames(request, turn_id, text, recalls=recalls))
        self._driver.begin(session_turn.new_turn(
            d, request, turn_id=turn_id, text=text, channel=self.channel,
            token_ratio=self._token_ratio))
        if recalls:  # embedded while the context is gathered (Recall.embed_meanwhile)
            turn = self._require_turn()
            turn.embedding = d.recall.embed_meanwhile(turn.user_text)
        if isinstance(request, ActionRequest):
            self._driver.run_action(request.skill, request.params)
            return
        # A fast exit (nothing to answer, a cancel, a thanks) only acknowledges the person.
        self._require_turn().cognition = TurnCognition(
            social=social is not None or is_empty(text) or is_cancel(text))
        if person:
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
        if statement is not None:  # "call me Sam": no LLM call when that is the whole message
            answer = session_turn.identity_hook(d, self._require_turn(), statement)
            if answer is not None:
                self._driver.finish("answered", text=answer)
                return
        self._gather_context()

    def _gather_context(self) -> None:
        """The turn's context is gathered on the pool (session_turn.py); the loop starts when
        it comes back."""
        turn = self._require_turn()
        turn.phase = "context"  # the turn's opening frames said "retrieving_memory" already
        channel = session_turn.history_channel(turn.request, self.channel)
        job = session_turn.context_job(self._deps, turn, channel=channel,
                                       cognition=self._cognition, token_ratio=self._token_ratio,
                                       history_from=self._history_from)
        self._work.submit(job, turn_id=turn.id, reply=self.tell_self)

    def _on_context(self, ready: ContextReady) -> None:
        turn = self._require_turn()
        error = session_turn.missing_images(ready)
        if error is not None:
            turn.image_ids = ()
            self._driver.finish("error", error=error, recoverable=False)
            return
        session_turn.use_context(turn, ready)
        self._history_from = ready.context.history_from
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
        commit = session_turn.commit_of(ending, channel=self.channel, now=d.clock.time(),
                                        verdict=verdict, extras=extras, deps=d)
        record = commit.record
        d.metrics.turns.labels(outcome=outcome).inc()
        d.metrics.turn_seconds.observe(elapsed)
        log.info("turn_finished", outcome=outcome, tokens_total=record.tokens_total,
                 llm_calls=record.llm_calls, response_time_s=round(elapsed, 6),
                 llm_s=round(turn.loop.llm_seconds, 6), error=ending.error)
        self._token_ratio = turn.budget.ratio
        self._storing = (turn.id, turn.client_id, session_turn.from_person(turn.request),
                         turn.request)
        self._to_writer(commit)
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
        if isinstance(message, TurnStoreFailed) and message.cause is not None and self._storing:
            self._held.keep(self._storing[3], why=message.error, exchange_id=turn_id)
        elif isinstance(message, TurnStoreFailed):
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
                                    [("dmn_idle_reset",
                                      lambda: session_turn.person_active(
                                          self._deps, self.channel, running=False)),
                                     ("compaction_backstop", backstop)])
        else:
            if by_person:
                session_turn.person_active(self._deps, self.channel, running=False)
            backstop()
        self._start_next()

    # -- the driver's host --

    def show(self, *frames: Frame) -> None:
        self._emit(*frames)

    def state_written(self, turn: Turn, summary: str) -> None:
        channel = session_turn.history_channel(turn.request, self.channel)
        self._to_writer(SaveCheckpoint(channel, summary, turn.history_upto, turn.id))

    # -- plumbing --

    def _require_turn(self) -> Turn:
        turn = self._driver.turn
        assert turn is not None, "no turn is running"
        return turn

    def _emit(self, *frames: Frame) -> None:
        self._to_writer(AppendFrames(self.channel, frames))

    def _to_writer(self, message: Any) -> None:
        self._deps.directory.tell("store_writer", message)

