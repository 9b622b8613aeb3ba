"""The installable web app's files as a browser fetches them: the manifest and the service worker
at the root, without the login cookie, with the right types; the manifest's icons real PNGs of
the sizes it says; the pages' policy the old one plus the manifest and the worker; and the
worker's offline shell naming every file the pages load. (In a real Chromium:
tests/browser/test_pwa.py.)"""

from __future__ import annotations

import asyncio
import json
import re
import struct
from pathlib import Path
from types import SimpleNamespace

import pytest
import tornado.httpclient
import tornado.httpserver
import tornado.netutil

from chalie.config_load import load_config
from chalie.edge.app import make_app
from chalie.edge.pages import PAGE_CSP, PUBLIC, STATIC

# The policy before the app was installable (issue 38 adds manifest-src and worker-src, no more).
OLD_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
    "connect-src 'self'; frame-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
_IMPORT = re.compile(r"""(?:\bfrom|\bimport)\s*["']\./([\w.-]+\.js)["']""")
_ASSET = re.compile(r"""(?:href|src)="/static/([\w.-]+)\"""")


def fetch(path: str, *, follow: bool = True) -> tornado.httpclient.HTTPResponse:
    """GET `path` from the real application on 127.0.0.1, with no cookie."""
    async def go() -> tornado.httpclient.HTTPResponse:
        app = make_app(SimpleNamespace(config=load_config()))  # type: ignore[arg-type]
        sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
        server = tornado.httpserver.HTTPServer(app)
        server.add_sockets(sockets)
        port = sockets[0].getsockname()[1]
        try:
            return await tornado.httpclient.AsyncHTTPClient().fetch(
                f"http://127.0.0.1:{port}{path}", raise_error=False, follow_redirects=follow)
        finally:
            server.stop()
    return asyncio.run(go())


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_the_manifest_is_public_json_with_what_installing_needs() -> None:
    """/manifest.webmanifest answers without a cookie as application/manifest+json: Chalie's
    name, a standalone app at /, theme colours, icons of 192 and 512 pixels and a maskable one."""
    r = fetch("/manifest.webmanifest")
    assert r.code == 200
    assert r.headers["Content-Type"] == "application/manifest+json"
    assert r.headers["Content-Security-Policy"] == PAGE_CSP
    manifest = json.loads(r.body)
    assert manifest["name"] == "Chalie"
    assert manifest["short_name"]
    assert manifest["description"]
    assert manifest["start_url"] == manifest["scope"] == "/"
    assert manifest["display"] == "standalone"
    assert re.fullmatch(r"#[0-9a-f]{6}", manifest["theme_color"])
    assert re.fullmatch(r"#[0-9a-f]{6}", manifest["background_color"])
    icons = {(i["sizes"], i.get("purpose", "any")): i for i in manifest["icons"]}
    assert set(icons) == {("192x192", "any"), ("512x512", "any"), ("512x512", "maskable")}


def test_every_icon_is_a_public_png_of_the_size_the_manifest_says() -> None:
    """Each icon is a PNG file of its stated size, served without the cookie (a browser may
    fetch icons without credentials, like the manifest)."""
    manifest = json.loads((STATIC / "manifest.webmanifest").read_text())
    for icon in manifest["icons"]:
        name = icon["src"].removeprefix("/static/")
        width, height = (int(n) for n in icon["sizes"].split("x"))
        assert icon["type"] == "image/png"
        assert png_size(STATIC / name) == (width, height)
        assert name in PUBLIC
        r = fetch(icon["src"])
        assert r.code == 200, name
        assert r.headers["Content-Type"] == "image/png"


def test_the_service_worker_is_public_script_at_the_root() -> None:
    """/sw.js answers without a cookie as JavaScript, revalidated on every check (no-cache),
    with the pages' policy; at / its scope is every page."""
    r = fetch("/sw.js")
    assert r.code == 200
    assert r.headers["Content-Type"].startswith("application/javascript")
    assert r.headers["Cache-Control"] == "no-cache"
    assert r.headers["Content-Security-Policy"] == PAGE_CSP
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert r.body == (STATIC / "sw.js").read_bytes()
    assert "chalieNotificationClick" in r.body.decode()


def test_the_pages_policy_is_the_old_one_plus_the_manifest_and_the_worker() -> None:
    """The pages may load a manifest and a worker from this server, and nothing else more."""
    assert PAGE_CSP == OLD_CSP + "; manifest-src 'self'; worker-src 'self'"


@pytest.mark.parametrize("path", ["/", "/brain"])
def test_a_page_still_needs_the_cookie(path: str) -> None:
    """The root files are public; the pages are not: without the cookie, the login page."""
    response = fetch(path, follow=False)
    assert response.code == 302
    assert response.headers["Location"] == f"/login?next={path}"


def loaded_by_pages() -> set[str]:
    """Every file under /static/ that /, /brain and the modules they import load."""
    found: set[str] = set()
    todo: list[str] = []
    for page in ("index.html", "brain.html"):
        todo += _ASSET.findall((STATIC / page).read_text())
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        if name.endswith(".js"):
            todo += _IMPORT.findall((STATIC / name).read_text())
    return found


def shell_of_worker() -> tuple[set[str], set[str]]:
    """The worker's PAGES and FILES lists, as written in sw.js."""
    source = (STATIC / "sw.js").read_text()
    pages = re.search(r"const PAGES = \[(.*?)\];", source, re.S)
    files = re.search(r"const FILES = \[(.*?)\]\.map", source, re.S)
    assert pages
    assert files
    return (set(re.findall(r'"([^"]+)"', pages.group(1))),
            set(re.findall(r'"([^"]+)"', files.group(1))))


def test_the_worker_keeps_every_file_the_pages_load() -> None:
    """The offline shell is the chat page, the dashboard and every file they load (a module
    added to a page without adding it to sw.js fails here), and each listed file exists."""
    pages, files = shell_of_worker()
    assert pages == {"/", "/brain"}
    needed = loaded_by_pages()
    assert "chat.js" in needed
    assert "push-settings.js" in needed
    assert needed - files == set()
    assert [name for name in files if not (STATIC / name).is_file()] == []
