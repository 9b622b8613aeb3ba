"""Wiring: the store, the actor tree, the worker pool and the Tornado edge, started and stopped
as one. `chalie serve` runs one Server; tests start many, each with its own data and registry.

Parts are wired beside it: the background paths (the spending governor, Attention, the Dmn,
the Scheduler, the goals) in chalie/server_paths.py; the other programs (paired interfaces,
signals and world state, broadcast streams, MCP servers) in chalie/server_programs.py;
delivery away from the page (the senders, the Delivery actor, the Telegram bot) in
chalie/server_delivery.py; the edge's shared context in chalie/server_edge.py.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import pykka
import structlog
import tornado.httpserver
import tornado.netutil
from tornado.ioloop import IOLoop

from chalie import server_delivery, server_edge, server_paths, server_programs
from chalie.actors.encoder import Encoder, EncoderDeps
from chalie.actors.housekeeper import Housekeeper
from chalie.actors.pool import WorkerPool
from chalie.actors.session import Session
from chalie.actors.session_deps import SessionDeps
from chalie.actors.session_supervisor import SessionSupervisor
from chalie.actors.store_writer import StoreWriter
from chalie.actors.supervisor import ChildSpec, Directory, Link, Ping, Supervisor
from chalie.background.attention import Attention
from chalie.background.backoff import Backoff
from chalie.background.governor import Governor
from chalie.clock import Clock, SystemClock
from chalie.config import CONTEXT_SHARES, Config, parse_span
from chalie.delivery import vapid
from chalie.delivery.vapid import VapidKeys
from chalie.edge.api_access import ApiAccess
from chalie.edge.app import make_app
from chalie.edge.auth import Authenticator, ensure_password
from chalie.edge.context import EdgeContext
from chalie.edge.hub import SocketHub
from chalie.edge.rest_base import largest_body
from chalie.edge.subscriptions import Subscriptions
from chalie.llm.factory import build_models, single
from chalie.llm.types import LlmProvider
from chalie.memory.context import ContextSettings
from chalie.memory.embed_memo import Remembering
from chalie.memory.embedders import Embedder, build_embedder
from chalie.memory.recall import Recall
from chalie.metrics import Metrics
from chalie.prompts import Prompts
from chalie.reload import MODEL_KEYS, changes, merged
from chalie.store import approval_rows, db, goal_rows, interface_rows, memory_writes
from chalie.store import backup as backups
from chalie.store.event_log import close_interrupted_turns
from chalie.store.health import StoreHealth
from chalie.store.lock import DataLock
from chalie.tools.catalog import ToolCatalog

log = structlog.get_logger("chalie.server")

CLOSE_TIMEOUT_S = 5.0
BACKGROUND_WORKERS = 2  # encoding and embedding; never the threads user turns run on
PATH_WORKERS = 4  # the DMN's, scheduled prompts' and goals' LLM and tool calls


class Server:
    def __init__(
        self,
        config: Config,
        *,
        provider: LlmProvider | None = None,
        clock: Clock | None = None,
        metrics: Metrics | None = None,
        embedder: Embedder | None = None,
        config_file: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.config = config
        self.config_file, self.env = config_file, dict(env or {})  # the settings' layers
        self.clock = clock or SystemClock()
        self.metrics = metrics or Metrics()
        self.prompts = Prompts.load()
        self.models = (single(provider, config.llm, self.metrics) if provider is not None
                       else build_models(config.llm, self.prompts, self.metrics))
        self._check_models = provider is None  # a given provider is the caller's to check
        # "minilm" may build its ONNX file (seconds, once) or fetch its weights here. The
        # vectors of a turn's question are remembered for its message's turn in the index.
        self.embedder = embedder or Remembering(build_embedder(
            config.memory, config.llm, models_dir=Path(config.store.path) / "models"))
        self.directory = Directory()
        self.port = 0
        self.generated_password: str | None = None
        self.failed = threading.Event()
        self.failure: str | None = None
        self._root: pykka.ActorRef[Any] | None = None
        self._http: tornado.httpserver.HTTPServer | None = None
        self._pool: WorkerPool | None = None
        self._background: WorkerPool | None = None
        self._health_pool: WorkerPool | None = None
        self._paths_pool: WorkerPool | None = None
        self.governor: Governor | None = None
        self.attention: Attention | None = None
        governor = config.governor  # background jobs that keep failing wait (GET /health)
        self.backoff = Backoff(self.clock, initial_s=governor.failure_backoff_s,
                               max_s=governor.failure_backoff_max_s, metrics=self.metrics)
        self._http_out: httpx.Client | None = None
        self._subscriptions: Subscriptions | None = None
        self._on_failure: asyncio.Event | None = None
        self._hub: SocketHub | None = None
        self._api: ApiAccess | None = None
        self._edge: EdgeContext | None = None  # its config is swapped by reload()
        self._catalog: ToolCatalog | None = None
        self._lock = DataLock(Path(config.store.path))
        self._allowed: frozenset[tuple[str, str]] = frozenset()
        self.vapid: VapidKeys | None = None  # made (or read) when the store opens
        self._delivery: server_delivery.Parts | None = None
        self.store_health = StoreHealth(config.store.path, min_free_mb=config.store.min_free_mb,
                                        hold_limit=config.store.hold_messages)

    @property
    def db_path(self) -> Path:
        return db.db_path(self.config.store.path)

    def _open_store(self) -> int:
        """Ready the store (password, interrupted turns, the embedding space, what the last
        day spent); the embedding space's id."""
        store = self.config.store
        conn = db.open_writer(
            store.path, busy_timeout_ms=store.busy_timeout_ms, synchronous=store.synchronous
        )
        try:
            self.generated_password = ensure_password(conn, self.config.auth.password, self.clock)
            close_interrupted_turns(conn, self.clock.time())
            with db.immediate(conn):
                space_id = memory_writes.ensure_space(conn, self.embedder.space, self.clock.time())
            self.governor, self.attention = server_paths.policy(
                self.config, conn, self.clock, self.metrics,
                store_writable=lambda: self.store_health.writable)
            self._allowed = approval_rows.allowed(conn)  # the tools the person always allows
            self.vapid = vapid.ensure(conn, Path(store.path), self.clock.time())
        finally:
            conn.close()
        return space_id

    async def start(self) -> int:
        """Lock the data directory, open the store, start the actors, listen; returns the port.
        Call on the IOLoop. Raises StoreError while another server holds the data directory."""
        self._lock.acquire()
        try:
            return await self._start()
        except BaseException:
            self._lock.release()
            raise

    async def _start(self) -> int:
        store = self.config.store
        space_id = self._open_store()
        log.info("memory", embedder=self.embedder.kind, space=self.embedder.space,
                 space_id=space_id)
        loop = IOLoop.current()
        asyncio_loop = asyncio.get_running_loop()
        self._on_failure = asyncio.Event()
        readers = db.Readers(self.db_path, busy_timeout_ms=store.busy_timeout_ms)
        self._hub = hub = SocketHub(loop)
        authenticator = Authenticator(configured=self.config.auth.password, read=readers.get,
                                      clock=self.clock)
        hub.start_keepalive(self.config.server.ping_interval_s, self.config.server.ping_misses,
                            live=authenticator.live_sessions)
        self._pool = WorkerPool(self.config.act.workers)
        self._background = WorkerPool(BACKGROUND_WORKERS, name="chalie-background")
        self._paths_pool = WorkerPool(PATH_WORKERS, name="chalie-paths")
        delivery = self._delivery = server_delivery.wire(self, readers.get, hub)
        programs = server_programs.build(self.config, clock=self.clock,
                                         directory=self.directory, metrics=self.metrics,
                                         allowed=self._allowed)
        self._health_pool, self._http_out, self._subscriptions, self._catalog = (
            programs.health_pool, programs.http, programs.subscriptions, programs.catalog)
        self.metrics.watch_goals(lambda: goal_rows.counts(readers.get()))
        self.metrics.watch_store(self.store_health.describe)
        memory = self.config.memory
        recall = Recall(embedder=self.embedder, space_id=space_id, config=memory,
                        clock=self.clock, metrics=self.metrics)
        self._background.submit(recall.warm, readers.transient)  # the bit index, before a turn
        primary = self.config.llm.job("primary")
        assert primary is not None
        deps = SessionDeps(
            provider=self.models.primary,
            light=self.models.light,
            tools=programs.catalog,
            prompts=self.prompts,
            act=self.config.act,
            llm=primary,
            store=self.config.store,
            read=readers.get,
            read_once=readers.transient,
            clock=self.clock,
            pool=self._pool,
            directory=self.directory,
            metrics=self.metrics,
            recall=recall,
            context=ContextSettings(
                context_window=primary.context_window,
                reply_reserve=self.config.context.reply_reserve,
                shares={n: getattr(self.config.context, n) for n in CONTEXT_SHARES},
                history_turns=self.config.act.history_turns,
                recall_k=memory.recall_k,
            ),
            world=programs.world,
            governor=self.governor,
            cognition=self.config.cognition,
            timezone=self.config.dmn.timezone,
            idle_s=self.config.server.session_idle_s,
            store_health=self.store_health,
        )
        encoder_deps = EncoderDeps(
            provider=self.models.light, prompts=self.prompts, embedder=self.embedder,
            space_id=space_id, memory=memory, llm=self.config.llm.job("light") or primary,
            read=readers.get,
            clock=self.clock, pool=self._background, directory=self.directory,
            metrics=self.metrics, governor=self.governor, backoff=self.backoff,
        )
        paths = server_paths.deps(deps, self.config, pool=self._paths_pool,
                                  governor=self.governor, attention=self.attention)
        common: dict[str, Any] = {
            "config": self.config.supervisor,
            "clock": self.clock,
            "directory": self.directory,
            "metrics": self.metrics,
        }

        def give_up(reason: str) -> None:
            self.failure = reason
            self.failed.set()
            asyncio_loop.call_soon_threadsafe(self._on_failure.set)  # type: ignore[union-attr]

        def start_writer(link: Link) -> pykka.ActorRef[Any]:
            return StoreWriter.start(
                link, config=store, outbox=hub, clock=self.clock, directory=self.directory,
                metrics=self.metrics, snapshots_kept=memory.snapshots_kept,
                notify_channel=self.config.dmn.channel, health=self.store_health,
                allowed=programs.catalog.set_allowed,
            )

        def start_session(link: Link, channel: str) -> pykka.ActorRef[Any]:
            return Session.start(link, channel=channel, deps=deps)

        def start_sessions(link: Link) -> pykka.ActorRef[Any]:
            return SessionSupervisor.start(link, session_factory=start_session, **common)

        def start_encoder(link: Link) -> pykka.ActorRef[Any]:
            return Encoder.start(link, deps=encoder_deps)

        def start_housekeeper(link: Link) -> pykka.ActorRef[Any]:
            # Settings read at each run: a reloaded [store] applies from the next one.
            return Housekeeper.start(link, settings=lambda: self.config.store, clock=self.clock,
                                     directory=self.directory, metrics=self.metrics)

        self._root = Supervisor.start(
            None,
            name="root",
            children=(
                # Stopped in reverse: world state is flushed while the writer still runs.
                ChildSpec("store_writer", start_writer),
                ChildSpec("housekeeper", start_housekeeper),
                delivery.child,
                *server_programs.children(self.config, programs, read=readers.get,
                                          clock=self.clock, directory=self.directory,
                                          metrics=self.metrics, common=common),
                ChildSpec("sessions", start_sessions),
                ChildSpec("encoder", start_encoder),
                *server_paths.children(self.config, paths, common),
            ),
            on_give_up=give_up,
            **common,
        )
        root = self._root
        # Answered after the root's on_start, so both children are in the Directory.
        await asyncio.get_running_loop().run_in_executor(None, lambda: root.ask(Ping(), timeout=30))
        self._api = ApiAccess(read=readers.get, directory=self.directory)
        self._edge = server_edge.context(self, auth=authenticator, hub=hub, read=readers.get,
                                         recall=recall, programs=programs, away=delivery.away,
                                         tokens=self._api.tokens)
        app = make_app(self._edge)
        sockets = tornado.netutil.bind_sockets(
            self.config.server.port, self.config.server.host, family=socket.AF_INET
        )
        # Tornado cuts off (400, connection closed) any body larger than every endpoint takes;
        # each endpoint refuses its own limit with a 413 (rest_base.JsonHandler.prepare).
        self._http = tornado.httpserver.HTTPServer(app,
                                                   xheaders=self.config.server.trust_proxy_headers,
                                                   max_body_size=largest_body(self.config))
        self._http.add_sockets(sockets)
        self.port = sockets[0].getsockname()[1]
        await self._reach_out(readers.get, programs, delivery)
        return self.port

    async def _reach_out(self, read: Any, programs: server_programs.OtherPrograms,
                         delivery: server_delivery.Parts) -> None:
        """Once listening: the broadcast streams, the Telegram bot, the models' check."""
        rows = await asyncio.get_running_loop().run_in_executor(
            None, lambda: interface_rows.subscriptions(read()))
        programs.subscriptions.start(rows)
        assert self._edge is not None
        await delivery.start_bridge(self._edge)
        if self._check_models:
            self.models.check()

    def reload(self, new: Config) -> tuple[list[str], list[str]]:
        """Take what `new` changes that can change while running (chalie/reload.py); returns
        (keys applied, keys that need a restart). `self.config` becomes the config in effect.
        Call on the IOLoop, where the edge's handlers read it."""
        applied, restart = changes(self.config, new)
        effective = merged(self.config, new, applied)
        if self._check_models and MODEL_KEYS.intersection(applied):  # first: it may refuse
            self.models.rebuild(effective.llm, self.prompts, self.metrics, close_after_s=(
                effective.act.timeout_s + effective.llm.request_timeout_s))
        self.config = effective
        if self._edge is not None:
            self._edge.config = self.config
        if self._http is not None:  # from the next request on
            self._http.conn_params.max_body_size = largest_body(self.config)
        if self.governor is not None:
            self.governor.set_budgets(self.config.governor.budgets())
        if self.attention is not None:
            self.attention.retune(parse_span(self.config.dmn.quiet_hours),
                                  daily_cap=self.config.dmn.daily_cap)
        if self._catalog is not None:
            self._catalog.set_rules(confirm=self.config.tools.confirm,
                                    block=self.config.tools.block)
        if self._delivery is not None:
            self._delivery.reloaded(self.config, applied, self._edge)
        return applied, restart

    async def wait_failed(self) -> str:
        assert self._on_failure is not None
        await self._on_failure.wait()
        return self.failure or "unknown failure"

    async def stop(self) -> None:
        if self._delivery is not None:  # no new turns from Telegram
            await self._delivery.stop_bridge()
        if self._hub is not None:
            self._hub.stop_keepalive()
            self._hub.close_all("server shutting down")
        if self._http is not None:
            self._http.stop()
            try:
                await asyncio.wait_for(self._http.close_all_connections(), CLOSE_TIMEOUT_S)
            except TimeoutError:
                log.warning("connections_not_closed", timeout_s=CLOSE_TIMEOUT_S)
            self._http = None
        if self._api is not None:
            await self._api.stop(self._edge)
        if self._subscriptions is not None:  # before the actors: its last signals reach them
            await self._subscriptions.stop()
            self._subscriptions = None
        await server_paths.let_turns_finish(self.config.server.shutdown_grace_s, self.clock,
                                            self.metrics)
        root = self._root
        if root is not None:
            self._root = None
            await asyncio.get_running_loop().run_in_executor(None, _stop_actor, root)
        sends = self._delivery.pool if self._delivery is not None else None
        for pool in (self._pool, self._background, self._health_pool, self._paths_pool, sends):
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        self._pool = self._background = self._health_pool = self._paths_pool = None
        self._delivery = None
        if self._http_out is not None:
            self._http_out.close()
            self._http_out = None
        self.models.close()
        self.embedder.close()
        if root is not None and self.store_health.fault is None:
            # Nothing writes the store any more: the next start need not read it all again.
            marked = backups.mark_sound(self.db_path)
            log.info("store_marked_sound" if marked else "store_not_marked_sound")
        self._lock.release()
        log.info("stopped")


def _stop_actor(ref: pykka.ActorRef[Any]) -> None:
    try:
        ref.stop(block=True, timeout=30)
    except (pykka.ActorDeadError, pykka.Timeout):
        pass
