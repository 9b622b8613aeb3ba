"""Real parts for integration tests: a stub OpenAI-compatible LLM on 127.0.0.1, the real server
as a subprocess, and a WebSocket client that logs in like a user's client does."""

from __future__ import annotations

import json
import logging
import math
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import apsw
import httpx
import websocket

from tests.conftest import write_config

ROOT = Path(__file__).resolve().parents[2]
# websocket-client logs a server's normal close (1001 "going away") at ERROR; it is not one.
logging.getLogger("websocket").setLevel(logging.CRITICAL)
WAIT_S = 20.0  # generous upper bound for anything to happen; tests never sleep this long


# --- stub LLM -------------------------------------------------------------------------------------

def completion(
    text: str = "",
    tool_calls: list[tuple[str, str]] | None = None,
    prompt_tokens: int = 50,
    completion_tokens: int = 5,
) -> dict[str, Any]:
    """A chat-completions answer; tool_calls are (name, raw JSON arguments)."""
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
            for i, (n, a) in enumerate(tool_calls)
        ]
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message,
                     "finish_reason": "tool_calls" if tool_calls else "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


class Reply:
    """What the stub does with one request: answer `body` with `status` (and `headers`), send
    `raw` bytes, or drop the connection. A 200 `body` answers a streaming request as SSE.

    `hold` delays the whole answer until it is set. `pause` cuts a streamed answer in two: the
    stub sends the role chunk and the first `pause_after` pieces of content, sets `paused`, and
    waits for `pause` before it sends the rest (so a client can be seen half-way through)."""

    def __init__(self, body: Any = None, status: int = 200, raw: bytes | None = None,
                 hold: threading.Event | None = None, drop: bool = False, *,
                 headers: dict[str, str] | None = None, pause: threading.Event | None = None,
                 pause_after: int = 2) -> None:
        self.body, self.status, self.raw, self.hold, self.drop = body, status, raw, hold, drop
        self.headers = headers or {}
        self.pause, self.pause_after = pause, pause_after
        self.paused = threading.Event()


def sse_chunks(body: dict[str, Any], piece: int = 4) -> list[dict[str, Any]]:
    """A chat completion as the chunks a streaming server sends: the content a few characters
    at a time, each tool call's arguments in pieces, then the finish and a usage chunk."""
    message = body["choices"][0]["message"]
    base = {"id": body.get("id", "chatcmpl-stub"), "object": "chat.completion.chunk"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant"})]
    text = message.get("content") or ""
    out += [chunk({"content": text[i:i + piece]}) for i in range(0, len(text), piece)]
    for n, call in enumerate(message.get("tool_calls") or ()):
        args = call["function"]["arguments"]
        out.append(chunk({"tool_calls": [{"index": n, "id": call["id"], "type": "function",
                                          "function": {"name": call["function"]["name"],
                                                       "arguments": ""}}]}))
        out += [chunk({"tool_calls": [{"index": n, "function": {"arguments": args[i:i + 8]}}]})
                for i in range(0, len(args), 8)]
    out.append(chunk({}, body["choices"][0].get("finish_reason") or "stop"))
    if body.get("usage"):
        out.append({**base, "choices": [], "usage": body["usage"]})
    return out


_FORMATS = {
    "date-time": "1970-01-01T00:00:00Z",
    "date": "1970-01-01",
    "time": "00:00:00",
    "uuid": "00000000-0000-0000-0000-000000000000",
}


def schema_filler(schema: dict[str, Any]) -> Any:
    """A minimal instance of a JSON Schema, as a constrained model would give at the least.

    Objects get every required property; strings are "filler" (an enum's or const's first value;
    padded to minLength, cut to maxLength); numbers are 0 moved inside their bounds; arrays hold
    max(minItems, 1) items unless maxItems is lower; booleans are false; `anyOf`/`oneOf` take the
    first option; `null` (and a schema that says nothing) is None."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return schema_filler(schema[key][0])
    if schema.get("allOf"):
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            merged.update(part)
        return schema_filler(merged)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0] if kind else None
    if kind == "object":
        properties = schema.get("properties", {})
        required = schema.get("required", [])
        return {name: schema_filler(properties.get(name, {})) for name in required}
    if kind == "array":
        return _array_filler(schema)
    if kind == "string":
        text = _FORMATS.get(schema.get("format", ""), "filler")
        text = text.ljust(schema.get("minLength", 0), "x")
        return text[: schema["maxLength"]] if "maxLength" in schema else text
    if kind in ("integer", "number"):
        return _number_filler(schema, integer=kind == "integer")
    if kind == "boolean":
        return False
    return None


def _array_filler(schema: dict[str, Any]) -> list[Any]:
    count = max(schema.get("minItems", 0), 1)
    if "maxItems" in schema:
        count = min(count, schema["maxItems"])
    prefix = schema.get("prefixItems", [])
    items = schema.get("items", {})
    out = [schema_filler(p) for p in prefix[:count]]
    if isinstance(items, dict):  # `"items": false` closes a tuple after its prefixItems
        out += [schema_filler(items) for _ in range(count - len(out))]
    return out


def _number_filler(schema: dict[str, Any], *, integer: bool) -> int | float:
    """0 if allowed, else the nearest value the bounds (and multipleOf) admit."""
    low, high = schema.get("minimum"), schema.get("maximum")
    x_low, x_high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    step = schema.get("multipleOf")

    def fits(v: float) -> bool:
        return (
            (low is None or v >= low) and (high is None or v <= high)
            and (x_low is None or v > x_low) and (x_high is None or v < x_high)
            and (step is None or math.isclose(v / step, round(v / step)))
        )

    floor_ = max((b for b in (low, x_low) if b is not None), default=None)
    ceiling = min((b for b in (high, x_high) if b is not None), default=None)
    candidates: list[float] = [0]
    if floor_ is not None:
        candidates += [floor_, floor_ + 1]
    if ceiling is not None:
        candidates += [ceiling, ceiling - 1]
    if floor_ is not None and ceiling is not None:
        candidates.append((floor_ + ceiling) / 2)
    if step is not None:
        candidates += [math.ceil(c / step) * step for c in list(candidates)]
    if integer:
        candidates = [float(f(c)) for c in candidates for f in (math.ceil, math.floor)]
    for value in candidates:
        if fits(value):
            return int(value) if integer else value
    raise ValueError(f"schema_filler: no number fits {schema}")


def _json_schema_of(body: dict[str, Any]) -> dict[str, Any] | None:
    """The schema a chat-completions request asks the reply to follow, if it asks for one."""
    response_format = body.get("response_format")
    if not isinstance(response_format, dict) or response_format.get("type") != "json_schema":
        return None
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict):
        return None
    schema: dict[str, Any] = spec["schema"]
    return schema


class _QuietServer(ThreadingHTTPServer):
    """A client that drops a kept-alive connection with a reset, or hangs up on a stream it
    gave up on, is no error of the stub's."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class StubLlm:
    """An OpenAI-compatible /v1/chat/completions server on loopback that replays queued replies.

    A request with a `json_schema` response_format is answered from `structured_replies`, and
    with that queue empty by `schema_filler` of the request's own schema; every other request is
    answered from `replies`, and with that queue empty by "stub answer". A default answer
    reports the prompt's size as a real server would (a token per 4 characters of the messages),
    so the server's token estimates calibrate to something true. Every request body is kept in
    `requests`, in arrival order.
    """

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.models = ["stub-model", "llama3.1"]  # what GET /v1/models lists
        self.replies: queue.Queue[Reply] = queue.Queue()
        self.structured_replies: queue.Queue[Reply] = queue.Queue()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                data = json.dumps({"object": "list", "data": [
                    {"id": m, "object": "model"} for m in stub.models]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                stub.requests.append(body)
                reply = stub._next_reply(body)
                if reply.hold is not None:
                    reply.hold.wait(WAIT_S)
                if reply.drop:
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                if body.get("stream") and reply.status == 200 and reply.raw is None \
                        and isinstance(reply.body, dict) and reply.body.get("choices"):
                    self._stream(reply.body, reply)
                    return
                data = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any], reply: Reply) -> None:
                """Server-sent events in chunked encoding (the connection stays open); with
                `reply.pause`, stopped after the role chunk and `reply.pause_after` more."""
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                events = [f"data: {json.dumps(c)}\n\n".encode() for c in sse_chunks(body)]
                pause_at = -1 if reply.pause is None else 1 + reply.pause_after
                for n, event in enumerate([*events, b"data: [DONE]\n\n"]):
                    if n == pause_at and reply.pause is not None:
                        reply.paused.set()
                        reply.pause.wait(WAIT_S)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def queue(self, *replies: Reply | dict[str, Any]) -> None:
        for r in replies:
            self.replies.put(r if isinstance(r, Reply) else Reply(r))

    def queue_structured(self, *replies: Reply | dict[str, Any]) -> None:
        """Replies for requests that carry a json_schema response_format, in order."""
        for r in replies:
            self.structured_replies.put(r if isinstance(r, Reply) else Reply(r))

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        schema = _json_schema_of(body)
        source = self.replies if schema is None else self.structured_replies
        try:
            return source.get_nowait()
        except queue.Empty:
            pass
        prompt_tokens = max(1, sum(len(str(m.get("content") or "")) for m in
                                   body.get("messages", ())) // 4)
        if schema is None:
            return Reply(completion("stub answer", prompt_tokens=prompt_tokens))
        return Reply(completion(json.dumps(schema_filler(schema)), prompt_tokens=prompt_tokens))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# --- the server as a subprocess ------------------------------------------------------------------

class ServerProcess:
    """`python -m chalie serve --config FILE` with its JSON log lines collected."""

    def __init__(self, workdir: Path, stub: StubLlm | None, password: str = "secret",
                 env: dict[str, str] | None = None, **sections: dict[str, Any]) -> None:
        merged: dict[str, dict[str, Any]] = {
            "server": {"port": 0},
            "store": {"path": str(workdir / "data")},
            "auth": {"password": password},
            "log": {"format": "json", "level": "info"},
            # The DMN calls the LLM on its own: only in the tests about it (they turn it on).
            # No quiet hours, in a fixed zone: a goal's or a thought's message must not wait
            # for the morning because the tests happen to run at night (the tests about quiet
            # hours set their own).
            "dmn": {"enabled": False, "quiet_hours": "", "timezone": "UTC"},
            # Hashed vectors: fast and deterministic; the tests of "minilm" name it.
            "memory": {"embedder": "hashed"},
        }
        if stub is not None:
            merged["llm"] = {"base_url": stub.base_url, "retries": 0}
        for name, values in sections.items():
            merged.setdefault(name, {}).update(values)
        self.config_path = write_config(workdir, merged)
        self.db_path = workdir / "data" / "chalie.db"
        self.password = password
        self.env = env or {}
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self.port = 0
        self.clients: list[Client] = []

    def start(self) -> ServerProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHALIE_")}
        env.update(self.env)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "chalie", "serve", "--config", str(self.config_path)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        listening: queue.Queue[int] = queue.Queue()
        proc = self.proc

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                self.lines.append(line)
                if '"event": "listening"' in line:
                    listening.put(json.loads(line)["port"])

        self._pump = threading.Thread(target=pump, daemon=True)
        self._pump.start()
        try:
            self.port = listening.get(timeout=WAIT_S)
        except queue.Empty:
            self.kill()
            raise AssertionError("server did not start:\n" + "".join(self.lines)) from None
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_events(self) -> list[dict[str, Any]]:
        out = []
        for line in list(self.lines):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return out

    def errors(self) -> list[dict[str, Any]]:
        return [e for e in self.log_events() if e.get("level") in ("error", "critical")]

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, as in a crash."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGKILL)
            self._reap()

    def stop(self) -> int:
        """SIGTERM: a clean shutdown; returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self._reap()

    def wait(self) -> int:
        """Wait for the process to exit on its own; returns the exit code."""
        return self._reap()

    def _reap(self) -> int:
        assert self.proc is not None
        for client in self.clients:
            client.close()
        self.clients.clear()
        code = self.proc.wait(WAIT_S)
        self._pump.join(WAIT_S)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return code

    def login(self) -> str:
        r = httpx.post(f"{self.url}/auth/login", json={"password": self.password})
        assert r.status_code == 200, r.text
        return r.cookies["chalie_session"]

    def connect(self, cookie: str | None = None, channel: str = "main", *,
                deltas: bool = False) -> Client:
        client = Client(self, cookie or self.login(), channel, deltas=deltas)
        self.clients.append(client)
        return client


class Client:
    """A /ws client that reads frames as JSON. Like a client that ignores `message_delta`
    frames, `recv` passes them by (into `deltas`), unless made with `deltas=True`."""

    def __init__(self, server: ServerProcess, cookie: str, channel: str, *,
                 deltas: bool = False) -> None:
        self.keep_deltas = deltas
        self.deltas: list[dict[str, Any]] = []
        self.ws = websocket.create_connection(
            f"ws://127.0.0.1:{server.port}/ws?channel={channel}",
            cookie=f"chalie_session={cookie}",
            timeout=WAIT_S,
            sockopt=((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),),
        )

    def send(self, frame: dict[str, Any] | str | bytes) -> None:
        if isinstance(frame, dict):
            self.ws.send(json.dumps(frame))
        elif isinstance(frame, bytes):
            self.ws.send_binary(frame)
        else:
            self.ws.send(frame)

    def recv(self) -> dict[str, Any]:
        while True:
            frame: dict[str, Any] = json.loads(self.ws.recv())
            if frame.get("type") != "message_delta" or self.keep_deltas:
                return frame
            self.deltas.append(frame)

    def recv_until(self, stop: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        frames = []
        while True:
            frame = self.recv()
            frames.append(frame)
            if stop(frame):
                return frames

    def turn(self, text: str, **extra: Any) -> list[dict[str, Any]]:
        """Send a chat and read every frame up to and including its `done`."""
        return self.turn_from({"type": "chat", "text": text, **extra})

    def turn_from(self, frame: dict[str, Any]) -> list[dict[str, Any]]:
        """Send any frame that starts a turn and read up to and including its `done`."""
        self.send(frame)
        return self.recv_until(lambda f: f["type"] == "done")

    def read_until_closed(self) -> list[str]:
        """Read frames until the server closes the socket (answering its close frame, as a
        client does); returns the frames read on the way."""
        frames = []
        try:
            while (raw := self.ws.recv()) != "":  # "" is the server's close frame
                frames.append(raw)
        except websocket.WebSocketConnectionClosedException:
            pass
        return frames

    def close(self) -> None:
        self.ws.close(timeout=1)
        self.ws.shutdown()  # close() leaves the socket open when the server closed first


def db_rows(path: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    """Rows from the server's database on a connection of the test's own: what is on disk."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    conn.set_busy_timeout(10_000)  # a busy server's checkpoint must not fail the read
    try:
        return list(conn.execute(sql, params))
    finally:
        conn.close()


def wait_for(condition: Callable[[], bool], timeout: float = WAIT_S) -> None:
    """Poll a condition another process makes true (no clock of ours can be injected there)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)
