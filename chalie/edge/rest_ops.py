"""GET /health (no auth) and GET /metrics (Prometheus text format)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from chalie import __version__
from chalie.edge.rest_base import JsonHandler


class HealthHandler(JsonHandler):
    """The server's own state decides the status; each job's model is reported beside it
    (`llm`: provider, model, address and state: ok, unreachable, rate_limited, error or
    unknown) without failing the check: a server whose model is down still serves, and says
    so in every answer that needs the model."""

    def get(self) -> None:
        body: dict[str, Any] = {"status": "ok", "name": "chalie", "version": __version__}
        if self.ctx.models is not None:
            body["llm"] = self.ctx.models.describe()
        if not self.ctx.healthy():
            self.set_status(503)
            body["status"] = "failing"
        self.write_json(body)


class MetricsHandler(JsonHandler):
    def get(self) -> None:
        self.ctx.metrics.ws_connections.set(self.ctx.hub.count())
        self.set_header("Content-Type", CONTENT_TYPE_LATEST)
        self.write(generate_latest(self.ctx.metrics.registry))
