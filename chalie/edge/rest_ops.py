"""GET /health (open to anyone, answering each asker what is theirs to know) and GET /metrics
(Prometheus text format; with server.metrics_token set, only for
`Authorization: Bearer <metrics_token>`)."""

from __future__ import annotations

import hmac
from typing import Literal

import apsw
import msgspec
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from chalie import __version__
from chalie.edge.api_spec import (
    API_TOKEN_AUTH,
    COOKIE_AUTH,
    INTERFACE_AUTH,
    METRICS_AUTH,
    Operation,
    Raw,
)
from chalie.edge.auth import COOKIE
from chalie.edge.health_jobs import jobs_field
from chalie.edge.rest_base import ApiError, JsonHandler
from chalie.errors import StoreError
from chalie.interfaces.board import InterfaceState

Viewer = Literal["person", "stranger"] | InterfaceState  # who asks /health (HealthHandler)


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


class InterfaceHealth(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The asking interface's own health as Chalie sees it (GET /api/interfaces shows the same
    for each interface): whether Chalie's checks of its /health reach it (`online`), how many
    failed in a row, when it was last checked, the last check's error, and when it last went
    offline or came back (`changed_at`)."""

    id: str
    name: str
    online: bool
    failures: int
    last_check_at: float | None
    last_error: str | None
    changed_at: float | None


class Health(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """GET /health's answer. Anyone gets `status` and `version`; the person (login cookie or
    an API token) gets everything else but `interface`; a paired interface (its bearer token)
    gets `interface`, its own state, and nothing else."""

    status: Literal["ok", "failing"]
    version: str
    name: str | None = None  # "chalie"
    jobs: list[JobWait] | None = None  # the person's: [] when every background job works
    llm: dict[str, ModelState] | None = None  # by job; absent on a server with no models
    store: StoreState | None = None  # absent only on a server with no store (tests)
    embedder: EmbedderState | None = None
    interface: InterfaceHealth | None = None  # an interface's own, for that interface only


class HealthHandler(JsonHandler):
    """The server's own state and its store's decide the status, for anyone: 503 while either
    fails, so a monitor needs no credential. What else is said depends on who asks.

    The person (their login cookie, or one of their API tokens): each job's model (`llm`:
    provider, model, address and state: ok, unreachable, rate_limited, error or unknown),
    reported without failing the check: a server whose model is down still serves, and says so
    in every answer that needs the model. `store` (chalie/store/health.py): `state` (ok, full,
    read_only, damaged, io_error), the `error` and a `message` in words a person can act on,
    `since`, the free space (`free_mb`, `min_free_mb`, `space_low`) and the messages kept until
    the store takes writes again (`held_messages`). `jobs` lists the background jobs that wait
    after failing (chalie/edge/health_jobs.py), an outage of none: the status stays as it is.
    A paired interface (its bearer token): its own state (`interface`), as Chalie's health
    checks of it see it. Anyone else, a wrong or revoked token too (never a 401): `status` and
    `version` only, nothing of the server's models, files, data or errors."""

    api = {"get": Operation(
        "Whether the server is up; to the person, the state of each job's model, the store's "
        "and the background jobs waiting after failures", {200: Health, 503: Health},
        auth=(COOKIE_AUTH, API_TOKEN_AUTH, INTERFACE_AUTH), auth_optional=True,
        description="Open to anyone, 503 while the server or its store is failing. Without a "
                    "credential (or with a wrong one) the answer is only `status` and "
                    "`version`. With the login cookie or an API token (any scope): `name`, "
                    "`jobs`, `llm`, `store` and `embedder` too. With a paired interface's "
                    "bearer token: `status`, `version` and `interface`, that interface's own "
                    "state as Chalie's checks see it.")}

    async def get(self) -> None:
        healthy = self.ctx.healthy()
        store = self.ctx.store
        described = None if store is None else msgspec.convert(store.describe(), StoreState)
        writable = described is None or described.state == "ok"
        if not healthy or not writable:
            self.set_status(503)
        status: Literal["ok", "failing"] = "ok" if healthy and writable else "failing"
        viewer = await self._viewer()
        if viewer == "person":
            self.write_json(self._everything(status, described))
        elif isinstance(viewer, InterfaceState):
            self.write_json(Health(status, __version__, interface=_own(viewer)))
        else:
            self.write_json(Health(status, __version__))

    async def _viewer(self) -> Viewer:
        """Who asks: the person (login cookie, or an API token), a paired interface (its
        bearer token), or a stranger: anyone else, whatever they sent."""
        token = self.bearer_token()
        if token is not None:
            tokens, interfaces = self.ctx.tokens, self.ctx.interfaces
            if tokens is not None and tokens.by_token(token) is not None:
                return "person"
            state = interfaces.by_token(token) if interfaces is not None else None
            if state is not None:
                return state
        cookie = self.get_cookie(COOKIE)
        if cookie and await self._session_ok(cookie):
            return "person"
        return "stranger"

    async def _session_ok(self, cookie: str) -> bool:
        """Whether the cookie is a live login; False while the store cannot be read to say
        (/health answers all the same, as to a stranger)."""
        try:
            ok: bool = await self.off_loop(lambda: self.ctx.auth.session_ok(cookie))
        except (apsw.Error, StoreError):
            return False
        return ok

    def _everything(self, status: Literal["ok", "failing"],
                    store: StoreState | None) -> Health:
        llm = None
        if self.ctx.models is not None:
            llm = msgspec.convert(self.ctx.models.describe(), dict[str, ModelState])
        jobs = msgspec.convert(jobs_field(self.ctx), list[JobWait])
        return Health(status, __version__, name="chalie", jobs=jobs, llm=llm, store=store,
                      embedder=self._embedder())

    def _embedder(self) -> EmbedderState | None:
        embedder, wanted = self.ctx.embedder, self.ctx.config.memory.embedder
        if embedder is None:
            return None
        fell_back = embedder.kind != wanted
        return EmbedderState(embedder.kind, embedder.space, wanted, fell_back,
                             getattr(embedder, "origin", None) if fell_back else None)


def _own(state: InterfaceState) -> InterfaceHealth:
    return InterfaceHealth(state.row.id, state.row.name, state.online, state.failures,
                           state.last_check_at, state.last_error, state.changed_at)


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
