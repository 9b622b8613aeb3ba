"""POST /auth/login: password in, session cookie out. POST /auth/logout: that session ends."""

from __future__ import annotations

from typing import Literal

import msgspec
import structlog
import tornado.ioloop
import tornado.web

from chalie.actors.store_writer_messages import CreateAuthSession, EndAuthSession
from chalie.edge.api_spec import ErrorBody, Ok, Operation
from chalie.edge.auth import COOKIE, Authenticator, LoginThrottle, token_hash
from chalie.edge.rest_base import JsonHandler
from chalie.edge.session_cookie import clear_session_cookie, set_session_cookie

log = structlog.get_logger("chalie.edge")


class LoginBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    password: str


_TRIED = {"login": "passwords", "pairing": "pairing keys"}


def locked_out(handler: JsonHandler, throttle: LoginThrottle, remote: str,
               what: Literal["login", "pairing"]) -> bool:
    """Answer 429 with Retry-After when `remote` is locked out of `what`; whether it was.
    Written here, not raised: send_error would clear the Retry-After header."""
    wait = throttle.retry_after(remote)
    if wait is None:
        return False
    handler.ctx.metrics.auth_locked_out.labels(what=what).inc()
    handler.set_status(429)
    handler.set_header("Retry-After", str(max(1, round(wait))))
    handler.write_json(ErrorBody(
        f"too many wrong {_TRIED[what]} from {remote}; try again in {wait:.0f}s", 429))
    return True


class LoginHandler(JsonHandler):
    api = {"post": Operation(
        "Log in with the password: the answer sets the login cookie (chalie_session)",
        {200: Ok}, body=LoginBody, errors=(401, 429), example={"password": "the password"},
        description="An address that sends too many wrong passwords is refused (429, with "
                    "Retry-After) for a while, right password or not.")}

    async def post(self) -> None:
        body = self.decode_body(LoginBody)
        remote = self.request.remote_ip or "unknown"
        if locked_out(self, self.ctx.throttle, remote, "login"):
            return
        loop = tornado.ioloop.IOLoop.current()
        ok = await loop.run_in_executor(None, self.ctx.auth.password_ok, body.password)
        if not ok:
            self.ctx.throttle.failed(remote)
            log.warning("login_failed", remote=remote)
            raise tornado.web.HTTPError(401, reason="wrong password")
        self.ctx.throttle.succeeded(remote)
        token = Authenticator.new_token()
        now = self.ctx.clock.time()
        lifetime_s = self.ctx.config.auth.session_days * 86400
        message = CreateAuthSession(token_hash(token), now, now + lifetime_s)
        await self.ask("store_writer", message, timeout=10)
        set_session_cookie(self, self.ctx, token, lifetime_s=lifetime_s)
        self.write_json(Ok())


class LogoutHandler(JsonHandler):
    """POST /auth/logout: ends the session of the cookie sent and clears the cookie; 200 with
    no cookie or a dead one too (there is nothing left to end)."""

    api = {"post": Operation("End the login cookie's session and clear the cookie", {200: Ok})}

    async def post(self) -> None:
        token = self.get_cookie(COOKIE)
        if token:
            ended = await self.ask("store_writer", EndAuthSession(token_hash(token)))
            if ended:
                log.info("logged_out", remote=self.request.remote_ip)
        clear_session_cookie(self, self.ctx)
        self.write_json(Ok())
