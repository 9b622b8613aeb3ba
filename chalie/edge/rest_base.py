"""JSON request/response helpers: errors are JSON bodies that name the problem.

`ApiError` carries its message in the body only (a reason phrase must be plain ASCII, and an
error that quotes what the client sent may not be). `AuthedHandler` refuses requests without
a login cookie; `QueryParams` reads query parameters strictly: an unknown or repeated
parameter, or a value out of range, is a 400 that says what the endpoint accepts.

Before any handler runs, `JsonHandler.prepare` refuses, in this order: a body larger than the
endpoint takes (413, server.max_body_bytes); a request that changes something, carries no
interface token and comes from another site's page (403: its Origin, or its Referer when it
has no Origin, is not this server; a request with neither, as curl sends, passes); and, on
/api/, /gw/ and /v1/, a credential past server.rest_rate_per_min, or an address that sent that many
wrong credentials (429 with Retry-After; chalie/edge/ratelimit.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlsplit

import apsw
import msgspec
import pykka
import tornado.web
from tornado.ioloop import IOLoop

from chalie.config import Config
from chalie.edge.api_spec import ErrorBody, Operation
from chalie.edge.auth import COOKIE, token_hash
from chalie.edge.context import EdgeContext
from chalie.edge.session_cookie import logged_in
from chalie.errors import StoreError

T = TypeVar("T")
_AT = re.compile(r" - at `\$\.?([^`]*)`")
SHOWN_CHARS = 40  # of a rejected value, quoted back in the error
ASK_TIMEOUT_S = 10.0  # an actor that does not answer a request within this is reported (503)
MAX_SQL_INT = 2**63 - 1
_DIGITS = re.compile(r"[0-9]+")
_TRUE, _FALSE = ("1", "true"), ("0", "false")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})  # never checked for their origin
RATE_LIMITED = ("/api/", "/gw/", "/v1/")  # paths under server.rest_rate_per_min
BODY_SLACK = 128 * 1024  # over the largest limit: a multipart form's boundaries and headers
MAX_ERROR_CHARS = 300  # of a decoder's message, which may quote a client's field name


def largest_body(config: Config) -> int:
    """The largest body any endpoint takes: Tornado drops the connection past it unread.
    POST /v1/chat/completions takes a conversation and an image as base64."""
    return config.server.max_body_bytes + config.images.max_bytes * 4 // 3 + BODY_SLACK


class ApiError(tornado.web.HTTPError):
    """An error answered as `{"error": message, "status": status}`, with `headers` set."""

    def __init__(self, status: int, message: str, *,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(status)
        self.message = message
        self.headers = dict(headers or {})


class JsonHandler(tornado.web.RequestHandler):
    api: ClassVar[Mapping[str, Operation]] = {}  # method -> its description (api_spec.py)

    def initialize(self, ctx: EdgeContext) -> None:
        self.ctx = ctx

    def set_default_headers(self) -> None:
        self.set_header("Content-Type", "application/json")

    async def prepare(self) -> None:
        """Refuse an oversize body, a cross-site change or a client past the REST rate."""
        self._check_size()
        self._check_origin()
        self._check_rate()

    def body_limit(self) -> tuple[int, str]:
        """(the largest body this endpoint takes, the config key that sets it)."""
        return self.ctx.config.server.max_body_bytes, "server.max_body_bytes"

    def decode_body(self, kind: type[T]) -> T:
        """The body as `kind` (a Struct that forbids unknown fields); a 400 naming the field."""
        try:
            return msgspec.json.decode(self.request.body, type=kind)
        except msgspec.ValidationError as e:
            found = _AT.search(str(e))
            field = found.group(1) if found else ""
            message = f"{field or 'body'}: {_AT.sub('', str(e))}"
            raise ApiError(400, _cut(message)) from None
        except msgspec.DecodeError as e:
            raise ApiError(400, _cut(f"body is not valid JSON: {e}")) from None

    def query_params(self, *known: str) -> QueryParams:
        """This request's query parameters; a 400 for any not in `known`."""
        return QueryParams(self.request.query_arguments, known)

    async def off_loop(self, work: Callable[[], T]) -> T:
        """Run blocking work (reads, asks to actors, embedding) on a worker thread."""
        return await IOLoop.current().run_in_executor(None, work)

    async def ask(self, actor: str, message: Any, *, what: str = "the store",
                  timeout: float = ASK_TIMEOUT_S) -> Any:
        """Ask an actor off the IOLoop; a 503 naming `what` when it is down or slow."""
        ref = self.ctx.directory.get(actor)
        if ref is None:
            raise ApiError(503, f"{what} is restarting; try again shortly")
        try:
            return await self.off_loop(lambda: ref.ask(message, timeout=timeout))
        except pykka.ActorDeadError:
            raise ApiError(503, f"{what} is restarting; try again shortly") from None
        except pykka.Timeout:
            raise ApiError(503, f"{what} did not answer within {timeout:.0f}s; "
                                "try again") from None
        except (apsw.Error, StoreError):  # a write the store could not take
            store = self.ctx.store
            if store is not None and not store.writable:
                raise ApiError(503, f"{store.words()}; try again then") from None
            raise

    def bearer_token(self) -> str | None:
        """The token of an `Authorization: Bearer <token>` header, if one was sent."""
        header = self.request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return token.strip()

    def write_json(self, value: Any) -> None:
        self.write(msgspec.json.encode(value))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        error = self._reason
        exc_info = kwargs.get("exc_info")
        if exc_info is not None and isinstance(exc_info[1], ApiError):
            error = exc_info[1].message
            for name, value in exc_info[1].headers.items():
                self.set_header(name, value)
        self.set_header("Content-Type", "application/json")
        self.finish(msgspec.json.encode(ErrorBody(error, status_code)))

    def _refuse(self, status: int, reason: str, message: str,
                headers: Mapping[str, str] | None = None) -> ApiError:
        self.ctx.metrics.rest_refused.labels(reason=reason).inc()
        return ApiError(status, message, headers=headers)

    def _check_size(self) -> None:
        allowed, key = self.body_limit()
        declared = self.request.headers.get("Content-Length", "")
        size = max(int(declared) if declared.isdigit() else 0, len(self.request.body))
        if size > allowed:
            raise self._refuse(413, "too_large", f"the body is {size} bytes; this endpoint "
                                                 f"takes at most {allowed} ({key})")

    def _check_origin(self) -> None:
        """A change made with the login cookie must come from this server's own pages. An
        interface's bearer token is not sent by browsers on their own, so it is not checked."""
        if self.request.method in SAFE_METHODS or self.bearer_token() is not None:
            return
        header, origin = "Origin", self.request.headers.get("Origin")
        if origin is None:
            referer = self.request.headers.get("Referer")
            if referer is None:
                return  # not a browser (browsers send Origin on every cross-site POST)
            header, origin = "Referer", referer
        if not same_origin(origin, self.request.host):
            raise self._refuse(403, "cross_site", f"cross-site request refused: {header} "
                                                  f"{shown(origin)} is not this server")

    def _check_rate(self) -> None:
        limit = self.ctx.rest_limit
        if limit is None or not self.request.path.startswith(RATE_LIMITED):
            return
        rate = self.ctx.config.server.rest_rate_per_min
        wait = limit.wait(self._failed_key(), rate)
        if wait is not None:
            raise self._too_many("bad_credentials", "too many requests with a wrong login or "
                                 f"token from {self.request.remote_ip}", wait)
        wait = limit.take(self._rate_key(), rate)
        if wait is not None:
            raise self._too_many("rate_limited", "too many requests: "
                                 f"server.rest_rate_per_min allows {rate} a minute", wait)

    def _too_many(self, reason: str, what: str, wait: float) -> ApiError:
        seconds = max(1, math.ceil(wait))
        return self._refuse(429, reason, f"{what}; try again in {seconds}s",
                            headers={"Retry-After": str(seconds)})

    def on_finish(self) -> None:
        """A wrong credential (401) counts against its address too: see chalie/edge/ratelimit.py."""
        limit = self.ctx.rest_limit
        if (limit is not None and self.get_status() == 401
                and self.request.path.startswith(RATE_LIMITED)):
            limit.spend(self._failed_key(), self.ctx.config.server.rest_rate_per_min)

    def _failed_key(self) -> str:
        return "failed:" + (self.request.remote_ip or "unknown")

    def _rate_key(self) -> str:
        """The credential a request is counted against: its interface token, else its login
        cookie (each hashed: no secret is kept), else its client address."""
        bearer = self.bearer_token()
        if bearer is not None:
            return "bearer:" + token_hash(bearer)
        cookie = self.get_cookie(COOKIE)
        if cookie:
            return "cookie:" + token_hash(cookie)
        return "address:" + (self.request.remote_ip or "unknown")


class AuthedHandler(JsonHandler):
    """A JSON endpoint for the logged-in person only: 401 without a valid session cookie."""

    async def prepare(self) -> None:
        await super().prepare()
        if not await logged_in(self, self.ctx):  # replaces a cookie due for rotation
            raise ApiError(401, "not logged in: POST /auth/login first")


def same_origin(origin: str, host: str) -> bool:
    """Whether `origin` (an Origin or Referer header) names `host` (the request's Host), over
    http or https: behind a TLS proxy the browser's scheme is not the one the server sees."""
    try:
        parts = urlsplit(origin.strip())
    except ValueError:
        return False
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return False
    return _without_default_port(parts.netloc.rpartition("@")[2]) == _without_default_port(host)


def _without_default_port(netloc: str) -> str:
    netloc = netloc.lower()
    for default in (":80", ":443"):
        if netloc.endswith(default):
            return netloc[: -len(default)]
    return netloc


def _cut(message: str) -> str:
    return message if len(message) <= MAX_ERROR_CHARS else message[:MAX_ERROR_CHARS] + "..."


def shown(value: str) -> str:
    """A client's value quoted for an error message, cut short when long."""
    if len(value) > SHOWN_CHARS:
        return repr(value[:SHOWN_CHARS]) + "..."
    return repr(value)


class QueryParams:
    """Query parameters read strictly: each known one at most once, valid UTF-8."""

    def __init__(self, arguments: Mapping[str, Sequence[bytes]], known: Sequence[str]) -> None:
        for name, values in arguments.items():
            if name not in known:
                accepted = ", ".join(known) if known else "none"
                raise ApiError(400, f"unknown query parameter {shown(name)}; "
                                    f"this endpoint accepts: {accepted}")
            if len(values) > 1:
                raise ApiError(400, f"{name}: given {len(values)} times; give it once")
        self._values: dict[str, str] = {}
        for name, values in arguments.items():
            try:
                self._values[name] = values[0].decode("utf-8")
            except UnicodeDecodeError:
                raise ApiError(400, f"{name}: not valid UTF-8") from None

    def text(self, name: str, *, max_chars: int) -> str | None:
        """The value, or None when it is absent or blank."""
        value = self._values.get(name)
        if value is None or not value.strip():
            return None
        if len(value) > max_chars:
            raise ApiError(400, f"{name}: at most {max_chars} characters, got {len(value)}")
        return value

    def required_text(self, name: str, *, max_chars: int) -> str:
        value = self.text(name, max_chars=max_chars)
        if value is None:
            raise ApiError(400, f"{name}: required, 1 to {max_chars} characters, not blank")
        return value

    def whole(self, name: str, *, default: int, lo: int, hi: int | None = None) -> int:
        """A whole number from `lo` to `hi`; with no `hi`, huge values count as the largest
        number SQLite holds (an offset past every row finds nothing either way)."""
        value = self._values.get(name)
        if value is None:
            return default
        number = whole_number(value)
        if number is None or number < lo or (hi is not None and number > hi):
            allowed = f"from {lo} to {hi}" if hi is not None else f"of at least {lo}"
            raise ApiError(400, f"{name}: must be a whole number {allowed}, got {shown(value)}")
        return min(number, MAX_SQL_INT)

    def flag(self, name: str, *, default: bool) -> bool:
        value = self._values.get(name)
        if value is None:
            return default
        if value.lower() in _TRUE:
            return True
        if value.lower() in _FALSE:
            return False
        raise ApiError(400, f"{name}: must be 0, 1, true or false, got {shown(value)}")


def whole_number(text: str) -> int | None:
    """ASCII digits only (no sign, spaces or underscores, which int() would take); numbers
    too long for SQLite come back as one past its largest."""
    if not _DIGITS.fullmatch(text):
        return None
    digits = text.lstrip("0") or "0"
    return int(digits) if len(digits) <= len(str(MAX_SQL_INT)) else MAX_SQL_INT + 1
