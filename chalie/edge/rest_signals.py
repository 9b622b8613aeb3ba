"""/api/signals and /api/signals/batch: other programs report world state (spec section 3).

A paired interface sends its bearer token and may emit only the signal types it declared: in
its pair request, else in its GET /capabilities, else any (see board.signal_scope); the
logged-in person's cookie counts as the interface "__chat_ui__", which may emit any. Each signal
is checked, type-scoped and rate-limited on its own (SignalGate), and the accepted ones go to
the WorldState actor. No LLM is called, whatever the volume.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import msgspec

from chalie.actors.world_state import SignalsIn
from chalie.edge.api_spec import COOKIE_AUTH, INTERFACE_AUTH, Operation, limit_param
from chalie.edge.auth import COOKIE
from chalie.edge.rest_base import ApiError, JsonHandler
from chalie.interfaces.board import SignalsFrom, signal_scope
from chalie.values.signals import Signal
from chalie.world.signals import (
    BATCH_MAX,
    CHAT_UI,
    Rejection,
    SignalGate,
    SignalIn,
    allowed_types,
    decode_batch,
    parse,
)

RETRY_AFTER_S = 1  # what a rate-limited sender is told to wait
EXAMPLE = {"signal_type": "weather_update", "content": "Heavy rain expected this evening",
           "source": "weather-service", "topic": "weather", "activation_energy": 0.6}
SENDERS = (INTERFACE_AUTH, COOKIE_AUTH)
# Where an interface's signal types were declared, as a 403 says it.
DECLARED_IN: dict[SignalsFrom, str] = {"pairing": "at pairing",
                                       "capabilities": "in its /capabilities", "any": "anywhere"}


class SalientSignal(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A signal in world state, with its salience now and its age."""

    id: str
    sender: str
    signal_type: str
    content: str
    source: str
    topic: str | None
    activation_energy: float
    salience: float
    age_s: float
    received_at: float


class WorldNow(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    items: list[SalientSignal]


class SignalAccepted(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    signal_id: str
    ok: Literal[True] = True


class BatchError(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    index: int  # of the signal in the batch
    error: str
    status: int  # what the signal would have got alone


class BatchResult(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    accepted: int
    rejected: int
    errors: list[BatchError]


@dataclass(frozen=True)
class Sender:
    """Who sends: the interface's id (or the chat UI), the signal types it may emit (None: any)
    and where they were declared."""

    id: str
    allowed: frozenset[str] | None
    declared_in: str = DECLARED_IN["any"]

    def admit(self, gate: SignalGate, parsed: SignalIn | Rejection) -> Signal | Rejection:
        return gate.admit(self.id, self.allowed, parsed, declared_in=self.declared_in)


class _SignalHandler(JsonHandler):
    async def sender(self) -> Sender:
        """The interface of the bearer token, or the chat UI of the cookie; or a 401."""
        token = self.bearer_token()
        if token is not None:
            board = self.ctx.interfaces
            state = board.by_token(token) if board is not None else None
            if state is None:
                raise ApiError(401, "bearer token unknown or revoked; pair again")
            types, declared_from = signal_scope(state.row)
            return Sender(state.row.id, allowed_types(types), DECLARED_IN[declared_from])
        cookie = self.get_cookie(COOKIE)
        if cookie:
            logged_in: bool = await self.off_loop(lambda: self.ctx.auth.session_ok(cookie))
            if logged_in:
                return Sender(CHAT_UI, None)
        raise ApiError(401, "send the interface's bearer token (Authorization: Bearer ...) or "
                            "log in")

    def gate(self) -> SignalGate:
        if self.ctx.gate is None:
            raise ApiError(503, "signals are not available on this server")
        return self.ctx.gate

    def count(self, result: Signal | Rejection, n: int = 1) -> None:
        reason = "accepted" if isinstance(result, Signal) else result.reason
        self.ctx.metrics.signals.labels(result=reason, via="rest").inc(n)

    def to_world(self, signals: tuple[Signal, ...]) -> None:
        if signals and not self.ctx.directory.tell("world", SignalsIn(signals)):
            raise ApiError(503, "world state is restarting; try again shortly")


class SignalHandler(_SignalHandler):
    """POST /api/signals: one signal; 202 {"ok": true, "signal_id"}. GET (cookie): world state
    now, most salient first, each signal with its current salience and age."""

    api = {
        "get": Operation("World state now, most salient first", {200: WorldNow},
                         auth=(COOKIE_AUTH,), query=(limit_param(100, 1000),)),
        "post": Operation(
            "Report one signal: it goes to world state (no LLM is called)",
            {202: SignalAccepted}, auth=SENDERS, body=SignalIn, errors=(403, 429),
            example=EXAMPLE,
            description="An interface may emit only the signal types it declared, in its pair "
                        "request or else in its /capabilities (403 for another; any type when "
                        "it declared none); each sender is rate-limited (429)."),
    }

    async def get(self) -> None:
        cookie = self.get_cookie(COOKIE)
        if not cookie or not await self.off_loop(lambda: self.ctx.auth.session_ok(cookie)):
            raise ApiError(401, "not logged in: POST /auth/login first")
        params = self.query_params("limit")
        limit = params.whole("limit", default=100, lo=1, hi=1000)
        world = self.ctx.world
        if world is None:
            raise ApiError(503, "signals are not available on this server")
        self.write_json(WorldNow([
            SalientSignal(
                id=s.signal.id, sender=s.signal.sender, signal_type=s.signal.signal_type,
                content=s.signal.content, source=s.signal.source, topic=s.signal.topic,
                activation_energy=s.signal.activation_energy, salience=round(s.salience, 4),
                age_s=round(s.age_s, 1), received_at=s.signal.received_at)
            for s in world.top(limit)
        ]))

    async def post(self) -> None:
        self.query_params()
        sender = await self.sender()
        result = sender.admit(self.gate(), parse(self.request.body))
        self.count(result)
        if isinstance(result, Rejection):
            if result.reason == "rate_limited":
                self.set_header("Retry-After", str(RETRY_AFTER_S))
            raise ApiError(result.status, result.error)
        self.to_world((result,))
        self.set_status(202)
        self.write_json(SignalAccepted(result.id))


class BatchHandler(_SignalHandler):
    """POST /api/signals/batch: up to 50 signals, each checked and limited on its own;
    200 {"accepted", "rejected", "errors": [{"index", "error", "status"}]}."""

    api = {"post": Operation(
        f"Report up to {BATCH_MAX} signals, each checked and limited on its own",
        {200: BatchResult}, auth=SENDERS,
        body=Annotated[list[SignalIn], msgspec.Meta(max_length=BATCH_MAX)], example=[EXAMPLE],
        description="A signal that is refused is listed in `errors` with the status it would "
                    "have got alone; the others are accepted.")}

    async def post(self) -> None:
        self.query_params()
        sender = await self.sender()
        try:
            items = decode_batch(self.request.body)
        except ValueError as e:
            raise ApiError(400, str(e)) from None
        gate = self.gate()
        accepted: list[Signal] = []
        errors: list[BatchError] = []
        for index, raw in enumerate(items):
            result = sender.admit(gate, parse(raw))
            if isinstance(result, Signal):
                accepted.append(result)
            else:
                self.count(result)
                errors.append(BatchError(index, result.error, result.status))
        if accepted:
            self.count(accepted[0], len(accepted))
        self.to_world(tuple(accepted))
        self.write_json(BatchResult(len(accepted), len(errors), errors))
