"""/api/subscriptions: the person makes Chalie read broadcast streams (spec section 3).

A subscription is a name, a ws:// or wss:// URL and the signal types accepted from it ("*" for
any). It is stored first (through the StoreWriter, so a restart resumes it) and then connected;
GET shows each stream's live state. Only the login cookie manages subscriptions: a bearer token
never can.
"""

from __future__ import annotations

import uuid

import msgspec

from chalie.actors.store_writer_messages import DeleteSubscription, SaveSubscription
from chalie.edge.api_spec import COOKIE_AUTH, Operation, path_id
from chalie.edge.rest_base import ApiError, AuthedHandler, shown
from chalie.edge.subscriptions import Subscriptions, SubscriptionState, check
from chalie.store.interface_rows import SubscriptionRow


class SubscriptionBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str  # 1-64 letters, digits, '_', '.' or '-'
    url: str  # ws:// or wss://
    signals: list[str]  # the signal types accepted from it ("*": any)


class SubscriptionList(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    items: list[SubscriptionState]


class _Base(AuthedHandler):
    def subscriptions(self) -> Subscriptions:
        if self.ctx.subscriptions is None:
            raise ApiError(503, "broadcast streams are not available on this server")
        return self.ctx.subscriptions


class SubscriptionsHandler(_Base):
    """GET /api/subscriptions: every stream with its state; POST {name, url, signals}: a new
    one, 201 with its state (409 when the name is taken)."""

    api = {
        "get": Operation("Every broadcast stream with its state", {200: SubscriptionList},
                         auth=(COOKIE_AUTH,)),
        "post": Operation("Read a new broadcast stream: stored, then connected",
                          {201: SubscriptionState}, auth=(COOKIE_AUTH,), body=SubscriptionBody,
                          errors=(409,), example={"name": "news", "signals": ["headline"],
                                                  "url": "wss://feeds.example.org/stream"}),
    }

    async def get(self) -> None:
        self.query_params()
        self.write_json(SubscriptionList(self.subscriptions().states()))

    async def post(self) -> None:
        self.query_params()
        subscriptions = self.subscriptions()
        body = self.decode_body(SubscriptionBody)
        try:
            signals = check(body.name, body.url, body.signals)
        except ValueError as e:
            raise ApiError(400, str(e)) from None
        row = SubscriptionRow(id=str(uuid.uuid4()), name=body.name, url=body.url,
                              signals=signals, created_at=self.ctx.clock.time())
        if not await self.ask("store_writer", SaveSubscription(row)):
            raise ApiError(409, f"name: a subscription named {body.name!r} exists; delete it "
                                "first or pick another name")
        subscriptions.add(row)
        self.set_status(201)
        self.write_json(subscriptions.state(row.id))


class SubscriptionHandler(_Base):
    """DELETE /api/subscriptions/<id>: stop reading the stream and forget it; 204."""

    api = {"delete": Operation(
        "Stop reading a stream and forget it", {204: None}, auth=(COOKIE_AUTH,), errors=(404,),
        path=(path_id("subscription_id", "the subscription's id"),))}

    async def delete(self, subscription_id: str) -> None:
        self.query_params()
        subscriptions = self.subscriptions()
        stored = await self.ask("store_writer", DeleteSubscription(subscription_id))
        running = subscriptions.remove(subscription_id)
        if not (stored or running):
            raise ApiError(404, f"no subscription {shown(subscription_id)}")
        self.set_status(204)
