"""/api/interfaces: pairing other programs, and managing them (spec/interfaces.md section 7).

The person (cookie) makes a one-time pairing key; the program pairs with it: Chalie checks its
GET /health and GET /capabilities, then uses up the key and stores the interface in one
transaction, and answers its id and a bearer token shown this once (only its hash is kept).
A wrong, used or expired key is a 401 that changes nothing; an interface that fails its checks
is a 502 naming what failed, and the key stays good for another try. Only the cookie manages
interfaces: a bearer token never can.

The signal types an interface may emit: those its pair request lists in `signals` (an
extension of the contract; "*" is any), else those its /capabilities declare (re-read by a
refresh), else any type. The list shows them, and where they came from (`signals_from`).
"""

from __future__ import annotations

import re
import secrets
import uuid
from typing import Any

import msgspec
import structlog

from chalie.actors.interface_health import InterfaceChanged, InterfaceGone
from chalie.actors.store_writer_messages import (
    CreatePairingKey,
    DeleteInterface,
    PairInterface,
    UpdateCapabilities,
)
from chalie.edge.api_spec import COOKIE_AUTH, Operation, path_id
from chalie.edge.rest_auth import locked_out
from chalie.edge.rest_base import ApiError, AuthedHandler, JsonHandler, shown
from chalie.interfaces.board import (
    InterfaceState,
    SignalsFrom,
    provider_key,
    signal_scope,
    token_hash,
)
from chalie.interfaces.capabilities import encode_capabilities, signal_types
from chalie.interfaces.errors import InterfaceError
from chalie.store import interface_rows
from chalie.store.interface_rows import InterfaceRow

log = structlog.get_logger("chalie.interfaces")

MAX_NAME = 64
MAX_HOST = 253
_HOST_RE = re.compile(r"^[A-Za-z0-9.:_\[\]%-]+$")  # a hostname, IPv4 or IPv6 address


class PairBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    pairing_key: str
    name: str
    host: str
    port: int
    # The signal types it may emit ("*": any); None: those its /capabilities declare, else any.
    signals: list[str] | None = None


class PairingKey(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    pairing_key: str
    expires_at: float


class Paired(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The interface's id, and its bearer token: shown this once, only its hash is kept."""

    interface_id: str
    signal_token: str


class InterfaceTool(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    description: str
    parameters: dict[str, Any]  # a JSON schema of its arguments


class Interface(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A paired interface, its health, the signal types it may emit (["*"]: any) and where they
    were declared, and the names of the tools it lends."""

    id: str
    name: str
    host: str
    port: int
    version: str
    signals: list[str]
    signals_from: SignalsFrom
    online: bool
    failures: int
    last_check_at: float | None
    last_error: str | None
    changed_at: float | None
    paired_at: float
    refreshed_at: float
    tools: list[str]


class InterfaceDetail(Interface, frozen=True, forbid_unknown_fields=True):
    """As Interface, with each tool described as the model sees it."""

    tools: list[InterfaceTool]  # type: ignore[assignment]


class Interfaces(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    items: list[Interface]


class Unpaired(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    unpaired: str


_ID = (path_id("interface_id", "the interface's id"),)


class PairingKeyHandler(AuthedHandler):
    """POST /api/interfaces/pairing-key: a one-time key, good for interfaces.pairing_key_ttl_s."""

    api = {"post": Operation("A one-time pairing key, good for interfaces.pairing_key_ttl_s",
                             {200: PairingKey}, auth=(COOKIE_AUTH,))}

    async def post(self) -> None:
        self.query_params()
        key = secrets.token_urlsafe(24)
        now = self.ctx.clock.time()
        expires = now + self.ctx.config.interfaces.pairing_key_ttl_s
        await self.ask("store_writer", CreatePairingKey(token_hash(key), now, expires))
        self.write_json(PairingKey(key, expires))


class PairHandler(JsonHandler):
    """POST /api/interfaces/pair: authenticated by the pairing key in the body. An address that
    offers too many wrong keys is refused (429) for a while, right key or not."""

    api = {"post": Operation(
        "Pair a program with a pairing key: Chalie checks its /health and /capabilities",
        {201: Paired}, body=PairBody, errors=(401, 429, 502), example={
            "pairing_key": "the key from POST /api/interfaces/pairing-key", "name": "weather",
            "host": "127.0.0.1", "port": 8790, "signals": ["weather_update"]},
        description="Authenticated by the pairing key in the body. A wrong, used or expired key "
                    "is a 401; an interface that fails its checks a 502 naming what failed. "
                    "Without `signals` the interface may emit the signal types its "
                    "/capabilities declare ({\"tools\": [...], \"signals\": [...]}), or any "
                    "type when it declares none.")}

    async def post(self) -> None:
        body = self.decode_body(PairBody)
        remote = self.request.remote_ip or "unknown"
        throttle = self.ctx.pair_throttle
        if throttle is not None and locked_out(self, throttle, remote, "pairing"):
            return
        name, host, signals = _checked(body)
        key_hash = token_hash(body.pairing_key)
        now = self.ctx.clock.time()
        if not await self.off_loop(
                lambda: interface_rows.pairing_key_usable(self.ctx.read(), key_hash, now)):
            if throttle is not None:
                throttle.failed(remote)
            log.warning("pairing_refused", remote=remote)
            raise ApiError(401, "pairing_key: unknown, already used or expired; make a new "
                                "one with POST /api/interfaces/pairing-key")
        client = self._client()
        try:
            health = await self.off_loop(lambda: client.health(host, body.port))
            capabilities = await self.off_loop(lambda: client.capabilities(host, body.port))
        except InterfaceError as e:
            raise ApiError(502, f"the interface failed its checks: {e}") from None
        token = secrets.token_urlsafe(32)
        row = InterfaceRow(
            id=str(uuid.uuid4()), name=name, host=host, port=body.port, signals=signals,
            token_hash=token_hash(token), version=health.version,
            capabilities=encode_capabilities(capabilities.tools), paired_at=now,
            refreshed_at=now, capability_signals=capabilities.signals,
        )
        if not await self.ask("store_writer", PairInterface(key_hash, now, row)):
            raise ApiError(401, "pairing_key: already used or expired")
        try:
            await self.ask("interface_health", InterfaceChanged(row), what="interface health")
        except ApiError as e:  # stored: a restarted InterfaceHealth loads it; the token stands
            log.warning("interface_paired_unpublished", interface_id=row.id, error=e.message)
        log.info("interface_paired", interface_id=row.id, name=name,
                 capabilities=len(capabilities.tools), signals_from=signal_scope(row)[1])
        self.set_status(201)
        self.write_json(Paired(row.id, token))

    def _client(self) -> Any:
        client = self.ctx.interface_client
        if client is None:
            raise ApiError(503, "interfaces are not available on this server")
        return client


class _InterfaceBase(AuthedHandler):
    """What the interface endpoints share: the board, and an interface as they show it."""

    def _board(self) -> Any:
        board = self.ctx.interfaces
        if board is None:
            raise ApiError(503, "interfaces are not available on this server")
        return board

    def _item(self, state: InterfaceState) -> Interface:
        row = state.row
        signals, signals_from = signal_scope(row)
        return Interface(
            id=row.id, name=row.name, host=row.host, port=row.port, version=row.version,
            signals=list(signals), signals_from=signals_from, online=state.online,
            failures=state.failures, last_check_at=state.last_check_at,
            last_error=state.last_error, changed_at=state.changed_at, paired_at=row.paired_at,
            refreshed_at=row.refreshed_at,
            tools=list(self.ctx.tools.names_of(provider_key(row.id)))
            if self.ctx.tools is not None else [],
        )

    def _state(self, interface_id: str) -> InterfaceState:
        state: InterfaceState | None = self._board().get(interface_id)
        if state is None:
            raise ApiError(404, f"no paired interface {shown(interface_id)}")
        return state

    def _detail(self, state: InterfaceState) -> InterfaceDetail:
        item = self._item(state)
        registry = self.ctx.tools.current() if self.ctx.tools is not None else None
        tools = []
        for name in item.tools:
            tool = registry.get(name) if registry is not None else None
            if tool is not None:
                tools.append(InterfaceTool(name, tool.spec.description, tool.spec.parameters))
        fields = {f: getattr(item, f) for f in Interface.__struct_fields__ if f != "tools"}
        return InterfaceDetail(**fields, tools=tools)


class InterfacesHandler(_InterfaceBase):
    """GET /api/interfaces: every paired interface with its online state and tool names."""

    api = {"get": Operation("Every paired interface with its online state and tool names",
                            {200: Interfaces}, auth=(COOKIE_AUTH,))}

    async def get(self) -> None:
        self.query_params()
        self.write_json(Interfaces([self._item(s) for s in self._board().all()]))


class InterfaceHandler(_InterfaceBase):
    """GET /api/interfaces/<id> (detail with tools), DELETE (unpair at once)."""

    api = {
        "get": Operation("A paired interface, with its tools as the model sees them",
                         {200: InterfaceDetail}, auth=(COOKIE_AUTH,), path=_ID, errors=(404,)),
        "delete": Operation("Unpair an interface: its token is refused from the answer on",
                            {200: Unpaired}, auth=(COOKIE_AUTH,), path=_ID, errors=(404,)),
    }

    async def get(self, interface_id: str) -> None:
        self.query_params()
        self.write_json(self._detail(self._state(interface_id)))

    async def delete(self, interface_id: str) -> None:
        self.query_params()
        if not await self.ask("store_writer", DeleteInterface(interface_id)):
            raise ApiError(404, f"no paired interface {shown(interface_id)}")
        # Answered once readers no longer see it: its token is refused from here on.
        await self.ask("interface_health", InterfaceGone(interface_id), what="interface health")
        log.info("interface_unpaired", interface_id=interface_id)
        if self.ctx.gate is not None:
            self.ctx.gate.forget(interface_id)
        self.write_json(Unpaired(interface_id))


class RefreshHandler(_InterfaceBase):
    """POST /api/interfaces/<id>/refresh: fetch its capabilities again: its tools, and the
    signal types it declares there."""

    api = {"post": Operation(
        "Fetch an interface's capabilities again: its tools and declared signal types",
        {200: InterfaceDetail}, auth=(COOKIE_AUTH,), path=_ID, errors=(404, 502))}

    async def post(self, interface_id: str) -> None:
        self.query_params()
        state = self._state(interface_id)
        row = state.row
        client = self.ctx.interface_client
        if client is None:
            raise ApiError(503, "interfaces are not available on this server")
        try:
            health = await self.off_loop(lambda: client.health(row.host, row.port))
            capabilities = await self.off_loop(lambda: client.capabilities(row.host, row.port))
        except InterfaceError as e:
            raise ApiError(502, f"the interface failed its checks: {e}") from None
        now = self.ctx.clock.time()
        encoded = encode_capabilities(capabilities.tools)
        update = UpdateCapabilities(row.id, health.version, encoded, capabilities.signals, now)
        if not await self.ask("store_writer", update):
            raise ApiError(404, f"no paired interface {shown(interface_id)}")
        fresh = msgspec.structs.replace(row, version=health.version, capabilities=encoded,
                                        capability_signals=capabilities.signals,
                                        refreshed_at=now)
        await self.ask("interface_health", InterfaceChanged(fresh), what="interface health")
        self.write_json(self._detail(self._state(interface_id)))


def _checked(body: PairBody) -> tuple[str, str, tuple[str, ...] | None]:
    """The pairing body's name, host and declared signal types, or a 400 naming the field."""
    name = body.name.strip()
    if not 0 < len(name) <= MAX_NAME:
        raise ApiError(400, f"name: 1-{MAX_NAME} characters, not blank")
    host = body.host.strip()
    if not 0 < len(host) <= MAX_HOST or not _HOST_RE.match(host):
        raise ApiError(400, f"host: a hostname or IP address, got {shown(body.host)}")
    if not 1 <= body.port <= 65535:
        raise ApiError(400, f"port: must be from 1 to 65535, got {body.port}")
    if body.signals is None:
        return name, host.strip("[]"), None
    try:
        return name, host.strip("[]"), signal_types(body.signals, "signals")
    except InterfaceError as e:
        raise ApiError(400, str(e)) from None
