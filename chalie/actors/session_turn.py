"""A Session's turn, from what it starts from to what is stored: the parts that need no actor.

A turn opens with its opening frames and a Turn over an ActLoop; "call me Sam" is stored and,
when that is the whole message, answered without the model (the identity hook). A person's chat
starts from a bare loop; its context (identity, Current State, hybrid recall, history, world
state, tools, the message's topic) is gathered on the pool, where the query is embedded, fitted
to the prompt's budget, and comes back to the Session as ContextReady. An action (a skill run
without the LLM) and the compaction backstop start from the channel's own loop: its Current
State and the history after it, read at once. A turn ends as one CommitTurn for the StoreWriter:
its record, its closing frames, and an interface's notification.

A paired program's message (POST /api/messages) runs on the program's own channel but reads
the conversation of the person's channel its answer goes to, and is kept there: what the
program said and the answer enter that channel's transcript, so the person's reply has them in
its history.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import apsw
import msgspec
import pykka
import structlog

from chalie.act.budget import PromptBudget
from chalie.act.loop import ActLoop
from chalie.actors.background_messages import PersonActive
from chalie.actors.consent import held_ops
from chalie.actors.driver_deps import Ending
from chalie.actors.session_cognition import ChannelCognition, TurnCognition
from chalie.actors.session_deps import SessionDeps
from chalie.actors.session_messages import ActionRequest, UserMessage
from chalie.actors.store_writer_messages import (
    AppendFrames,
    CommitTurn,
    PushLive,
    RepushExchange,
)
from chalie.actors.supervisor import Directory
from chalie.actors.turn import Turn, closing_frames, turn_record
from chalie.actors.turn_messages import ContextReady
from chalie.cognition.mind import Verdict
from chalie.frames import Done, Error, MessageDelta, Notification, Status, encode_live
from chalie.memory import context
from chalie.memory.context import NAME_KEY
from chalie.memory.identity import NameStatement, acknowledgement
from chalie.store import cognition_rows, concept_rows, image_rows, queries
from chalie.store.background_ops import Op
from chalie.store.consent_ops import ResolveHeld
from chalie.store.effects import RememberFact
from chalie.store.records import ProgramLine

log = structlog.get_logger("chalie.session")

Request = UserMessage | ActionRequest


def request_text(request: Request) -> str:
    """What the turn works on: the person's words, or the action as one line."""
    if isinstance(request, ActionRequest):
        kind = "approved" if request.held_id is not None else "action"  # a held call, approved
        return f"[{kind}] {request.skill} {msgspec.json.encode(request.params).decode()}"
    return request.text


def from_person(request: Any) -> bool:
    """A chat or an action of the person's, not a program's message (POST /api/messages)."""
    return isinstance(request, ActionRequest) or (
        isinstance(request, UserMessage) and request.notify_channel is None)


def opening_frames(request: Request, turn_id: str, text: str, *,
                   recalls: bool) -> tuple[Status, ...]:
    """The turn's first frames: the exchange is open in the log from here on, so a crash is
    closed with an error frame by whoever comes next. A turn that goes on to recall says so in
    the same message (one transaction for the writer, not two)."""
    said = request if isinstance(request, UserMessage) else None
    opening = Status(stage="processing", exchange_id=turn_id, text=text or None,
                     client_id=request.client_id,
                     image_ids=said.image_ids if said is not None else (),
                     source=said.source if said is not None and said.source != "text" else None)
    return (opening, *([Status(stage="retrieving_memory", exchange_id=turn_id)]
                       if recalls else []))


def new_turn(d: SessionDeps, request: Request, *, turn_id: str, text: str, channel: str,
             token_ratio: float) -> Turn:
    """The turn for `request`: an action runs a skill (no history, no recall); a chat's
    context is gathered on the pool once the fast exits are passed."""
    now = datetime.fromtimestamp(d.clock.time(), UTC).strftime("%Y-%m-%d %H:%M UTC")
    action = isinstance(request, ActionRequest)
    if action:
        loop, upto = channel_loop(d, d.read(), channel, text, now, with_history=False)
    else:
        loop, upto = bare_loop(d, text, now), 0
    turn = Turn(
        id=turn_id, loop=loop,
        budget=PromptBudget(d.llm.context_window, d.act.compaction_threshold, token_ratio),
        started_at=d.clock.time(), received_at=request.received_at,
        timeout_s=d.act.timeout_s,
        source="action" if action else request.source,  # type: ignore[union-attr]
        client_id=request.client_id, is_action=action, request=request,
        history_upto=upto,
        image_ids=request.image_ids if isinstance(request, UserMessage) else (),
        light=isinstance(request, UserMessage) and request.light,
    )
    if isinstance(request, UserMessage) and request.notify_channel is not None:
        turn.for_program = True  # the person is not watching: what needs them waits for them
        turn.provenance.program(request.program_text or request.text)
    elif isinstance(request, UserMessage):
        turn.provenance.person(text, request=True)
    return turn


def identity_hook(d: SessionDeps, turn: Turn, statement: NameStatement) -> str | None:
    """The identity hook needs no LLM: "call me Sam" stores the name as a trait with the turn;
    when that was the whole message, the acknowledgement that answers it."""
    fact = RememberFact(key=NAME_KEY, value=statement.name, kind="trait", source="identity",
                        confidence=1.0)
    turn.effects.append(fact)
    log.info("name_stated", whole=statement.whole)
    if not statement.whole:
        return None
    return acknowledgement(statement.name, queries.current_value(d.read(), NAME_KEY))


def channel_loop(d: SessionDeps, conn: apsw.Connection, channel: str, text: str, now: str, *,
                 with_history: bool) -> tuple[ActLoop, int]:
    """A loop over the channel's Current State and the history after it; also the last
    transcript id that history reaches (what a checkpoint made now would cover)."""
    checkpoint = queries.latest_checkpoint(conn, channel)
    upto = queries.last_transcript_id(conn, channel)
    history = queries.recent_transcript(
        conn, channel, 2 * d.act.history_turns,
        after_id=checkpoint.upto_transcript_id if checkpoint else 0,
    ) if with_history else []
    loop = ActLoop(
        prompts=d.prompts, user_text=text, history=history, tools=d.tools.specs(),
        max_iterations=d.act.max_iterations, max_result_chars=d.act.max_tool_result_chars,
        now_text=now, state=checkpoint.text if checkpoint else "",
    )
    return loop, upto


def bare_loop(d: SessionDeps, text: str, now: str) -> ActLoop:
    """A loop with no context yet: the context arrives before the first request."""
    return ActLoop(
        prompts=d.prompts, user_text=text, history=(), tools=d.tools.specs(),
        max_iterations=d.act.max_iterations, max_result_chars=d.act.max_tool_result_chars,
        now_text=now,
    )


def context_job(d: SessionDeps, turn: Turn, *, channel: str, cognition: ChannelCognition,
                token_ratio: float, history_from: int) -> Callable[[], ContextReady]:
    """The pool job that gathers the turn's context: identity, Current State, hybrid recall,
    history, world state and tools, fitted to the budget, and the message's topic. What it
    needs of the Session is copied now, on the Session's thread."""
    turn_id, text = turn.id, turn.user_text
    system = turn.loop.system
    tools = d.tools.specs()
    pending = tuple(e for e in turn.effects if isinstance(e, RememberFact))
    world = d.world.top() if d.world is not None else []
    image_ids = turn.image_ids
    mind = cognition.mind.copy()
    learned = cognition.trait_lines()
    choose_topic = cognition.topic_job(text)
    embedding = turn.embedding

    def job() -> ContextReady:
        started = time.perf_counter()
        conn = d.read()
        images, missing = image_rows.load(conn, image_ids) if image_ids else ((), [])
        built = context.build(
            conn, channel=channel, text=text, recall=d.recall, prompts=d.prompts,
            system=system, tools=tools, settings=d.context, token_ratio=token_ratio,
            pending=pending, world=world, traits=learned,
            conversation=mind.state_text(d.prompts, cognition_rows.summary(conn, channel)),
            gists=concept_rows.gists(conn, channel, d.clock.time()), history_from=history_from,
            embedding=embedding,
        )
        built_ms = (time.perf_counter() - started) * 1000
        topic = choose_topic(conn, built)
        log.info("context_ready", recalled=len(built.recalled), tokens=built.tokens,
                 degraded=built.degraded, images=len(images),
                 topic=topic.name if topic else None, build_ms=round(built_ms, 2),
                 recall_ms=round(built.recall_s * 1000, 2),
                 embed_wait_ms=round(built.embed_wait_s * 1000, 2),
                 ms=round((time.perf_counter() - started) * 1000, 2))
        return ContextReady(turn_id, built, images, tuple(missing), topic)

    return job


def replayed(d: SessionDeps, channel: str, client_id: str) -> bool:
    """A client retrying a message whose turn is stored: its frames are pushed again (True);
    False when no turn of the channel answered that client id."""
    stored = queries.turn_for_client_id(d.read(), channel, client_id)
    if stored is None:
        return False
    log.info("duplicate_client_id_replayed", client_id=client_id, exchange_id=stored)
    d.directory.tell("store_writer", RepushExchange(channel, stored))
    return True


def missing_images(ready: ContextReady) -> str | None:
    """What to tell the person when the message named images the store does not have."""
    if not ready.missing_images:
        return None
    unknown = ", ".join(repr(i) for i in ready.missing_images)
    return f"image_ids: no image {unknown} (upload it with POST /api/images first)"


def use_context(turn: Turn, ready: ContextReady) -> None:
    """The gathered context goes into the turn's loop (and what cognition needs of it, onto
    the turn's cognition)."""
    turn.loop.images = ready.images
    ctx = ready.context
    turn.loop.use_context(identity=ctx.identity, state=ctx.state,
                          history=ctx.history, tools=ctx.tools, world=ctx.world,
                          situation=ctx.situation, memory=ctx.memory_lines)
    turn.history_upto = ctx.history_upto
    turn.recalled = ctx.recalled
    turn.provenance.person(ctx.identity, *ctx.person_texts)
    turn.provenance.program(*ctx.program_texts)
    if isinstance(turn.cognition, TurnCognition):
        c = turn.cognition
        c.choice, c.recalled_texts, c.vector = ready.topic, ctx.recalled_texts, ctx.vector
        c.history_messages, c.worlds = len(ctx.history), ctx.worlds
        c.memory_fill = ctx.memory_fill


def commit_of(ending: Ending, *, channel: str, now: float, verdict: Verdict | None,
              extras: tuple[Op, ...], deps: SessionDeps) -> CommitTurn:
    """The ended turn as the StoreWriter takes it: its record and closing frames (with the
    topic, mode and confidence cognition gave it), and the answer as a notification when an
    interface's message asked for one."""
    turn, outcome, elapsed = ending.turn, ending.outcome, ending.elapsed
    frames = closing_frames(
        turn, outcome, elapsed, text=ending.text, error=ending.error,
        recoverable=ending.recoverable, topic=verdict.topic if verdict else None,
        mode=verdict.mode if verdict else "act",
        confidence=verdict.confidence if verdict else None)
    record = turn_record(turn, channel, outcome, elapsed, now, text=ending.text,
                         error=ending.error)
    request = turn.request
    if isinstance(request, ActionRequest) and request.held_id is not None:
        extras = (*extras, ResolveHeld(request.held_id, "approved", request.via))
    if turn.held:  # a program's message: the person is asked on their own channel
        extras = (*extras, *held_ops(
            turn.held, tools=deps.tools, channel=history_channel(request, channel), path="user",
            now=now, days=deps.act.held_approval_days, narrate=deps.prompts.narrate))
    if isinstance(request, UserMessage) and request.notify_channel is not None:
        # A program's message: it and the answer the person is told go into their channel's
        # transcript (the answer only when there is one: the notification's condition).
        record = msgspec.structs.replace(record, program=ProgramLine(
            request.notify_channel, request.program or "a program",
            request.program_text if request.program_text is not None else request.text))
    return CommitTurn(record, frames, turn.received_at,
                      notify=notification(request, ending.text), extras=extras)


def notification(request: Any, answer: str | None) -> AppendFrames | None:
    """An interface's message was answered: the answer goes to the person as a notification."""
    if not isinstance(request, UserMessage) or request.notify_channel is None or not answer:
        return None
    return AppendFrames(request.notify_channel,
                        (Notification(content=answer, topic=request.topic,
                                      source="interface", program=request.program),))


def history_channel(request: Any, channel: str) -> str:
    """The channel whose conversation a turn's context reads: for a program's message, the
    person's channel its answer goes to (where it and its answer are kept); else its own."""
    if isinstance(request, UserMessage) and request.notify_channel is not None:
        return request.notify_channel
    return channel


def person_active(d: SessionDeps, channel: str, *, running: bool) -> None:
    """The person is here: the DMN's idle timer starts again, and it thinks nothing while
    their turn on `channel` is `running` or shortly after (a DMN that is not running misses
    nothing: it reads the last turn from the store when it starts)."""
    ref = d.directory.get("dmn")
    if ref is not None:
        try:
            ref.tell(PersonActive(d.clock.time(), channel, running))
        except pykka.ActorDeadError:
            pass  # being restarted


def live_sender(directory: Directory,
                channel: str) -> Callable[[MessageDelta | Error | Done], None]:
    """How the turn's message_delta frames reach the channel's sockets: through the
    StoreWriter (in order with the logged frames), from the worker thread that streams."""

    def send(frame: MessageDelta | Error | Done) -> None:
        directory.tell("store_writer", PushLive(channel, encode_live(frame)))

    return send
