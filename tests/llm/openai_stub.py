"""A real OpenAI-compatible server on 127.0.0.1 for the provider's wire tests.

It answers from a queue of scripted replies: whole JSON, a server-sent event stream cut from a
chat completion (text in small pieces, tool arguments split across chunks, a usage chunk, then
`[DONE]`), an error status with headers, a connection dropped mid-stream, or garbage. The
official `openai` client reads its streams too, which is what shows the stub speaks the wire
format and not only what our own parser expects.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer. `parts` are written one by one (as HTTP chunks when `chunked`);
    `drop` closes the connection before the body is complete; with `pause_after` the server
    waits for `resume` after that many parts, so a test can see text arrive mid-stream."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    parts: list[bytes] = field(default_factory=list)
    chunked: bool = True
    drop: bool = False
    pause_after: int | None = None
    resume: threading.Event = field(default_factory=threading.Event)
    waited_out: bool = False  # the pause ended by timeout: nobody read the early parts


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


def json_reply(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, {"Content-Type": "application/json", **(headers or {})},
                 [json.dumps(body).encode()], chunked=False)


def error_reply(status: int, body: Any, headers: dict[str, str] | None = None) -> Reply:
    """An error status; `body` is sent as JSON unless it is already a string."""
    if isinstance(body, str):
        return Reply(status, {"Content-Type": "text/plain", **(headers or {})},
                     [body.encode()], chunked=False)
    return json_reply(body, status, headers)


def garbage_reply(data: bytes = b"<html><body>Bad gateway</body></html>") -> Reply:
    return Reply(200, {"Content-Type": "text/html"}, [data], chunked=False)


def completion(text: str | None = "ok", *, tool_calls: list[dict[str, Any]] | None = None,
               usage: dict[str, int] | None = None, reasoning_content: str | None = None,
               finish_reason: str | None = None) -> dict[str, Any]:
    """A chat completion as OpenAI sends it."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = tool_calls
    if reasoning_content is not None:
        message["reasoning_content"] = reasoning_content
    body: dict[str, Any] = {
        "id": "chatcmpl-stub", "object": "chat.completion", "created": 1_700_000_000,
        "model": "stub", "choices": [{"index": 0, "message": message, "finish_reason":
                                      finish_reason or ("tool_calls" if tool_calls else "stop")}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def tool_call(name: str, arguments: Any, call_id: str = "call_abc") -> dict[str, Any]:
    """A tool call; `arguments` is a JSON string, or an object as older Ollama sends it."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def stream_chunks(body: dict[str, Any], piece: int = 3) -> list[dict[str, Any]]:
    """`body` (a chat completion) cut into chat.completion.chunk objects the way OpenAI streams
    it: a role chunk, reasoning and text in `piece`-character deltas, each tool call's id and
    name first and its arguments in pieces, a finish chunk, and the usage in a last chunk with
    no choices."""
    (choice,) = body["choices"]
    message = choice["message"]
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    deltas += [{"reasoning_content": p}
               for p in _pieces(message.get("reasoning_content") or "", piece)]
    deltas += [{"content": p} for p in _pieces(message.get("content") or "", piece)]
    for i, call in enumerate(message.get("tool_calls") or ()):
        deltas.append({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                       "function": {"name": call["function"]["name"],
                                                    "arguments": ""}}]})
        deltas += [{"tool_calls": [{"index": i, "function": {"arguments": p}}]}
                   for p in _pieces(call["function"]["arguments"], piece)]
    head = {"id": body["id"], "object": "chat.completion.chunk", "created": body["created"],
            "model": body["model"]}
    chunks = [{**head, "choices": [{"index": 0, "delta": d, "finish_reason": None}]}
              for d in deltas]
    chunks.append({**head, "choices": [{"index": 0, "delta": {},
                                        "finish_reason": choice["finish_reason"]}]})
    if "usage" in body:
        chunks.append({**head, "choices": [], "usage": body["usage"]})
    return chunks


def sse(*events: dict[str, Any] | str) -> list[bytes]:
    """Each event as one `data:` event; a string is sent as is (e.g. "[DONE]")."""
    return [f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in events]


def sse_reply(body: dict[str, Any] | None = None, *, piece: int = 3,
              events: list[dict[str, Any] | str] | None = None, done: bool = True,
              **options: Any) -> Reply:
    """An event stream of `body` cut by stream_chunks (or of `events` as given), then
    `data: [DONE]` unless `done` is False. `options` go to Reply (drop, pause_after, ...)."""
    chosen: list[dict[str, Any] | str] = list(
        events if events is not None else stream_chunks(body or completion(), piece))
    if done:
        chosen.append("[DONE]")
    headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    return Reply(200, headers, [b": keep-alive comment\n\n", *sse(*chosen)], **options)


class OpenAIStub:
    """The server. `queue` scripts the next answers (to POST /v1/chat/completions or GET
    /v1/models, in arrival order); `received` keeps every request."""

    def __init__(self) -> None:
        self._replies: list[Reply] = []
        self._lock = threading.Lock()
        self.received: list[Received] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 10  # an idle keep-alive connection does not hold its thread forever

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                stub._answer(self)

            def do_POST(self) -> None:
                stub._answer(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # a short poll so close() returns at once; no test waits on it
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.01,),
                                        daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def queue(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    def body(self, n: int = 0) -> Any:
        return self.received[n].body

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        with self._lock:
            self.received.append(Received(handler.command, handler.path,
                                          dict(handler.headers.items()),
                                          json.loads(raw) if raw else None))
            reply = self._replies.pop(0) if self._replies else error_reply(500, "no reply queued")
        handler.send_response_only(reply.status)  # a scripted Date header must be the only one
        if "Date" not in reply.headers:
            handler.send_header("Date", handler.date_time_string())
        for name, value in reply.headers.items():
            handler.send_header(name, value)
        if reply.chunked:
            handler.send_header("Transfer-Encoding", "chunked")
        elif not reply.drop:
            handler.send_header("Content-Length", str(sum(len(p) for p in reply.parts)))
        handler.end_headers()
        for i, part in enumerate(reply.parts):
            if i == reply.pause_after:
                reply.waited_out = not reply.resume.wait(timeout=5)
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(part), part) if reply.chunked else part)
            handler.wfile.flush()
        if reply.drop:
            handler.close_connection = True  # mid-body: no closing chunk, the socket just closes
            return
        if reply.chunked:
            handler.wfile.write(b"0\r\n\r\n")
