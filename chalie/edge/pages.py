"""The web pages: the chat (`/`), the brain dashboard (`/brain`), the login page and their files.

They are static HTML, CSS and JavaScript modules in `chalie/edge/static/`, served as they are
(no build step) and talking to the same /ws and REST endpoints as any other client. Every page
and file needs the login cookie except the login page and the files it uses (`PUBLIC`); a page
asked for without one is a redirect to the login page, a file a 401.

The pages are an installable web app: its manifest (`/manifest.webmanifest`) and its icons are
public too, since browsers fetch a manifest without credentials; the service worker (`/sw.js`,
at the root so that its scope is every page) keeps the pages' shell for an offline start and
shows Web Push notifications. It is code the public can read in the source anyway: it holds
nothing of the person's.

Each answer carries a Content-Security-Policy that allows nothing but this server: no inline
script or style, no other origin for anything. A card (an interface tool's result, rendered by
Chalie) is its own document at `/cards/<channel>/<seq>`, shown by the chat page in a sandboxed
iframe: its stylesheet is inline, which the pages' policy forbids, so it gets a stricter policy
of its own (no script at all, nothing fetched but this server's images; sandboxed, yet
same-origin so that the chat page can size the frame to the card).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import tornado.ioloop
import tornado.web

from chalie.config import CHANNEL_RE
from chalie.edge.api_spec import COOKIE_AUTH, Ok, Operation
from chalie.edge.context import EdgeContext
from chalie.edge.rest_base import AuthedHandler
from chalie.edge.session_cookie import logged_in

STATIC = Path(__file__).parent / "static"
# The login page and what it loads: everything else needs the cookie.
PUBLIC = frozenset({"base.css", "login.css", "login.js", "icon.svg",
                    "icon-192.png", "icon-512.png", "icon-maskable-512.png"})
# The files served at the root, without the cookie: name -> Content-Type.
ROOT_FILES = {
    "manifest.webmanifest": "application/manifest+json",
    "sw.js": "application/javascript; charset=utf-8",
}

PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
    "connect-src 'self'; frame-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'; manifest-src 'self'; worker-src 'self'"
)
# The sandbox keeps the card same-origin (and scriptless) so that the chat page can measure its
# document and size the frame to it; no script runs in it, by the sandbox and by script-src.
CARD_CSP = (
    "default-src 'none'; script-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'self'; sandbox allow-same-origin "
    "allow-popups allow-popups-to-escape-sandbox"
)


def secure_headers(handler: tornado.web.RequestHandler, csp: str = PAGE_CSP) -> None:
    handler.set_header("Content-Security-Policy", csp)
    handler.set_header("X-Content-Type-Options", "nosniff")
    handler.set_header("Referrer-Policy", "no-referrer")
    handler.set_header("X-Frame-Options", "DENY" if csp == PAGE_CSP else "SAMEORIGIN")
    handler.set_header("Cache-Control", "no-cache")


async def _logged_in(handler: tornado.web.RequestHandler, ctx: EdgeContext) -> bool:
    """Whether the request's login cookie is good (checked off the IOLoop: it reads the store);
    a cookie due for rotation is replaced on the way."""
    return await logged_in(handler, ctx)


def _unauthorized(handler: tornado.web.RequestHandler) -> None:
    handler.set_status(401)
    handler.set_header("Content-Type", "application/json")
    handler.finish({"error": "not logged in: POST /auth/login first", "status": 401})


class _Page(tornado.web.RequestHandler):
    def initialize(self, ctx: EdgeContext) -> None:
        self.ctx = ctx

    async def logged_in(self) -> bool:
        return await _logged_in(self, self.ctx)

    def unauthorized(self) -> None:
        _unauthorized(self)


class PageHandler(_Page):
    """One HTML page; without the cookie (unless it is the login page) a redirect to log in."""

    def initialize(self, ctx: EdgeContext, page: str, public: bool = False) -> None:  # type: ignore[override]
        super().initialize(ctx)
        self.page = page
        self.public = public

    async def get(self) -> None:
        if not self.public and not await self.logged_in():
            self.redirect(f"/login?next={quote(self.request.path, safe='/')}")
            return
        secure_headers(self)
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.finish((STATIC / self.page).read_bytes())


class StaticHandler(tornado.web.StaticFileHandler):
    """The pages' files: the cookie is needed for all but the login page's."""

    def initialize(self, ctx: EdgeContext) -> None:  # type: ignore[override]
        super().initialize(path=str(STATIC))
        self.ctx = ctx

    async def prepare(self) -> None:
        name = self.path_args[0] if self.path_args else ""
        if name not in PUBLIC and not await _logged_in(self, self.ctx):
            _unauthorized(self)

    def set_extra_headers(self, path: str) -> None:
        secure_headers(self)

    def get_content_type(self) -> str:
        if self.absolute_path and self.absolute_path.endswith(".js"):
            return "text/javascript; charset=utf-8"
        if self.absolute_path and self.absolute_path.endswith(".css"):
            return "text/css; charset=utf-8"
        return super().get_content_type()


class RootFileHandler(tornado.web.RequestHandler):
    """GET /manifest.webmanifest and GET /sw.js: public, never cached without asking again (a
    browser checks the worker for an update on each visit; the ETag makes that a 304)."""

    def initialize(self, name: str) -> None:
        self.name = name

    def get(self) -> None:
        secure_headers(self)
        self.set_header("Content-Type", ROOT_FILES[self.name])
        self.finish((STATIC / self.name).read_bytes())


class SessionHandler(AuthedHandler):
    """GET /auth/session: 200 while the login cookie is good (the pages ask before connecting),
    else 401 like every other endpoint."""

    api = {"get": Operation("200 while the login cookie is good", {200: Ok}, auth=(COOKIE_AUTH,))}

    async def get(self) -> None:
        self.query_params()
        self.write_json(Ok())


_CARD_BASE = (
    "html{color-scheme:light dark}body{margin:0;padding:8px;font:15px/1.45 system-ui,"
    "-apple-system,'Segoe UI',Roboto,Arial,sans-serif}"
)


class CardHandler(_Page):
    """GET /cards/<channel>/<seq>: the card frame with that seq, as a document of its own."""

    async def get(self, channel: str, seq_text: str) -> None:
        if not await self.logged_in():
            self.unauthorized()
            return
        if not CHANNEL_RE.match(channel) or not seq_text.isdigit() or len(seq_text) > 18:
            raise tornado.web.HTTPError(404)
        loop = tornado.ioloop.IOLoop.current()
        body = await loop.run_in_executor(None, self._card_body, channel, int(seq_text))
        if body is None:
            self.set_status(404)
            secure_headers(self, CARD_CSP)
            self.set_header("Content-Type", "text/html; charset=utf-8")
            self.finish(_document("", "<p>This card is no longer kept.</p>"))
            return
        secure_headers(self, CARD_CSP)
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.finish(_document(str(body.get("css", "")), str(body.get("html", ""))))

    def _card_body(self, channel: str, seq: int) -> dict[str, Any] | None:
        row = self.ctx.read().execute(
            "SELECT body FROM events WHERE channel = ? AND seq = ? AND type = 'card'",
            (channel, seq),
        ).fetchone()
        if row is None:
            return None
        value = json.loads(str(row[0]))
        return value if isinstance(value, dict) else None


def _document(css: str, html: str) -> str:
    # The card's html and css are Chalie's own (every interface string escaped when the card
    # was rendered); a "</" is still kept from ending the style element early.
    style = (_CARD_BASE + css).replace("</", "<\\/")
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<style>{style}</style></head><body>{html}</body></html>")
