"""Wiring of the other programs for chalie/server.py: what paired interfaces, signals,
broadcast streams and MCP servers share (the tool catalog, the interface and world boards, the
signal gate, the subscriptions, one HTTP client and the health checks' pool), and WorldState,
InterfaceHealth and the MCP servers' supervisor as children of the root supervisor.

The MCP SDK is imported only when `[[mcp.servers]]` names a server: it takes half a second
and ~25 MiB to import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import apsw
import httpx
import pykka

from chalie import doctor_models, server_paths
from chalie.actors.interface_health import HealthDeps, InterfaceHealth
from chalie.actors.pool import WorkerPool
from chalie.actors.supervisor import ChildSpec, Directory, Link
from chalie.actors.world_state import WorldState
from chalie.clock import Clock
from chalie.config import Config
from chalie.edge.subscriptions import Subscriptions
from chalie.interfaces.board import InterfaceBoard
from chalie.interfaces.client import InterfaceClient
from chalie.metrics import Metrics
from chalie.tools.catalog import ToolCatalog
from chalie.tools.goal import GoalTool
from chalie.tools.memory import ForgetTool, MemoryTool
from chalie.tools.recall import RecallTool
from chalie.tools.schedule import ScheduleTool
from chalie.world.signals import SignalGate, WorldBoard, WorldSettings

HEALTH_WORKERS = 2  # interfaces' /health checks, each bounded by interfaces.health_timeout_s


@dataclass(frozen=True)
class OtherPrograms:
    """What paired interfaces, signals, broadcast streams and MCP servers share; the Server
    shuts `health_pool` down and closes `http` when it stops."""

    client: InterfaceClient
    catalog: ToolCatalog
    interfaces: InterfaceBoard
    world: WorldBoard
    gate: SignalGate
    subscriptions: Subscriptions
    health_pool: WorkerPool
    http: httpx.Client  # the one client `client` calls every interface with


def build(config: Config, *, clock: Clock, directory: Directory, metrics: Metrics,
          allowed: frozenset[tuple[str, str]] = frozenset()) -> OtherPrograms:
    """The shared parts, made anew for each start; `allowed`: the tools the person always
    allows (chalie/store/approval_rows.py)."""
    health_pool = WorkerPool(HEALTH_WORKERS, name="chalie-health")
    # One client for every call to an interface; each request sets its own timeouts.
    http = httpx.Client(follow_redirects=False, trust_env=False)
    signals = config.signals
    gate = SignalGate(clock, rate_per_min=signals.rate_per_min)
    subscriptions = Subscriptions(gate=gate, directory=directory, metrics=metrics,
                                  config=config.subscriptions, clock=clock)
    return OtherPrograms(
        client=InterfaceClient(
            http, health_timeout_s=config.interfaces.health_timeout_s,
            connect_timeout_s=config.interfaces.connect_timeout_s,
            execute_timeout_s=config.interfaces.execute_timeout_s,
            max_response_bytes=config.interfaces.max_response_bytes,
        ),
        catalog=ToolCatalog([MemoryTool(), RecallTool(), ForgetTool(),
                             ScheduleTool(server_paths.default_zone(config)), GoalTool()],
                            confirm=config.tools.confirm, block=config.tools.block,
                            allowed=allowed),
        interfaces=InterfaceBoard(),
        world=WorldBoard(WorldSettings(world_max=signals.world_max,
                                       half_life_s=signals.half_life_s,
                                       min_salience=signals.min_salience,
                                       top_k=signals.top_k), clock),
        gate=gate,
        subscriptions=subscriptions,
        health_pool=health_pool,
        http=http,
    )


def children(config: Config, p: OtherPrograms, *, read: Callable[[], apsw.Connection],
             clock: Clock, directory: Directory, metrics: Metrics,
             common: dict[str, Any]) -> tuple[ChildSpec, ...]:
    """WorldState (right after the writer: stopped in reverse, it is flushed while the
    writer still runs), InterfaceHealth and the MCP servers' supervisor."""
    health = HealthDeps(board=p.interfaces, catalog=p.catalog, client=p.client,
                        config=config.interfaces, read=read, clock=clock,
                        pool=p.health_pool, metrics=metrics)

    def start_world(link: Link) -> pykka.ActorRef[Any]:
        return WorldState.start(link, board=p.world, read=read, clock=clock,
                                directory=directory, metrics=metrics,
                                flush_s=config.signals.flush_s, wake=config.dmn.signal_wake)

    def start_health(link: Link) -> pykka.ActorRef[Any]:
        return InterfaceHealth.start(link, deps=health)

    specs = (ChildSpec("world", start_world), ChildSpec("interface_health", start_health))
    if not config.mcp.servers:
        return specs
    # The MCP SDK takes half a second and ~25 MiB to import: only when a server is set up.
    from chalie.actors.mcp import McpSupervisor  # noqa: PLC0415

    def start_mcp(link: Link) -> pykka.ActorRef[Any]:
        return McpSupervisor.start(link, servers=config.mcp, catalog=p.catalog, **common)

    return (*specs, ChildSpec("mcp", start_mcp))


def settings_hooks(server: Any) -> dict[str, Any]:
    """What the edge needs for /api/settings (chalie/edge/rest_settings.py): the layers the
    config came from, how a changed one is applied (Server.reload), how models are tested."""
    prompts = server.prompts
    return {"config_file": server.config_file, "env": server.env, "apply_config": server.reload,
            "test_models": lambda llm: doctor_models.live_checks(llm, prompts),
            "embedder": server.embedder}
