"""What the web pages stand on, from outside as a browser would ask: the pages and their files
behind the login cookie, the Content-Security-Policy, card documents, images, the person's side
of the conversation in the log, and the dashboard's read endpoints. (The pages themselves are
driven in a real browser in tests/browser.)"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.integration.harness import ServerProcess, StubLlm, completion, wait_for
from tests.integration.stub_interface import StubInterface, pair

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


_open: list[httpx.Client] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _open:
        _open.pop().close()


def client(server: ServerProcess, cookie: str | None = None) -> httpx.Client:
    """An HTTP client as a browser would be: with the login cookie or without, not following
    redirects (closed after the test)."""
    cookies = {"chalie_session": cookie} if cookie else {}
    c = httpx.Client(base_url=server.url, cookies=cookies, follow_redirects=False)
    _open.append(c)
    return c


@pytest.mark.parametrize("page", ["/", "/brain"])
def test_a_page_without_the_cookie_redirects_to_the_login_page(
    server: ServerProcess, page: str
) -> None:
    """A new visitor is sent to log in, and back to the page they asked for after."""
    r = client(server).get(page)
    assert r.status_code == 302
    assert r.headers["Location"] == f"/login?next={page}"


@pytest.mark.parametrize("page", ["/", "/brain", "/login"])
def test_every_page_allows_nothing_but_this_server(
    server: ServerProcess, cookie: str, page: str
) -> None:
    """Each page is HTML with a policy that forbids inline script and style and any other
    origin, and may not be framed."""
    r = client(server, cookie).get(page)
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/html")
    csp = r.headers["Content-Security-Policy"]
    for directive in ("default-src 'none'", "script-src 'self'", "style-src 'self'",
                      "connect-src 'self'", "frame-ancestors 'none'"):
        assert directive in csp
    assert "unsafe-inline" not in csp
    assert "http" not in csp
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert "<script>" not in r.text
    assert " style=" not in r.text


def test_the_login_page_needs_no_cookie_and_its_files_are_public(server: ServerProcess) -> None:
    anonymous = client(server)
    assert anonymous.get("/login").status_code == 200
    for name in ("login.js", "base.css", "login.css"):
        r = anonymous.get(f"/static/{name}")
        assert r.status_code == 200, name
        assert "Content-Security-Policy" in r.headers


def test_the_pages_own_files_need_the_cookie(server: ServerProcess, cookie: str) -> None:
    """Everything but the login page's files is the person's: 401 without the cookie."""
    for name in ("chat.js", "index.html", "brain.js"):
        r = client(server).get(f"/static/{name}")
        assert r.status_code == 401, name
        assert r.json()["error"].startswith("not logged in")
    r = client(server, cookie).get("/static/chat.js")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/javascript")
    assert client(server, cookie).get("/static/no-such-file.js").status_code == 404
    assert client(server, cookie).get("/static/../pages.py").status_code in (403, 404)


def test_auth_session_says_whether_the_cookie_is_good(server: ServerProcess, cookie: str) -> None:
    assert client(server, cookie).get("/auth/session").json() == {"ok": True}
    assert client(server).get("/auth/session").status_code == 401
    assert client(server, "made-up").get("/auth/session").status_code == 401


def test_the_first_frame_of_a_turn_carries_the_persons_message(
    server: ServerProcess, llm: StubLlm, cookie: str
) -> None:
    """A page that reloads rebuilds both sides of the conversation from the log, and knows
    its message arrived when the processing status names its client_id."""
    llm.queue(completion("Hello."))
    ws = server.connect(cookie)
    upload = client(server, cookie).post("/api/images", content=PNG)
    image_id = upload.json()["image_id"]
    frames = ws.turn("look at this", client_id="c-1", image_ids=[image_id])
    first = frames[0]
    assert first["stage"] == "processing"
    assert (first["text"], first["client_id"], first["image_ids"]) == (
        "look at this", "c-1", [image_id])
    assert all("text" not in f for f in frames[1:] if f["type"] == "status")
    replay = server.connect(cookie)
    replay.send({"type": "resume", "last_seq": 0})
    assert replay.recv()["text"] == "look at this"


def test_an_uploaded_image_can_be_shown_again(server: ServerProcess, cookie: str) -> None:
    c = client(server, cookie)
    image_id = c.post("/api/images", content=PNG).json()["image_id"]
    r = c.get(f"/api/images/{image_id}")
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "image/png"
    assert r.content == PNG
    assert c.get("/api/images/unknown").status_code == 404
    assert client(server).get(f"/api/images/{image_id}").status_code == 401


def test_a_card_is_a_document_of_its_own_with_a_stricter_policy(
    server: ServerProcess, llm: StubLlm, cookie: str, iface: StubInterface
) -> None:
    """The chat page frames a card by its seq; the card's document runs no script and fetches
    nothing but this server's images."""
    pair(server.url, cookie, iface, name="weather")
    iface.answers["lookup"] = {"text": "shown", "blocks": [
        {"type": "text", "text": "<script>alert(1)</script> Rain & wind"}]}
    llm.queue(completion(tool_calls=[("lookup", json.dumps({"query": "rain"}))]),
              completion("Shown."))
    frames = server.connect(cookie).turn("forecast?")
    card = next(f for f in frames if f["type"] == "card")
    r = client(server, cookie).get(f"/cards/main/{card['seq']}")
    assert r.status_code == 200
    csp = r.headers["Content-Security-Policy"]
    assert "script-src 'none'" in csp
    assert "default-src 'none'" in csp
    assert "sandbox" in csp
    assert card["html"] in r.text
    assert "&lt;script&gt;" in r.text
    assert "<script" not in r.text.lower()
    assert client(server).get(f"/cards/main/{card['seq']}").status_code == 401
    message_seq = next(f["seq"] for f in frames if f["type"] == "message")
    assert client(server, cookie).get(f"/cards/main/{message_seq}").status_code == 404
    assert client(server, cookie).get("/cards/main/x").status_code == 404


def test_recent_turns_are_listed_newest_first(
    server: ServerProcess, llm: StubLlm, cookie: str
) -> None:
    llm.queue(completion("One."), completion("Two."))
    ws = server.connect(cookie)
    first = ws.turn("first")[0]["exchange_id"]
    second = ws.turn("second")[0]["exchange_id"]
    items = client(server, cookie).get("/api/turns").json()["items"]
    assert [(i["id"], i["user_text"], i["response_text"]) for i in items] == [
        (second, "second", "Two."), (first, "first", "One.")]
    assert items[0]["outcome"] == "answered"
    assert items[0]["llm_calls"] == 1
    limited = client(server, cookie).get("/api/turns", params={"limit": 1, "offset": 1})
    assert [i["id"] for i in limited.json()["items"]] == [first]
    bad = client(server, cookie).get("/api/turns", params={"limit": 0})
    assert bad.status_code == 400
    assert "limit" in bad.json()["error"]
    assert client(server).get("/api/turns").status_code == 401


def test_world_state_is_listed_with_its_salience(server: ServerProcess, cookie: str) -> None:
    c = client(server, cookie)
    for content, energy in (("door opened", 0.3), ("fire alarm", 0.9)):
        r = c.post("/api/signals", json={"signal_type": "home", "content": content,
                                         "activation_energy": energy})
        assert r.status_code == 202

    def listed() -> list[dict[str, object]]:
        items: list[dict[str, object]] = c.get("/api/signals").json()["items"]
        return items

    wait_for(lambda: len(listed()) == 2)
    items = listed()
    assert [i["content"] for i in items] == ["fire alarm", "door opened"]
    first = items[0]
    assert 0 < float(str(first["salience"])) <= 0.9
    assert first["signal_type"] == "home"
    assert float(str(first["age_s"])) >= 0
    assert client(server).get("/api/signals").status_code == 401


def test_mcp_servers_are_listed_even_with_none_configured(
    server: ServerProcess, cookie: str
) -> None:
    assert client(server, cookie).get("/api/mcp").json() == {"items": []}
    assert client(server).get("/api/mcp").status_code == 401
