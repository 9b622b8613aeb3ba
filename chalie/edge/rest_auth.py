"""POST /auth/login: password in, session cookie out."""

from __future__ import annotations

import msgspec
import structlog
import tornado.ioloop
import tornado.web

from chalie.actors.messages import CreateAuthSession
from chalie.edge.auth import COOKIE, Authenticator, token_hash
from chalie.edge.rest_base import JsonHandler

log = structlog.get_logger("chalie.edge")


class LoginBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    password: str


class LoginHandler(JsonHandler):
    async def post(self) -> None:
        body = self.decode_body(LoginBody)
        remote = self.request.remote_ip or "unknown"
        wait = self.ctx.throttle.retry_after(remote)
        if wait is not None:
            # Written here, not raised: send_error would clear the Retry-After header.
            self.set_status(429)
            self.set_header("Retry-After", str(max(1, round(wait))))
            self.write_json({
                "error": f"too many wrong passwords from {remote}; try again in {wait:.0f}s",
                "status": 429,
            })
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
        days = self.ctx.config.auth.session_days
        message = CreateAuthSession(token_hash(token), now, now + days * 86400)
        writer = self.ctx.directory.get("store_writer")
        if writer is None:
            raise tornado.web.HTTPError(503, reason="store is restarting")
        await loop.run_in_executor(None, lambda: writer.ask(message, timeout=10))
        self.set_cookie(
            COOKIE, token, httponly=True, samesite="Strict", path="/", expires_days=days,
            secure=self.ctx.config.auth.secure_cookie,
        )
        self.write_json({"ok": True})
