"""/api/push: the devices that take Web Push ("Notify me on this device" in the page's settings).

GET /api/push/key answers the server's VAPID public key, the `applicationServerKey` a page
subscribes with. POST /api/push/subscriptions takes what `PushSubscription.toJSON()` gives
({endpoint, keys: {p256dh, auth}}) and an optional name (by default one made from the
browser's User-Agent): 201 with the new device, or 200 when the endpoint is known already (its
keys are updated, and its name when one is given). GET lists the devices with how their latest
pushes went; DELETE /api/push/subscriptions/<id> removes one; POST
/api/push/subscriptions/<id>/test pushes a test notification to it now and says how it went (a
device its push service says is gone is removed). All need the login cookie.

An endpoint is https:, or http: to this machine (a push service run locally, as in tests).
"""

from __future__ import annotations

import re
import uuid
from typing import Annotated, Literal

import msgspec

from chalie.actors.delivery_messages import TargetsChanged
from chalie.delivery import webpush
from chalie.delivery.senders import Sender, Target
from chalie.delivery.webpush import BadSubscription
from chalie.edge.api_spec import COOKIE_AUTH, Operation, path_id
from chalie.edge.rest_base import ApiError, AuthedHandler, shown
from chalie.edge.rest_schedules import apply
from chalie.store import delivery_rows
from chalie.store.delivery_ops import Subscribe, Unsubscribe
from chalie.store.delivery_rows import PushSubscription

MAX_NAME = 80
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

_Endpoint = Annotated[str, msgspec.Meta(
    min_length=1, max_length=webpush.MAX_ENDPOINT,
    description="the push service's URL for the device: https:, or http: to this machine")]
_P256dh = Annotated[str, msgspec.Meta(
    pattern=r"^[A-Za-z0-9_-]{87}=?$",
    description="the device's P-256 public key, the 65-byte uncompressed point, base64url")]
_Auth = Annotated[str, msgspec.Meta(
    pattern=r"^[A-Za-z0-9_-]{22}(==)?$",
    description="the device's 16-byte authentication secret, base64url")]
_Name = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_NAME,
                                    description="what the person calls the device")]


class PushKeys(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    p256dh: _P256dh
    auth: _Auth


class PushSubscriptionBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What `PushSubscription.toJSON()` gives (its `expirationTime` too), and a name: by
    default one made from the browser's User-Agent ("Firefox on Android")."""

    endpoint: _Endpoint
    keys: PushKeys
    name: _Name | None = None
    expirationTime: float | None = None  # the browser's field name; not kept


class PushKey(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The server's VAPID public key: the uncompressed P-256 point, base64url (a page's
    `applicationServerKey`)."""

    public_key: str


class Device(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A device that takes Web Push, and how its latest pushes went: `failures` in a row
    (since the last that went), the latest one's error, and when the next is tried."""

    id: str
    name: str
    endpoint: str
    created_at: float
    last_sent_at: float | None
    failures: int
    last_error: str | None
    retry_at: float | None


class Devices(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    items: list[Device]


class DeviceRemoved(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    removed: str


class PushTried(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How the test push went: sent (the push service took it), gone (the device no longer
    takes pushes: it was removed) or failed, and what went wrong."""

    result: Literal["sent", "gone", "failed"]
    error: str | None


def device(row: PushSubscription) -> Device:
    return Device(id=row.id, name=row.name, endpoint=row.endpoint, created_at=row.created_at,
                  last_sent_at=row.last_sent_at, failures=row.failures,
                  last_error=row.last_error, retry_at=row.retry_at)


_ID = (path_id("subscription_id", "the device's id"),)


class _Base(AuthedHandler):
    def targets_changed(self) -> None:
        """Tell the Delivery actor (when it runs) that a device came or went."""
        ref = self.ctx.directory.get("delivery")
        if ref is not None:
            ref.tell(TargetsChanged())

    def sender(self) -> Sender:
        sender = None if self.ctx.away is None else self.ctx.away.named(webpush.NAME)
        if sender is None:
            raise ApiError(503, "Web Push is not available on this server yet; try again "
                                "shortly")
        return sender


class PushKeyHandler(_Base):
    api = {"get": Operation(
        "The server's VAPID public key, the applicationServerKey a page subscribes with",
        {200: PushKey}, auth=(COOKIE_AUTH,))}

    async def get(self) -> None:
        self.query_params()
        away = self.ctx.away
        if away is None or not away.vapid_public_key:
            raise ApiError(503, "Web Push is not available on this server yet; try again "
                                "shortly")
        self.write_json(PushKey(away.vapid_public_key))


class PushDevicesHandler(_Base):
    api = {
        "get": Operation("The devices that take Web Push, and how their pushes went",
                         {200: Devices}, auth=(COOKIE_AUTH,)),
        "post": Operation(
            "A device takes Web Push (201), or one known already takes new keys (200)",
            {200: Device, 201: Device}, auth=(COOKIE_AUTH,), body=PushSubscriptionBody,
            example={"endpoint": "https://push.example.org/wpush/v2/gAAAAABh",
                     "keys": {"p256dh": "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0"
                                        "VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM",
                              "auth": "tBHItJI5svbpez7KI4CCXg"},
                     "name": "Firefox on Android"},
            description="The body is what the browser's PushSubscription.toJSON() gives, and "
                        "an optional name. A bad endpoint (https:, or http: to this machine, "
                        f"at most {webpush.MAX_ENDPOINT} characters), a p256dh that is not a "
                        "P-256 point or an auth that is not 16 bytes is a 400 naming the "
                        "field."),
    }

    async def get(self) -> None:
        self.query_params()
        rows = await self.off_loop(lambda: delivery_rows.subscriptions(self.ctx.read()))
        self.write_json(Devices([device(r) for r in rows]))

    async def post(self) -> None:
        self.query_params()
        body = self.decode_body(PushSubscriptionBody)
        try:
            endpoint = webpush.check_endpoint(body.endpoint)
            p256dh, auth = webpush.check_keys(body.keys.p256dh, body.keys.auth)
        except BadSubscription as e:
            raise ApiError(400, f"{e.field}: {e.problem}") from None
        name = _name(body.name) if body.name is not None else await self._kept_name(
            endpoint, device_name(self.request.headers.get("User-Agent", "")))
        row = PushSubscription(id=uuid.uuid4().hex[:12], endpoint=endpoint, p256dh=p256dh,
                               auth=auth, name=name, created_at=self.ctx.clock.time())
        ((stored, new),) = await apply(self, Subscribe(row))
        self.targets_changed()
        self.set_status(201 if new else 200)
        self.write_json(device(stored))


    async def _kept_name(self, endpoint: str, default: str) -> str:
        """The name a known device has (a page subscribing again gives none), else `default`."""
        rows = await self.off_loop(lambda: delivery_rows.subscriptions(self.ctx.read()))
        return next((r.name for r in rows if r.endpoint == endpoint), default)


class PushDeviceHandler(_Base):
    api = {"delete": Operation("Remove a device: it takes no more pushes", {200: DeviceRemoved},
                               auth=(COOKIE_AUTH,), path=_ID, errors=(404,))}

    async def delete(self, subscription_id: str) -> None:
        self.query_params()
        (gone,) = await apply(self, Unsubscribe(subscription_id, "removed by the person"))
        if not gone:
            raise ApiError(404, f"no device {shown(subscription_id)}")
        self.targets_changed()
        self.write_json(DeviceRemoved(subscription_id))


class TestPushHandler(_Base):
    api = {"post": Operation(
        "Push a test notification to a device now, and say how it went", {200: PushTried},
        auth=(COOKIE_AUTH,), path=_ID, errors=(404,),
        description="`gone`: the device's push service says it no longer takes pushes, and "
                    "it was removed.")}

    async def post(self, subscription_id: str) -> None:
        self.query_params()
        row = await self.off_loop(lambda: delivery_rows.subscription(self.ctx.read(),
                                                                     subscription_id))
        if row is None:
            raise ApiError(404, f"no device {shown(subscription_id)}")
        sender = self.sender()
        target = Target(key=webpush.PREFIX + row.id, service=webpush.NAME, name=row.name)
        sent = await self.off_loop(lambda: sender.send(target, webpush.test_item()))
        if sent.outcome == "gone":
            await apply(self, Unsubscribe(row.id, sent.error or "gone"))
            self.targets_changed()
        self.write_json(PushTried(sent.outcome, sent.error))


def _name(given: str) -> str:
    name = _CONTROL.sub(" ", given).strip()
    if not name:
        raise ApiError(400, "name: must not be blank")
    return name


_BROWSERS = (("Edg/", "Edge"), ("OPR/", "Opera"), ("SamsungBrowser/", "Samsung Internet"),
             ("Firefox/", "Firefox"), ("FxiOS/", "Firefox"), ("CriOS/", "Chrome"),
             ("Chromium/", "Chromium"), ("Chrome/", "Chrome"), ("Safari/", "Safari"))
_SYSTEMS = (("iPhone", "iPhone"), ("iPad", "iPad"), ("Android", "Android"),
            ("CrOS", "ChromeOS"), ("Windows", "Windows"), ("Mac OS X", "macOS"),
            ("Macintosh", "macOS"), ("Linux", "Linux"))


def device_name(user_agent: str) -> str:
    """A name for a device from its browser's User-Agent: "Firefox on Android"."""
    browser = next((name for mark, name in _BROWSERS if mark in user_agent), None)
    system = next((name for mark, name in _SYSTEMS if mark in user_agent), None)
    if browser and system:
        return f"{browser} on {system}"
    return browser or (f"a browser on {system}" if system else "a browser")
