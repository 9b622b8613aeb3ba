"""GET /health (no auth) and GET /metrics (Prometheus text format)."""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from chalie import __version__
from chalie.edge.rest_base import JsonHandler


class HealthHandler(JsonHandler):
    def get(self) -> None:
        if not self.ctx.healthy():
            self.set_status(503)
            self.write_json({"status": "failing", "name": "chalie", "version": __version__})
            return
        self.write_json({"status": "ok", "name": "chalie", "version": __version__})


class MetricsHandler(JsonHandler):
    def get(self) -> None:
        self.ctx.metrics.ws_connections.set(self.ctx.hub.count())
        self.set_header("Content-Type", CONTENT_TYPE_LATEST)
        self.write(generate_latest(self.ctx.metrics.registry))
