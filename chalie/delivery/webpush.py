"""Web Push (RFC 8030), through pywebpush: each Item to each device the person enabled
"Notify me on this device" on, encrypted for it (RFC 8291, aes128gcm) and signed with the
server's VAPID key (RFC 8292; chalie/delivery/vapid.py).

A device is a row of push_subscriptions; its target key is "push:<id>". The push service's
answer decides the outcome: 2xx sent; 404 or 410 gone (the subscription expired or was
withdrawn: the Delivery actor removes it); 429, 5xx, a timeout or no connection failed, to be
tried again (after the service's Retry-After, when it gave one); any other 4xx failed, with
the status and the service's reason. An endpoint is a capability URL (whoever knows it can
push to the device), so what is shown of it, in errors and logs, is its origin only:
"https://fcm.googleapis.com/…".
"""

from __future__ import annotations

import base64
import binascii
import email.utils
import ipaddress
import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import apsw
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from py_vapid import Vapid02, VapidException  # type: ignore[import-untyped]

from chalie.clock import Clock, SystemClock
from chalie.config import Config
from chalie.delivery.items import TITLE, Item
from chalie.delivery.senders import Sent, Target
from chalie.delivery.vapid import VapidKeys
from chalie.store import delivery_rows
from chalie.store.delivery_rows import PushSubscription

NAME = "webpush"
PREFIX = "push:"
# A push message is at most 4096 bytes (RFC 8291 §4): one aes128gcm record after its 86-byte
# header, less the 16-byte tag and the padding delimiter, holds 3993 bytes of payload.
MAX_PAYLOAD = 3993
MAX_DETAIL = 200  # characters of a push service's own words kept in an error
MAX_RETRY_AFTER_S = 7 * 86400.0
ELIDED = "…"
MAX_ENDPOINT = 2048  # characters
P256DH_BYTES = 65  # an uncompressed P-256 point
AUTH_BYTES = 16
_SPACE = re.compile(r"\s+")
_UNSAFE = re.compile(r"[\x00-\x20\x7f]")


class BadSubscription(ValueError):
    """A subscription's field is not what a browser gives: `field` and the `problem`."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class ProbeItem(Item, frozen=True, kw_only=True):
    """The push a device's test button sends: its payload says `"test": true`."""

    def payload(self) -> dict[str, Any]:
        return {**super().payload(), "test": True}


def test_item() -> ProbeItem:
    """What a device's test button pushes (on the page's own channel, "main")."""
    return ProbeItem(kind="notifications", channel="main", seq=0, title=TITLE,
                    body="Notifications from Chalie reach this device.", url="/",
                    tag="chalie-test")


class WebPushSender:
    """The Sender of Web Push (chalie/delivery/senders.py). `read` is a read connection of
    the calling thread; `config()` the config in effect (push.subject, push.ttl_s and
    notify.timeout_s are read on every send)."""

    name = NAME

    def __init__(self, read: Callable[[], apsw.Connection], key: VapidKeys,
                 config: Callable[[], Config], *, clock: Clock | None = None) -> None:
        self._read = read
        self._config = config
        self._clock: Clock = clock or SystemClock()
        private = serialization.load_pem_private_key(key.private_pem.encode(), password=None)
        assert isinstance(private, ec.EllipticCurvePrivateKey)
        # "no-strict": push.subject is checked by the config (a mailto: or https: address);
        # py_vapid's own pattern refuses an https: subject with a path.
        self._vapid = Vapid02(private, conf={"no-strict": True})

    def targets(self) -> list[Target]:
        return [Target(key=PREFIX + row.id, service=NAME, name=row.name)
                for row in delivery_rows.subscriptions(self._read())]

    def send(self, target: Target, item: Item) -> Sent:
        try:
            row = delivery_rows.subscription(self._read(), target.key.removeprefix(PREFIX))
        except apsw.Error as e:
            return Sent("failed", f"the store could not be read: {e}")
        if row is None:
            return Sent("gone", "the device was removed")
        return self.send_to(row, item)

    def send_to(self, row: PushSubscription, item: Item) -> Sent:
        """Push `item` to the device `row` now (blocking; never raises)."""
        # Imported on the first push (about 0.4 s of start-up with aiohttp and requests,
        # which it brings).
        import requests  # noqa: PLC0415
        from pywebpush import (  # type: ignore[import-untyped]  # noqa: PLC0415
            WebPushException,
            webpush,
        )

        config = self._config()
        shown = shown_endpoint(row.endpoint)
        ttl = config.push.ttl_s
        if item.expires_at is not None:  # not worth showing once the escalation has expired
            ttl = max(1, min(ttl, int(item.expires_at - self._clock.time())))
        try:
            webpush(
                subscription_info={"endpoint": row.endpoint,
                                   "keys": {"p256dh": row.p256dh, "auth": row.auth}},
                data=payload_json(item),
                vapid_private_key=self._vapid,
                # a fresh dict each time: pywebpush adds "exp" (12 hours ahead) to it
                vapid_claims={"sub": config.push.subject, "aud": origin(row.endpoint)},
                content_encoding="aes128gcm",
                timeout=config.notify.timeout_s,
                ttl=ttl,
                headers={"Urgency": "high" if item.kind == "escalations" else "normal"},
            )
        except WebPushException as e:
            if e.response is None:
                return Sent("failed", _scrub(f"{shown}: {e.message}", row.endpoint))
            return self._answered(e.response, row.endpoint)
        except requests.Timeout:
            return Sent("failed", f"{shown}: no answer within {config.notify.timeout_s:g}s "
                                  "(notify.timeout_s)")
        except requests.ConnectionError as e:
            return Sent("failed", _scrub(f"{shown}: could not connect ({_cause(e)})",
                                         row.endpoint))
        except VapidException as e:
            return Sent("failed", f"the VAPID claim could not be signed ({e}); check "
                                  "push.subject")
        except Exception as e:  # never raises: whatever else went wrong is this send's outcome
            return Sent("failed", _scrub(f"{shown}: {type(e).__name__}: {e}", row.endpoint))
        return Sent("sent")

    def _answered(self, response: Any, endpoint: str) -> Sent:
        """The outcome of a push service's non-2xx answer (`response`: a requests.Response)."""
        status = response.status_code
        if 200 <= status < 300:  # pywebpush takes only 200 to 202 for success
            return Sent("sent")
        said = f"{shown_endpoint(endpoint)} answered {status} {response.reason or ''}".rstrip()
        detail = _SPACE.sub(" ", response.text or "").strip()[:MAX_DETAIL]
        error = _scrub(f"{said}: {detail}" if detail else said, endpoint)
        if status in (404, 410):
            return Sent("gone", error)
        if status == 429 or status >= 500:
            return Sent("failed", error, retry_after_s=self.retry_after(
                response.headers.get("Retry-After")))
        return Sent("failed", error)

    def retry_after(self, header: str | None) -> float | None:
        """Seconds from now of a Retry-After header (seconds, or an HTTP date)."""
        if header is None or not header.strip():
            return None
        value = header.strip()
        if value.isdigit():
            return min(float(value), MAX_RETRY_AFTER_S)
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, min(when.timestamp() - self._clock.time(), MAX_RETRY_AFTER_S))


def check_endpoint(endpoint: str) -> str:
    """A push service's URL: https:, or http: to this machine (a push service run locally);
    BadSubscription otherwise."""
    if len(endpoint) > MAX_ENDPOINT:
        raise BadSubscription("endpoint", f"at most {MAX_ENDPOINT} characters, got "
                                          f"{len(endpoint)}")
    if _UNSAFE.search(endpoint):
        raise BadSubscription("endpoint", "a URL has no spaces or control characters")
    try:
        parts = urlsplit(endpoint)
        host, _ = parts.hostname, parts.port  # .port: a bad port is a ValueError
    except ValueError as e:
        raise BadSubscription("endpoint", f"not a URL ({e})") from None
    if parts.scheme not in ("https", "http") or not host:
        raise BadSubscription("endpoint", "an https:// URL of a push service")
    if parts.username is not None or parts.password is not None:
        raise BadSubscription("endpoint", "a push service's URL carries no user name or "
                                          "password")
    if parts.scheme == "http" and not _loopback(host):
        raise BadSubscription("endpoint", "https:// (http:// only to a push service on this "
                                          "machine)")
    return endpoint


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name other than localhost
        return False


def check_keys(p256dh: str, auth: str) -> tuple[str, str]:
    """The device's keys as base64url without padding; BadSubscription unless `p256dh` is a
    point of P-256 and `auth` is 16 bytes."""
    raw = _unb64("keys.p256dh", p256dh)
    if len(raw) != P256DH_BYTES or raw[0] != 4:
        raise BadSubscription("keys.p256dh", f"a {P256DH_BYTES}-byte uncompressed P-256 "
                                             f"point, got {len(raw)} bytes")
    try:
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), raw)
    except ValueError:
        raise BadSubscription("keys.p256dh", "not a point of the P-256 curve") from None
    secret = _unb64("keys.auth", auth)
    if len(secret) != AUTH_BYTES:
        raise BadSubscription("keys.auth", f"{AUTH_BYTES} bytes, got {len(secret)}")
    return p256dh.rstrip("="), auth.rstrip("=")


def _unb64(field: str, text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text.rstrip("=") + "=" * (-len(text.rstrip("=")) % 4))
    except (ValueError, binascii.Error):
        raise BadSubscription(field, "not base64url") from None


def payload_json(item: Item) -> str:
    """The item's payload as JSON, its body cut to fit in one push message."""
    payload = item.payload()
    text = _encoded(payload)
    while len(text.encode()) > MAX_PAYLOAD and payload["body"]:
        over = len(text.encode()) - MAX_PAYLOAD
        body: str = payload["body"].removesuffix(ELIDED)
        payload["body"] = body[:max(0, len(body) - max(over, 8))] + ELIDED
        text = _encoded(payload)
    return text


def origin(endpoint: str) -> str:
    """The endpoint's origin (scheme://host[:port]): the VAPID claim's `aud`."""
    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    default = {"https": 443, "http": 80}.get(parts.scheme)
    port = f":{parts.port}" if parts.port is not None and parts.port != default else ""
    return f"{parts.scheme}://{host}{port}"


def shown_endpoint(endpoint: str) -> str:
    """What may be shown of an endpoint: its origin, the secret path elided."""
    try:
        return f"{origin(endpoint)}/{ELIDED}"
    except ValueError:
        return f"push endpoint {ELIDED}"


def _scrub(text: str, endpoint: str) -> str:
    """`text` without the endpoint's path, wherever an error quoted it."""
    parts = urlsplit(endpoint)
    text = text.replace(endpoint, shown_endpoint(endpoint))
    for secret in (parts.path + (f"?{parts.query}" if parts.query else ""), parts.path):
        if len(secret) > 1:
            text = text.replace(secret, f"/{ELIDED}")
    return text


def _cause(error: BaseException) -> str:
    """The innermost reason of a connection error ("[Errno 111] Connection refused")."""
    reason: BaseException = error
    seen = set()
    while id(reason) not in seen:
        seen.add(id(reason))
        inner = getattr(reason, "reason", None) or reason.__cause__ or reason.__context__
        if not isinstance(inner, BaseException):
            break
        reason = inner
    text = str(reason)
    # urllib3 says "<...NewConnectionError object at 0x...>: Failed to establish a new
    # connection: [Errno 111] Connection refused": keep what follows the last ": ".
    return text.rsplit(": ", 1)[-1] if ": " in text else text or type(reason).__name__


def _encoded(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
