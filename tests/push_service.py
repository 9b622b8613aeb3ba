"""A push service stand-in on 127.0.0.1 for the Web Push tests (unit, integration, browser).

It takes pushes as a real push service does (RFC 8030) at http://127.0.0.1:<port>/push/<name>,
and checks each as the RFCs require before it takes it:

- `Authorization: vapid t=<JWT>, k=<public key>` (RFC 8292): the JWT ES256-signed by `k`, its
  `aud` this service's origin, its `exp` in the future and at most 24 hours ahead, a `sub`; and
  `k` the key the subscription was made with, when the test gave one (applicationServerKey);
- `Content-Encoding: aes128gcm`, a `TTL`, an `Urgency` (when sent) RFC 8030 knows, a body of at
  most 4096 bytes;
- the body decrypts (RFC 8291, with http_ece) with the subscription's private key and auth
  secret, which the test made (`make_subscription`), to UTF-8 JSON.

A push that passes is recorded (its JSON, its headers, its claims) and answered 201, or what
the test told it to answer for that subscription (`answer`: 410, 404, 429 with Retry-After,
500...). One that fails a check is answered 400, 401, 403 or 413 with the reason, and the
reason is kept in `failures`, so a test asserts `failures == []`.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import http_ece
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

WAIT_S = 20.0
MAX_BODY = 4096  # RFC 8291 section 4: a push message is at most 4096 bytes
MAX_EXP_AHEAD_S = 24 * 3600  # RFC 8292 section 2: no more than 24 hours from the request
URGENCIES = ("very-low", "low", "normal", "high")


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Subscription:
    """A device as the stand-in knows it: its keys (the private one to decrypt with) and the
    VAPID public key it was made with (None: any)."""

    name: str
    private_key: ec.EllipticCurvePrivateKey
    auth: bytes
    server_key: str | None = None

    @property
    def p256dh(self) -> str:
        return b64url(self.private_key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint))


@dataclass
class Answer:
    """What to answer a valid push to a subscription instead of 201."""

    status: int
    retry_after: str | None = None
    body: str = ""


@dataclass
class Push:
    """A push that passed every check: the subscription's name, the decrypted payload (its
    JSON), the request's headers, the VAPID claims and key, and the status it was answered."""

    name: str
    payload: Any
    text: str
    headers: dict[str, str]
    claims: dict[str, Any]
    vapid_key: str
    status: int
    at: float = field(default_factory=time.time)


class PushService:
    """The stand-in, serving on its own thread until `close()`."""

    def __init__(self) -> None:
        self.pushes: list[Push] = []  # every push that passed the checks, in arrival order
        self.failures: list[str] = []  # every check that failed, with the subscription's name
        self._subscriptions: dict[str, Subscription] = {}
        self._answers: dict[str, Answer] = {}
        self._changed = threading.Condition()
        service = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                status, text, extra = service._take(self.path, dict(self.headers.items()), body)
                data = text.encode()
                self.send_response(status)
                for name, value in extra.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port: int = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                        daemon=True)
        self._thread.start()

    # --- what a test does --------------------------------------------------------------------

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def endpoint(self, name: str) -> str:
        return f"{self.origin}/push/{name}"

    def subscribe(self, name: str, server_key: str | None = None) -> Subscription:
        """A new device `name` (fresh keys); with `server_key`, it takes only pushes signed by
        that VAPID key, as a subscription made with that applicationServerKey."""
        sub = Subscription(name, ec.generate_private_key(ec.SECP256R1()), os.urandom(16),
                           server_key)
        with self._changed:
            self._subscriptions[name] = sub
        return sub

    def answer(self, name: str, status: int | None, *, retry_after: str | None = None,
               body: str = "") -> None:
        """Answer valid pushes to `name` with `status` from now on (None: 201 again)."""
        with self._changed:
            if status is None:
                self._answers.pop(name, None)
            else:
                self._answers[name] = Answer(status, retry_after, body)

    def delivered(self, name: str | None = None) -> list[Push]:
        """The pushes taken (answered 201), to `name` or to any."""
        with self._changed:
            return [p for p in self.pushes if p.status == 201 and name in (None, p.name)]

    def wait_for(self, condition: Callable[[PushService], bool],
                 timeout: float = WAIT_S) -> None:
        """Wait until `condition(self)` holds (checked on every push); AssertionError after
        `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not condition(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"the push service did not see it in {timeout:g}s; "
                                         f"pushes: {self.pushes}, failures: {self.failures}")
                self._changed.wait(left)

    def wait_pushes(self, name: str, count: int = 1, timeout: float = WAIT_S) -> list[Push]:
        """The pushes to `name` (any status) once there are at least `count`."""
        self.wait_for(lambda s: len([p for p in s.pushes if p.name == name]) >= count,
                      timeout)
        with self._changed:
            return [p for p in self.pushes if p.name == name]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(WAIT_S)

    # --- the checks ---------------------------------------------------------------------------

    def _take(self, path: str, headers: dict[str, str],
              body: bytes) -> tuple[int, str, dict[str, str]]:
        name = path.removeprefix("/push/") if path.startswith("/push/") else None
        with self._changed:
            sub = self._subscriptions.get(name or "")
            answer = self._answers.get(name or "")
        try:
            if sub is None:
                raise _Refused(404, f"no subscription at {path}")
            claims, key = self._check_vapid(headers, sub)
            text = self._check_body(headers, body, sub)
        except _Refused as e:
            with self._changed:
                self.failures.append(f"{name or path}: {e.status} {e.reason}")
                self._changed.notify_all()
            return e.status, e.reason, {}
        try:
            payload = json.loads(text)
        except json.JSONDecodeError:
            payload = None
        status = 201 if answer is None else answer.status
        lowered = {k.lower(): v for k, v in headers.items()}
        with self._changed:
            self.pushes.append(Push(sub.name, payload, text, lowered, claims, key, status))
            self._changed.notify_all()
        if answer is None:
            return 201, "", {"Location": f"/message/{len(self.pushes)}"}
        extra = {} if answer.retry_after is None else {"Retry-After": answer.retry_after}
        return answer.status, answer.body, extra

    def _check_vapid(self, headers: dict[str, str],
                     sub: Subscription) -> tuple[dict[str, Any], str]:
        """RFC 8292: the claims and the key of a valid `Authorization: vapid` header."""
        auth = _header(headers, "Authorization")
        if auth is None:
            raise _Refused(401, "no Authorization header")
        scheme, _, params = auth.partition(" ")
        if scheme.lower() != "vapid":
            raise _Refused(401, f"Authorization scheme {scheme!r}, not vapid")
        fields: dict[str, str] = {}
        for part in params.split(","):
            key, eq, value = part.strip().partition("=")
            if eq:
                fields[key.strip().lower()] = value.strip()
        if "t" not in fields or "k" not in fields:
            raise _Refused(401, "Authorization: vapid needs t= and k=")
        token, key = fields["t"], fields["k"]
        return self._check_jwt(token, key, sub), key

    def _check_jwt(self, token: str, key: str, sub: Subscription) -> dict[str, Any]:
        """The claims of a JWT ES256-signed by `key`, for this service, not yet expired."""
        try:
            point = unb64url(key)
            public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
        except (ValueError, binascii.Error):
            raise _Refused(401, "k is not a P-256 public key (base64url)") from None
        if sub.server_key is not None and key != sub.server_key:
            raise _Refused(403, "k is not the key the subscription was made with")
        pieces = token.split(".")
        if len(pieces) != 3:
            raise _Refused(401, "t is not a JWT (three parts)")
        try:
            header = json.loads(unb64url(pieces[0]))
            claims = json.loads(unb64url(pieces[1]))
            signature = unb64url(pieces[2])
        except (ValueError, binascii.Error):
            raise _Refused(401, "t's parts are not base64url JSON") from None
        if header.get("alg") != "ES256":
            raise _Refused(401, f"JWT alg {header.get('alg')!r}, not ES256")
        if len(signature) != 64:
            raise _Refused(401, f"ES256 signature of {len(signature)} bytes, not 64")
        der = encode_dss_signature(int.from_bytes(signature[:32], "big"),
                                   int.from_bytes(signature[32:], "big"))
        try:
            public.verify(der, f"{pieces[0]}.{pieces[1]}".encode(), ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            raise _Refused(403, "the JWT's signature does not verify with k") from None
        if not isinstance(claims, dict):
            raise _Refused(403, "the JWT's claims are not an object")
        if claims.get("aud") != self.origin:
            raise _Refused(403, f"aud {claims.get('aud')!r} is not {self.origin!r}")
        exp, now = claims.get("exp"), time.time()
        if not isinstance(exp, int) or exp <= now:
            raise _Refused(403, f"exp {exp!r} is not in the future")
        if exp > now + MAX_EXP_AHEAD_S:
            raise _Refused(403, f"exp is {exp - now:.0f}s ahead, more than 24 hours")
        sub_claim = claims.get("sub")
        if not isinstance(sub_claim, str) or not sub_claim.startswith(("mailto:", "https:")):
            raise _Refused(403, f"sub {sub_claim!r} is not a mailto: or https: contact")
        return claims

    def _check_body(self, headers: dict[str, str], body: bytes, sub: Subscription) -> str:
        """RFC 8030 and RFC 8291: the headers of a push with a payload, and its plaintext."""
        encoding = _header(headers, "Content-Encoding")
        if encoding != "aes128gcm":
            raise _Refused(400, f"Content-Encoding {encoding!r}, not aes128gcm")
        ttl = _header(headers, "TTL")
        if ttl is None or not ttl.isdigit():
            raise _Refused(400, f"TTL {ttl!r} is not a number of seconds")
        urgency = _header(headers, "Urgency")
        if urgency is not None and urgency not in URGENCIES:
            raise _Refused(400, f"Urgency {urgency!r} is not one of {', '.join(URGENCIES)}")
        if len(body) > MAX_BODY:
            raise _Refused(413, f"the body is {len(body)} bytes, more than {MAX_BODY}")
        try:
            plain: bytes = http_ece.decrypt(body, private_key=sub.private_key,
                                            auth_secret=sub.auth, version="aes128gcm")
        except Exception as e:  # http_ece's ECEException, a short body's struct.error
            raise _Refused(400, f"the body does not decrypt: {e}") from None
        try:
            return plain.decode("utf-8")
        except UnicodeDecodeError:
            raise _Refused(400, "the payload is not UTF-8") from None


class _Refused(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _header(headers: dict[str, str], name: str) -> str | None:
    return next((v for k, v in headers.items() if k.lower() == name.lower()), None)


def make_subscription(service: PushService, name: str, server_key: str | None = None,
                      ) -> tuple[dict[str, Any], ec.EllipticCurvePrivateKey, bytes]:
    """A device `name` at the stand-in: (the body POST /api/push/subscriptions takes, as a
    browser's PushSubscription.toJSON() gives it; the device's private key; its auth secret).
    With `server_key` the stand-in takes only pushes signed by that VAPID key."""
    sub = service.subscribe(name, server_key)
    body = {"endpoint": service.endpoint(name), "expirationTime": None,
            "keys": {"p256dh": sub.p256dh, "auth": b64url(sub.auth)}}
    return body, sub.private_key, sub.auth
