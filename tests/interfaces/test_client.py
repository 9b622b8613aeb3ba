"""Calls to an interface over HTTP (faked at the transport): answers, and every way they fail."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import msgspec
import pytest

from chalie.interfaces.capabilities import Capabilities, Health
from chalie.interfaces.client import ExecuteResult, InterfaceClient
from chalie.interfaces.errors import InterfaceError

Handler = Callable[[httpx.Request], httpx.Response]
MAX_BYTES = 1000


def client(handler: Handler, **options: Any) -> InterfaceClient:
    http = httpx.Client(transport=httpx.MockTransport(handler), follow_redirects=False)
    settings: dict[str, Any] = {"health_timeout_s": 5.0, "connect_timeout_s": 2.0,
                                "execute_timeout_s": 30.0, "max_response_bytes": MAX_BYTES}
    settings.update(options)
    return InterfaceClient(http, **settings)


def answering(value: Any, status: int = 200) -> Handler:
    return lambda request: httpx.Response(status, json=value)


def failure(call: Callable[[], Any]) -> str:
    with pytest.raises(InterfaceError) as e:
        call()
    return str(e.value)


CAPS = [{"name": "forecast", "description": "Weather.", "parameters": [
    {"name": "city", "type": "string", "required": True, "description": "City"}]}]


def test_health_reads_name_and_version_from_the_right_url() -> None:
    """GET http://host:port/health with the answer-time timeout and the connect timeout."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"status": "ok", "name": "W", "version": "2"})

    assert client(handler).health("weather.local", 9001) == Health("ok", "W", "2")
    (request,) = seen
    assert request.method == "GET"
    assert str(request.url) == "http://weather.local:9001/health"
    assert request.extensions["timeout"] == {"connect": 2.0, "read": 5.0, "write": 5.0,
                                             "pool": 5.0}


def test_an_ipv6_host_is_put_in_brackets() -> None:
    """A bare IPv6 address becomes http://[addr]:port; a bracketed one is left as it is."""
    urls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        urls.append(str(request.url))
        return httpx.Response(200, json=CAPS)

    c = client(handler)
    c.capabilities("::1", 9001)
    c.capabilities("[fe80::1]", 8080)
    c.capabilities("10.0.0.2", 8080)
    assert urls == ["http://[::1]:9001/capabilities", "http://[fe80::1]:8080/capabilities",
                    "http://10.0.0.2:8080/capabilities"]


def test_capabilities_are_checked() -> None:
    """A good answer gives the capabilities; a bad one names the request and the field."""
    assert client(answering(CAPS)).capabilities("h", 1).tools[0].name == "forecast"
    bad = [{**CAPS[0], "parameters": [{"name": "c", "type": "int", "required": True,
                                       "description": "d"}]}]
    assert failure(lambda: client(answering(bad)).capabilities("h", 1)) == (
        "GET http://h:1/capabilities: capabilities[0].parameters[0].type: must be string, "
        'number, boolean or object, got "int"')


def test_capabilities_in_the_object_form_give_tools_and_signal_types() -> None:
    """{"tools", "signals"} gives both; a bad signal type names the request and the field."""
    answer = client(answering({"tools": CAPS, "signals": ["rain", "rain", "wind"]})).capabilities(
        "h", 1)
    assert ([t.name for t in answer.tools], answer.signals) == (["forecast"], ("rain", "wind"))
    bad = {"tools": CAPS, "signals": ["rain", "hail storm"]}
    assert failure(lambda: client(answering(bad)).capabilities("h", 1)) == (
        "GET http://h:1/capabilities: capabilities.signals[1]: a signal type (1-64 letters, "
        "digits or '_', '.', ':', '-') or \"*\", got \"hail storm\"")


def test_execute_posts_capability_and_params_and_reads_every_field() -> None:
    """POST /execute {capability, params} with the execute timeout; all answer fields read."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={
            "text": "Sunny", "data": {"max": 21}, "error": None,
            "blocks": [{"type": "heading", "text": "Paris"}], "openUrl": "https://x.test",
        })

    result = client(handler).execute("h", 1, "forecast", {"city": "Paris"})
    assert result == ExecuteResult(text="Sunny", data={"max": 21}, error=None,
                                   blocks=({"type": "heading", "text": "Paris", "level": 1},),
                                   open_url="https://x.test")
    (request,) = seen
    assert (request.method, str(request.url)) == ("POST", "http://h:1/execute")
    assert msgspec.json.decode(request.content) == {"capability": "forecast",
                                                    "params": {"city": "Paris"}}
    assert request.headers["Content-Type"] == "application/json"
    assert request.extensions["timeout"]["read"] == 30.0


def test_an_empty_execute_answer_is_all_nulls() -> None:
    """{} is a valid answer: nothing to say."""
    assert client(answering({})).execute("h", 1, "x", {}) == ExecuteResult()


@pytest.mark.parametrize(("answer", "message"), [
    ([1], "must be a JSON object, got [1]"),
    ({"text": 3}, "text: must be a string or null, got 3"),
    ({"error": {"code": 1}}, 'error: must be a string or null, got {"code":1}'),
    ({"openUrl": True}, "openUrl: must be a string or null, got true"),
    ({"blocks": [{"type": "heading"}]}, "blocks[0].text: must be a string, got null"),
])
def test_a_misshapen_execute_answer_names_the_field(answer: Any, message: str) -> None:
    """Wrong shapes fail with the request and the field."""
    assert failure(lambda: client(answering(answer)).execute("h", 1, "x", {})) == (
        f"POST http://h:1/execute: {message}")


def test_render_gives_the_blocks_in_normal_form() -> None:
    """GET / answers a Block[]; what comes back is checked."""
    c = client(answering([{"type": "text", "text": "hi", "extra": 1}, {"type": "unknown"}]))
    assert c.render("h", 1) == [{"type": "text", "text": "hi"}]
    assert failure(lambda: client(answering({"blocks": []})).render("h", 1)) == (
        'GET http://h:1/: blocks: must be an array of blocks, got {"blocks":[]}')


def raising(error: Exception) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        raise error

    return handler


@pytest.mark.parametrize(("error", "message"), [
    (httpx.ConnectError("[Errno 111] Connection refused"), "connection refused"),
    (httpx.ConnectError("[Errno -2] Name or service not known"),
     "could not connect ([Errno -2] Name or service not known)"),
    (httpx.ConnectTimeout("timed out"), "could not connect within 2s"),
    (httpx.ReadTimeout("timed out"), "timed out after 5s"),
    (httpx.RemoteProtocolError("Server disconnected"), "RemoteProtocolError: Server disconnected"),
])
def test_transport_failures_name_the_request(error: Exception, message: str) -> None:
    """No connection, a timeout, a dropped connection: each an InterfaceError, never httpx's."""
    assert failure(lambda: client(raising(error)).health("127.0.0.1", 9001)) == (
        f"GET http://127.0.0.1:9001/health: {message}")


def test_an_execute_timeout_says_the_execute_time() -> None:
    """A tool call that takes too long reports its own limit."""
    c = client(raising(httpx.ReadTimeout("timed out")), execute_timeout_s=12.5)
    assert failure(lambda: c.execute("h", 1, "x", {})) == (
        "POST http://h:1/execute: timed out after 12.5s")


def test_an_error_status_is_a_failure_quoting_the_body() -> None:
    """HTTP 500 fails with the start of what the interface said."""
    c = client(lambda r: httpx.Response(500, text="  database\n  is down  "))
    assert failure(lambda: c.health("h", 1)) == "GET http://h:1/health: answered HTTP 500: " \
                                                "database is down"
    c = client(lambda r: httpx.Response(404))
    assert failure(lambda: c.health("h", 1)) == "GET http://h:1/health: answered HTTP 404"


def test_a_redirect_is_not_followed() -> None:
    """A 302 is a failure, whatever it points at."""
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(302, headers={"Location": "http://169.254.169.254/"})

    assert failure(lambda: client(handler).capabilities("h", 1)) == (
        "GET http://h:1/capabilities: answered HTTP 302 (a redirect; redirects are not followed)")
    assert seen == ["http://h:1/capabilities"]


def test_a_body_that_is_not_json_fails() -> None:
    """An HTML page where JSON was due is refused."""
    c = client(lambda r: httpx.Response(200, text="<html>hi</html>"))
    message = failure(lambda: c.health("h", 1))
    assert message.startswith("GET http://h:1/health: not JSON (")


def test_a_body_over_the_limit_fails_by_its_declared_length() -> None:
    """Content-Length over max_response_bytes is refused before reading."""
    c = client(lambda r: httpx.Response(200, content=b" " * (MAX_BYTES + 1)))
    assert failure(lambda: c.capabilities("h", 1)) == (
        f"GET http://h:1/capabilities: answer larger than {MAX_BYTES} bytes")
    fits = client(lambda r: httpx.Response(200, content=b"[]" + b" " * (MAX_BYTES - 2)))
    assert fits.capabilities("h", 1) == Capabilities(tools=())


def test_an_endless_body_is_cut_off_at_the_limit() -> None:
    """A stream with no length stops being read once it passes max_response_bytes."""
    sent: list[int] = []

    def endless() -> Iterator[bytes]:
        while True:
            sent.append(100)
            yield b"[" * 100

    c = client(lambda r: httpx.Response(200, content=endless()))
    assert failure(lambda: c.health("h", 1)) == (
        f"GET http://h:1/health: answer larger than {MAX_BYTES} bytes")
    assert sum(sent) == MAX_BYTES + 100


def test_a_slow_trickle_is_cut_off_at_the_deadline() -> None:
    """Chunks that each come in time but add up past connect + answer time fail."""
    now = [0.0]

    def monotonic() -> float:
        return now[0]

    def trickle() -> Iterator[bytes]:
        for part in (b'{"status":', b' "ok", "name": "W",', b' "version": "1"}'):
            now[0] += 3.0  # each chunk is within the 5 s read timeout; together 9 s > 2 + 5
            yield part

    c = client(lambda r: httpx.Response(200, content=trickle()), monotonic=monotonic)
    assert failure(lambda: c.health("h", 1)) == "GET http://h:1/health: timed out after 5s"
    now[0] = 0.0
    quick = client(lambda r: httpx.Response(200, content=iter([b'{"status": "ok", "name": "W",',
                                                               b' "version": "1"}'])),
                   monotonic=monotonic)
    assert quick.health("h", 1).name == "W"


def test_params_that_are_not_json_fail_without_a_request() -> None:
    """Arguments that cannot be encoded are an InterfaceError; nothing is sent."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={})

    c = client(handler)
    assert failure(lambda: c.execute("h", 1, "x", {"when": object()})).startswith(
        "params: cannot be sent as JSON (")
    assert seen == []
