"""What the edge's handlers share: config, clock, auth, hub, metrics and the actor directory."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

from chalie.actors.supervisor import Directory
from chalie.background.backoff import Backoff
from chalie.background.governor import Governor
from chalie.clock import Clock
from chalie.config import Config, LlmConfig
from chalie.delivery.away import Away
from chalie.edge.auth import Authenticator, LoginThrottle
from chalie.edge.hub import SocketHub
from chalie.edge.ratelimit import RestRateLimit
from chalie.edge.subscriptions import Subscriptions
from chalie.edge.tokens import TokenBoard
from chalie.interfaces.board import InterfaceBoard
from chalie.interfaces.client import InterfaceClient
from chalie.llm.factory import Models
from chalie.memory.recall import Recall
from chalie.metrics import Metrics
from chalie.prompts import Prompts
from chalie.store.health import StoreHealth
from chalie.tools.catalog import ToolCatalog
from chalie.world.signals import SignalGate, WorldBoard


@dataclass
class EdgeContext:
    # The config in effect: Server.reload (SIGHUP) swaps it on the IOLoop, so a handler that
    # reads ctx.config gets the new values from the next request on. The rest is set once.
    config: Config
    clock: Clock
    auth: Authenticator
    throttle: LoginThrottle
    hub: SocketHub
    metrics: Metrics
    directory: Directory
    read: Callable[[], apsw.Connection]
    healthy: Callable[[], bool]
    recall: Recall | None = None
    gate: SignalGate | None = None  # signals' validation, type scoping, rate limit (IOLoop only)
    world: WorldBoard | None = None
    subscriptions: Subscriptions | None = None
    interfaces: InterfaceBoard | None = None
    interface_client: InterfaceClient | None = None
    tools: ToolCatalog | None = None
    prompts: Prompts | None = None
    governor: Governor | None = None  # the background paths' budgets (GET /api/spending)
    default_zone: str = "UTC"  # a cron schedule's zone when none is given
    models: Models | None = None  # each job's provider and its last state (GET /health)
    pair_throttle: LoginThrottle | None = None  # wrong pairing keys per address (IOLoop only)
    rest_limit: RestRateLimit | None = None  # server.rest_rate_per_min (IOLoop only)
    store: StoreHealth | None = None  # whether the store takes writes (GET /health)
    # The settings (chalie/settings.py): the config file and environment the config came
    # from, and how a changed config is applied while running (Server.reload).
    config_file: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    apply_config: Callable[[Config], tuple[list[str], list[str]]] | None = None
    # The doctor's model checks for an [llm] as it would be: (check lines as JSON, the models
    # the primary's server offers or None); blocking (POST /api/settings/test).
    embedder: Any = None  # the Embedder in use (GET /health says when it stands in)
    test_models: Callable[[LlmConfig], tuple[list[dict[str, str]], list[str] | None]] | None \
        = None
    backoff: Backoff | None = None  # background jobs waiting after failures (GET /health)
    tokens: TokenBoard | None = None  # scoped API tokens (IOLoop only)
    mcp: Any = None  # the MCP server at /mcp, started on its first request (edge/mcp_http.py)
    away: Away | None = None  # delivery away from the page: the senders, the VAPID key
