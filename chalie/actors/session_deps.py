"""What a Session needs from outside, in one frozen record: the server builds it once and every
channel's Session shares it (chalie/actors/session.py, and the rooms beside it: the context it
gathers, its cognition, its backstop)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from contextlib import AbstractContextManager
from dataclasses import dataclass

import apsw

from chalie.actors.supervisor import Directory
from chalie.background.governor import Governor
from chalie.clock import Clock
from chalie.config import ActConfig, CognitionConfig, LlmConfig, StoreConfig
from chalie.llm.types import LlmProvider
from chalie.memory.context import ContextSettings
from chalie.memory.recall import Recall
from chalie.metrics import Metrics
from chalie.prompts import Prompts
from chalie.store.health import StoreHealth
from chalie.tools.base import ToolSource
from chalie.world.signals import WorldBoard


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
    # Whether the store takes writes; messages are kept while it does not (session_held.py).
    store_health: StoreHealth | None = None

