"""GET /health (no auth) and GET /metrics (Prometheus text format; with server.metrics_token
set, only for `Authorization: Bearer <metrics_token>`)."""

from __future__ import annotations

import hmac
from typing import Literal

import msgspec
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from chalie import __version__
from chalie.edge.api_spec import METRICS_AUTH, Operation, Raw
from chalie.edge.rest_base import ApiError, JsonHandler


class ModelState(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """One job's model as /health reports it (chalie/llm/route.py, Job.describe), with its
    fallback's when one is configured."""

    provider: str
    model: str
    address: str
    state: Literal["unknown", "ok", "unreachable", "rate_limited", "error"]
    error: str | None
    at: float | None
    fallback: ModelState | None = None


class Health(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    status: Literal["ok", "failing"]
    name: str
    version: str
    llm: dict[str, ModelState] | None = None  # by job; absent on a server with no models


class HealthHandler(JsonHandler):
    """The server's own state decides the status; each job's model is reported beside it
    (`llm`: provider, model, address and state: ok, unreachable, rate_limited, error or
    unknown) without failing the check: a server whose model is down still serves, and says
    so in every answer that needs the model."""

    api = {"get": Operation("Whether the server is up, and the state of each job's model",
                            {200: Health, 503: Health})}

    def get(self) -> None:
        healthy = self.ctx.healthy()
        llm = None
        if self.ctx.models is not None:
            llm = msgspec.convert(self.ctx.models.describe(), dict[str, ModelState])
        if not healthy:
            self.set_status(503)
        self.write_json(Health("ok" if healthy else "failing", "chalie", __version__, llm))


class MetricsHandler(JsonHandler):
    api = {"get": Operation(
        "Prometheus metrics, in the Prometheus text format", {200: Raw(
            {"text/plain": {"type": "string"}}, "the metrics")},
        auth=(METRICS_AUTH,), auth_optional=True, errors=(401,),
        description="Open when server.metrics_token is empty; otherwise only for "
                    "`Authorization: Bearer <server.metrics_token>`.")}

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
