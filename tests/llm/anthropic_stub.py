"""A real Anthropic Messages API on 127.0.0.1 for tests, faithful enough that Anthropic's own
Python client reads it (tests/llm/test_anthropic.py checks that).

POST /v1/messages answers the queued replies in order, and "stub answer" when none is queued.
A message reply to a request with `"stream": true` is streamed as the event sequence Anthropic
sends (message_start, content_block_start/delta/stop per block with text and tool input in
small pieces, message_delta, message_stop); any other reply is answered as it is. GET
/v1/models lists `models`. Every request is kept in `requests` as (headers, JSON body or None),
header names lower-cased, in arrival order.
"""

from __future__ import annotations

import json
import queue
import socket
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                403: "permission_error", 404: "not_found_error", 413: "request_too_large",
                429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}
TEXT_PIECE = 4  # characters of text per text_delta
JSON_PIECE = 6  # characters of tool input per input_json_delta


@dataclass(frozen=True)
class Reply:
    """What the stub does with one POST /v1/messages: answer `body` as JSON (or the bytes
    `raw`) with `status` and `headers`; or close the connection unanswered (`drop`).

    For a streaming request a message body is streamed, unless `plain` (then it is answered as
    JSON, as a server that cannot stream would); `cut_after` stops the stream after that many
    events and then sends `error_event` as an `event: error`, or without one cuts the
    connection mid-stream; `stall_after` sends that many events and then nothing until the
    stub closes; `endless` streams pings until the client goes away."""

    body: Any = None
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    raw: bytes | None = None
    drop: bool = False
    plain: bool = False
    cut_after: int | None = None
    error_event: dict[str, Any] | None = None
    stall_after: int | None = None
    endless: bool = False


def message(text: str = "", tool_uses: Iterable[tuple[str, str, dict[str, Any] | str]] = (),
            *, thinking: str = "", input_tokens: int = 12, output_tokens: int | None = None,
            stop_reason: str | None = None, cache_creation_input_tokens: int = 0,
            cache_read_input_tokens: int = 0, usage: bool = True) -> Reply:
    """A Messages API answer: a thinking block (if any), a text block (if any), then one
    tool_use block per (id, name, input). An input given as a string is sent as that raw JSON
    text when streamed (so it may be broken) and as a JSON string otherwise. `output_tokens`
    defaults to a token per 4 characters of the text; `usage=False` leaves usage out."""
    uses = list(tool_uses)
    content: list[dict[str, Any]] = []
    if thinking:
        content.append({"type": "thinking", "thinking": thinking, "signature": "c2lnbmVk"})
    if text:
        content.append({"type": "text", "text": text})
    content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in uses]
    body: dict[str, Any] = {
        "id": "msg_stub", "type": "message", "role": "assistant", "model": "claude-stub",
        "content": content, "stop_reason": stop_reason or ("tool_use" if uses else "end_turn"),
        "stop_sequence": None,
    }
    if usage:
        body["usage"] = {
            "input_tokens": input_tokens,
            "cache_creation_input_tokens": cache_creation_input_tokens,
            "cache_read_input_tokens": cache_read_input_tokens,
            "output_tokens": (len(text) + 3) // 4 if output_tokens is None else output_tokens,
        }
    return Reply(body)


def http_error(status: int, message: str = "", *, error_type: str = "",
               headers: Mapping[str, str] | None = None) -> Reply:
    """An error status with Anthropic's error body {"type": "error", "error": {...}}."""
    kind = error_type or _ERROR_TYPES.get(status, "api_error")
    return Reply({"type": "error", "error": {"type": kind, "message": message or kind}},
                 status=status, headers=tuple((headers or {}).items()))


def drop() -> Reply:
    """Read the request, then close the connection without a word."""
    return Reply(drop=True)


def garbage(data: bytes = b"<html>502 Bad Gateway</html>") -> Reply:
    """A 200 whose body is not a Messages answer (content-type still says JSON)."""
    return Reply(raw=data)


def plain(reply: Reply) -> Reply:
    """`reply` answered as JSON even to a streaming request."""
    return replace(reply, plain=True)


def broken(reply: Reply, after: int) -> Reply:
    """`reply` streamed for `after` events, then the connection cut mid-stream."""
    return replace(reply, cut_after=after)


def stream_error(error_type: str, detail: str, *, after: int = 1,
                 reply: Reply | None = None) -> Reply:
    """`reply` (by default "stub answer") streamed for `after` events, then an `event: error`
    whose message is `detail`."""
    error = {"type": "error", "error": {"type": error_type, "message": detail}}
    return replace(reply or message("stub answer"), cut_after=after, error_event=error)


def stalled(reply: Reply, after: int) -> Reply:
    """`reply` streamed for `after` events, then silence (the connection stays open)."""
    return replace(reply, stall_after=after)


def endless_pings() -> Reply:
    """A stream that starts a message and then only pings, for as long as the client reads."""
    return replace(message("stub answer"), endless=True)


def sse_events(body: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The (event, data) sequence Anthropic streams for the Messages answer `body`."""
    usage = dict(body.get("usage") or {})
    start = {k: v for k, v in body.items() if k != "usage"} | {
        "content": [], "stop_reason": None, "stop_sequence": None}
    if usage:
        start["usage"] = usage | {"output_tokens": 1}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start",
                                                                   "message": start})]
    for index, block in enumerate(body["content"]):
        events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                               "content_block": _empty(block)}))
        if index == 0:
            events.append(("ping", {"type": "ping"}))
        events += [("content_block_delta", {"type": "content_block_delta", "index": index,
                                            "delta": d}) for d in _deltas(block)]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    delta: dict[str, Any] = {"type": "message_delta", "delta": {
        "stop_reason": body.get("stop_reason"), "stop_sequence": body.get("stop_sequence")}}
    if usage:
        delta["usage"] = {"output_tokens": usage.get("output_tokens", 0)}
    return [*events, ("message_delta", delta), ("message_stop", {"type": "message_stop"})]


def _empty(block: Mapping[str, Any]) -> dict[str, Any]:
    if block["type"] == "text":
        return {"type": "text", "text": ""}
    if block["type"] == "thinking":
        return {"type": "thinking", "thinking": "", "signature": ""}
    return {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}


def _deltas(block: Mapping[str, Any]) -> list[dict[str, Any]]:
    if block["type"] == "text":
        return [{"type": "text_delta", "text": p} for p in _pieces(block["text"], TEXT_PIECE)]
    if block["type"] == "thinking":
        return [*({"type": "thinking_delta", "thinking": p}
                  for p in _pieces(block["thinking"], TEXT_PIECE)),
                {"type": "signature_delta", "signature": block["signature"]}]
    given = block["input"]
    raw = given if isinstance(given, str) else json.dumps(given)
    return [{"type": "input_json_delta", "partial_json": p}
            for p in ["", *_pieces(raw, JSON_PIECE)]]


def _pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    stub: StubAnthropic

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a connection cut by close() or by a client that gave up is part of the test


class StubAnthropic:
    """The Messages API on 127.0.0.1 (see the module docstring); `close()` stops it."""

    def __init__(self, models: Iterable[str] = ("claude-stub-1",)) -> None:
        self.models = list(models)
        self.requests: list[tuple[dict[str, str], Any]] = []
        self._replies: queue.Queue[Reply] = queue.Queue()
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self.released = threading.Event()  # set by close(): a stalled stream may end
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.stub = self
        self.port: int = self._server.server_address[1]
        # A short poll so close() (which waits for the loop to notice) returns promptly.
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01},
                         daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def queue(self, *replies: Reply) -> None:
        for r in replies:
            self._replies.put(r)

    def next_reply(self) -> Reply:
        try:
            return self._replies.get_nowait()
        except queue.Empty:
            return message("stub answer")

    def track(self, conn: socket.socket, *, open_: bool) -> None:
        with self._lock:
            (self._connections.add if open_ else self._connections.discard)(conn)

    def close(self) -> None:
        """Stop listening and cut every open connection (kept-alive ones would linger)."""
        self.released.set()
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            connections, self._connections = list(self._connections), set()
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # the client closed it already


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    @property
    def stub(self) -> StubAnthropic:
        return cast(_Server, self.server).stub

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.stub.track(self.connection, open_=True)

    def finish(self) -> None:
        self.stub.track(self.connection, open_=False)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.stub.requests.append(({k.lower(): v for k, v in self.headers.items()}, None))
        if self.path.partition("?")[0] != "/v1/models":
            self._answer(http_error(404, f"no such path: {self.path}"))
            return
        data = [{"type": "model", "id": m, "display_name": m,
                 "created_at": "2025-01-01T00:00:00Z"} for m in self.stub.models]
        self._answer(Reply({"data": data, "has_more": False,
                            "first_id": data[0]["id"] if data else None,
                            "last_id": data[-1]["id"] if data else None}))

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        self.stub.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
        if self.path.partition("?")[0] != "/v1/messages":
            self._answer(http_error(404, f"no such path: {self.path}"))
            return
        reply = self.stub.next_reply()
        if isinstance(reply.body, dict) and reply.body.get("type") == "message":
            reply = replace(reply, body=reply.body | {"model": body.get("model", "claude-stub")})
            if body.get("stream") and not reply.plain and reply.status == 200:
                self._stream(reply)
                return
        self._answer(reply)

    def _answer(self, reply: Reply) -> None:
        if reply.drop:
            self._cut()
            return
        data = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in reply.headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, reply: Reply) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for n, (event, data) in enumerate(sse_events(reply.body)):
                if n == reply.cut_after:
                    if reply.error_event is None:
                        self._cut()
                        return
                    self._event("error", reply.error_event)
                    break
                if n == reply.stall_after:
                    self.wfile.flush()
                    self.stub.released.wait(10)
                    self.close_connection = True
                    return
                self._event(event, data)
                while reply.endless and n == 0:  # ends when the client hangs up
                    self._event("ping", {"type": "ping"})
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True  # the client went away mid-stream

    def _event(self, event: str, data: Mapping[str, Any]) -> None:
        chunk = f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))

    def _cut(self) -> None:
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True
