"""Wiring of the edge's context (chalie/edge/context.py): what every handler shares, made from
the parts chalie/server.py started."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import apsw

from chalie import server_paths, server_programs
from chalie.delivery.away import Away
from chalie.edge.auth import Authenticator, LoginThrottle
from chalie.edge.context import EdgeContext
from chalie.edge.hub import SocketHub
from chalie.edge.ratelimit import RestRateLimit
from chalie.edge.tokens import TokenBoard
from chalie.memory.recall import Recall


def context(server: Any, *, auth: Authenticator, hub: SocketHub,
            read: Callable[[], apsw.Connection], recall: Recall,
            programs: server_programs.OtherPrograms, away: Away, tokens: TokenBoard) -> EdgeContext:
    config, clock = server.config, server.clock
    return EdgeContext(
        config=config,
        clock=clock,
        auth=auth,
        throttle=LoginThrottle(clock, max_failures=config.auth.max_failures,
                               window_s=config.auth.lockout_s),
        rest_limit=RestRateLimit(clock),
        pair_throttle=LoginThrottle(clock, max_failures=config.interfaces.pair_max_failures,
                                    window_s=config.interfaces.pair_lockout_s),
        hub=hub,
        metrics=server.metrics,
        directory=server.directory,
        read=read,
        healthy=lambda: not server.failed.is_set(),
        recall=recall,
        gate=programs.gate,
        subscriptions=programs.subscriptions,
        world=programs.world,
        interfaces=programs.interfaces,
        interface_client=programs.client,
        tools=programs.catalog,
        prompts=server.prompts,
        governor=server.governor,
        default_zone=server_paths.default_zone(config),
        models=server.models,
        store=server.store_health,
        **server_programs.settings_hooks(server),
        backoff=server.backoff,
        tokens=tokens,
        away=away,
    )
