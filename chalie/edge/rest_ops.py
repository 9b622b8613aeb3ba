"""GET /health (no auth) and GET /metrics (Prometheus text format; with server.metrics_token
set, only for `Authorization: Bearer <metrics_token>`)."""

from __future__ import annotations

import hmac
from typing import Literal

import msgspec
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from chalie import __version__
from chalie.edge.api_spec import METRICS_AUTH, Operation, Raw
from chalie.edge.health_jobs import jobs_field
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


class JobWait(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A background job waiting after failing (chalie/background/backoff.py)."""

    job: str
    channel: str
    state: Literal["backing_off"]
    failures: int
    retry_at: float
    since: float
    error: str


class StoreState(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Whether the store takes writes, and why not (chalie/store/health.py, describe)."""

    state: Literal["ok", "full", "read_only", "damaged", "io_error"]
    error: str | None
    message: str | None
    since: float | None
    free_mb: float | None
    free_bytes: int | None
    min_free_mb: float
    space_low: bool
    held_messages: int


class EmbedderState(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The embedder in use, and whether it stands in for the one configured (memory.embedder:
    "minilm" falls back to "hashed" when its weights cannot be had; `reason` says why)."""

    kind: str
    space: str
    wanted: str
    fell_back: bool
    reason: str | None


class Health(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    status: Literal["ok", "failing"]
    name: str
    version: str
    jobs: list[JobWait]  # always there: [] when every background job works
    llm: dict[str, ModelState] | None = None  # by job; absent on a server with no models
    store: StoreState | None = None  # absent only on a server with no store (tests)
    embedder: EmbedderState | None = None


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

    api = {"get": Operation("Whether the server is up, the state of each job's model, the "
                            "store's and the background jobs waiting after failures",
                            {200: Health, 503: Health})}

    def get(self) -> None:
        healthy = self.ctx.healthy()
        llm = None
        if self.ctx.models is not None:
            llm = msgspec.convert(self.ctx.models.describe(), dict[str, ModelState])
        store = self.ctx.store
        described = None if store is None else msgspec.convert(store.describe(), StoreState)
        writable = described is None or described.state == "ok"
        if not healthy or not writable:
            self.set_status(503)
        jobs = msgspec.convert(jobs_field(self.ctx), list[JobWait])
        self.write_json(Health("ok" if healthy and writable else "failing", "chalie",
                               __version__, jobs, llm, described, self._embedder()))

    def _embedder(self) -> EmbedderState | None:
        embedder, wanted = self.ctx.embedder, self.ctx.config.memory.embedder
        if embedder is None:
            return None
        fell_back = embedder.kind != wanted
        return EmbedderState(embedder.kind, embedder.space, wanted, fell_back,
                             getattr(embedder, "origin", None) if fell_back else None)


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
