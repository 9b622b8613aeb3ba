"""What the edge's handlers share: config, clock, auth, hub, metrics and the actor directory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import apsw

from chalie.actors.supervisor import Directory
from chalie.clock import Clock
from chalie.config import Config
from chalie.edge.auth import Authenticator, LoginThrottle
from chalie.edge.hub import SocketHub
from chalie.memory.recall import Recall
from chalie.metrics import Metrics


@dataclass(frozen=True)
class EdgeContext:
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
