"""The login cookie on a request: checked, replaced when due, set and cleared.

Every request that checks the cookie (REST through AuthedHandler, the pages, GET /auth/session)
may replace it: once its token is `auth.rotate_days` old, the StoreWriter makes a new session
row with the same expiry as the login's and cuts the old one to ROTATE_GRACE_S, and the answer
carries the new token in Set-Cookie. Concurrent requests with the old token rotate it once: the
writer replaces nothing for a row already cut short.
"""

from __future__ import annotations

import pykka
import structlog
import tornado.ioloop
import tornado.web

from chalie.actors.store_writer_messages import RotateAuthSession
from chalie.edge.auth import COOKIE, ROTATE_GRACE_S, Authenticator, token_hash
from chalie.edge.context import EdgeContext

log = structlog.get_logger("chalie.edge")
ASK_TIMEOUT_S = 10.0


async def logged_in(handler: tornado.web.RequestHandler, ctx: EdgeContext) -> bool:
    """Whether the request's cookie names a live session (read off the IOLoop); a token due
    for rotation is replaced on the way."""
    token = handler.get_cookie(COOKIE)
    if not token:
        return False
    loop = tornado.ioloop.IOLoop.current()
    state = await loop.run_in_executor(None, ctx.auth.session, token)
    if state is None:
        return False
    now = ctx.clock.time()
    if state.due_for_rotation(now, ctx.config.auth.rotate_days):
        await _rotate(handler, ctx, token, now)
    return True


async def _rotate(handler: tornado.web.RequestHandler, ctx: EdgeContext, token: str,
                  now: float) -> None:
    """Replace the token; when the store cannot, the old one stands and a later request
    tries again."""
    writer = ctx.directory.get("store_writer")
    if writer is None:
        return
    new = Authenticator.new_token()
    message = RotateAuthSession(token_hash(token), token_hash(new), now, now + ROTATE_GRACE_S)
    loop = tornado.ioloop.IOLoop.current()
    try:
        expires_at = await loop.run_in_executor(
            None, lambda: writer.ask(message, timeout=ASK_TIMEOUT_S))
    except (pykka.ActorDeadError, pykka.Timeout) as e:
        log.warning("session_rotation_failed", error=type(e).__name__)
        return
    if isinstance(expires_at, float):  # None: another request replaced it first
        set_session_cookie(handler, ctx, new, lifetime_s=expires_at - now)
        ctx.metrics.sessions_rotated.inc()


def set_session_cookie(handler: tornado.web.RequestHandler, ctx: EdgeContext, token: str, *,
                       lifetime_s: float) -> None:
    """The cookie with the session's remaining life (counted by Tornado from the real time,
    as the browser counts it, whatever clock the server runs on)."""
    handler.set_cookie(
        COOKIE, token, httponly=True, samesite="Strict", path="/",
        expires_days=lifetime_s / 86400, secure=ctx.config.auth.secure_cookie,
    )


def clear_session_cookie(handler: tornado.web.RequestHandler, ctx: EdgeContext) -> None:
    handler.clear_cookie(COOKIE, httponly=True, samesite="Strict", path="/",
                         secure=ctx.config.auth.secure_cookie)
