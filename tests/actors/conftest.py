"""The real actor tree in-process, wired like chalie/server.py, with fakes only at the seams:
a ManualClock that tells tests when a timer is scheduled, an Outbox that records the frames a
client would receive, an inline (or real) worker pool, and a scripted or blocking LLM."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw
import pykka
import pytest

from chalie import server_paths
from chalie.actors.encoder import Encoder, EncoderDeps
from chalie.actors.session import Session
from chalie.actors.session_deps import SessionDeps
from chalie.actors.session_messages import ActionRequest, Deliver, Steer, UserMessage
from chalie.actors.session_supervisor import SessionSupervisor
from chalie.actors.store_writer import StoreWriter
from chalie.actors.store_writer_messages import RepushExchange
from chalie.actors.supervisor import ChildSpec, Directory, Link, Supervisor
from chalie.actors.turn_messages import TurnDeadline
from chalie.actors.world_state import WorldState
from chalie.background.attention import Attention
from chalie.background.backoff import Backoff
from chalie.background.governor import Governor
from chalie.clock import ManualClock, Timer
from chalie.config import CONTEXT_SHARES, Config
from chalie.errors import LlmBadResponse
from chalie.llm.scripted import ScriptCall, ScriptedProvider, ScriptStep, ScriptUsage
from chalie.llm.types import ChatRequest, ChatResponse, LlmProvider, TextSink, Usage
from chalie.memory.context import ContextSettings
from chalie.memory.embedders import Embedder, HashedEmbedder
from chalie.memory.recall import Recall
from chalie.metrics import Metrics
from chalie.prompts import Prompts
from chalie.store import db, goal_rows, memory_writes, writes
from chalie.store.records import TurnRecord
from chalie.tools.base import Tool
from chalie.tools.catalog import ToolCatalog
from chalie.tools.memory import MemoryTool
from chalie.world.signals import WorldBoard

WAIT_S = 10.0  # upper bound for another thread's work; a passing test never waits this long
POLL_S = 0.005  # how often a wait looks again at what it waits for

Read = Callable[[], apsw.Connection]


class Waitable:
    """State shared with other threads, with waits that fail the test after WAIT_S."""

    def __init__(self) -> None:
        self._cond = threading.Condition()

    def _changed(self) -> None:
        self._cond.notify_all()

    def _wait(self, ready: Callable[[], bool], what: str, state: Callable[[], Any]) -> None:
        with self._cond:
            if not self._cond.wait_for(ready, WAIT_S):
                pytest.fail(f"gave up after {WAIT_S}s waiting for {what}; have {state()!r}")


class Recording(Waitable):
    """A thread-safe list of things that happened, in order."""

    def __init__(self) -> None:
        super().__init__()
        self._items: list[Any] = []

    def add(self, item: Any) -> None:
        with self._cond:
            self._items.append(item)
            self._changed()

    @property
    def items(self) -> list[Any]:
        with self._cond:
            return list(self._items)

    def wait_for(self, ready: Callable[[list[Any]], bool], what: str) -> list[Any]:
        self._wait(lambda: ready(self._items), what, lambda: self._items)
        return self.items


class RecorderActor(pykka.ThreadingActor):
    """Stands in for an actor a test only listens to: records every message it is told."""

    def __init__(self, recording: Recording) -> None:
        super().__init__()
        self._recording = recording

    def on_receive(self, message: Any) -> Any:
        self._recording.add(message)


class FakeOutbox(Waitable):
    """Records each channel's pushed frames, decoded, as a client on that channel would see them.

    `on_push(channel, frames)` runs on the pushing thread (the StoreWriter's) before the frames
    are recorded: a test can look at the store at the moment a frame goes out.
    """

    def __init__(self) -> None:
        super().__init__()
        self._frames: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._live: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
        self.on_push: Callable[[str, list[dict[str, Any]]], None] | None = None

    def push(self, channel: str, frames: Any, *, again: bool = False) -> None:
        decoded = [json.loads(f) for f in frames]
        if self.on_push is not None:
            self.on_push(channel, decoded)
        with self._cond:
            self._frames[channel].extend(decoded)
            self._changed()

    def live(self, channel: str, frame: str) -> None:
        """An ephemeral frame, kept apart with the number of durable frames before it."""
        with self._cond:
            self._live[channel].append((len(self._frames[channel]), json.loads(frame)))
            self._changed()

    def live_frames(self, channel: str = "main") -> list[tuple[int, dict[str, Any]]]:
        with self._cond:
            return list(self._live[channel])

    def frames(self, channel: str = "main") -> list[dict[str, Any]]:
        with self._cond:
            return list(self._frames[channel])

    def wait_for(
        self, ready: Callable[[list[dict[str, Any]]], bool], what: str, channel: str = "main"
    ) -> list[dict[str, Any]]:
        self._wait(lambda: ready(self._frames[channel]), what, lambda: self._frames[channel])
        return self.frames(channel)

    def wait_for_type(
        self, kind: str, count: int = 1, channel: str = "main"
    ) -> list[dict[str, Any]]:
        """All frames of `channel` once `count` frames of type `kind` have been pushed."""
        return self.wait_for(
            lambda fs: sum(f["type"] == kind for f in fs) >= count,
            f"{count} `{kind}` frame(s) on {channel!r}", channel,
        )


class WatchedClock(ManualClock, Waitable):
    """A ManualClock a test can wait on until another thread has scheduled a timer."""

    def __init__(self) -> None:
        ManualClock.__init__(self)
        Waitable.__init__(self)

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        timer = super().call_later(delay, callback)
        with self._cond:
            self._changed()
        return timer

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        timer = super().call_at(when, callback)
        with self._cond:
            self._changed()
        return timer

    def wait_for_timers(self, count: int = 1) -> None:
        self._wait(lambda: self.pending() >= count, f"{count} pending timer(s)", self.pending)


class InlineExecutor(Executor):
    """Runs each job at once on the submitting thread: deterministic turns, no worker threads."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as e:  # a Future carries any failure
            future.set_exception(e)
        return future


class BlockingProvider:
    """An LLM whose first answer waits until the test calls `release()`; later ones come at once."""

    def __init__(self, *texts: str) -> None:
        self.entered = threading.Event()
        self._release = threading.Event()
        self._texts = list(texts)
        self._lock = threading.Lock()
        self.requests: list[ChatRequest] = []

    def complete(self, request: ChatRequest, *, timeout_s: float,
                 on_text: TextSink | None = None) -> ChatResponse:
        with self._lock:
            first = not self.requests
            self.requests.append(request)
            text = self._texts.pop(0)
        if first:
            self.entered.set()
            self._release.wait(WAIT_S)
        return ChatResponse(text, (), Usage(10, 2, 12), "stop", 0.0)

    def wait_entered(self) -> None:
        if not self.entered.wait(WAIT_S):
            pytest.fail(f"the LLM was not called within {WAIT_S}s")

    def release(self) -> None:
        self._release.set()

    def close(self) -> None:
        self._release.set()


class Gate:
    """A point a worker thread stops at until the test opens it."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._entered = threading.Event()
        self._open = threading.Event()

    def pass_through(self) -> None:
        self._entered.set()
        self._open.wait(WAIT_S)

    def wait_entered(self) -> None:
        if not self._entered.wait(WAIT_S):
            pytest.fail(f"{self._what} was not reached within {WAIT_S}s")

    def open(self) -> None:
        self._open.set()


class GatedProvider:
    """A scripted LLM whose requests numbered in `hold` (0 is the first) stay out until the test
    calls `release(n)`, so it can act while that call is out. Request n gets step n whatever
    order held calls return in. Use it with the threaded pool."""

    def __init__(self, steps: list[ScriptStep], *, hold: tuple[int, ...] = (0,)) -> None:
        self._steps = steps
        self._gates = {n: Gate(f"LLM request {n}") for n in hold}
        self._lock = threading.Lock()
        self.requests: list[ChatRequest] = []  # in the order they were sent

    def complete(self, request: ChatRequest, *, timeout_s: float,
                 on_text: TextSink | None = None) -> ChatResponse:
        with self._lock:
            n = len(self.requests)
            self.requests.append(request)
        if n >= len(self._steps):
            raise LlmBadResponse(f"the script's {len(self._steps)} steps are used up")
        gate = self._gates.get(n)
        if gate is not None:
            gate.pass_through()
        return ScriptedProvider([self._steps[n]]).complete(request, timeout_s=timeout_s,
                                                            on_text=on_text)

    def wait_entered(self, n: int = 0) -> None:
        self._gates[n].wait_entered()

    def release(self, n: int = 0) -> None:
        self._gates[n].open()

    def close(self) -> None:
        for gate in self._gates.values():
            gate.open()


class GatedExecutor(ThreadPoolExecutor):
    """A real worker pool whose jobs numbered in `hold` (0 is the first submitted: a turn's first
    LLM call) wait for `release(n)` before they run, e.g. to keep a tool call running."""

    def __init__(self, *hold: int) -> None:
        super().__init__(4)
        self._gates = {n: Gate(f"worker job {n}") for n in hold}
        self._numbers = itertools.count()
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        with self._lock:
            gate = self._gates.get(next(self._numbers))
        if gate is None:
            return super().submit(fn, *args, **kwargs)

        def held() -> Any:
            gate.pass_through()
            return fn(*args, **kwargs)

        return super().submit(held)

    def wait_entered(self, n: int) -> None:
        self._gates[n].wait_entered()

    def release(self, n: int) -> None:
        self._gates[n].open()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        for gate in self._gates.values():
            gate.open()
        super().shutdown(wait, cancel_futures=cancel_futures)


def answer(text: str, prompt: int = 10, completion: int = 2) -> ScriptStep:
    """An LLM answer with no tool calls and the given usage."""
    return ScriptStep(text=text, usage=ScriptUsage(prompt, completion))


def calls(*tool_calls: ScriptCall, text: str = "", prompt: int = 20,
          completion: int = 5) -> ScriptStep:
    """An LLM answer asking for `tool_calls`."""
    return ScriptStep(text=text, tool_calls=tool_calls, usage=ScriptUsage(prompt, completion))


def shape(frames: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(f["type"], f["seq"]) for f in frames]


def prompt(request: ChatRequest) -> str:
    """The single user message of an LLM request: history, time, state, memory, world state,
    message, trail."""
    (message,) = request.messages
    return message.content


@dataclass
class Tree:
    """A running root Supervisor with the StoreWriter and the SessionSupervisor under it (and,
    with `paths`, the Dmn, the Scheduler and the goals' supervisor)."""

    config: Config
    clock: WatchedClock
    outbox: FakeOutbox
    metrics: Metrics
    directory: Directory
    root: pykka.ActorRef[Any]
    provider: LlmProvider
    governor: Governor | None = None
    attention: Attention | None = None
    backoff: Backoff | None = None

    def metric(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0

    def wait_until(self, ready: Callable[[], bool], what: str) -> None:
        """Wait (at most WAIT_S) for other threads to make `ready` true: their work, not the
        passing of time, which only the ManualClock moves."""
        deadline = time.monotonic() + WAIT_S
        while not ready():
            if time.monotonic() > deadline:
                pytest.fail(f"gave up after {WAIT_S}s waiting for {what}")
            time.sleep(POLL_S)

    def deliver(self, message: Any, channel: str = "main") -> None:
        assert self.directory.tell("sessions", Deliver(channel, message))

    def chat(
        self, text: str, channel: str = "main", *, client_id: str | None = None,
        age_s: float = 0.0,
    ) -> None:
        """Send a chat as the edge does, received `age_s` seconds ago."""
        received = self.clock.monotonic() - age_s
        self.deliver(UserMessage(text=text, received_at=received, client_id=client_id), channel)

    def steer(self, text: str, channel: str = "main") -> None:
        """Send an `act_steer` frame as the edge does."""
        self.deliver(Steer(text=text, received_at=self.clock.monotonic()), channel)

    def action(
        self, skill: str, params: dict[str, Any], channel: str = "main", *,
        client_id: str | None = None,
    ) -> None:
        """Send an `action` frame as the edge does."""
        self.deliver(ActionRequest(skill=skill, params=params,
                                   received_at=self.clock.monotonic(), client_id=client_id),
                     channel)

    def answer_approval(self, approval_id: Any, approve: Any, channel: str = "main") -> None:
        self.action("approval", {"approval_id": approval_id, "approve": approve}, channel)

    def settle(self, channel: str = "main") -> None:
        """Return once the channel's Session has handled everything delivered so far, the
        StoreWriter everything the Session sent it until then, and the Session what the
        StoreWriter answered it meanwhile (TurnStored, after which an idle Session arms its
        idle timer). Mailboxes are FIFO: each ask is a barrier, not a wait on time."""
        sessions = self.directory.get("sessions")
        assert sessions is not None
        session = sessions.proxy().child(f"session:{channel}").get(timeout=WAIT_S)
        assert session is not None, f"no session for {channel!r}"
        session.ask(TurnDeadline("settle"), timeout=WAIT_S)  # a stale deadline: dropped
        writer = self.directory.get("store_writer")
        assert writer is not None
        writer.ask(RepushExchange(channel, "settle"), timeout=WAIT_S)  # no such exchange: no-op
        session.ask(TurnDeadline("settle"), timeout=WAIT_S)

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        return query(Path(self.config.store.path), sql, *params)

    def restarts(self, actor: str) -> float:
        return restarts(self.metrics, actor)


def store_turns(tree: Tree, pairs: list[tuple[str, str]], *, at: float = 1_600_000_000.0,
                every_s: float = 1.0) -> None:
    """Store answered turns on "main" as the StoreWriter would, `every_s` apart from `at`."""
    store = tree.config.store
    conn = db.open_writer(store.path, busy_timeout_ms=store.busy_timeout_ms,
                          synchronous=store.synchronous)
    try:
        with db.immediate(conn):
            for n, (said, answered) in enumerate(pairs):
                writes.insert_turn(conn, TurnRecord(
                    id=f"seed-{n}", channel="main", client_id=None, source="text",
                    user_text=said, response_text=answered, outcome="answered", error=None,
                    iterations=0, llm_calls=1, tokens_total=0, response_time_s=1.0,
                    started_at=at + n * every_s, finished_at=at + n * every_s + 0.5,
                ))
    finally:
        conn.close()


def query(data_dir: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows from a fresh read-only connection: what is committed right now."""
    conn = db.connect(db.db_path(data_dir), busy_timeout_ms=5000, readonly=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def restarts(metrics: Metrics, actor: str) -> float:
    value = metrics.registry.get_sample_value("chalie_actor_restarts_total", {"actor": actor})
    return value or 0.0


@pytest.fixture
def clock() -> WatchedClock:
    return WatchedClock()


def _background(config: Config, deps: SessionDeps, common: dict[str, Any],
                pool: Executor) -> tuple[Governor, Attention, tuple[ChildSpec, ...]]:
    """The background paths as Server.start wires them: governor, Attention, children."""
    store = config.store
    conn = db.open_writer(store.path, busy_timeout_ms=store.busy_timeout_ms,
                          synchronous=store.synchronous)
    try:
        governor, attention = server_paths.policy(config, conn, deps.clock, deps.metrics)
    finally:
        conn.close()
    path_deps = server_paths.deps(deps, config, pool=pool, governor=governor,
                                  attention=attention)
    deps.metrics.watch_goals(lambda: goal_rows.counts(deps.read()))
    return governor, attention, server_paths.children(config, path_deps, common)


@pytest.fixture
def start_tree(make_config: Any, clock: WatchedClock) -> Iterator[Callable[..., Tree]]:
    """Start the actor tree the way Server.start does; stopped (and its pool shut) afterwards."""
    started: list[tuple[pykka.ActorRef[Any], Executor, LlmProvider]] = []

    def start(
        provider: LlmProvider,
        *,
        tools: list[Tool] | None = None,
        wrap_read: Callable[[Read], Read] | None = None,
        threaded: bool = False,
        act: dict[str, Any] | None = None,
        llm: dict[str, Any] | None = None,
        store: dict[str, Any] | None = None,
        confirm: tuple[str, ...] = (),
        block: tuple[str, ...] = (),
        pool: Executor | None = None,
        memory: dict[str, Any] | None = None,
        context: dict[str, Any] | None = None,
        embedder: Embedder | None = None,
        encoder: bool = False,
        background: Executor | None = None,
        prompts: Prompts | None = None,
        world: WorldBoard | None = None,
        signals: dict[str, Any] | None = None,
        paths: bool = False,
        dmn: dict[str, Any] | None = None,
        scheduler: dict[str, Any] | None = None,
        goals: dict[str, Any] | None = None,
        governor: dict[str, Any] | None = None,
        paths_pool: Executor | None = None,
        cognition: dict[str, Any] | None = None,
        session_idle_s: float = 0.0,
    ) -> Tree:
        """`confirm`/`block` are the registry's tools.confirm/tools.block; `pool` replaces the
        worker pool (`threaded` picks a real one of 4 threads, otherwise jobs run inline).
        `paths` starts the background paths (Dmn, Scheduler, goals) too, on `paths_pool`
        (inline unless given). `encoder` starts the Encoder too, on `background` (inline unless
        given); `world` starts
        WorldState publishing on that board, which prompts read. `cognition` gives the Session
        the [cognition] config with these overrides (without it: none, so no critic)."""
        config = make_config(
            act=act or {}, llm=llm or {}, store=store or {},
            memory={"index_delay_s": 0.0, **(memory or {})},  # embed at once unless told
            context=context or {},
            signals=signals or {},
            supervisor={"backoff_initial_s": 1.0, "backoff_max_s": 8.0},
            # Background paths: no quiet hours and UTC unless a test says otherwise; the DMN
            # only thinks (and asks the LLM) in the tests that turn it on.
            dmn={"enabled": False, "timezone": "UTC", "quiet_hours": "", **(dmn or {})},
            scheduler=scheduler or {},
            goals=goals or {},
            governor=governor or {},
            cognition=cognition or {},
        )
        store_config = config.store
        embedder = embedder or HashedEmbedder()
        conn = db.open_writer(
            store_config.path, busy_timeout_ms=store_config.busy_timeout_ms,
            synchronous=store_config.synchronous,
        )
        with db.immediate(conn):
            space_id = memory_writes.ensure_space(conn, embedder.space, clock.time())
        conn.close()
        readers = db.Readers(db.db_path(store_config.path),
                             busy_timeout_ms=store_config.busy_timeout_ms)
        if pool is None:
            pool = ThreadPoolExecutor(4) if threaded else InlineExecutor()
        outbox, metrics, directory = FakeOutbox(), Metrics(), Directory()
        catalog = ToolCatalog(tools if tools is not None else [MemoryTool()], confirm=confirm,
                              block=block)
        backoff = Backoff(clock, initial_s=config.governor.failure_backoff_s,
                          max_s=config.governor.failure_backoff_max_s, metrics=metrics)
        deps = SessionDeps(
            provider=provider,
            tools=catalog,
            prompts=prompts or Prompts.load(),
            act=config.act,
            llm=config.llm,
            store=config.store,
            read=wrap_read(readers.get) if wrap_read else readers.get,
            clock=clock,
            pool=pool,
            directory=directory,
            metrics=metrics,
            recall=Recall(embedder=embedder, space_id=space_id, config=config.memory,
                          clock=clock, metrics=metrics),
            context=ContextSettings(
                context_window=config.llm.context_window,
                reply_reserve=config.context.reply_reserve,
                shares={n: getattr(config.context, n) for n in CONTEXT_SHARES},
                history_turns=config.act.history_turns, recall_k=config.memory.recall_k,
            ),
            world=world,
            cognition=config.cognition if cognition is not None else None,
            idle_s=session_idle_s,  # 0: Sessions never stop when idle (no extra timers)
        )
        encoder_deps = EncoderDeps(
            provider=provider, prompts=deps.prompts, embedder=embedder, space_id=space_id,
            memory=config.memory, llm=config.llm, read=deps.read, clock=clock,
            pool=background or InlineExecutor(), directory=directory, metrics=metrics,
            backoff=backoff,
        )
        common: dict[str, Any] = {
            "config": config.supervisor, "clock": clock, "directory": directory,
            "metrics": metrics,
        }

        def start_writer(link: Link) -> pykka.ActorRef[Any]:
            return StoreWriter.start(link, config=store_config, outbox=outbox, clock=clock,
                                     directory=directory, metrics=metrics,
                                     allowed=catalog.set_allowed)

        def start_session(link: Link, channel: str) -> pykka.ActorRef[Any]:
            return Session.start(link, channel=channel, deps=deps)

        def start_sessions(link: Link) -> pykka.ActorRef[Any]:
            return SessionSupervisor.start(link, session_factory=start_session, **common)

        def start_encoder(link: Link) -> pykka.ActorRef[Any]:
            return Encoder.start(link, deps=encoder_deps)

        def start_world(link: Link) -> pykka.ActorRef[Any]:
            assert world is not None
            return WorldState.start(link, board=world, read=readers.get, clock=clock,
                                    directory=directory, metrics=metrics,
                                    flush_s=config.signals.flush_s,
                                    wake=config.dmn.signal_wake)

        children = [ChildSpec("store_writer", start_writer)]
        if world is not None:
            children.append(ChildSpec("world", start_world))
        children.append(ChildSpec("sessions", start_sessions))
        if encoder:
            children.append(ChildSpec("encoder", start_encoder))
        gov = att = None
        if paths:
            gov, att, more = _background(config, deps, common, paths_pool or InlineExecutor())
            children += more
        root = Supervisor.start(None, name="root", children=tuple(children), **common)
        started.append((root, pool, provider))
        # The root starts its children on its own thread; a call through its mailbox returns
        # once that is done, so the Directory knows both children before the test sends.
        root.proxy().child("sessions").get(timeout=WAIT_S)
        return Tree(config, clock, outbox, metrics, directory, root, provider, gov, att,
                    backoff)

    yield start
    for root, pool, provider in started:
        try:
            root.stop(block=True, timeout=WAIT_S)
        except pykka.ActorDeadError:
            pass
        provider.close()  # a BlockingProvider lets its worker go
        pool.shutdown(wait=True, cancel_futures=True)
