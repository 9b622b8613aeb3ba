"""A real interface for integration tests: an HTTP server on 127.0.0.1 that answers
/health, /capabilities, /execute and / as spec/interfaces.md section 6 says a paired program
does, with knobs to make it fail, answer garbage or hang, and a record of every request."""

from __future__ import annotations

import json
import queue
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from tests.integration.harness import WAIT_S, ServerProcess, StubLlm


def capability(name: str, description: str = "", *, read_only: bool = False,
               danger: str | None = None, **params: tuple[str, bool]) -> dict[str, Any]:
    """A capability whose parameters are given as name=(type, required); `read_only` and
    `danger` as the interface declares them (neither: it needs the person's approval)."""
    body: dict[str, Any] = {
        "name": name,
        "description": description or f"the {name} capability",
        "parameters": [
            {"name": p, "type": kind, "required": required, "description": f"the {p}"}
            for p, (kind, required) in params.items()
        ],
    }
    if read_only:
        body["read_only"] = True
    if danger is not None:
        body["danger"] = danger
    return body


LOOKUP = capability("lookup", "Look something up in the test interface", read_only=True,
                    query=("string", True), limit=("number", False))


@dataclass
class Answer:
    """What the stub does with one request: answer `body` (JSON) with `status`, or the bytes
    `raw`; wait for `hold` first; or cut the connection without answering (`drop`)."""

    body: Any = None
    status: int = 200
    raw: bytes | None = None
    hold: threading.Event | None = None
    drop: bool = False


@dataclass
class Seen:
    """One request the stub received."""

    method: str
    path: str
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a connection cut by stop() or by a caller that gave up is part of the test


class StubInterface:
    """A paired program on loopback.

    `capabilities` is what GET /capabilities answers (an Answer for anything else, e.g. garbage):
    the contract's plain array of tools, or, once `signals` is set, the object
    {"tools": capabilities, "signals": signals} that declares the signal types it emits;
    `answers[capability]` what POST /execute answers for that capability (a dict body, raw bytes,
    or an Answer), by default {"text": "<capability> done", ...}; `healthy` switches GET /health
    between 200 {"status": "ok"} and `unhealthy` (an Answer: 500 unless changed, or a drop);
    answers queued with `queue_health` come first. `render` is what GET / answers. `requests`
    keeps every request in arrival order. `stop()` closes the port; `start()` opens the same one.
    """

    def __init__(self, capabilities: list[dict[str, Any]] | Answer | None = None,
                 *, name: str = "stubface", version: str = "1.0",
                 signals: list[str] | None = None) -> None:
        self.name, self.version = name, version
        self.capabilities: list[dict[str, Any]] | Answer = (
            [LOOKUP] if capabilities is None else capabilities)
        self.signals = signals
        self.answers: dict[str, dict[str, Any] | bytes | Answer] = {}
        self.healthy = True
        self.unhealthy = Answer({"status": "broken"}, status=500)
        self.render: Any = [{"type": "text", "text": "stub overlay"}]
        self.requests: list[Seen] = []
        self._health_queue: queue.Queue[Answer] = queue.Queue()
        self._lock = threading.Lock()
        self._held: list[threading.Event] = []
        self._connections: set[socket.socket] = set()
        self.port = 0
        self._server: _Server | None = None
        self.start()

    # --- knobs ------------------------------------------------------------------------------------

    def queue_health(self, *answers: Answer) -> int:
        """Answers for the next GET /health requests, in order; returns how many /health
        requests came before them (so a test can count the ones they answer)."""
        with self._lock:
            for a in answers:
                self._health_queue.put(a)
            return self.count("/health")

    def hold(self) -> threading.Event:
        """An Event for Answer(hold=...), set when the stub stops so no handler outlives it."""
        event = threading.Event()
        self._held.append(event)
        return event

    # --- what it saw ------------------------------------------------------------------------------

    def seen(self, path: str, method: str | None = None) -> list[Seen]:
        return [r for r in list(self.requests)
                if r.path == path and (method is None or r.method == method)]

    def count(self, path: str) -> int:
        return len(self.seen(path))

    def executions(self) -> list[Any]:
        """The JSON bodies of every POST /execute."""
        return [r.body for r in self.seen("/execute", "POST")]

    # --- life -------------------------------------------------------------------------------------

    @property
    def host(self) -> str:
        return "127.0.0.1"

    def start(self) -> None:
        """Listen (again) on 127.0.0.1, on the port used before if there was one."""
        assert self._server is None
        self._server = _Server(("127.0.0.1", self.port), self._handler())
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        """Stop listening: connections to the port are refused until start()."""
        for event in self._held:
            event.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self._lock:  # kept-alive connections would otherwise go on being served
            connections, self._connections = list(self._connections), set()
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by the other side

    close = stop

    # --- serving ----------------------------------------------------------------------------------

    def _answer_for(self, method: str, path: str, body: Any) -> Answer:
        if method == "GET" and path == "/health":
            try:
                return self._health_queue.get_nowait()
            except queue.Empty:
                pass
            if not self.healthy:
                return self.unhealthy
            return Answer({"status": "ok", "name": self.name, "version": self.version})
        if method == "GET" and path == "/capabilities":
            caps = self.capabilities
            if isinstance(caps, Answer):
                return caps
            return Answer(caps if self.signals is None else {"tools": caps,
                                                              "signals": self.signals})
        if method == "GET" and path == "/":
            return Answer(self.render)
        if method == "POST" and path == "/execute":
            name = body.get("capability") if isinstance(body, dict) else None
            answer = self.answers.get(str(name))
            if answer is None:
                return Answer({"text": f"{name} done", "data": None, "error": None,
                               "blocks": None, "openUrl": None})
            if isinstance(answer, bytes):
                return Answer(raw=answer)
            if isinstance(answer, Answer):
                return answer
            return Answer(answer)
        return Answer({"error": "not found"}, status=404)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                with stub._lock:
                    stub._connections.add(self.connection)

            def finish(self) -> None:
                with stub._lock:
                    stub._connections.discard(self.connection)
                try:
                    super().finish()
                except OSError:
                    pass  # the connection was cut by stop()

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw
                path = self.path.split("?", 1)[0]
                with stub._lock:
                    stub.requests.append(Seen(method, path, body, dict(self.headers.items())))
                    answer = stub._answer_for(method, path, body)
                if answer.hold is not None:
                    answer.hold.wait(WAIT_S)
                if answer.drop:
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                data = answer.raw if answer.raw is not None else json.dumps(answer.body).encode()
                try:
                    self.send_response(answer.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    self.close_connection = True  # the caller gave up waiting (a timeout test)

        return Handler


# --- talking to the server as the person and as the interface ------------------------------------

def cookie_client(server_url: str, cookie: str) -> httpx.Client:
    return httpx.Client(base_url=server_url, cookies={"chalie_session": cookie}, timeout=WAIT_S)


def bearer_client(server_url: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=server_url, headers={"Authorization": f"Bearer {token}"},
                        timeout=WAIT_S)


def pairing_key(server_url: str, cookie: str) -> dict[str, Any]:
    """POST /api/interfaces/pairing-key as the person: {"pairing_key", "expires_at"}."""
    with cookie_client(server_url, cookie) as http:
        r = http.post("/api/interfaces/pairing-key")
    assert r.status_code in (200, 201), (r.status_code, r.text)
    answer: dict[str, Any] = r.json()
    return answer


def pair_request(server_url: str, key: str, stub: StubInterface, *, name: str,
                 signals: list[str] | None = None, **extra: Any) -> httpx.Response:
    """POST /api/interfaces/pair as the interface does (no cookie, no bearer)."""
    body: dict[str, Any] = {"pairing_key": key, "name": name, "host": stub.host,
                            "port": stub.port, **extra}
    if signals is not None:
        body["signals"] = signals
    return httpx.post(f"{server_url}/api/interfaces/pair", json=body, timeout=WAIT_S)


def pair(server_url: str, cookie: str, stub: StubInterface, *, name: str,
         signals: list[str] | None = None) -> tuple[str, str]:
    """Get a pairing key and pair `stub` with it: (interface_id, signal_token)."""
    key = pairing_key(server_url, cookie)["pairing_key"]
    r = pair_request(server_url, key, stub, name=name, signals=signals)
    assert r.status_code == 201, (r.status_code, r.text)
    answer = r.json()
    return answer["interface_id"], answer["signal_token"]


def interfaces_listed(server_url: str, cookie: str) -> list[dict[str, Any]]:
    """GET /api/interfaces as the person: the paired interfaces (a bare list, or the list in
    the answer's `items`/`interfaces` field)."""
    with cookie_client(server_url, cookie) as http:
        r = http.get("/api/interfaces")
    assert r.status_code == 200, (r.status_code, r.text)
    answer = r.json()
    if isinstance(answer, dict):
        answer = answer.get("items", answer.get("interfaces"))
    assert isinstance(answer, list), r.text
    return answer


def online(server_url: str, cookie: str, interface_id: str) -> bool | None:
    """The listed `online` state of one interface (None when it is not listed)."""
    for item in interfaces_listed(server_url, cookie):
        if item["id"] == interface_id:
            return bool(item["online"])
    return None


# --- what the stub LLM was asked ------------------------------------------------------------------

def user_prompt(request: dict[str, Any]) -> str:
    """The last message of a chat-completions request: the prompt with history, trail, world."""
    return str(request["messages"][-1]["content"])


def whole_prompt(request: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content") or "") for m in request["messages"])


def tool_names(request: dict[str, Any]) -> list[str]:
    """The names of the tools a request offered the model."""
    return [t["function"]["name"] for t in request.get("tools") or ()]


def tool_spec(request: dict[str, Any], name: str) -> dict[str, Any]:
    for t in request.get("tools") or ():
        if t["function"]["name"] == name:
            spec: dict[str, Any] = t["function"]
            return spec
    raise AssertionError(f"no tool {name!r} offered: {tool_names(request)}")


def last_tool_result(prompt: str) -> str:
    """What the trail says the last tool call returned (the text after its last "-> ")."""
    assert "-> " in prompt, prompt
    return prompt.rsplit("-> ", 1)[1]


@contextmanager
def serving(workdir: Path, llm: StubLlm, **sections: dict[str, Any]) -> Iterator[ServerProcess]:
    """The real server with extra config sections; killed after, and it must have logged no
    error."""
    server = ServerProcess(workdir, llm, **sections).start()
    try:
        yield server
    finally:
        server.kill()
    errors = server.errors()
    assert not errors, f"server logged errors: {errors}"


def assert_error(r: httpx.Response, status: int | tuple[int, ...], *words: str) -> None:
    """An error answer: the status, a JSON body {"error", "status"}, and each of `words` in the
    error text (case-insensitive)."""
    allowed = status if isinstance(status, tuple) else (status,)
    assert r.status_code in allowed, (r.status_code, r.text)
    body = r.json()
    assert isinstance(body, dict), r.text
    assert body.get("status") == r.status_code, r.text
    assert isinstance(body.get("error"), str), r.text
    for word in words:
        assert word.lower() in body["error"].lower(), (word, body["error"])
