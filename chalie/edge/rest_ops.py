"""GET /health (no auth) and GET /metrics (Prometheus text format; with server.metrics_token
set, only for `Authorization: Bearer <metrics_token>`)."""

from __future__ import annotations

import hmac
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from chalie import __version__
from chalie.edge.health_jobs import jobs_field
from chalie.edge.rest_base import ApiError, JsonHandler


class HealthHandler(JsonHandler):
    """The server's own state and its store's decide the status; each job's model is reported
    beside it (`llm`: provider, model, address and state: ok, unreachable, rate_limited, error
    or unknown) without failing the check: a server whose model is down still serves, and says
    so in every answer that needs the model. `store` (chalie/store/health.py): `state` (ok,
    full, read_only, damaged, io_error), the `error` and a `message` in words a person can act
    on, `since`, the free space (`free_mb`, `min_free_mb`, `space_low`) and the messages kept
    until the store takes writes again (`held_messages`); 503 while it cannot take writes.
    `jobs` lists the background jobs that wait after failing (chalie/edge/health_jobs.py), an
    outage of none: the status stays as it is."""

    def get(self) -> None:
        body: dict[str, Any] = {"status": "ok", "name": "chalie", "version": __version__}
        if self.ctx.models is not None:
            body["llm"] = self.ctx.models.describe()
        body["jobs"] = jobs_field(self.ctx)
        store = self.ctx.store
        if store is not None:
            body["store"] = store.describe()
        if not self.ctx.healthy() or (store is not None and not store.writable):
            self.set_status(503)
            body["status"] = "failing"
        self.write_json(body)


class MetricsHandler(JsonHandler):
    def get(self) -> None:
        expected = self.ctx.config.server.metrics_token  # read each time: SIGHUP may change it
        if expected:
            sent = self.bearer_token() or ""
            if not sent:
                raise ApiError(401, "send Authorization: Bearer <server.metrics_token>")
            if not hmac.compare_digest(sent.encode(), expected.encode()):
                raise ApiError(401, "the bearer token is not server.metrics_token")
        self.ctx.metrics.ws_connections.set(self.ctx.hub.count())
        self.set_header("Content-Type", CONTENT_TYPE_LATEST)
        self.write(generate_latest(self.ctx.metrics.registry))
